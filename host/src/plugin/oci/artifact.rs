//! What a plugin artifact looks like, checked before anything is downloaded.
//!
//! The layout is the one `oras push` and `wkg oci push` produce for a Wasm
//! component: an OCI image manifest whose config has a Wasm config media
//! type and which has exactly one layer, the component. The layer's declared
//! digest and size come from here; the download is held to both.

use serde::Deserialize;

use super::reference::sha256_hex;

/// The OCI image manifest media type: the only manifest a plugin may be.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The Wasm config media types (`v0` is what the tools write today).
pub const CONFIG: [&str; 2] = ["application/vnd.wasm.config.v0+json", "application/vnd.wasm.config.v1+json"];
/// The component layer media types.
pub const LAYER: [&str; 2] = ["application/wasm", "application/vnd.wasm.content.layer.v1+wasm"];
/// Manifests are small; anything larger is not a plugin's.
pub const MAX_MANIFEST_BYTES: usize = 64 << 10;

/// The one layer a plugin artifact carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    media_type: Option<String>,
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    manifests: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
}

/// Checks a manifest and returns its component layer, or why it is not a
/// plugin (one line).
pub fn component_layer(manifest: &[u8], max_bytes: u64) -> Result<Layer, String> {
    if manifest.len() > MAX_MANIFEST_BYTES {
        return Err(format!("its manifest is {} bytes, more than {MAX_MANIFEST_BYTES}", manifest.len()));
    }
    let m: Manifest = serde_json::from_slice(manifest).map_err(|e| format!("its manifest is not valid: {e}"))?;
    if m.manifests.is_some() {
        return Err("it is an index of several manifests; give the digest of the plugin's own manifest".into());
    }
    if m.schema_version != 2 || m.media_type.as_deref().is_some_and(|t| t != MANIFEST) {
        return Err(format!(
            "its manifest is {} (schema {}), not an OCI image manifest",
            super::oneline(m.media_type.as_deref().unwrap_or("untyped")),
            m.schema_version
        ));
    }
    let config = m.config.ok_or("its manifest has no config")?;
    if !CONFIG.contains(&config.media_type.as_str()) {
        return Err(format!(
            "its config media type is {}, expected {} (is it a container image?)",
            super::oneline(&config.media_type),
            CONFIG.join(" or ")
        ));
    }
    let [layer] = <[Descriptor; 1]>::try_from(m.layers)
        .map_err(|layers| format!("it has {} layers, expected exactly one (the component)", layers.len()))?;
    if !LAYER.contains(&layer.media_type.as_str()) {
        return Err(format!(
            "its layer media type is {}, expected {}",
            super::oneline(&layer.media_type),
            LAYER.join(" or ")
        ));
    }
    if sha256_hex(&layer.digest).is_none() {
        return Err(format!(
            "its layer digest {} is not sha256:<64 lowercase hex digits>",
            super::oneline(&layer.digest)
        ));
    }
    let size = u64::try_from(layer.size).map_err(|_| format!("its layer declares a negative size {}", layer.size))?;
    if size > max_bytes {
        return Err(format!("its layer declares {size} bytes, more than the limit of {max_bytes}"));
    }
    Ok(Layer { digest: layer.digest, size })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn manifest(config: &str, layers: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": config, "digest": D, "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    fn layer(media_type: &str, size: i64) -> serde_json::Value {
        json!({"mediaType": media_type, "digest": D, "size": size})
    }

    #[test]
    fn both_tool_layouts_are_plugins() {
        for (config, media_type) in [(CONFIG[0], LAYER[0]), (CONFIG[1], LAYER[1])] {
            let found = component_layer(&manifest(config, json!([layer(media_type, 10)])), 100).unwrap();
            assert_eq!(found, Layer { digest: D.into(), size: 10 });
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let image = "application/vnd.oci.image.config.v1+json";
        let cases = [
            (manifest(image, json!([layer(LAYER[0], 10)])), "container image"),
            (manifest(CONFIG[0], json!([])), "0 layers"),
            (manifest(CONFIG[0], json!([layer(LAYER[0], 1), layer(LAYER[0], 1)])), "2 layers"),
            (manifest(CONFIG[0], json!([layer("application/x-tar", 10)])), "layer media type is application/x-tar"),
            (manifest(CONFIG[0], json!([layer(LAYER[0], 101)])), "declares 101 bytes, more than the limit of 100"),
            (manifest(CONFIG[0], json!([layer(LAYER[0], -1)])), "negative size"),
            (manifest(CONFIG[0], json!([{"mediaType": LAYER[0], "digest": "sha256:../x", "size": 1}])), "not sha256:"),
            (serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": []})).unwrap(), "index"),
            (b"not json".to_vec(), "not valid"),
            (vec![b' '; MAX_MANIFEST_BYTES + 1], "more than"),
        ];
        for (bytes, reason) in cases {
            let e = component_layer(&bytes, 100).unwrap_err();
            assert!(e.contains(reason), "{e} does not say {reason}");
            assert!(!e.contains('\n'));
        }
    }
}
