//! An OCI registry, through `oci-client` (the client the host pulls plugins
//! with): manifests and blobs pushed and read, and an artifact copied with
//! everything it references (an index, its images, their layers) from one
//! registry to another.

use anyhow::{Context, Result, bail};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const MANIFESTS: [&str; 4] = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// The most one layer of a copied artifact may have: the host's image
/// layers are tens of megabytes.
const MAX_LAYER: usize = 512 << 20;

/// The most a manifest may have: a descriptor's manifest is a few hundred
/// bytes, an index of two images under a kilobyte.
const MAX_MANIFEST: usize = 4 << 20;

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A manifest as read: its bytes, digest and media type.
pub struct Manifest {
    pub bytes: Vec<u8>,
    pub digest: String,
    pub media_type: String,
}

impl Manifest {
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.bytes).context("a manifest that is not JSON")
    }
}

pub struct Registries {
    client: Client,
    /// Credentials given explicitly, by registry host (before the docker config's).
    given: std::collections::BTreeMap<String, RegistryAuth>,
}

impl Registries {
    /// `insecure`: registries reached over plain HTTP (a local registry).
    pub fn new(insecure: &[String]) -> Self {
        // rustls on ring, as the host (already installed is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = ClientProtocol::HttpsExcept(insecure.to_vec());
        Self { client: Client::new(ClientConfig { protocol, ..ClientConfig::default() }), given: Default::default() }
    }

    /// Uses `user` and `password` for `registry` (host[:port]).
    pub fn with_credentials(mut self, registry: &str, user: &str, password: &str) -> Self {
        self.given.insert(registry.into(), RegistryAuth::Basic(user.into(), password.into()));
        self
    }

    /// Credentials given, else from the docker/podman config (credential
    /// helpers included); anonymous when there are none.
    fn credentials(&self, registry: &str) -> RegistryAuth {
        if let Some(auth) = self.given.get(registry) {
            return auth.clone();
        }
        match docker_credential::get_credential(registry) {
            Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
                RegistryAuth::Basic(user, password)
            }
            Ok(docker_credential::DockerCredential::IdentityToken(token)) => RegistryAuth::Bearer(token),
            Err(_) => RegistryAuth::Anonymous,
        }
    }

    async fn login(&self, at: &Reference, operation: RegistryOperation) -> Result<RegistryAuth> {
        let auth = self.credentials(at.resolve_registry());
        self.client.auth(at, &auth, operation).await.with_context(|| format!("authenticating at {at}"))?;
        Ok(auth)
    }

    pub async fn manifest(&self, at: &Reference) -> Result<Manifest> {
        let auth = self.login(at, RegistryOperation::Pull).await?;
        let (bytes, digest) =
            self.client.pull_manifest_raw(at, &auth, &MANIFESTS).await.with_context(|| format!("reading {at}"))?;
        if bytes.len() > MAX_MANIFEST {
            bail!("the manifest of {at} has {} bytes, more than {MAX_MANIFEST}", bytes.len());
        }
        if sha256(&bytes) != digest {
            bail!("the manifest of {at} does not match its digest {digest}");
        }
        if let Some(pinned) = at.digest()
            && pinned != digest
        {
            bail!("{at} answered with another manifest ({digest})");
        }
        let json: Value = serde_json::from_slice(&bytes).with_context(|| format!("the manifest of {at}"))?;
        let media_type = json["mediaType"].as_str().unwrap_or(OCI_MANIFEST).to_string();
        Ok(Manifest { bytes: bytes.to_vec(), digest, media_type })
    }

    /// A blob, at most `max_bytes` of it read, checked against its digest.
    pub async fn blob(&self, at: &Reference, digest: &str, max_bytes: usize) -> Result<Vec<u8>> {
        check_digest(digest)?;
        self.login(at, RegistryOperation::Pull).await?;
        let mut bounded = Bounded { bytes: Vec::new(), max: max_bytes };
        let read = self.client.pull_blob(at, digest, &mut bounded).await;
        if bounded.bytes.len() > max_bytes {
            bail!("blob {digest} of {at} has more than {max_bytes} bytes");
        }
        read.with_context(|| format!("reading blob {digest} of {at}"))?;
        let bytes = bounded.bytes;
        if sha256(&bytes) != digest {
            bail!("blob {digest} of {at} does not match its digest");
        }
        Ok(bytes)
    }

    /// The children (of an index), layers and config of `manifest`, then
    /// the manifest itself, from `from` to `to`.
    async fn copy_contents(&self, from: &Reference, to: &Reference, manifest: &Manifest, json: &Value) -> Result<()> {
        let mut blobs = Vec::new();
        if let Some(children) = json["manifests"].as_array() {
            for child in children {
                let digest = child["digest"].as_str().context("an index entry without a digest")?;
                check_digest(digest)?;
                Box::pin(self.copy(&pinned(from, digest), &pinned(to, digest), None)).await?;
            }
        }
        let mut descriptors: Vec<&Value> = json["layers"].as_array().map(|l| l.iter().collect()).unwrap_or_default();
        descriptors.extend(json.get("config"));
        for descriptor in descriptors {
            let digest = descriptor["digest"].as_str().context("a layer without a digest")?;
            let size = descriptor["size"].as_u64().unwrap_or(0) as usize;
            if size > MAX_LAYER {
                bail!("{from} has a layer of {size} bytes, more than {MAX_LAYER}");
            }
            // What the manifest says a layer has, and no byte more.
            blobs.push(self.blob(from, digest, size).await?);
        }
        let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
        let pushed = self.push(to, &refs, &manifest.bytes, &manifest.media_type).await?;
        if pushed != manifest.digest {
            bail!("copying {from}: pushed {pushed}, not {}", manifest.digest);
        }
        Ok(())
    }

    /// The digests of the artifacts of `artifact_type` that refer to `at`
    /// (pinned): the registry's referrers API, or the referrers tag schema
    /// (`sha256-<hex>`) where it has none.
    pub async fn referrers(&self, at: &Reference, artifact_type: &str) -> Result<Vec<String>> {
        self.login(at, RegistryOperation::Pull).await?;
        let index = self
            .client
            .pull_referrers(at, Some(artifact_type))
            .await
            .with_context(|| format!("the referrers of {at}"))?;
        Ok(index
            .manifests
            .into_iter()
            .filter(|m| m.artifact_type.as_deref() == Some(artifact_type))
            .map(|m| m.digest)
            .collect())
    }

    /// Keeps the referrers tag schema of `subject` (in `at`'s repository)
    /// listing `entry`, for registries without a referrers API: what cosign
    /// does when it signs, done again where a signature is copied to.
    async fn add_referrer(&self, at: &Reference, subject: &str, entry: Value) -> Result<()> {
        check_digest(subject)?;
        let tag = Reference::with_tag(at.registry().into(), at.repository().into(), subject.replace(':', "-"));
        let mut index = match self.manifest(&tag).await {
            Ok(existing) => existing.json()?,
            Err(_) => serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}),
        };
        let manifests = index["manifests"].as_array_mut().context("a referrers index without manifests")?;
        if !manifests.iter().any(|m| m["digest"] == entry["digest"]) {
            manifests.push(entry);
            let bytes = serde_json::to_vec(&index)?;
            self.push(&tag, &[], &bytes, OCI_INDEX).await?;
        }
        Ok(())
    }

    /// Pushes blobs (skipping those the repository has) and then a
    /// manifest; returns the manifest's digest.
    pub async fn push(&self, at: &Reference, blobs: &[&[u8]], manifest: &[u8], media_type: &str) -> Result<String> {
        self.login(at, RegistryOperation::Push).await?;
        for blob in blobs {
            let digest = sha256(blob);
            if !self.client.blob_exists(at, &digest).await.unwrap_or(false) {
                self.client.push_blob(at, blob.to_vec(), &digest).await.with_context(|| format!("pushing to {at}"))?;
            }
        }
        let content_type = http::HeaderValue::from_str(media_type)?;
        self.client
            .push_manifest_raw(at, manifest.to_vec(), content_type)
            .await
            .with_context(|| format!("pushing the manifest of {at}"))?;
        Ok(sha256(manifest))
    }

    /// Copies the artifact `from` (pinned by digest) with everything it
    /// references to `to` (the same digest); returns its digest, the same
    /// on both sides. With `tag`, the copy is also tagged (its manifest
    /// pushed once more, under the tag).
    pub async fn copy(&self, from: &Reference, to: &Reference, tag: Option<&str>) -> Result<String> {
        let manifest = self.manifest(from).await?;
        let json = manifest.json()?;
        // There already (the image of a second component): the registry
        // holds everything its manifest names; only tag it.
        let there = self.manifest(&pinned(to, &manifest.digest)).await.is_ok_and(|t| t.digest == manifest.digest);
        if !there {
            self.copy_contents(from, to, &manifest, &json).await?;
        }
        let pushed = manifest.digest.clone();
        if let Some(tag) = tag {
            let tagged = Reference::with_tag(to.registry().into(), to.repository().into(), tag.into());
            self.push(&tagged, &[], &manifest.bytes, &manifest.media_type).await?;
        }
        // A referrer (a signature) is found from its subject.
        if let Some(subject) = json["subject"]["digest"].as_str() {
            let mut entry = serde_json::json!({
                "mediaType": manifest.media_type, "digest": pushed, "size": manifest.bytes.len(),
            });
            if let Some(artifact_type) = json["artifactType"].as_str() {
                entry["artifactType"] = artifact_type.into();
            }
            self.add_referrer(to, subject, entry).await?;
        }
        Ok(pushed)
    }
}

/// A digest as it may go into a URL: `sha256:` and 64 lower-case hex digits.
pub fn check_digest(digest: &str) -> Result<()> {
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        bail!("{digest:?} is not a sha256 digest");
    }
    Ok(())
}

/// A sink that refuses to hold more than `max` bytes: a registry that
/// sends more than a blob may have fails the read, not the memory.
struct Bounded {
    bytes: Vec<u8>,
    max: usize,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        chunk: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.bytes.len() + chunk.len() > self.max {
            let over = self.max + 1;
            self.bytes.resize(over, 0);
            return std::task::Poll::Ready(Err(std::io::Error::other("more bytes than the limit")));
        }
        self.bytes.extend_from_slice(chunk);
        std::task::Poll::Ready(Ok(chunk.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// `reference` at another digest, in the same repository.
pub fn pinned(reference: &Reference, digest: &str) -> Reference {
    Reference::with_digest(reference.registry().to_string(), reference.repository().to_string(), digest.to_string())
}
