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
    #[error("precompiled plugin cache {}: refused, {reason}", path.display())]
    UnsafeCache { path: PathBuf, reason: String },
    #[error("the component does not fit the plugin world")]
    Incompatible(#[source] Cause),
    #[error("the plugin implements contract version {found}; this host supports {oldest} to {newest}")]
    Unsupported { found: String, oldest: &'static str, newest: &'static str },
    #[error("plugin {plugin} exceeded its time budget of {budget:?}")]
    Timeout { plugin: String, budget: Duration },
    #[error("plugin {plugin} exceeded its {limit}")]
    Limit { plugin: String, bound: Bound, limit: String },
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

/// A limit a call can exceed (besides its time budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Memory,
    Table,
    Output,
    Objects,
}

/// What stopped a call, as the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Timeout,
    Limit(Bound),
    InputSize,
    OutputSize,
    Trap,
}

impl Stopped {
    pub const ALL: [Stopped; 8] = [
        Stopped::Timeout,
        Stopped::Limit(Bound::Memory),
        Stopped::Limit(Bound::Table),
        Stopped::Limit(Bound::Output),
        Stopped::Limit(Bound::Objects),
        Stopped::InputSize,
        Stopped::OutputSize,
        Stopped::Trap,
    ];
}

impl crate::metrics::LabelValue for Stopped {
    fn label(self) -> &'static str {
        match self {
            Stopped::Timeout => "timeout",
            Stopped::Limit(Bound::Memory) => "memory",
            Stopped::Limit(Bound::Table) => "table",
            Stopped::Limit(Bound::Output) => "output",
            Stopped::Limit(Bound::Objects) => "objects",
            Stopped::InputSize => "input-size",
            Stopped::OutputSize => "output-size",
            Stopped::Trap => "trap",
        }
    }
}

impl PluginError {
    /// What stopped a call, for the errors a call can end with.
    pub fn stopped(&self) -> Option<Stopped> {
        match self {
            PluginError::Timeout { .. } => Some(Stopped::Timeout),
            PluginError::Limit { bound, .. } => Some(Stopped::Limit(*bound)),
            PluginError::TooLarge { what, .. } if *what == INPUT => Some(Stopped::InputSize),
            PluginError::TooLarge { .. } => Some(Stopped::OutputSize),
            PluginError::Trap { .. } => Some(Stopped::Trap),
            _ => None,
        }
    }
}

/// What [`PluginError::TooLarge`] calls an input.
pub(super) const INPUT: &str = "an input";
