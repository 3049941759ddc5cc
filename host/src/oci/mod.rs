//! Plugins from OCI registries: pinned by digest, checked, cached, verified.
//!
//! `--plugin oci://<registry>/<repository>@sha256:<digest>` names an
//! artifact in the layout `oras push` and `wkg oci push` produce (a Wasm
//! config and one component layer). Pulling it, in order:
//!
//! 1. the reference is checked ([`reference`]); a tag needs an opt-in;
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
//! (credentials, CA bundle, plain HTTP for named registries, retries) is
//! in [`registry`]; publishing in [`push`].

pub mod artifact;
pub mod auth;
pub mod blobs;
pub mod push;
pub mod reference;
pub mod registry;
pub mod signature;

use std::path::PathBuf;

pub use reference::PluginRef;

use self::blobs::Blobs;
use self::registry::Registry;

/// The largest component a registry may hand the host.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

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
    #[error("{0}")]
    Setup(String),
}

/// How plugins are pulled (from the command line).
#[derive(Clone, Debug, Default)]
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
}

/// A pulled component and where it came from.
pub struct Pulled {
    pub wasm: Vec<u8>,
    /// `oci://…@sha256:<manifest digest>`.
    pub pinned: String,
    /// Whether the registry was asked anything.
    pub contacted_registry: bool,
}

/// Pulls (or finds in the cache) the component a reference names.
#[tracing::instrument(skip_all, fields(plugin = %reference))]
pub async fn pull(reference: &PluginRef, options: &Options) -> Result<Pulled, SourceError> {
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
