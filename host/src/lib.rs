//! The generic OpenControlPlane service-provider host.
//!
//! The data path of one reconcile:
//!
//! ```text
//! watch ─▶ access ─▶ gather ─▶ plan (in the Wasm sandbox) ─▶ apply (SSA) ─▶ status
//! ```
//!
//! The code is three wings above a ground floor, and calls go down only:
//!
//! - [`controller`]: the operator around one reconcile: `init` and `run`
//!   assembled from their settings, the kube-rs controller and every watch
//!   that maps back to an instance ([`controller::watch`]), probes and
//!   metrics endpoints.
//! - [`reconcile`]: one reconcile of one instance, the operation
//!   annotations and the finalizer, then the live or the deletion path as
//!   their named steps: [`reconcile::access`] (openmcp AccessRequests),
//!   [`reconcile::gather`] (the plugin's inputs), the plan, [`reconcile::apply`]
//!   (server-side apply, copies, pruning, the plugin's CRDs, with owner
//!   labels instead of cross-cluster owner references; taking over another
//!   provider's objects only as [`adopt`] allows) and
//!   [`reconcile::status`] (the status and Events).
//! - [`plugin`]: the Wasm side: where a component comes from, the sandbox it
//!   runs in, the grant and the checks of what it answers. It uses no kube
//!   and nothing of the cluster side, which takes the checked values it
//!   hands over.
//!
//! Beside the controller, [`render`] runs the data path on files. Between
//! the reconcile and the Wasm side: [`clusters`] builds and caches clients,
//! [`instance`] (an instance and its reach), [`error`] (every failure, with
//! the plugin side's and [`adopt`]'s refusals). Beside the Wasm side:
//! [`adopt`] (whose objects may be taken over) and the watches' stores.
//! The ground floor, which imports nothing of the crate above it:
//! [`keys`] (how the host names an instance it keeps something for),
//! [`syntax`] (what Kubernetes accepts as a name: the rule every string
//! meets before it reaches a URL), [`owner`], [`resource`] (Kubernetes
//! plumbing), [`metrics`], [`logging`], [`telemetry`] (traces).
//!
//! Dependencies point one way: no room imports a room that imports it, the
//! wings call downwards only, and a step of the reconcile never reaches
//! back into the paths that call it (checked by `tests/architecture.rs`).
//!
//! The host knows nothing about any particular service: everything specific
//! comes from the plugin's `describe()`.

pub mod adopt;
pub mod clusters;
pub mod controller;
pub mod error;
mod instance;
mod keys;
pub mod logging;
pub mod metrics;
pub mod owner;
pub mod plugin;
pub mod reconcile;
pub mod render;
pub mod resource;
mod stores;
pub mod syntax;
pub mod telemetry;

pub use error::{Category, Error};
