//! The OCM component of one service provider: the host's image index, the
//! provider's plugin with its cosign signature, its CRDs, and the
//! ServiceProvider configuration that runs that plugin.
//!
//! Resources, in this order (openmcp's bootstrapper takes the first
//! `ociImage` as the ServiceProvider's image and downloads
//! `<last name segment>-crds`):
//!
//! | name | type | access |
//! |---|---|---|
//! | `service-provider-host` | `ociImage` | the image index, by digest |
//! | `<provider>-crds` | `directoryTree` | local blob: a tar of the CRD files |
//! | `plugin` | `ociArtifact` | the plugin's artifact, by digest |
//! | `plugin-signature` | `ociArtifact` | its cosign signature (a Sigstore bundle referring to it), by digest |
//! | `service-provider-config` | `serviceProviderConfig` | local blob: the ServiceProvider's `spec` fields |

use anyhow::{Context, Result, bail};
use oci_client::Reference;
use serde_json::Value;

use crate::descriptor::{Access, Descriptor, Digest, Resource};
use crate::registry::Registries;
use crate::repository::{ComponentRef, LocalBlob, tar};

pub const IMAGE: &str = "service-provider-host";
pub const PLUGIN: &str = "plugin";
pub const PLUGIN_SIGNATURE: &str = "plugin-signature";
pub const CONFIG: &str = "service-provider-config";
pub const CONFIG_TYPE: &str = "serviceProviderConfig";
pub const PROVIDER: &str = "open-control-plane.io";
/// The variable of the ServiceProvider's `env` that names the plugin.
pub const PLUGIN_VARIABLE: &str = "PLUGIN";

/// What a provider's component is made of.
pub struct Parts {
    pub at: ComponentRef,
    /// The image index, `registry/repository[:tag]@sha256:…`.
    pub image: String,
    /// The plugin's artifact and its signature, both pinned by digest.
    pub plugin: String,
    pub plugin_signature: String,
    /// `(file name, bytes)` of each CRD the provider brings.
    pub crds: Vec<(String, Vec<u8>)>,
    /// The ServiceProvider's `spec` fields besides `image` (YAML).
    pub config: String,
}

/// Where the pulled plugin and its compiled form are kept in the pod: an
/// `emptyDir`, so a restarted container does not pull again.
const CACHE_DIR: &str = "/var/cache/service-provider-host";

/// The ServiceProvider configuration that runs `plugin` (pinned) checked
/// against the cosign public key `verify_key` (PEM, carried inline: no
/// ConfigMap to create). Registry credentials are the landscape's to add.
pub fn config(plugin: &str, verify_key: &str) -> Result<String> {
    pinned_digest(plugin)?;
    if !verify_key.trim_start().starts_with("-----BEGIN PUBLIC KEY-----") {
        bail!("the plugin verification key is a PEM public key (cosign.pub)");
    }
    let config = serde_json::json!({
        "verbosity": "INFO",
        "env": [
            {"name": PLUGIN_VARIABLE, "value": format!("oci://{plugin}")},
            {"name": "PLUGIN_VERIFY_KEY", "value": verify_key.trim()},
            {"name": "PLUGIN_CACHE_DIR", "value": CACHE_DIR},
        ],
        "extraVolumes": [{"name": "plugin-cache", "emptyDir": {"sizeLimit": "256Mi"}}],
        "extraVolumeMounts": [{"name": "plugin-cache", "mountPath": CACHE_DIR}],
    });
    Ok(serde_saphyr::to_string(&config)?)
}

/// The artifact type of a Sigstore bundle, what `cosign sign` attaches.
const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// The cosign signature of a pinned plugin, as the host looks for it: a
/// Sigstore bundle referring to it (the registry's referrers API, or the
/// referrers tag schema), pinned by its own digest.
pub async fn signature_of(registries: &Registries, plugin: &str) -> Result<String> {
    let digest = pinned_digest(plugin)?;
    let parsed: Reference = plugin.parse()?;
    let bundles = registries.referrers(&parsed, BUNDLE).await?;
    match bundles.as_slice() {
        [bundle] => Ok(format!("{}/{}@{bundle}", parsed.registry(), parsed.repository())),
        [] => bail!("{plugin} has no cosign signature (a Sigstore bundle referring to {digest}): sign it first"),
        _ => bail!("{plugin} has {} cosign signatures: the component carries one; remove the others", bundles.len()),
    }
}

/// The name of the CRDs resource: the component name's last segment and
/// `-crds`, as the bootstrapper derives it.
pub fn crds_resource(component_name: &str) -> String {
    format!("{}-crds", component_name.rsplit('/').next().unwrap_or(component_name))
}

/// The digest a reference is pinned to.
pub fn pinned_digest(reference: &str) -> Result<String> {
    let parsed: Reference = reference.parse().with_context(|| format!("{reference} is not an OCI reference"))?;
    parsed.digest().map(str::to_string).with_context(|| format!("{reference} is not pinned by digest (@sha256:…)"))
}

/// A resource of the component's own (relation `local`).
fn resource(name: &str, kind: &str, version: &str, access: Access, digest: Digest) -> Resource {
    Resource {
        name: name.into(),
        version: version.into(),
        kind: kind.into(),
        relation: "local".into(),
        extra_identity: Default::default(),
        labels: Vec::new(),
        access,
        digest: Some(digest),
    }
}

fn oci_resource(name: &str, kind: &str, version: &str, reference: &str) -> Result<Resource> {
    let access = Access::OciArtifact { image_reference: reference.into() };
    Ok(resource(name, kind, version, access, Digest::oci_artifact(&pinned_digest(reference)?)))
}

fn blob_resource(name: &str, kind: &str, version: &str, blob: &LocalBlob) -> Resource {
    let access =
        Access::LocalBlob { local_reference: blob.digest(), media_type: blob.media_type.clone(), reference_name: None };
    resource(name, kind, version, access, Digest::generic_blob(&blob.digest()))
}

/// The descriptor (unsigned) and its local blobs.
pub fn build(parts: &Parts) -> Result<(Descriptor, Vec<LocalBlob>)> {
    let config: Value = serde_saphyr::from_str(&parts.config).context("the ServiceProvider config is not YAML")?;
    if !config.is_object() || config.get("image").is_some() {
        bail!("the ServiceProvider config is a map of spec fields without `image` (the component's image is)");
    }
    if parts.crds.is_empty() {
        bail!("a service provider brings at least one CRD");
    }
    let version = &parts.at.version;
    let mut descriptor = Descriptor::new(&parts.at.name, version, PROVIDER, &parts.at.base);
    let crds = LocalBlob { bytes: tar(&parts.crds)?, media_type: "application/x-tar".into() };
    let config_blob = LocalBlob { bytes: parts.config.clone().into_bytes(), media_type: "application/yaml".into() };
    descriptor.component.resources = vec![
        oci_resource(IMAGE, "ociImage", version, &parts.image)?,
        blob_resource(&crds_resource(&parts.at.name), "directoryTree", version, &crds),
        oci_resource(PLUGIN, "ociArtifact", version, &parts.plugin)?,
        oci_resource(PLUGIN_SIGNATURE, "ociArtifact", version, &parts.plugin_signature)?,
        blob_resource(CONFIG, CONFIG_TYPE, version, &config_blob),
    ];
    Ok((descriptor, vec![crds, config_blob]))
}

/// Builds, signs (signature `signature`, RSA key `sign_key` in PEM) and
/// pushes a provider's component; returns its manifest digest.
pub async fn publish(registries: &Registries, parts: &Parts, sign_key: &str, signature: &str) -> Result<String> {
    let (mut descriptor, blobs) = build(parts)?;
    crate::sign::sign(&mut descriptor, signature, sign_key)?;
    crate::repository::push(registries, &parts.at, &descriptor, &blobs).await
}

/// A component of references only, `(reference name, component name,
/// version)` each: what a landscape's root is.
pub fn root(at: &ComponentRef, references: &[(String, String, String)]) -> Result<Descriptor> {
    let mut descriptor = Descriptor::new(&at.name, &at.version, PROVIDER, &at.base);
    for (name, component_name, version) in references {
        ComponentRef::new(&at.base, component_name, version)?;
        descriptor.component.component_references.push(crate::descriptor::ComponentReference {
            name: name.clone(),
            component_name: component_name.clone(),
            version: version.clone(),
            extra_identity: Vec::new(),
            labels: Vec::new(),
            digest: None,
        });
    }
    Ok(descriptor)
}
