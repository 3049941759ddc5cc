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
//!   into a component in one line.

pub mod contract;
pub mod convert;
pub mod names;
