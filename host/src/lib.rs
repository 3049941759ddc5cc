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
//! - [`apply`]: server-side apply, Secret copies and ordered deletion, with
//!   owner labels instead of cross-cluster owner references.
//! - [`reconcile`] and [`watch`]: the kube-rs controller around those steps;
//!   [`access`] obtains cluster access through openmcp AccessRequests.
//! - [`render`]: the offline `render` command: the same path with files as
//!   input and the plan printed instead of applied.
//!
//! The host knows nothing about any particular service: everything specific
//! comes from the plugin's `describe()`.

pub mod access;
pub mod apply;
pub mod clusters;
pub mod gather;
pub mod init;
pub mod metrics;
pub mod operator;
pub mod plan;
pub mod reconcile;
pub mod render;
pub mod sandbox;
pub mod server;
pub mod status;
pub mod watch;

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
    /// Something only a person can fix (a missing source Secret, a Secret of
    /// the wrong type): shown in the status, retried at the poll interval.
    #[error("{0}")]
    Invalid(String),
    /// Cluster access could not be set up or used.
    #[error("{0}")]
    Cluster(String),
    #[error("{context}: {source}")]
    Kube { context: String, source: kube::Error },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Deletion is progressing but not finished: not a failure, just look
    /// again after the given delay (the finalizer stays).
    #[error("{reason}")]
    NotYet { reason: String, retry_after: std::time::Duration },
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    pub fn kube(context: String, source: kube::Error) -> Self {
        Error::Kube { context, source }
    }
}
