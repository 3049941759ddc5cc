//! The registry side of a pull: one `oci-client` per start, its TLS,
//! credentials and retries, and the registry's answers turned into
//! [`SourceError`]s that say what to do.
//!
//! The client is built only when the cache cannot answer, so a start from
//! the cache makes no request at all (and needs no credentials).

use std::sync::OnceLock;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::{Client, Reference};

use super::artifact::{Layer, MANIFEST};
use super::auth::Credentials;
use super::blobs::Blobs;
use super::{Options, PluginRef, SourceError, oneline};

/// Manifest types asked for: a plugin's, and an index so that it can be
/// named in the refusal.
const ACCEPT: [&str; 3] =
    [MANIFEST, "application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];

/// A registry client made on first use.
pub struct Lazy<'a> {
    reference: &'a PluginRef,
    options: &'a Options,
    cell: OnceLock<Registry>,
}

impl Registry {
    pub fn lazy<'a>(reference: &'a PluginRef, options: &'a Options) -> Lazy<'a> {
        Lazy { reference, options, cell: OnceLock::new() }
    }
}

impl Lazy<'_> {
    pub fn get(&self) -> Result<&Registry, SourceError> {
        if let Some(registry) = self.cell.get() {
            return Ok(registry);
        }
        let registry = Registry::new(self.reference, self.options)?;
        Ok(self.cell.get_or_init(|| registry))
    }

    /// Whether a request was (or could have been) made.
    pub fn used(&self) -> bool {
        self.cell.get().is_some()
    }
}

/// A client for the registry of one reference.
pub struct Registry {
    pub(super) client: Client,
    pub(super) credentials: Credentials,
    who: String,
    registry: String,
}

impl Registry {
    fn new(reference: &PluginRef, options: &Options) -> Result<Self, SourceError> {
        // reqwest asks for the process's rustls provider: ring, as for kube.
        // Already installed (a second pull) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            user_agent: concat!("service-provider-host/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        if let Some(path) = &options.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| SourceError::Setup(format!("reading registry CA bundle {}: {e}", path.display())))?;
            config.extra_root_certificates.push(Certificate { encoding: CertificateEncoding::Pem, data: pem });
        }
        let client = Client::try_from(config)
            .map_err(|e| SourceError::Setup(format!("setting up the registry client: {}", oneline(&e.to_string()))))?;
        let credentials = Credentials::from_env().map_err(SourceError::Setup)?;
        Ok(Self { client, credentials, who: reference.to_string(), registry: reference.registry().to_string() })
    }

    /// The digest a tag points at now.
    pub async fn resolve(&self, image: &Reference) -> Result<String, SourceError> {
        let auth = self.credentials.for_registry(&self.registry);
        let digest = (|| self.client.fetch_manifest_digest(image, &auth)).retry(backoff()).when(transient).await;
        let digest = digest.map_err(|e| self.error(e))?;
        match super::reference::sha256_hex(&digest) {
            Some(_) => Ok(digest),
            None => Err(self.transfer(format!("the registry named digest {}", oneline(&digest)))),
        }
    }

    /// A manifest's bytes (the caller checks them against the digest).
    pub async fn manifest(&self, image: &Reference) -> Result<Vec<u8>, SourceError> {
        self.pull_manifest(image, &ACCEPT).await.map_err(|e| self.error(e))
    }

    /// A manifest at a tag, or `None` if the tag does not exist.
    pub async fn manifest_at(&self, image: &Reference, accept: &[&str]) -> Result<Option<Vec<u8>>, SourceError> {
        match self.pull_manifest(image, accept).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    async fn pull_manifest(&self, image: &Reference, accept: &[&str]) -> Result<Vec<u8>, OciDistributionError> {
        let auth = self.credentials.for_registry(&self.registry);
        let pulled = (|| self.client.pull_manifest_raw(image, &auth, accept)).retry(backoff()).when(transient).await;
        pulled.map(|(bytes, _)| bytes.to_vec())
    }

    /// The digests of the manifests that refer to `image` with this
    /// artifact type (the referrers API, or its tag fallback).
    pub async fn referrers(&self, image: &Reference, artifact_type: &str) -> Result<Vec<String>, SourceError> {
        let auth = self.credentials.for_registry(&self.registry);
        // Authenticates the client for the pull scope; referrers reuse it.
        self.client.store_auth_if_needed(image.resolve_registry(), &auth).await;
        let index = (|| self.client.pull_referrers(image, Some(artifact_type))).retry(backoff()).when(transient).await;
        match index {
            Ok(index) => Ok(index.manifests.into_iter().map(|m| m.digest).collect()),
            Err(e) if not_found(&e) => Ok(Vec::new()),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Streams a blob into the store, held to the layer's digest and size.
    pub async fn blob(&self, image: &Reference, layer: &Layer, blobs: &Blobs) -> Result<Vec<u8>, SourceError> {
        let fetch = || async {
            let mut writer = blobs.writer(&layer.digest, layer.size);
            let mut stream = self.client.pull_blob_stream(image, layer.digest.as_str()).await?;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| match e.get_ref().is_some_and(|inner| inner.is::<DigestError>()) {
                    // Checked as the stream ends: not worth another try.
                    true => OciDistributionError::GenericError(Some(format!(
                        "the bytes the registry sent do not hash to {}",
                        layer.digest
                    ))),
                    false => OciDistributionError::IoError(e),
                })?;
                writer.write(&chunk).map_err(|why| OciDistributionError::GenericError(Some(why)))?;
            }
            writer.finish().map_err(|why| OciDistributionError::GenericError(Some(why)))
        };
        let auth = self.credentials.for_registry(&self.registry);
        self.client.store_auth_if_needed(image.resolve_registry(), &auth).await;
        fetch.retry(backoff()).when(transient).await.map_err(|e| self.error(e))
    }

    fn transfer(&self, why: String) -> SourceError {
        SourceError::Transfer { reference: self.who.clone(), why }
    }

    /// The registry's answer, as the operator needs to read it.
    pub(super) fn error(&self, e: OciDistributionError) -> SourceError {
        let (reference, registry) = (self.who.clone(), self.registry.clone());
        let unauthorized = |why: String| {
            let hint = match self.credentials.source() {
                Some(file) if self.credentials.has(&registry) => {
                    format!("; the credentials for it in {} were not accepted", file.display())
                }
                _ => "; give credentials in a kubernetes.io/dockerconfigjson Secret mounted as $DOCKER_CONFIG/config.json"
                    .to_string(),
            };
            SourceError::Unauthorized { reference: reference.clone(), registry: registry.clone(), why: why + &hint }
        };
        match e {
            OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
                SourceError::Unreachable { reference, registry, why: oneline(&root_cause(&e)) }
            }
            OciDistributionError::UnauthorizedError { .. } => unauthorized("HTTP 401".into()),
            OciDistributionError::AuthenticationFailure(why) => unauthorized(oneline(&why)),
            OciDistributionError::ServerError { code: code @ (401 | 403), .. } => unauthorized(format!("HTTP {code}")),
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let text = envelope.errors.iter().map(|e| format!("{:?}: {}", e.code, e.message)).collect::<Vec<_>>();
                let why = oneline(&text.join("; "));
                if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                    unauthorized(why)
                } else if codes.iter().any(|c| is_unknown(c)) {
                    SourceError::NotFound { reference, why }
                } else {
                    SourceError::Transfer { reference, why: format!("the registry answered {why}") }
                }
            }
            OciDistributionError::ServerError { code: 404, .. }
            | OciDistributionError::ImageManifestNotFoundError(_) => {
                SourceError::NotFound { reference, why: "HTTP 404".into() }
            }
            OciDistributionError::GenericError(Some(why)) => SourceError::Transfer { reference, why: oneline(&why) },
            other => SourceError::Transfer { reference, why: oneline(&other.to_string()) },
        }
    }
}

fn is_unknown(code: &OciErrorCode) -> bool {
    matches!(
        code,
        OciErrorCode::ManifestUnknown | OciErrorCode::BlobUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
    )
}

fn not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| is_unknown(&e.code)),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        _ => false,
    }
}

/// Worth another try: the network, a busy or failing registry.
fn transient(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RequestError(e) => e.is_connect() || e.is_timeout() || e.is_request() || e.is_body(),
        OciDistributionError::ServerError { code, .. } => *code >= 500 || *code == 429,
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|e| matches!(e.code, OciErrorCode::Toomanyrequests))
        }
        OciDistributionError::IoError(_) => true,
        _ => false,
    }
}

/// Four retries over about eight seconds: a registry restarting or a
/// network hiccup passes, a registry that is gone fails the start soon
/// (the Deployment's old ReplicaSet keeps serving).
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(4))
        .with_max_times(4)
        .with_jitter()
}

/// The innermost cause ("Connection refused", "timed out"): the outer
/// layers only repeat the URL the message already names.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}
