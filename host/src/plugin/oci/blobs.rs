//! A content-addressed store of pulled blobs: `<dir>/blobs/sha256/<hex>`.
//!
//! Nothing read from here is trusted: a blob is returned only if its bytes
//! hash to the name it was asked for, so a corrupted or replaced file is
//! dropped and pulled again. Writes go to a temporary file that is renamed
//! into place once its digest has been checked, so a reader never sees half
//! a blob and a failed download leaves nothing behind. Each temporary file
//! has a name of its own (`tempfile` creates it exclusively, under a random
//! name): pods sharing the cache volume can have the same pid, each in its
//! own pid namespace, so a name made from the pid would be one file for two
//! downloads.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use super::reference::sha256_hex;
use crate::plugin::sandbox::{digest_of, sha256_digest};

/// Where blobs live, if the operator gave a cache directory.
#[derive(Clone, Debug)]
pub struct Blobs {
    root: Option<PathBuf>,
}

impl Blobs {
    pub fn new(cache_dir: Option<&Path>) -> Self {
        Self { root: cache_dir.map(Path::to_path_buf) }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        Some(self.root.as_ref()?.join("blobs").join("sha256").join(sha256_hex(digest)?))
    }

    /// Where the signature that verified a manifest digest is kept. It is
    /// checked again with the key on every read, so it needs no trust.
    fn evidence_path(&self, digest: &str) -> Option<PathBuf> {
        Some(self.root.as_ref()?.join("signatures").join(format!("sha256-{}.json", sha256_hex(digest)?)))
    }

    pub fn evidence(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.evidence_path(digest)?;
        (std::fs::metadata(&path).ok()?.len() <= 1 << 20).then(|| std::fs::read(path).ok()).flatten()
    }

    pub fn keep_evidence(&self, digest: &str, bytes: &[u8]) {
        let Some(path) = self.evidence_path(digest) else { return };
        let written = partial_beside(&path).and_then(|mut partial| {
            partial.write_all(bytes)?;
            partial.persist(&path).map(drop).map_err(|e| e.error)
        });
        if let Err(e) = written {
            tracing::warn!(cache = %path.display(), error = %e, "the plugin cache is not writable; the next start fetches the signature again");
        }
    }

    /// The blob's bytes, if the store holds them intact.
    pub fn read(&self, digest: &str, max_bytes: u64) -> Option<Vec<u8>> {
        let path = self.path(digest)?;
        if std::fs::metadata(&path).ok()?.len() > max_bytes {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        if digest_of(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(blob = %path.display(), "a cached blob does not match its digest; pulling it again");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Starts a blob that is checked against `digest` and held to
    /// `max_bytes` as it is written. A cache that cannot be written costs
    /// a pull on the next start, nothing more: the blob stays in memory.
    pub fn writer(&self, digest: &str, max_bytes: u64) -> Writer {
        let file = self.path(digest).and_then(|path| match partial_beside(&path) {
            Ok(partial) => Some((partial, path)),
            Err(e) => {
                tracing::warn!(cache = %path.display(), error = %e, "the plugin cache is not writable; the next start pulls again");
                None
            }
        });
        Writer { digest: digest.to_string(), max_bytes, hasher: Sha256::new(), bytes: Vec::new(), file }
    }

    /// Stores bytes that must hash to `digest`.
    pub fn put(&self, digest: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut writer = self.writer(digest, bytes.len() as u64);
        writer.write(bytes)?;
        writer.finish()
    }
}

/// A new file in the directory of `path` (made if need be), to be renamed
/// to `path` when complete; removed when dropped before that.
fn partial_beside(path: &Path) -> std::io::Result<NamedTempFile> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut builder = tempfile::Builder::new();
    // What `File::create` gives (less the umask), not tempfile's 0600: a
    // cache filled at image build time is read by the image's user.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.prefix(".partial-").tempfile_in(dir)
}

/// A blob being written: hashed and counted on the way.
pub struct Writer {
    digest: String,
    max_bytes: u64,
    hasher: Sha256,
    bytes: Vec<u8>,
    /// The partial file and where it goes.
    file: Option<(NamedTempFile, PathBuf)>,
}

impl Writer {
    /// Appends a chunk; fails once more than the limit has arrived.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), String> {
        if (self.bytes.len() + chunk.len()) as u64 > self.max_bytes {
            self.abandon();
            return Err(format!("the registry sent more than the {} bytes the manifest declares", self.max_bytes));
        }
        self.hasher.update(chunk);
        self.bytes.extend_from_slice(chunk);
        if let Some((file, ..)) = &mut self.file
            && let Err(e) = file.write_all(chunk)
        {
            self.abandon();
            return Err(format!("writing the plugin cache: {e}"));
        }
        Ok(())
    }

    /// Checks the digest and moves the blob into place; returns its bytes.
    pub fn finish(mut self) -> Result<Vec<u8>, String> {
        let actual = sha256_digest(&self.hasher.clone().finalize());
        if actual != self.digest {
            self.abandon();
            return Err(format!("the bytes the registry sent do not hash to {} (but to {actual})", self.digest));
        }
        if let Some((partial, path)) = self.file.take() {
            let moved =
                partial.as_file().sync_all().and_then(|()| partial.persist(&path).map(drop).map_err(|e| e.error));
            if let Err(e) = moved {
                return Err(format!("writing the plugin cache {}: {e}", path.display()));
            }
        }
        Ok(self.bytes)
    }

    /// Stops writing the file; dropping it removes it.
    fn abandon(&mut self) {
        self.file = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sph-blobs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_blob_is_stored_under_its_digest_and_read_back_only_intact() {
        let root = dir("intact");
        let blobs = Blobs::new(Some(&root));
        let digest = digest_of(b"component");
        let mut w = blobs.writer(&digest, 100);
        w.write(b"compo").unwrap();
        w.write(b"nent").unwrap();
        assert_eq!(w.finish().unwrap(), b"component");
        assert_eq!(blobs.read(&digest, 100).as_deref(), Some(&b"component"[..]));
        let file = root.join("blobs/sha256").join(sha256_hex(&digest).unwrap());
        std::fs::write(&file, b"tampered!").unwrap();
        assert_eq!(blobs.read(&digest, 100), None);
        assert!(!file.exists(), "a tampered blob is removed");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_wrong_or_oversized_download_leaves_nothing() {
        let root = dir("wrong");
        let blobs = Blobs::new(Some(&root));
        let digest = digest_of(b"component");
        let mut w = blobs.writer(&digest, 100);
        w.write(b"other bytes").unwrap();
        assert!(w.finish().unwrap_err().contains("do not hash to sha256:"));
        let mut w = blobs.writer(&digest, 4);
        assert!(w.write(b"component").unwrap_err().contains("more than the 4 bytes"));
        drop(w);
        let left: Vec<_> = std::fs::read_dir(root.join("blobs/sha256")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn two_downloads_of_one_blob_into_one_directory_do_not_collide() {
        // Two pods on one cache volume can have the same pid (each in its own
        // pid namespace); one process plays both here.
        let root = dir("shared");
        let blobs = Blobs::new(Some(&root));
        let digest = digest_of(b"component");
        let (mut first, mut second) = (blobs.writer(&digest, 100), blobs.writer(&digest, 100));
        first.write(b"compo").unwrap();
        second.write(b"compo").unwrap();
        second.write(b"nent").unwrap();
        first.write(b"nent").unwrap();
        assert_eq!(second.finish().unwrap(), b"component");
        assert_eq!(first.finish().unwrap(), b"component");
        // One that fails does not take the other's file with it.
        let other = digest_of(b"other");
        let mut kept = blobs.writer(&other, 100);
        kept.write(b"oth").unwrap();
        drop(blobs.writer(&other, 100));
        kept.write(b"er").unwrap();
        assert_eq!(kept.finish().unwrap(), b"other");
        assert_eq!(blobs.read(&digest, 100).as_deref(), Some(&b"component"[..]));
        assert_eq!(blobs.read(&other, 100).as_deref(), Some(&b"other"[..]));
        let mut left: Vec<_> =
            std::fs::read_dir(root.join("blobs/sha256")).unwrap().map(|e| e.unwrap().file_name()).collect();
        left.sort();
        let mut expected = [sha256_hex(&digest).unwrap(), sha256_hex(&other).unwrap()];
        expected.sort();
        assert_eq!(left, expected, "only the blobs remain");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn without_a_directory_blobs_stay_in_memory() {
        let blobs = Blobs::new(None);
        let digest = digest_of(b"x");
        assert_eq!(blobs.put(&digest, b"x").unwrap(), b"x");
        assert!(blobs.put(&digest, b"y").is_err());
        assert_eq!(blobs.read(&digest, 10), None);
        assert!(blobs.read("sha256:../../etc/passwd", 10).is_none());
    }
}
