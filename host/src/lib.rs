//! The generic OpenControlPlane service-provider host.
//!
//! The data path of one reconcile, one module per step:
//!
//! ```text
//! watch ─▶ gather ─▶ plan (in the Wasm sandbox) ─▶ apply (SSA) ─▶ status
//! ```
//!
//! - [`watch`]: the kube-rs controller and everything that maps back to an
//!   instance; [`reconcile`] strings the steps together per instance, with
//!   the finalizer and the operation annotations.
//! - [`gather`]: the plugin's inputs: the service object, the ProviderConfig,
//!   the tenant context and the objects the plugin asked to observe.
//! - [`plugin::plan`]: calls the plugin in the [`plugin::sandbox`] and
//!   checks every object it asks for against its capabilities.
//! - [`apply`]: server-side apply, copies, ordered deletion and pruning,
//!   with owner labels ([`owner`]) instead of cross-cluster owner references;
//!   taking over another provider's objects only as [`adopt`] allows; the
//!   plugin's CRDs by [`crds`], for `init` and `run` alike.
//! - [`status`]: the status and Events the host writes, with condition
//!   timestamps that only move when a condition changes.
//!
//! Around them: [`access`] obtains cluster access through openmcp
//! AccessRequests, [`clusters`] builds and caches clients, [`operator`] and
//! [`init`] assemble the `run` and `init` commands, [`render`] runs the data
//! path on files. Leaves that everything may use: [`error`], [`resource`]
//! (Kubernetes plumbing), [`instance`] (an instance and its reach),
//! [`owner`] and [`syntax`] (what Kubernetes accepts as a name: the rule
//! every string meets before it reaches a URL).
//!
//! All of the above is the cluster side. The Wasm side is [`plugin`]:
//! where a component comes from, the sandbox it runs in, the grant and the
//! checks of what it answers. It uses no kube and nothing of the cluster
//! side, which takes the checked values it hands over.
//!
//! Dependencies point one way: a module never imports a module that
//! imports it, and nothing in [`plugin`] imports the cluster side (both
//! checked by `tests/architecture.rs`).
//!
//! The host knows nothing about any particular service: everything specific
//! comes from the plugin's `describe()`.

pub mod access;
pub mod adopt;
pub mod apply;
pub mod budget;
pub mod clusters;
mod crds;
pub mod error;
mod gather;
pub mod init;
mod instance;
pub mod logging;
pub mod metrics;
pub mod operator;
pub mod owner;
pub mod plugin;
pub mod reconcile;
pub mod render;
pub mod resource;
pub mod server;
mod status;
mod stores;
pub mod syntax;
pub mod watch;

pub use error::{Category, Error};
