//! Where a plugin comes from: a file, or an OCI registry ([`crate::plugin::oci`]).
//!
//! `--plugin` takes either; this is the one place that tells them apart and
//! turns either into component bytes for the sandbox.

use std::path::PathBuf;

use crate::plugin::oci::{self, PluginRef, SourceError};

/// A `--plugin` value.
#[derive(Clone, Debug)]
pub enum PluginSource {
    File(PathBuf),
    Oci(PluginRef),
}

/// The component's bytes and a name for it in messages.
pub struct Component {
    pub wasm: Vec<u8>,
    /// The file, or the digest-pinned reference.
    pub origin: String,
}

impl PluginSource {
    /// `oci://…` is a registry reference; anything else is a file path.
    pub fn parse(text: &str, options: &oci::Options) -> Result<Self, SourceError> {
        match text.starts_with(oci::reference::SCHEME) {
            true => PluginRef::parse(text, options.allow_tag).map(Self::Oci),
            false => Ok(Self::File(PathBuf::from(text))),
        }
    }

    /// Reads or pulls the component. With a verification key only a
    /// signed registry artifact passes: a file carries no signature.
    pub async fn fetch(&self, options: &oci::Options) -> Result<Component, SourceError> {
        match self {
            Self::File(path) => {
                if let Some(key) = &options.verify_key {
                    return Err(SourceError::Setup(format!(
                        "plugin {} is a file, and files carry no signature: with --plugin-verify-key {} only signed plugins from a registry (oci://…@sha256:…) load",
                        path.display(),
                        oci::signature::key_name(key)
                    )));
                }
                let wasm = std::fs::read(path)
                    .map_err(|e| SourceError::Setup(format!("reading plugin {}: {e}", path.display())))?;
                Ok(Component { wasm, origin: path.display().to_string() })
            }
            Self::Oci(reference) => {
                let started = std::time::Instant::now();
                let pulled = oci::pull(reference, options).await?;
                tracing::info!(
                    plugin = %pulled.pinned,
                    from_cache = !pulled.contacted_registry,
                    verified = options.verify_key.is_some(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "plugin fetched"
                );
                Ok(Component { wasm: pulled.wasm, origin: pulled.pinned })
            }
        }
    }

    /// The file, if the plugin is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Self::File(path) => Some(path),
            Self::Oci(_) => None,
        }
    }
}
