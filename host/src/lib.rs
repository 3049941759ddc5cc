//! The generic OpenControlPlane service-provider host.
//!
//! The data path of one reconcile, one module per step:
//!
//! ```text
//! watch ─▶ gather ─▶ plan (in the Wasm sandbox) ─▶ apply (SSA) ─▶ status
//! ```
//!
//! - [`gather`]: the plugin's inputs: the service object, the ProviderConfig,
//!   the tenant context and the objects the plugin asked to observe.
//! - [`plan`]: calls the plugin in the [`sandbox`] and checks every object it
//!   asks for against its capability allow-list.
//! - [`status`]: the status the host writes, with condition timestamps that
//!   only move when a condition changes.
//! - [`render`]: the offline `render` command: the same path with files as
//!   input and the plan printed instead of applied.
//!
//! The host knows nothing about any particular service: everything specific
//! comes from the plugin's `describe()`.

pub mod gather;
pub mod plan;
pub mod render;
pub mod sandbox;
pub mod status;

use std::path::PathBuf;

/// Errors of the host library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("wasm sandbox: {0}")]
    Sandbox(String),
    /// Loading or calling a plugin failed (compile error, trap, deadline,
    /// memory limit).
    #[error("{0}")]
    Plugin(String),
    /// The plugin asked for something its capability allow-list (or the
    /// contract) does not permit.
    #[error("plugin {plugin} violated its contract: {message}")]
    Contract { plugin: String, message: String },
    #[error("invalid service object: {0}")]
    InvalidObject(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
