//! The harness's single error type.

use std::path::PathBuf;

/// Everything that can go wrong while building a test environment.
///
/// Messages are written for the person reading a failed CI log: they name
/// the file, process or command involved and, where possible, the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A server binary was not found. Tests never build binaries themselves
    /// (a cold kube-apiserver build takes many minutes); `script` is the
    /// file name of the build script under `tests/testbed/scripts/`.
    #[error(
        "{what} binary not found at {path}: run `tests/testbed/scripts/{script}` \
         (or set {env} to an existing binary)"
    )]
    MissingBinary { what: &'static str, env: &'static str, path: PathBuf, script: &'static str },

    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("failed to spawn {what}: {source}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },

    #[error("certificate generation failed: {0}")]
    Pki(#[from] rcgen::Error),

    /// A server process exited while we waited for it; `log_tail` is the end
    /// of its log file.
    #[error("{what} exited early ({status}); log {log}:\n{log_tail}")]
    ProcessExited { what: String, status: String, log: PathBuf, log_tail: String },

    #[error("timed out after {seconds}s waiting for {what}{detail}")]
    Timeout {
        what: String,
        seconds: u64,
        /// Extra context (last error seen, log tail), prefixed with ": ".
        detail: String,
    },

    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },

    #[error("invalid YAML in {origin}: {message}")]
    Yaml { origin: String, message: String },

    #[error("invalid CRD in {origin}: {message}")]
    InvalidCrd { origin: String, message: String },

    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),

    #[error("kubeconfig error: {0}")]
    Kubeconfig(String),

    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),

    /// The shared environment failed to start earlier in this test binary;
    /// the original error is kept as text because it is reported to every
    /// test that asks for the environment.
    #[error("shared test environment failed to start: {0}")]
    SharedStartFailed(String),

    #[error("{0}")]
    Other(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
