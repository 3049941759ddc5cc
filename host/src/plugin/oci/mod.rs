//! Plugins from OCI registries: pinned by digest, checked, cached, verified.
//!
//! `--plugin oci://<registry>/<repository>@sha256:<digest>` names an
//! artifact in the layout `oras push` and `wkg oci push` produce (a Wasm
//! config and one component layer). Pulling it, in order:
//!
//! 1. the reference is checked ([`reference`]); a tag needs an opt-in, and
//!    is refused with a verification key (see [`pull`]);
//! 2. the manifest comes from the cache or the registry, hashes to the
//!    pinned digest, and must describe exactly one component layer within
//!    the size limit ([`artifact`]), all before any layer is downloaded;
//! 3. with a verification key, a cosign signature over that digest must
//!    verify ([`signature`]), before anything is compiled;
//! 4. the layer is streamed into the cache while it is hashed and counted
//!    ([`blobs`]), and must be a component.
//!
//! Every cached file is checked against its digest when it is read, so a
//! second start with the same digest makes no registry request, and a
//! tampered cache is pulled again rather than trusted. Registry access
//! (credentials, CA bundle, plain HTTP for named registries, retries, a
//! limit on every answer) is in [`registry`]; publishing in [`push`]. All
//! of a pull has one deadline.

pub mod artifact;
pub mod auth;
pub mod blobs;
pub mod push;
pub mod reference;
pub mod registry;
pub mod signature;

use std::path::PathBuf;
use std::time::Duration;

pub use reference::PluginRef;

use self::blobs::Blobs;
use self::registry::Registry;

/// The largest component a registry may hand the host.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// How long a pull may take unless the operator says otherwise: the
/// largest component over a slow link fits, with every retry; a registry
/// that stalls fails the start within it rather than holding it.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(180);

/// Why a tag is refused with a verification key.
const TAG_WITH_KEY: &str = "with --plugin-verify-key it must be pinned by digest: the key signs digests, not tags, so a registry could move the tag back to any older digest the key once signed; give @sha256:<digest>";

/// Why a plugin could not be pulled: one line each, for the operator.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("plugin reference {reference} is not usable: {why}")]
    Reference { reference: String, why: String },
    #[error("{reference}: registry {registry} is unreachable: {why}")]
    Unreachable { reference: String, registry: String, why: String },
    #[error("{reference}: not found in the registry: {why}")]
    NotFound { reference: String, why: String },
    #[error("{reference}: registry {registry} refused access: {why}")]
    Unauthorized { reference: String, registry: String, why: String },
    #[error("{reference} is not a plugin: {why}")]
    Artifact { reference: String, why: String },
    #[error("{reference}: {why}")]
    Transfer { reference: String, why: String },
    #[error("{reference}: signature verification failed: {why}")]
    Signature { reference: String, why: String },
    /// An answer over its limit, refused before more of it was read.
    #[error("{reference}: registry {registry} sent more than {limit} bytes for {what}")]
    TooLarge { reference: String, registry: String, what: &'static str, limit: u64 },
    /// The deadline of a pull (or push) passed: a registry that stalls or
    /// trickles.
    #[error(
        "{reference}: the {action} registry {registry} did not finish within {limit:?} (--plugin-pull-timeout-seconds)"
    )]
    Deadline { reference: String, registry: String, action: &'static str, limit: Duration },
    #[error("{0}")]
    Setup(String),
}

/// How plugins are pulled (from the command line).
#[derive(Clone, Debug)]
pub struct Options {
    /// Blobs go to `<cache_dir>/blobs/sha256`; without it, memory only.
    pub cache_dir: Option<PathBuf>,
    /// Admit references without a digest (development only).
    pub allow_tag: bool,
    /// A cosign public key (PEM); with it, only signed plugins load.
    pub verify_key: Option<PathBuf>,
    /// Registries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Extra CA certificates (PEM) for registries.
    pub ca_file: Option<PathBuf>,
    /// How long one pull (or push) may take, every request, retry and
    /// signature check of it together.
    pub pull_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cache_dir: None,
            allow_tag: false,
            verify_key: None,
            insecure_registries: Vec::new(),
            ca_file: None,
            pull_timeout: DEFAULT_PULL_TIMEOUT,
        }
    }
}

/// A pulled component and where it came from.
pub struct Pulled {
    pub wasm: Vec<u8>,
    /// `oci://…@sha256:<manifest digest>`.
    pub pinned: String,
    /// Whether the registry was asked anything.
    pub contacted_registry: bool,
}

/// Pulls (or finds in the cache) the component a reference names, within
/// the pull's deadline: a registry's read timeout never trips on a byte
/// every few seconds, and retries add up, so a registry that stalls or
/// trickles fails the start here, in one line, instead of holding it.
///
/// With a verification key the reference must name a digest. The key
/// signs digests, not tags: a registry that moved a tag back to an older
/// release the key once signed (one with a known hole) would pass the
/// signature check, and no signature says which digest is the tag's now.
#[tracing::instrument(skip_all, fields(plugin = %reference))]
pub async fn pull(reference: &PluginRef, options: &Options) -> Result<Pulled, SourceError> {
    if options.verify_key.is_some() && reference.digest().is_none() {
        return Err(SourceError::Reference { reference: reference.to_string(), why: TAG_WITH_KEY.into() });
    }
    within_deadline("pull from", reference, options, fetch(reference, options)).await
}

/// `work` with [`Options::pull_timeout`] for all of it (`action`, for the
/// refusal: "pull from", "push to").
pub(crate) async fn within_deadline<T>(
    action: &'static str,
    reference: &PluginRef,
    options: &Options,
    work: impl Future<Output = Result<T, SourceError>>,
) -> Result<T, SourceError> {
    tokio::time::timeout(options.pull_timeout, work).await.unwrap_or_else(|_| {
        Err(SourceError::Deadline {
            reference: reference.to_string(),
            registry: reference.registry().to_string(),
            action,
            limit: options.pull_timeout,
        })
    })
}

/// [`pull`] without its deadline.
async fn fetch(reference: &PluginRef, options: &Options) -> Result<Pulled, SourceError> {
    let key = options.verify_key.as_deref().map(signature::Key::load).transpose().map_err(SourceError::Setup)?;
    let blobs = Blobs::new(options.cache_dir.as_deref());
    let remote = Registry::lazy(reference, options);
    let who = reference.to_string();

    let digest = match reference.digest() {
        Some(digest) => digest.to_string(),
        None => {
            let digest = remote.get()?.resolve(reference.reference()).await?;
            tracing::warn!(%digest, "a mutable plugin reference resolved; pin this digest for anything but development");
            digest
        }
    };
    let manifest = match blobs.read(&digest, artifact::MAX_MANIFEST_BYTES as u64) {
        Some(bytes) => bytes,
        None => {
            let bytes = remote.get()?.manifest(&reference.at(&digest)).await?;
            blobs.put(&digest, &bytes).map_err(|why| SourceError::Transfer { reference: who.clone(), why })?
        }
    };
    let layer = artifact::component_layer(&manifest, MAX_COMPONENT_BYTES)
        .map_err(|why| SourceError::Artifact { reference: who.clone(), why })?;
    if let Some(key) = &key {
        signature::verify(key, reference, &digest, &blobs, &remote).await?;
    }
    let wasm = match blobs.read(&layer.digest, layer.size) {
        Some(bytes) => bytes,
        None => remote.get()?.blob(&reference.at(&digest), &layer, &blobs).await?,
    };
    if !wasmtime::wasmparser::Parser::is_component(&wasm) {
        let why = match wasmtime::wasmparser::Parser::is_core_wasm(&wasm) {
            true => "its layer is a core WebAssembly module, not a component (build for wasm32-wasip2)",
            false => "its layer is not WebAssembly",
        };
        return Err(SourceError::Artifact { reference: who, why: why.into() });
    }
    Ok(Pulled { wasm, pinned: reference.pinned(&digest), contacted_registry: remote.used() })
}

/// Registry-sent text made safe for one log line: printable, bounded.
pub(crate) fn oneline(text: &str) -> String {
    crate::syntax::one_line(text, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tag_is_refused_with_a_verification_key_before_anything_is_read() {
        let reference = PluginRef::parse("oci://localhost:1/plugins/kro:v1", true).unwrap();
        let key = std::env::temp_dir().join("sph-no-such-key.pub");
        let options = Options { allow_tag: true, verify_key: Some(key), ..Options::default() };
        let e = pull(&reference, &options).await.err().unwrap();
        assert!(matches!(e, SourceError::Reference { .. }), "{e}");
        assert!(e.to_string().contains("with --plugin-verify-key"), "{e}");
    }
}
