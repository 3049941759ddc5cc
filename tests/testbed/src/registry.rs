//! A local OCI registry that requires authentication, for the real Flux
//! chain: `distribution` (the CNCF reference registry) built by
//! `scripts/build-flux-bins.sh`, with an htpasswd file holding one known
//! test user.
//!
//! Plain HTTP on a loopback port: the registry library Flux uses talks plain
//! HTTP to `127.0.0.1`, so OCIRepositories need neither `insecure: true` nor
//! a CA. Authentication is what makes a chart pull secret meaningful: a pull
//! without credentials is refused with 401, exactly like a private registry.
//!
//! Charts are pushed with a few calls of the OCI distribution API (no Helm or
//! oras binary): config and layer blobs (monolithic upload), then the
//! manifest under the chart version as tag, with Helm's media types.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use serde_json::json;
use sha2::Digest as _;

use crate::bins::FluxBinaries;
use crate::error::{Error, Result};
use crate::helm_chart::{HELM_CHART_MEDIA_TYPE, HELM_CONFIG_MEDIA_TYPE, HelmChart};
use crate::process::{RunDir, ServerProcess, free_port, lock_unpoisoned};

/// The registry's only user.
pub const REGISTRY_USER: &str = "envtest";
/// The password of [`REGISTRY_USER`].
pub const REGISTRY_PASSWORD: &str = "envtest-registry-password";
/// bcrypt (cost 4, the minimum: the registry checks it on every request) of
/// [`REGISTRY_PASSWORD`]; the only hash format the registry's htpasswd
/// support accepts. Made once with Go's `golang.org/x/crypto/bcrypt`.
const REGISTRY_PASSWORD_BCRYPT: &str = "$2a$04$iqs47dzQ6B1Rsr197J.vmOghOGtbWMkzE2fEcP/JU1ccssz8nOAW.";
/// The realm of the registry's `WWW-Authenticate: Basic` challenge.
pub const REGISTRY_REALM: &str = "envtest-registry";

/// OCI image manifest media type (what `helm push` writes).
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The data key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The Secret type Flux (and the Kro plugin) require for pull credentials.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";

/// What [`Registry::push_artifact`] pushes: a config and layers, each as
/// (media type, bytes), and the manifest's annotations.
pub struct Artifact<'a> {
    pub config: (&'a str, &'a [u8]),
    pub layers: &'a [(&'a str, &'a [u8])],
    pub annotations: serde_json::Value,
}

/// A chart (or any artifact) as it lies in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedChart {
    /// e.g. `kro/charts/kro`.
    pub repository: String,
    /// The chart version.
    pub tag: String,
    /// `sha256:...` of the manifest.
    pub digest: String,
}

impl PushedChart {
    /// The revision source-controller reports for an OCIRepository that
    /// pulled this tag: `<tag>@<manifest digest>`.
    pub fn revision(&self) -> String {
        format!("{}@{}", self.tag, self.digest)
    }
}

/// A running registry. Dropping it stops the process and removes its
/// storage (with the run directory).
pub struct Registry {
    host: String,
    // Field order = drop order: the process stops before the directory goes.
    process: Mutex<ServerProcess>,
    dir: RunDir,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("host", &self.host).field("dir", &self.dir.path()).finish_non_exhaustive()
    }
}

impl Registry {
    /// Starts the registry on a free loopback port and waits until it
    /// answers `/v2/` with its authentication challenge. A port taken in the
    /// meantime is retried with a new one.
    pub async fn start() -> Result<Self> {
        let binary = FluxBinaries::locate()?.registry;
        let mut attempt = 1;
        loop {
            match Self::try_start(&binary).await {
                Err(e) if attempt < 3 && e.to_string().contains("address already in use") => {
                    eprintln!("testbed: registry: port clash, retrying: {e}");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn try_start(binary: &Path) -> Result<Self> {
        let dir = RunDir::create("registry")?;
        let port = free_port()?;
        let host = format!("127.0.0.1:{port}");
        let htpasswd = dir.path().join("htpasswd");
        write(&htpasswd, &format!("{REGISTRY_USER}:{REGISTRY_PASSWORD_BCRYPT}\n"))?;
        let config = dir.path().join("config.yml");
        write(
            &config,
            &format!(
                "version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: {host}
  secret: envtest-upload-state-secret
auth:
  htpasswd:
    realm: {REGISTRY_REALM}
    path: {htpasswd}
",
                storage = dir.path().join("storage").display(),
                htpasswd = htpasswd.display(),
            ),
        )?;
        // The registry exports traces through OTel's autoexport, which
        // defaults to an OTLP endpoint that is not there.
        let env: [(&str, &OsStr); 2] = [("OTEL_TRACES_EXPORTER", "none".as_ref()), ("HOME", dir.path().as_os_str())];
        let mut process = ServerProcess::spawn_with_env(
            "registry",
            binary,
            &["serve".into(), config.display().to_string()],
            &env,
            &dir.path().join("registry.log"),
        )?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(e) = process.exited_error() {
                return Err(e);
            }
            let last = match send(&host, get("/v2/")).await {
                Ok(r) if r.status == StatusCode::UNAUTHORIZED => break,
                Ok(r) => format!("GET /v2/ answered {}", r.status),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "the registry to answer /v2/".into(),
                    seconds: 30,
                    detail: format!(": {last}; log:\n{}", process.log_tail(20)),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self { host, process: Mutex::new(process), dir })
    }

    /// `127.0.0.1:<port>`: the registry host as it appears in OCI references
    /// and in a docker config's `auths`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `oci://127.0.0.1:<port>/<repository>`, e.g. an OCIRepository's `url`
    /// or a ProviderConfig's `chartURL`.
    pub fn oci_url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.host)
    }

    /// The content of a `kubernetes.io/dockerconfigjson` Secret that grants
    /// [`REGISTRY_USER`] access to this registry.
    pub fn docker_config_json(&self) -> String {
        json!({
            "auths": {
                &self.host: {
                    "username": REGISTRY_USER,
                    "password": REGISTRY_PASSWORD,
                    "auth": basic_credentials(),
                }
            }
        })
        .to_string()
    }

    /// A pull Secret (`kubernetes.io/dockerconfigjson`) with
    /// [`Self::docker_config_json`], ready to create in `namespace`.
    pub fn pull_secret(&self, name: &str, namespace: &str) -> Secret {
        Secret {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() },
            type_: Some(DOCKER_CONFIG_JSON_TYPE.into()),
            data: Some(
                [(DOCKER_CONFIG_JSON_KEY.to_string(), ByteString(self.docker_config_json().into_bytes()))].into(),
            ),
            ..Default::default()
        }
    }

    /// Pushes `chart` as `<repository>:<chart version>` with Helm's media
    /// types (config `application/vnd.cncf.helm.config.v1+json`, one layer
    /// `application/vnd.cncf.helm.chart.content.v1.tar+gzip`). Pushing the
    /// same chart again is harmless (same digests).
    pub async fn push_helm_chart(&self, repository: &str, chart: &HelmChart) -> Result<PushedChart> {
        let mut annotations = json!({
            "org.opencontainers.image.title": chart.name,
            "org.opencontainers.image.version": chart.version,
        });
        if let Some(description) = &chart.description {
            annotations["org.opencontainers.image.description"] = json!(description);
        }
        let artifact = Artifact {
            config: (HELM_CONFIG_MEDIA_TYPE, &chart.config),
            layers: &[(HELM_CHART_MEDIA_TYPE, &chart.archive)],
            annotations,
        };
        self.push_artifact(repository, &chart.version, &artifact).await
    }

    /// Pushes the files of `dir` (relative paths kept) as a Flux artifact
    /// `<repository>:<tag>`, the way `flux push artifact` packs it: one
    /// `tar+gzip` layer, an empty config, the revision annotation. An
    /// OCIRepository serves it to kustomize-controller, as a GitOps
    /// repository would.
    pub async fn push_flux_artifact(&self, repository: &str, tag: &str, dir: &std::path::Path) -> Result<PushedChart> {
        let mut files = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at).map_err(|e| Error::io(&at, e))? {
                let path = entry.map_err(|e| Error::io(&at, e))?.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                    files.push((path.strip_prefix(dir).expect("below dir").to_path_buf(), data));
                }
            }
        }
        files.sort();
        let archive = crate::helm_chart::tar_gz(".", &files).map_err(|e| Error::io(dir, e))?;
        let artifact = Artifact {
            config: ("application/vnd.cncf.flux.config.v1+json", b"{}"),
            layers: &[("application/vnd.cncf.flux.content.v1.tar+gzip", archive.as_slice())],
            annotations: json!({
                "org.opencontainers.image.revision": format!("{tag}@{}", sha256_digest(&archive)),
                "org.opencontainers.image.source": format!("oci://{}/{repository}", self.host),
            }),
        };
        self.push_artifact(repository, tag, &artifact).await
    }

    /// Pushes an OCI image manifest with these blobs as
    /// `<repository>:<tag>`, whatever its media types (tests push
    /// artifacts a client must refuse, too).
    pub async fn push_artifact(&self, repository: &str, tag: &str, artifact: &Artifact<'_>) -> Result<PushedChart> {
        let (config_type, config) = artifact.config;
        let config_digest = self.push_blob(repository, config).await?;
        let mut layers = Vec::new();
        for (media_type, data) in artifact.layers {
            let digest = self.push_blob(repository, data).await?;
            layers.push(json!({ "mediaType": media_type, "digest": digest, "size": data.len() }));
        }
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST_MEDIA_TYPE,
            "config": { "mediaType": config_type, "digest": config_digest, "size": config.len() },
            "layers": layers,
            "annotations": artifact.annotations,
        }))?;
        let digest = sha256_digest(&manifest);
        let path = format!("/v2/{repository}/manifests/{tag}");
        let request = authorized(Request::builder().method(Method::PUT).uri(&path))
            .header(header::CONTENT_TYPE, OCI_MANIFEST_MEDIA_TYPE)
            .body(Full::new(Bytes::from(manifest)));
        let response = send(&self.host, request).await?;
        expect(&response, StatusCode::CREATED, &format!("PUT {path}"))?;
        let stored = response.headers.get("docker-content-digest").and_then(|v| v.to_str().ok());
        if stored.is_some_and(|d| d != digest) {
            return Err(Error::Other(format!("registry stored manifest {stored:?}, expected {digest}")));
        }
        Ok(PushedChart { repository: repository.into(), tag: tag.into(), digest })
    }

    /// The file the registry serves a blob from (tests tamper with it).
    pub fn blob_file(&self, digest: &str) -> std::path::PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        let prefix = hex.get(..2).unwrap_or_default();
        self.dir.path().join(format!("storage/docker/registry/v2/blobs/sha256/{prefix}/{hex}/data"))
    }

    /// Status of `GET /v2/<repository>/manifests/<tag>` with or without the
    /// test credentials (proves that the registry requires them).
    pub async fn manifest_status(&self, repository: &str, tag: &str, with_credentials: bool) -> Result<StatusCode> {
        let path = format!("/v2/{repository}/manifests/{tag}");
        let mut request =
            Request::builder().method(Method::GET).uri(&path).header(header::ACCEPT, OCI_MANIFEST_MEDIA_TYPE);
        if with_credentials {
            request = authorized(request);
        }
        Ok(send(&self.host, request.body(Full::new(Bytes::new()))).await?.status)
    }

    /// Uploads `data` unless the registry has it; returns its digest.
    async fn push_blob(&self, repository: &str, data: &[u8]) -> Result<String> {
        let digest = sha256_digest(data);
        let head = format!("/v2/{repository}/blobs/{digest}");
        let request = authorized(Request::builder().method(Method::HEAD).uri(&head)).body(Full::new(Bytes::new()));
        if send(&self.host, request).await?.status == StatusCode::OK {
            return Ok(digest);
        }
        let start = format!("/v2/{repository}/blobs/uploads/");
        let request = authorized(Request::builder().method(Method::POST).uri(&start)).body(Full::new(Bytes::new()));
        let response = send(&self.host, request).await?;
        expect(&response, StatusCode::ACCEPTED, &format!("POST {start}"))?;
        let location = response
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| l.parse::<http::Uri>().ok())
            .and_then(|uri| uri.path_and_query().map(|p| p.as_str().to_string()))
            .ok_or_else(|| Error::Other(format!("POST {start}: no usable Location header")))?;
        let separator = if location.contains('?') { '&' } else { '?' };
        let upload = format!("{location}{separator}digest={digest}");
        let request = authorized(Request::builder().method(Method::PUT).uri(&upload))
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(Full::new(Bytes::copy_from_slice(data)));
        let response = send(&self.host, request).await?;
        expect(&response, StatusCode::CREATED, &format!("PUT blob {digest}"))?;
        Ok(digest)
    }

    /// The registry's log file (access log included).
    pub fn log_path(&self) -> std::path::PathBuf {
        lock_unpoisoned(&self.process).log_path().to_path_buf()
    }

    pub fn pid(&self) -> u32 {
        lock_unpoisoned(&self.process).pid()
    }

    /// Resident memory of the registry process.
    pub fn rss_bytes(&self) -> Option<u64> {
        lock_unpoisoned(&self.process).rss_bytes()
    }

    /// Stops the registry. Also done on drop.
    pub fn stop(&self) {
        lock_unpoisoned(&self.process).stop(Duration::from_secs(5));
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// `base64(user:password)`, as in a docker config's `auth` and in the
/// `Authorization: Basic` header.
fn basic_credentials() -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}"))
}

fn authorized(builder: http::request::Builder) -> http::request::Builder {
    builder.header(header::AUTHORIZATION, format!("Basic {}", basic_credentials()))
}

fn get(path: &str) -> std::result::Result<Request<Full<Bytes>>, http::Error> {
    Request::builder().method(Method::GET).uri(path).body(Full::new(Bytes::new()))
}

/// `sha256:<hex>`, the OCI digest of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    let hash = sha2::Sha256::digest(data);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

struct Response {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

fn expect(response: &Response, status: StatusCode, what: &str) -> Result<()> {
    if response.status == status {
        return Ok(());
    }
    Err(Error::Other(format!(
        "registry: {what} answered {} (expected {status}): {}",
        response.status,
        String::from_utf8_lossy(&response.body)
    )))
}

/// One HTTP/1.1 request on a new loopback connection (the registry is
/// local; a connection pool would buy nothing).
async fn send(host: &str, request: std::result::Result<Request<Full<Bytes>>, http::Error>) -> Result<Response> {
    let mut request = request.map_err(|e| Error::Other(format!("registry request: {e}")))?;
    let failed = |e: &dyn std::fmt::Display| Error::Other(format!("registry {host}: {e}"));
    request.headers_mut().insert(header::HOST, host.parse().map_err(|e| failed(&e))?);
    let stream = tokio::net::TcpStream::connect(host).await.map_err(|e| failed(&e))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(|e| failed(&e))?;
    let connection = tokio::spawn(connection);
    let result = async {
        let response = sender.send_request(request).await.map_err(|e| failed(&e))?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| failed(&e))?.to_bytes();
        Ok(Response { status: parts.status, headers: parts.headers, body })
    }
    .await;
    drop(sender);
    connection.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_oci_sha256() {
        assert_eq!(sha256_digest(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn basic_credentials_encode_user_and_password() {
        let decoded = base64::engine::general_purpose::STANDARD.decode(basic_credentials()).unwrap();
        assert_eq!(decoded, format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}").as_bytes());
    }
}
