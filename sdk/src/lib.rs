//! Shared by the service-provider host and its plugins.
//!
//! - [`contract`]: the plugin contract (`wit/service-provider.wit`) as plain
//!   Rust types, so plugin logic can be written and unit-tested natively and
//!   the host can compare a component's answers with native ones.
//! - [`names`]: the openmcp naming algorithms (tenant namespaces, shortened
//!   names). Host and plugins must agree on them bit for bit, so there is
//!   exactly one implementation.
//! - [`convert`]: conversions between the contract types and generated WIT
//!   bindings, and [`export_provider!`] that turns a [`contract::Provider`]
//!   into a component in one line (the bindings live in the SDK's
//!   `component` module, compiled for `wasm32` only).
//! - [`testing`]: named plugin inputs (cases) any plugin can share between
//!   its native tests and the host's native-vs-component comparison.

/// The contract version the SDK's types and component bindings implement.
pub const CONTRACT_VERSION: &str = "0.2.0";
/// [`CONTRACT_VERSION`] as the bytes of the component's
/// `service-provider:contract` custom section.
pub const CONTRACT_SECTION: [u8; 5] = *b"0.2.0";

#[cfg(target_arch = "wasm32")]
pub mod component;

pub mod contract;
pub mod convert;
pub mod names;
pub mod testing;
