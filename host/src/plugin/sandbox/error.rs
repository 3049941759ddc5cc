//! What can go wrong with a plugin, worded for the operator who has to act.

use std::path::PathBuf;
use std::time::Duration;

/// A boxed cause that keeps its own chain (wasmtime errors convert into it).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A plugin could not be loaded or called.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("creating the Wasm engine")]
    Engine(#[source] Cause),
    #[error("compiling the component")]
    Compile(#[source] Cause),
    #[error("precompiled plugin cache {}", path.display())]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the component does not fit the plugin world")]
    Incompatible(#[source] Cause),
    #[error("the plugin implements contract version {found}; this host supports {oldest} to {newest}")]
    Unsupported { found: String, oldest: &'static str, newest: &'static str },
    #[error("plugin {plugin} exceeded its time budget of {budget:?}")]
    Timeout { plugin: String, budget: Duration },
    #[error("plugin {plugin} exceeded its {limit}")]
    Limit { plugin: String, limit: String },
    #[error("plugin {plugin} sent {what} of {bytes} bytes, more than the limit of {max} bytes")]
    TooLarge { plugin: String, what: &'static str, bytes: usize, max: usize },
    #[error("plugin {plugin} describes itself with what the host cannot use: {reason}")]
    Descriptor { plugin: String, reason: String },
    #[error("plugin {plugin} failed{}", wrote.as_ref().map(|w| format!(", having written: {w}")).unwrap_or_default())]
    Trap {
        plugin: String,
        /// The plugin's last words on stderr (a panic message), as one
        /// clean, bounded line.
        wrote: Option<String>,
        #[source]
        source: Cause,
    },
}
