//! Publishing a plugin: the component as a one-layer OCI artifact, in the
//! layout [`super::artifact`] accepts and `oras`/`wkg` tooling reads.
//!
//! The config holds no timestamp, so pushing the same component twice gives
//! the same manifest digest: the digest printed is what goes into a
//! ServiceProvider, and what cosign signs.

use oci_client::RegistryOperation;
use oci_client::errors::OciDistributionError;
use serde_json::json;

use super::artifact::{CONFIG, LAYER, MANIFEST};
use super::registry::Registry;
use super::{Options, PluginRef, SourceError};

/// What a push made.
pub struct Published {
    /// `oci://<registry>/<repository>@sha256:<manifest digest>`.
    pub pinned: String,
    /// The component's own digest (what a grant identity may pin).
    pub component: String,
}

/// The blobs and manifest of a plugin artifact.
struct Layout {
    config: Vec<u8>,
    config_digest: String,
    manifest: Vec<u8>,
    digest: String,
    component: String,
}

fn layout(wasm: &[u8], file_name: &str) -> Layout {
    let component = crate::plugin::sandbox::digest_of(wasm);
    let config = serde_json::to_vec(&json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [component],
    }))
    .expect("a JSON literal serialises");
    let config_digest = crate::plugin::sandbox::digest_of(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "artifactType": CONFIG[0],
        "config": {"mediaType": CONFIG[0], "digest": config_digest, "size": config.len()},
        "layers": [{
            "mediaType": LAYER[0],
            "digest": component,
            "size": wasm.len(),
            "annotations": {"org.opencontainers.image.title": file_name},
        }],
    }))
    .expect("a JSON literal serialises");
    let digest = crate::plugin::sandbox::digest_of(&manifest);
    Layout { config, config_digest, manifest, digest, component }
}

/// Pushes `wasm` (already checked to load) to `target` (a tag, usually),
/// within the same deadline as a pull: a stalled registry fails the push
/// rather than hanging the pipeline that runs it.
pub async fn push(
    wasm: &[u8],
    file_name: &str,
    target: &PluginRef,
    options: &Options,
) -> Result<Published, SourceError> {
    super::within_deadline("push to", target, options, publish(wasm, file_name, target, options)).await
}

async fn publish(
    wasm: &[u8],
    file_name: &str,
    target: &PluginRef,
    options: &Options,
) -> Result<Published, SourceError> {
    let Layout { config, config_digest, manifest, digest, component } = layout(wasm, file_name);
    let registry = Registry::lazy(target, options);
    let registry = registry.get()?;
    let image = target.reference();
    let auth = registry.credentials.for_registry(target.registry());
    let fail = |e: OciDistributionError| registry.error(e.into());
    registry.client.auth(image, &auth, RegistryOperation::Push).await.map_err(fail)?;
    registry.client.push_blob(image, config, &config_digest).await.map_err(fail)?;
    registry.client.push_blob(image, wasm.to_vec(), &component).await.map_err(fail)?;
    let content_type = http::HeaderValue::from_static(MANIFEST);
    registry.client.push_manifest_raw(image, manifest, content_type).await.map_err(fail)?;
    Ok(Published { pinned: target.pinned(&digest), component })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_artifact_is_what_a_pull_accepts_and_is_reproducible() {
        let wasm = b"\0asm\x0d\0\x01\0";
        let first = layout(wasm, "p.wasm");
        let layer = super::super::artifact::component_layer(&first.manifest, 1024).unwrap();
        assert_eq!((layer.digest.as_str(), layer.size), (first.component.as_str(), wasm.len() as u64));
        assert_eq!(first.digest, layout(wasm, "p.wasm").digest, "same component, same digest");
        assert_eq!(first.config_digest, crate::plugin::sandbox::digest_of(&first.config));
    }
}
