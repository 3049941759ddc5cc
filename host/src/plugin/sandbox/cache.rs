//! On-disk cache of precompiled components.
//!
//! Compiling a plugin with Cranelift costs a noticeable fraction of a second
//! (seconds in a debug build); loading a precompiled artifact costs about a
//! millisecond. Artifacts are keyed by the SHA-256 of the component and the
//! engine's compatibility hash (wasmtime version and configuration), so a
//! different plugin, wasmtime or engine setting never loads a stale one.
//!
//! An artifact is native code that wasmtime only lightly validates: loading
//! a damaged one can crash the process, and whoever can change one runs code
//! in the host. So the cache
//!
//! - keeps its artifacts in `<dir>/precompiled/`, a directory it creates
//!   for its owner alone (`dir` itself may be a volume everyone in the pod
//!   can write, as an `emptyDir` is);
//! - refuses ([`PluginError::UnsafeCache`]) a `precompiled/` directory or
//!   artifact that anyone but its owner may write, that another user than
//!   this process's or root owns (root: the image's baked, read-only
//!   cache), or that is a symbolic link; an artifact is opened without
//!   following a link and without waiting on a pipe;
//! - seals each artifact with the SHA-256 of its file name (component
//!   digest and engine) and its bytes, recorded when it was compiled, and
//!   loads one only when both still match: a damaged, truncated or renamed
//!   artifact is compiled again, not run.
//!
//! The seal lies beside the bytes it covers, so it detects damage, not a
//! writer who rewrites both: that is what the ownership check is for.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::PluginError;

/// The first line of every artifact file; the seal (`sha256:<hex>` of its
/// name, a newline and the artifact) and a newline follow, then the
/// artifact.
const MAGIC: &[u8] = b"service-provider-host precompiled v2\n";
/// The header: magic, the seal, newline.
const HEADER: usize = MAGIC.len() + "sha256:".len() + 64 + 1;
/// A larger file is not an artifact of this host (the largest plugin it
/// accepts compiles to a fraction of this).
const MAX_ARTIFACT: u64 = 512 << 20;

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
    let dir = dir.join("precompiled");
    let path = artifact_path(engine, digest, &dir);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(file) = read_private(&dir, &path)? {
        match unseal(&file, &name) {
            // SAFETY: these bytes are the ones this host's compiler wrote
            // for this component and engine configuration (the seal over
            // name and bytes matches, the file and its directory are
            // writable by their owner alone, and that owner is this
            // process's user or root).
            Some(artifact) => match unsafe { Component::deserialize(engine, artifact) } {
                Ok(component) => return Ok(component),
                Err(error) => tracing::warn!(
                    artifact = %path.display(), error = %error,
                    "the precompiled plugin cannot be loaded; compiling it again"
                ),
            },
            None => tracing::warn!(
                artifact = %path.display(),
                "the precompiled plugin does not match the digest recorded when it was compiled (damaged?); \
                 compiling it again"
            ),
        }
    }
    let artifact = engine.precompile_component(wasm).map_err(|e| PluginError::Compile(e.into()))?;
    write_sealed(&dir, &path, &name, &artifact)?;
    // SAFETY: compiled just now, from these bytes, by this engine.
    unsafe { Component::deserialize(engine, &artifact) }.map_err(|e| PluginError::Compile(e.into()))
}

/// The file at `path` if it is there; an error if it or its directory may
/// be changed by someone else.
fn read_private(dir: &Path, path: &Path) -> Result<Option<Vec<u8>>, PluginError> {
    let io = |source| PluginError::Cache { path: path.to_path_buf(), source };
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => owned_privately(dir, &meta)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    // No link followed, no wait on a pipe someone put there.
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(PluginError::UnsafeCache { path: path.to_path_buf(), reason: "it is a symbolic link".into() });
        }
        Err(e) => return Err(io(e)),
    };
    // The opened file's own metadata: what is read is what was checked.
    let meta = file.metadata().map_err(io)?;
    owned_privately(path, &meta)?;
    if !meta.is_file() || meta.len() > MAX_ARTIFACT {
        tracing::warn!(artifact = %path.display(), bytes = meta.len(), "not a precompiled plugin; compiling it again");
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_ARTIFACT).read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(bytes))
}

/// The seal of an artifact under its file name.
fn seal(name: &str, artifact: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update(artifact);
    super::sha256_digest(&hasher.finalize())
}

/// The artifact in a sealed file, if the recorded seal matches it and the
/// name it is found under.
fn unseal<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let recorded = bytes.get(..HEADER)?.strip_prefix(MAGIC)?.strip_suffix(b"\n")?;
    let artifact = &bytes[HEADER..];
    (recorded == seal(name, artifact).as_bytes()).then_some(artifact)
}

/// Writes a sealed artifact: into a file of its own name first, renamed
/// into place, so a concurrent reader never sees half of one (pods sharing
/// the volume can have the same pid, so the name is not made from it).
fn write_sealed(dir: &Path, path: &Path, name: &str, artifact: &[u8]) -> Result<(), PluginError> {
    let io = |source| PluginError::Cache { path: path.to_path_buf(), source };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(e)),
        _ => {}
    }
    owned_privately(dir, &std::fs::symlink_metadata(dir).map_err(io)?)?;
    let mut file = tempfile::Builder::new().prefix(".partial-").tempfile_in(dir).map_err(io)?;
    file.write_all(MAGIC).map_err(io)?;
    file.write_all(seal(name, artifact).as_bytes()).map_err(io)?;
    file.write_all(b"\n").map_err(io)?;
    file.write_all(artifact).map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Refuses a file or directory that others than its owner may write, or
/// whose owner is neither this process's user nor root.
fn owned_privately(path: &Path, meta: &std::fs::Metadata) -> Result<(), PluginError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let reason = if meta.file_type().is_symlink() {
        "it is a symbolic link".to_string()
    } else if meta.mode() & 0o022 != 0 {
        format!("others than its owner may write it (mode {:o})", meta.mode() & 0o7777)
    } else if meta.uid() != me && meta.uid() != 0 {
        format!("it belongs to user {}, neither this process's ({me}) nor root", meta.uid())
    } else {
        return Ok(());
    };
    Err(PluginError::UnsafeCache { path: path.to_path_buf(), reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(name: &str, artifact: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(seal(name, artifact).as_bytes());
        out.push(b'\n');
        out.extend(artifact);
        out
    }

    #[test]
    fn a_seal_opens_only_on_the_bytes_and_the_name_it_was_made_for() {
        let file = sealed("a.cwasm", b"native code");
        assert_eq!(unseal(&file, "a.cwasm"), Some(&b"native code"[..]));
        assert_eq!(unseal(&file, "b.cwasm"), None, "renamed");
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 0xff;
        assert_eq!(unseal(&flipped, "a.cwasm"), None);
        assert_eq!(unseal(&file[..file.len() - 1], "a.cwasm"), None, "truncated");
        assert_eq!(unseal(&file[..HEADER - 1], "a.cwasm"), None, "header only");
        assert_eq!(unseal(b"\x7fELF raw artifact", "a.cwasm"), None, "an unsealed artifact");
    }
}
