//! An OCM repository in an OCI registry, as the OCM specification maps it:
//! component `<name>` at `<version>` is the manifest tagged `<version>` of
//! `<base>/component-descriptors/<name>`; its config names the descriptor
//! layer (a tar holding `component-descriptor.yaml`), which comes first;
//! every other layer is a local blob, named by its digest.

use std::fmt;
use std::io::Read as _;

use anyhow::{Context, Result, bail};
use oci_client::Reference;
use serde_json::{Value, json};

use crate::descriptor::Descriptor;
use crate::registry::{OCI_MANIFEST, Registries, sha256};

pub const CONFIG: &str = "application/vnd.ocm.software.component.config.v1+json";
pub const DESCRIPTOR_TAR: &str = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar";
const DESCRIPTOR_JSON: &str = "application/vnd.ocm.software.component-descriptor.v2+json";
const DESCRIPTOR_YAML: &str = "application/vnd.ocm.software.component-descriptor.v2+yaml";
const DESCRIPTOR_FILE: &str = "component-descriptor.yaml";
/// A descriptor is kilobytes; a local blob here (CRDs, a config) well
/// under a few megabytes.
const MAX_DESCRIPTOR: usize = 1 << 20;
pub const MAX_LOCAL_BLOB: usize = 16 << 20;

/// `<base>//<component name>:<version>`, OCM's notation: `base` is a
/// registry host and an optional path (`localhost:5000/components`).
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentRef {
    pub base: String,
    pub name: String,
    pub version: String,
}

impl ComponentRef {
    pub fn parse(text: &str) -> Result<Self> {
        let (base, rest) =
            text.split_once("//").context("a component reference is <registry>[/path]//<name>:<version>")?;
        let (name, version) = rest.rsplit_once(':').context("a component reference ends in :<version>")?;
        Self::new(base, name, version)
    }

    /// A component version, its name and version checked: they become an
    /// OCI repository path and tag, and a name or version from a
    /// descriptor must not reach another repository (`..`, empty segments)
    /// or carry anything a tag cannot.
    pub fn new(base: &str, name: &str, version: &str) -> Result<Self> {
        let segment = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
                && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if name.split('/').count() < 2 || name.len() > 255 || !name.split('/').all(segment) {
            bail!("component name {name:?}: lower-case, a domain and a path (example.org/provider)");
        }
        let tag_char = |b: u8| b.is_ascii_alphanumeric() || b"-._+".contains(&b);
        if version.is_empty()
            || version.len() > 120
            || !version.bytes().all(tag_char)
            || version.starts_with(['.', '-'])
        {
            bail!("component version {version:?} is not a version");
        }
        let base = base.trim_end_matches('/');
        if base.is_empty() || base.split('/').skip(1).any(|s| !segment(s)) {
            bail!("repository {base:?}: <registry>[/path]");
        }
        Ok(Self { base: base.into(), name: name.into(), version: version.into() })
    }

    /// The OCI reference of the component version's manifest (a `+` in the
    /// version is `.build-` in the tag: tags have no `+`).
    pub fn oci(&self) -> Reference {
        let (registry, path) = split_base(&self.base);
        let repository = match path {
            Some(path) => format!("{path}/component-descriptors/{}", self.name),
            None => format!("component-descriptors/{}", self.name),
        };
        Reference::with_tag(registry.into(), repository, self.version.replace('+', ".build-"))
    }
}

impl fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}//{}:{}", self.base, self.name, self.version)
    }
}

/// `host[:port]` and the path after it, if any.
pub fn split_base(base: &str) -> (&str, Option<&str>) {
    match base.split_once('/') {
        Some((registry, path)) if !path.is_empty() => (registry, Some(path)),
        _ => (base.trim_end_matches('/'), None),
    }
}

/// A local blob to store with a component version.
pub struct LocalBlob {
    pub bytes: Vec<u8>,
    pub media_type: String,
}

impl LocalBlob {
    pub fn digest(&self) -> String {
        sha256(&self.bytes)
    }
}

/// A tar of files, reproducible: no times, no owners, one mode.
pub fn tar(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, name, bytes.as_slice())?;
    }
    Ok(builder.into_inner()?)
}

/// The files of a tar (regular files only), each at most `max` bytes.
pub fn untar(bytes: &[u8], max: usize) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries()? {
        let entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path()?.to_string_lossy().into_owned();
        let mut content = Vec::new();
        entry.take(max as u64 + 1).read_to_end(&mut content)?;
        if content.len() > max {
            bail!("{name} in the archive has more than {max} bytes");
        }
        files.push((name, content));
    }
    Ok(files)
}

/// Pushes a component version: the descriptor and its local blobs (each
/// `localBlob` access must name one of them). Returns the manifest digest.
pub async fn push(
    registries: &Registries,
    at: &ComponentRef,
    descriptor: &Descriptor,
    blobs: &[LocalBlob],
) -> Result<String> {
    if descriptor.component.name != at.name || descriptor.component.version != at.version {
        bail!("the descriptor is {}:{}, not {at}", descriptor.component.name, descriptor.component.version);
    }
    let text = serde_saphyr::to_string(descriptor).context("writing the descriptor as YAML")?;
    let layer = tar(&[(DESCRIPTOR_FILE.into(), text.into_bytes())])?;
    let layer_digest = sha256(&layer);
    let config = serde_json::to_vec(&json!({
        "componentDescriptorLayer": {"mediaType": DESCRIPTOR_TAR, "digest": layer_digest, "size": layer.len()}
    }))?;
    let mut layers = vec![json!({
        "mediaType": DESCRIPTOR_TAR, "digest": layer_digest, "size": layer.len(),
        "annotations": {"software.ocm.descriptor": "true"},
    })];
    for blob in blobs {
        layers.push(json!({"mediaType": blob.media_type, "digest": blob.digest(), "size": blob.bytes.len()}));
    }
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": CONFIG, "digest": sha256(&config), "size": config.len()},
        "layers": layers,
        "annotations": {"software.ocm.componentversion": format!("component-descriptors/{}:{}", at.name, at.version)},
    }))?;
    let mut all: Vec<&[u8]> = vec![&config, &layer];
    all.extend(blobs.iter().map(|b| b.bytes.as_slice()));
    registries.push(&at.oci(), &all, &manifest, OCI_MANIFEST).await
}

/// A component version as stored: its descriptor and its manifest.
pub struct Stored {
    pub descriptor: Descriptor,
    pub manifest: Value,
    pub digest: String,
}

/// Reads a component version: the manifest, its config, the descriptor
/// layer in any of the three forms the specification allows.
pub async fn get(registries: &Registries, at: &ComponentRef) -> Result<Stored> {
    let reference = at.oci();
    let manifest = registries.manifest(&reference).await.with_context(|| format!("component {at}"))?;
    let json = manifest.json()?;
    if json["config"]["mediaType"] != CONFIG {
        bail!("{at} is not an OCM component version (config {})", json["config"]["mediaType"]);
    }
    let config_digest = json["config"]["digest"].as_str().context("a config without a digest")?;
    let config: Value = serde_json::from_slice(&registries.blob(&reference, config_digest, MAX_DESCRIPTOR).await?)?;
    let layer = &config["componentDescriptorLayer"];
    let digest = layer["digest"].as_str().context("the config names no descriptor layer")?;
    let bytes = registries.blob(&reference, digest, MAX_DESCRIPTOR).await?;
    let text = match layer["mediaType"].as_str() {
        Some(DESCRIPTOR_TAR) => {
            let files = untar(&bytes, MAX_DESCRIPTOR)?;
            files
                .into_iter()
                .find(|(n, _)| n == DESCRIPTOR_FILE)
                .context("the descriptor tar has no component-descriptor.yaml")?
                .1
        }
        Some(DESCRIPTOR_JSON | DESCRIPTOR_YAML) => bytes,
        other => bail!("{at}: descriptor layer of media type {other:?}"),
    };
    let text = String::from_utf8(text).context("a descriptor that is not UTF-8")?;
    let descriptor: Descriptor = serde_saphyr::from_str(&text).with_context(|| format!("the descriptor of {at}"))?;
    if descriptor.component.name != at.name || descriptor.component.version != at.version {
        bail!("{at} holds the descriptor of {}:{}", descriptor.component.name, descriptor.component.version);
    }
    Ok(Stored { descriptor, manifest: json, digest: manifest.digest })
}

/// A local blob of a component version, by its `localReference`; only a
/// layer the version's manifest lists.
pub async fn local_blob(registries: &Registries, at: &ComponentRef, stored: &Stored, digest: &str) -> Result<Vec<u8>> {
    crate::registry::check_digest(digest)?;
    let listed = stored.manifest["layers"].as_array().into_iter().flatten().any(|l| l["digest"] == digest);
    if !listed {
        bail!("{at} has no local blob {digest}");
    }
    registries.blob(&at.oci(), digest, MAX_LOCAL_BLOB).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_version_is_a_tag_under_component_descriptors() {
        let at =
            ComponentRef::parse("localhost:5000/components//open-control-plane.io/x/service-provider-kro:1.0.0+b.1")
                .unwrap();
        let oci = at.oci();
        assert_eq!(oci.registry(), "localhost:5000");
        assert_eq!(oci.repository(), "components/component-descriptors/open-control-plane.io/x/service-provider-kro");
        assert_eq!(oci.tag(), Some("1.0.0.build-b.1"));
        for bad in [
            "localhost:5000//Upper.io/x:1",
            "localhost:5000//nopath:1",
            "localhost:5000/x:1",
            "r//a.io/b:",
            "r//a.io/../../victim:1",
            "r//a.io//b:1",
            "r//a.io/b:1/../x",
            "r/../x//a.io/b:1",
        ] {
            assert!(ComponentRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tar_is_reproducible_and_reads_back() {
        let files = vec![("a.yaml".to_string(), b"a: 1\n".to_vec()), ("b.yaml".to_string(), b"b: 2\n".to_vec())];
        assert_eq!(sha256(&tar(&files).unwrap()), sha256(&tar(&files).unwrap()));
        assert_eq!(untar(&tar(&files).unwrap(), 16).unwrap(), files);
        assert!(untar(&tar(&files).unwrap(), 2).is_err(), "over the limit");
    }
}
