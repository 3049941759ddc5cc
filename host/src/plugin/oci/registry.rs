//! The registry side of a pull: its requests, their TLS, credentials and
//! retries, every answer read against a limit, and the registry's answers
//! turned into [`SourceError`]s that say what to do.
//!
//! Pulls speak the distribution API over reqwest here, not through
//! `oci-client`: it reads each answer whole before it returns it (a
//! manifest, the referrers index, an error's body, the token endpoint's
//! answer), so a registry that sent gigabytes would have them held in
//! memory before any limit could look at them. Here a body is refused as
//! soon as it passes the limit of what was asked for, an error's body is
//! read only as far as its message needs, and the time all of it may take
//! is the pull's deadline ([`super::pull`]). `oci-client` still publishes
//! ([`super::push`]: the operator's own registry, not a start) and names
//! things (`Reference`, the error envelope, the token).
//!
//! The client is built only when the cache cannot answer, so a start from
//! the cache makes no request at all (and needs no credentials).

use std::sync::OnceLock;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciEnvelope, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::token_cache::RegistryToken;
use oci_client::{Client, Reference};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, WWW_AUTHENTICATE};

use super::artifact::{Layer, MANIFEST, MAX_MANIFEST_BYTES};
use super::auth::Credentials;
use super::blobs::Blobs;
use super::{Options, PluginRef, SourceError, oneline};
use crate::plugin::sandbox::digest_of;

/// The OCI image index media type (a referrers index is one).
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Manifest types asked for: a plugin's, and an index so that it can be
/// named in the refusal.
const ACCEPT_MANIFESTS: [&str; 3] = [MANIFEST, INDEX, "application/vnd.docker.distribution.manifest.v2+json"];
/// A manifest or an index (the referrers index, the `.sig` manifest).
const MAX_DOCUMENT_BYTES: u64 = MAX_MANIFEST_BYTES as u64;
/// What a token endpoint may send: a token is a few KiB, and an
/// `Authorization` header much larger than this is refused by servers
/// anyway.
const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// How much of an error's body is read, for its message; the rest is not.
const MAX_ERROR_BYTES: u64 = 16 << 10;
const USER_AGENT: &str = concat!("service-provider-host/", env!("CARGO_PKG_VERSION"));
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two reads of one answer; a trickle never trips it, which is
/// what the pull's deadline is for.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// `oci-client`, for publishing.
    pub(super) client: Client,
    pub(super) credentials: Credentials,
    /// Pulls: the same TLS, timeouts and proxy settings.
    http: reqwest::Client,
    /// `https://<host>`, or `http://` for an insecure registry.
    base: String,
    /// The hosts the operator named `--insecure-registry`: the only ones
    /// asked over plain HTTP, token endpoints included.
    insecure: Vec<String>,
    /// The `Authorization` of this pull's requests, found on first use.
    authorization: tokio::sync::OnceCell<Option<HeaderValue>>,
    who: String,
    registry: String,
    repository: String,
}

/// Why a request failed, before it is put for the operator.
#[derive(Debug)]
pub(super) enum Failure {
    /// The connection: refused, reset, timed out, cut in the middle.
    Network(reqwest::Error),
    /// Another answer than the one asked for: its status, and what its
    /// body (as far as it was read) says.
    Status { code: u16, envelope: Option<OciEnvelope>, text: String },
    /// The token endpoint did not give a token for the credentials.
    Token(String),
    /// More bytes than the limit of what was asked for.
    TooLarge { what: &'static str, limit: u64 },
    /// Anything else, in a line: a digest that does not match, the cache.
    Other(String),
}

impl From<reqwest::Error> for Failure {
    fn from(e: reqwest::Error) -> Self {
        Self::Network(e)
    }
}

/// `oci-client`'s errors (a push), in the same terms.
impl From<OciDistributionError> for Failure {
    fn from(e: OciDistributionError) -> Self {
        let status = |code| Self::Status { code, envelope: None, text: String::new() };
        match e {
            OciDistributionError::RequestError(e) => Self::Network(e),
            OciDistributionError::UnauthorizedError { .. } => status(401),
            OciDistributionError::ImageManifestNotFoundError(_) => status(404),
            OciDistributionError::ServerError { code, message, .. } => {
                Self::Status { code, envelope: None, text: message }
            }
            // oci-client keeps an envelope for client errors, not the status.
            OciDistributionError::RegistryError { envelope, .. } => {
                Self::Status { code: 400, envelope: Some(envelope), text: String::new() }
            }
            OciDistributionError::AuthenticationFailure(why) => Self::Token(why),
            OciDistributionError::GenericError(Some(why)) => Self::Other(why),
            other => Self::Other(other.to_string()),
        }
    }
}

impl Registry {
    fn new(reference: &PluginRef, options: &Options) -> Result<Self, SourceError> {
        // reqwest asks for the process's rustls provider: ring, as for kube.
        // Already installed (a second pull) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let setup = |e: &dyn std::fmt::Display| {
            SourceError::Setup(format!("setting up the registry client: {}", oneline(&e.to_string())))
        };
        let ca = match &options.ca_file {
            Some(path) => Some(
                std::fs::read(path)
                    .map_err(|e| SourceError::Setup(format!("reading registry CA bundle {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let mut config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        // A redirect goes where the first request could: https, or http to
        // a host named insecure (a registry's blob store, a token endpoint).
        let insecure = options.insecure_registries.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error("too many redirects");
            }
            match reachable(attempt.url(), &insecure) {
                Ok(()) => attempt.follow(),
                Err(why) => {
                    let to = oneline(attempt.url().as_str());
                    attempt.error(format!("a redirect to {to:?} {why}"))
                }
            }
        });
        let mut http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(USER_AGENT)
            .redirect(redirects);
        if let Some(pem) = ca {
            http = http.tls_certs_merge(reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| setup(&e))?);
            config.extra_root_certificates.push(Certificate { encoding: CertificateEncoding::Pem, data: pem });
        }
        let client = Client::try_from(config).map_err(|e| setup(&e))?;
        let http = http.build().map_err(|e| setup(&e))?;
        let credentials = Credentials::from_env().map_err(SourceError::Setup)?;
        let host = reference.reference().resolve_registry();
        let scheme = match options.insecure_registries.iter().any(|r| r == host) {
            true => "http",
            false => "https",
        };
        Ok(Self {
            client,
            credentials,
            http,
            base: format!("{scheme}://{host}"),
            insecure: options.insecure_registries.clone(),
            authorization: tokio::sync::OnceCell::new(),
            who: reference.to_string(),
            registry: reference.registry().to_string(),
            repository: reference.reference().repository().to_string(),
        })
    }

    /// The digest a tag points at now: that of the manifest it serves.
    pub async fn resolve(&self, image: &Reference) -> Result<String, SourceError> {
        let manifest = self.pull_manifest(image, &ACCEPT_MANIFESTS, "the manifest").await;
        Ok(digest_of(&manifest.map_err(|e| self.error(e))?))
    }

    /// A manifest's bytes (the caller checks them against the digest).
    pub async fn manifest(&self, image: &Reference) -> Result<Vec<u8>, SourceError> {
        self.pull_manifest(image, &ACCEPT_MANIFESTS, "the manifest").await.map_err(|e| self.error(e))
    }

    /// A manifest (`what`, for the refusal), or `None` if it does not exist.
    pub async fn manifest_at(
        &self,
        image: &Reference,
        accept: &[&str],
        what: &'static str,
    ) -> Result<Option<Vec<u8>>, SourceError> {
        match self.pull_manifest(image, accept, what).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// A manifest, at most [`MAX_DOCUMENT_BYTES`]; by digest, it must hash
    /// to it.
    async fn pull_manifest(&self, image: &Reference, accept: &[&str], what: &'static str) -> Result<Vec<u8>, Failure> {
        let at = image.digest().or(image.tag()).unwrap_or("latest");
        let fetch = || async {
            let response = self.get(image, &format!("manifests/{at}"), &accept.join(", "), &[]).await?;
            let bytes = read(response, MAX_DOCUMENT_BYTES, what).await?;
            match image.digest() {
                Some(digest) if digest_of(&bytes) != digest => {
                    Err(Failure::Other(format!("the bytes the registry sent for {what} do not hash to {digest}")))
                }
                _ => Ok(bytes.to_vec()),
            }
        };
        fetch.retry(backoff()).when(transient).await
    }

    /// The digests of the manifests that refer to `image` with this
    /// artifact type: the referrers API, or its tag schema where a registry
    /// has no such API.
    pub async fn referrers(&self, image: &Reference, artifact_type: &str) -> Result<Vec<String>, SourceError> {
        const WHAT: &str = "the referrers index";
        let Some(digest) = image.digest() else { return Ok(Vec::new()) };
        let fetch = || async {
            let path = format!("referrers/{digest}");
            match self.get(image, &path, INDEX, &[("artifactType", artifact_type)]).await {
                Ok(response) => read(response, MAX_DOCUMENT_BYTES, WHAT).await.map(Some),
                Err(e) if not_found(&e) => Ok(None),
                Err(e) => Err(e),
            }
        };
        let index = match fetch.retry(backoff()).when(transient).await.map_err(|e| self.error(e))? {
            Some(index) => index.to_vec(),
            None => {
                let tag = digest.replace(':', "-");
                let schema = Reference::with_tag(image.registry().into(), image.repository().into(), tag);
                match self.manifest_at(&schema, &[INDEX], WHAT).await? {
                    Some(index) => index,
                    None => return Ok(Vec::new()),
                }
            }
        };
        #[derive(serde::Deserialize)]
        struct Index {
            #[serde(default)]
            manifests: Vec<Descriptor>,
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Descriptor {
            digest: String,
            artifact_type: Option<String>,
        }
        let index: Index = serde_json::from_slice(&index)
            .map_err(|e| self.transfer(format!("its referrers index is not valid: {}", oneline(&e.to_string()))))?;
        // The tag schema's index is not filtered, nor is every registry's.
        let wanted = index.manifests.into_iter().filter(|m| m.artifact_type.as_deref() == Some(artifact_type));
        Ok(wanted.map(|m| m.digest).collect())
    }

    /// Streams a blob into the store, held to the layer's digest and size.
    pub async fn blob(&self, image: &Reference, layer: &Layer, blobs: &Blobs) -> Result<Vec<u8>, SourceError> {
        let fetch = || async {
            let mut response = self.get(image, &format!("blobs/{}", layer.digest), "*/*", &[]).await?;
            if let Some(length) = response.content_length().filter(|length| *length > layer.size) {
                return Err(Failure::Other(format!(
                    "the registry announced {length} bytes, more than the {} bytes the manifest declares",
                    layer.size
                )));
            }
            let mut writer = blobs.writer(&layer.digest, layer.size);
            while let Some(chunk) = response.chunk().await? {
                writer.write(&chunk).map_err(Failure::Other)?;
            }
            writer.finish().map_err(Failure::Other)
        };
        fetch.retry(backoff()).when(transient).await.map_err(|e| self.error(e))
    }

    /// `GET /v2/<repository>/<path>`, authorized: the answer, if it is
    /// the one asked for (its body not read yet).
    async fn get(
        &self,
        image: &Reference,
        path: &str,
        accept: &str,
        query: &[(&str, &str)],
    ) -> Result<reqwest::Response, Failure> {
        let url = format!("{}/v2/{}/{path}", self.base, image.repository());
        let mut request = self.http.get(url).header(ACCEPT, accept).query(query);
        if let Some(authorization) = self.authorization().await? {
            request = request.header(AUTHORIZATION, authorization);
        }
        let response = request.send().await?;
        match response.status() {
            StatusCode::OK => Ok(response),
            _ => Err(refusal(response).await),
        }
    }

    async fn authorization(&self) -> Result<Option<HeaderValue>, Failure> {
        self.authorization.get_or_try_init(|| self.authorize()).await.cloned()
    }

    /// What this registry asks for, as `/v2/` names it in its challenge:
    /// a bearer token for the repository (from its token endpoint, with
    /// the credentials), the credentials themselves, or nothing.
    async fn authorize(&self) -> Result<Option<HeaderValue>, Failure> {
        let auth = self.credentials.for_registry(&self.registry);
        if let RegistryAuth::Bearer(token) = &auth {
            return header(&format!("Bearer {token}")).map(Some);
        }
        // Only the challenge counts: the body is never read.
        let probe = self.http.get(format!("{}/v2/", self.base)).send().await?;
        let Some(challenge) = probe.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        match (bearer_challenge(challenge), &auth) {
            (Some((realm, service)), _) => self.token(&realm, service.as_deref(), &auth).await.map(Some),
            (None, RegistryAuth::Basic(user, password)) => {
                let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                header(&format!("Basic {pair}")).map(Some)
            }
            (None, _) => Ok(None),
        }
    }

    /// A pull token for the repository from the challenge's endpoint.
    async fn token(&self, realm: &str, service: Option<&str>, auth: &RegistryAuth) -> Result<HeaderValue, Failure> {
        let scope = format!("repository:{}:pull", self.repository);
        let mut query = vec![("scope", scope.as_str())];
        query.extend(service.map(|service| ("service", service)));
        let mut request = self.http.get(token_endpoint(realm, &self.insecure)?).query(&query);
        if let RegistryAuth::Basic(user, password) = auth {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await?;
        if response.status() != StatusCode::OK {
            let code = response.status().as_u16();
            // Of its words, a line: whatever the endpoint is, its answer is
            // not shown whole.
            let (_, text) = error_body(response).await;
            let text = crate::syntax::one_line(&text, 200);
            return Err(Failure::Token(format!("its token endpoint answered HTTP {code} {text}")));
        }
        let body = read(response, MAX_TOKEN_BYTES, "a token").await?;
        let token: RegistryToken = serde_json::from_slice(&body)
            .map_err(|_| Failure::Other("its token endpoint answered something other than a token".into()))?;
        header(&format!("Bearer {}", token.token()))
    }

    fn transfer(&self, why: String) -> SourceError {
        SourceError::Transfer { reference: self.who.clone(), why }
    }

    /// The registry's answer, as the operator needs to read it.
    pub(super) fn error(&self, e: Failure) -> SourceError {
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
            Failure::Network(e) if e.is_connect() || e.is_timeout() => {
                SourceError::Unreachable { reference, registry, why: oneline(&root_cause(&e)) }
            }
            Failure::Network(e) => SourceError::Transfer { reference, why: oneline(&root_cause(&e)) },
            Failure::Token(why) => unauthorized(oneline(&why)),
            Failure::TooLarge { what, limit } => SourceError::TooLarge { reference, registry, what, limit },
            Failure::Other(why) => SourceError::Transfer { reference, why: oneline(&why) },
            Failure::Status { code: 401, .. } => unauthorized("HTTP 401".into()),
            Failure::Status { code, envelope: Some(envelope), .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let text = envelope.errors.iter().map(|e| format!("{:?}: {}", e.code, e.message)).collect::<Vec<_>>();
                let why = oneline(&text.join("; "));
                if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                    unauthorized(why)
                } else if code == 404 || codes.iter().any(|c| is_unknown(c)) {
                    SourceError::NotFound { reference, why }
                } else {
                    SourceError::Transfer { reference, why: format!("the registry answered {why}") }
                }
            }
            Failure::Status { code: 403, .. } => unauthorized("HTTP 403".into()),
            Failure::Status { code: 404, .. } => SourceError::NotFound { reference, why: "HTTP 404".into() },
            Failure::Status { code, text, .. } => {
                SourceError::Transfer { reference, why: oneline(&format!("the registry answered HTTP {code} {text}")) }
            }
        }
    }
}

/// A body of at most `limit` bytes (`what`, for the refusal): refused as
/// soon as more is announced or arrives, so no more than the limit is
/// ever held.
async fn read(response: reqwest::Response, limit: u64, what: &'static str) -> Result<Bytes, Failure> {
    if response.content_length().is_some_and(|length| length > limit) {
        return Err(Failure::TooLarge { what, limit });
    }
    let body = Limited::new(reqwest::Body::from(response), usize::try_from(limit).unwrap_or(usize::MAX));
    match body.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(Failure::TooLarge { what, limit }),
        Err(e) => match e.downcast::<reqwest::Error>() {
            Ok(e) => Err(Failure::Network(*e)),
            Err(e) => Err(Failure::Other(e.to_string())),
        },
    }
}

/// An answer that is not the one asked for, its body read as far as its
/// message needs.
async fn refusal(response: reqwest::Response) -> Failure {
    let code = response.status().as_u16();
    let (envelope, text) = error_body(response).await;
    Failure::Status { code, envelope, text }
}

/// What an error's body says: the registry's error envelope, or its text;
/// at most [`MAX_ERROR_BYTES`] of it are read.
async fn error_body(response: reqwest::Response) -> (Option<OciEnvelope>, String) {
    match read(response, MAX_ERROR_BYTES, "an error").await {
        Ok(body) => match serde_json::from_slice::<OciEnvelope>(&body) {
            Ok(envelope) => (Some(envelope), String::new()),
            Err(_) => (None, String::from_utf8_lossy(&body).into_owned()),
        },
        Err(Failure::TooLarge { .. }) => (None, format!("(a body of more than {MAX_ERROR_BYTES} bytes, not read)")),
        Err(_) => (None, String::new()),
    }
}

/// The most redirects one request follows (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// Whether the host may send a request (with a registry's credentials) to
/// `url`: `https`, or `http` on a host the operator named
/// `--insecure-registry`; no credentials of its own in the URL. A registry
/// chooses its token endpoint and its redirects: without this it could
/// have the credentials sent in clear text, or have the host ask a plain
/// HTTP service inside the cluster (an instance metadata endpoint).
fn reachable(url: &reqwest::Url, insecure: &[String]) -> Result<(), &'static str> {
    const REFUSED: &str = "is refused: only https, or http on a host --insecure-registry names";
    let plain = match url.scheme() {
        "https" => false,
        "http" => true,
        _ => return Err(REFUSED),
    };
    let host = url.host_str().ok_or("names no host")?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("carries credentials");
    }
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    match !plain || insecure.contains(&authority) {
        true => Ok(()),
        false => Err(REFUSED),
    }
}

/// The token endpoint a registry's challenge names, if the host may ask it
/// ([`reachable`]).
fn token_endpoint(realm: &str, insecure: &[String]) -> Result<reqwest::Url, Failure> {
    let refused = |why: &str| Failure::Other(format!("its token endpoint {:?} {why}", oneline(realm)));
    let url = reqwest::Url::parse(realm).map_err(|_| refused("is not a URL"))?;
    reachable(&url, insecure).map_err(refused)?;
    Ok(url)
}

/// The realm and service of a `Bearer` challenge, if it is one.
fn bearer_challenge(header: &str) -> Option<(String, Option<String>)> {
    let challenges = http_auth::ChallengeParser::new(header).filter_map(Result::ok);
    let bearer = challenges.into_iter().find(|c| c.scheme.eq_ignore_ascii_case("bearer"))?;
    let param =
        |name: &str| bearer.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.to_unescaped());
    Some((param("realm")?, param("service")))
}

/// An `Authorization` value, kept out of debug output.
fn header(value: &str) -> Result<HeaderValue, Failure> {
    let mut header = HeaderValue::from_str(value)
        .map_err(|_| Failure::Other("the credentials or the token are not usable in an HTTP header".into()))?;
    header.set_sensitive(true);
    Ok(header)
}

fn is_unknown(code: &OciErrorCode) -> bool {
    matches!(
        code,
        OciErrorCode::ManifestUnknown | OciErrorCode::BlobUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
    )
}

fn not_found(e: &Failure) -> bool {
    match e {
        Failure::Status { code: 404, .. } => true,
        Failure::Status { envelope: Some(envelope), .. } => envelope.errors.iter().any(|e| is_unknown(&e.code)),
        _ => false,
    }
}

/// Worth another try: the network, a busy or failing registry.
fn transient(e: &Failure) -> bool {
    match e {
        Failure::Network(e) => e.is_connect() || e.is_timeout() || e.is_request() || e.is_body(),
        Failure::Status { code, envelope, .. } => {
            *code >= 500
                || *code == 429
                || envelope.as_ref().is_some_and(|e| e.errors.iter().any(|e| e.code == OciErrorCode::Toomanyrequests))
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use futures::StreamExt as _;

    use super::*;

    /// An answer of `chunks` KiB, streamed; `taken` counts what was read.
    fn streamed(status: StatusCode, chunks: usize, taken: Arc<AtomicU64>) -> reqwest::Response {
        let stream = futures::stream::iter(0..chunks).map(move |_| {
            taken.fetch_add(1024, Ordering::Relaxed);
            Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1024]))
        });
        let mut response = http::Response::new(reqwest::Body::wrap_stream(stream));
        *response.status_mut() = status;
        reqwest::Response::from(response)
    }

    #[tokio::test]
    async fn a_body_is_refused_as_soon_as_it_passes_its_limit() {
        let taken = Arc::new(AtomicU64::new(0));
        let e = read(streamed(StatusCode::OK, 100 << 10, taken.clone()), 64 << 10, "the manifest").await.unwrap_err();
        assert!(matches!(e, Failure::TooLarge { what: "the manifest", limit: 65536 }), "{e:?}");
        assert_eq!(taken.load(Ordering::Relaxed), (64 << 10) + 1024, "read one chunk past the limit, not 100 MiB");
        let within = read(streamed(StatusCode::OK, 64, Arc::default()), 64 << 10, "the manifest").await.unwrap();
        assert_eq!(within.len(), 64 << 10);
    }

    #[tokio::test]
    async fn an_error_body_is_read_only_as_far_as_its_message_needs() {
        let taken = Arc::new(AtomicU64::new(0));
        let response = streamed(StatusCode::NOT_FOUND, 100 << 10, taken.clone());
        let Failure::Status { code, envelope, text } = refusal(response).await else { panic!("a status") };
        assert_eq!((code, envelope.is_none()), (404, true));
        assert!(text.contains("not read"), "{text}");
        assert!(taken.load(Ordering::Relaxed) <= MAX_ERROR_BYTES + 1024);
    }

    #[test]
    fn a_bearer_challenge_names_its_token_endpoint() {
        let (realm, service) =
            bearer_challenge(r#"Bearer realm="https://auth.example/token",service="registry.example""#).unwrap();
        assert_eq!((realm.as_str(), service.as_deref()), ("https://auth.example/token", Some("registry.example")));
        assert_eq!(bearer_challenge(r#"Basic realm="registry""#), None);
    }

    #[test]
    fn a_token_endpoint_is_https_or_named_insecure_and_carries_no_credentials() {
        let insecure = vec!["127.0.0.1:5000".to_string()];
        let allowed = |realm: &str| {
            token_endpoint(realm, &insecure).map(|u| u.to_string()).map_err(|e| match e {
                Failure::Other(why) => why,
                _ => "another failure".into(),
            })
        };
        assert!(allowed("https://auth.example/token").is_ok());
        assert!(allowed("http://127.0.0.1:5000/token").is_ok());
        for realm in [
            "http://auth.example/token",
            "http://127.0.0.1:5001/token",
            "http://169.254.169.254/latest/meta-data",
            "file:///etc/passwd",
            "https://user:secret@auth.example/token",
            "/token",
        ] {
            let why = allowed(realm).expect_err(realm);
            assert!(why.starts_with("its token endpoint"), "{realm}: {why}");
        }
    }
}
