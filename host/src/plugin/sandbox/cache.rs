//! On-disk cache of precompiled components.
//!
//! Compiling a plugin with Cranelift costs a noticeable fraction of a second
//! (seconds in a debug build); loading a precompiled artifact costs about a
//! millisecond. Artifacts are keyed by the SHA-256 of the component and the
//! engine's compatibility hash (wasmtime version and configuration), so a
//! different plugin, wasmtime or engine setting never loads a stale one.
//!
//! Loading an artifact is `unsafe` in wasmtime because it is only lightly
//! validated. This cache only ever loads files it wrote itself under a
//! content-derived name; operators must give it a directory nobody else can
//! write to.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::PluginError;

/// The artifact file for this component and engine.
fn artifact_path(engine: &Engine, digest: &str, dir: &Path) -> PathBuf {
    let digest = digest.strip_prefix("sha256:").unwrap_or(digest);
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
}

/// `digest` is the component's ([`super::digest_of`]).
pub(super) fn load_or_compile(
    engine: &Engine,
    wasm: &[u8],
    digest: &str,
    dir: &Path,
) -> Result<Component, PluginError> {
    let path = artifact_path(engine, digest, dir);
    if path.is_file() {
        // SAFETY: the file was produced by `precompile_component` below, for
        // these exact bytes and this engine configuration (see module docs).
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &path) } {
            return Ok(component);
        }
        // Unreadable or incompatible: fall through and replace it.
    }
    let artifact = engine.precompile_component(wasm).map_err(|e| PluginError::Compile(e.into()))?;
    let io = |source| PluginError::Cache { path: path.clone(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    // Write then rename, so a concurrent reader never sees half a file.
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, &artifact).map_err(io)?;
    std::fs::rename(&partial, &path).map_err(io)?;
    // SAFETY: as above; we just wrote these bytes.
    unsafe { Component::deserialize(engine, &artifact) }.map_err(|e| PluginError::Compile(e.into()))
}
