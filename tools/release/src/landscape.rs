//! A component as a landscape installs it: openmcp's bootstrapper walks
//! from the landscape's root component to the reference
//! `service-provider-<name>`, takes the first `ociImage` resource's
//! `imageReference` as the ServiceProvider's image, downloads the
//! `<component>-crds` directory and keeps only the files labelled
//! `openmcp.cloud/cluster: platform` (applied before anything else), and
//! writes the ServiceProvider with its configuration's keys as `spec`
//! fields. The same steps here, each resource checked against the digest
//! its descriptor records (which the bootstrapper does not do).

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::component::{self, PLUGIN_VARIABLE};
use crate::descriptor::{Access, Descriptor, Resource};
use crate::registry::{Registries, sha256};
use crate::repository::{self, ComponentRef, Stored};

const CLUSTER_LABEL: &str = "openmcp.cloud/cluster";

/// A provider's component version, found from the root.
pub struct Provider {
    pub at: ComponentRef,
    pub stored: Stored,
}

/// The component the root references as `reference` (direct references
/// first, then depth-first through theirs), in the root's repository.
pub async fn resolve(registries: &Registries, root: &ComponentRef, reference: &str) -> Result<Provider> {
    let mut pending = vec![root.clone()];
    let mut seen = Vec::new();
    while let Some(at) = pending.pop() {
        if seen.contains(&at) || seen.len() > 64 {
            continue;
        }
        let stored = repository::get(registries, &at).await?;
        let matching: Vec<_> =
            stored.descriptor.component.component_references.iter().filter(|r| r.name == reference).collect();
        match matching.as_slice() {
            [one] => {
                let found = ComponentRef::new(&root.base, &one.component_name, &one.version)?;
                let stored = repository::get(registries, &found).await?;
                return Ok(Provider { at: found, stored });
            }
            [] => {}
            _ => bail!("{at} references {reference} more than once"),
        }
        for r in stored.descriptor.component.component_references.iter().rev() {
            pending.push(ComponentRef::new(&root.base, &r.component_name, &r.version)?);
        }
        seen.push(at);
    }
    bail!("no component referenced as {reference} under {root}")
}

fn oci_reference(resource: &Resource) -> Result<&str> {
    match &resource.access {
        Access::OciArtifact { image_reference } => {
            let pinned = component::pinned_digest(image_reference)?;
            let recorded = resource.recorded_digest();
            if recorded.as_deref() != Some(pinned.as_str()) {
                bail!("resource {} points at {pinned}, its descriptor records {recorded:?}", resource.name);
            }
            Ok(image_reference)
        }
        Access::LocalBlob { .. } => bail!("resource {} is a local blob, not an OCI artifact", resource.name),
    }
}

/// The ServiceProvider's image: the first `ociImage` resource.
pub fn image(descriptor: &Descriptor) -> Result<String> {
    let resource = descriptor.first_of_type("ociImage").context("the component has no ociImage resource")?;
    Ok(oci_reference(resource)?.to_string())
}

/// The bytes of the local blob resource `name`, checked against the digest
/// the descriptor records.
pub async fn local_blob(registries: &Registries, provider: &Provider, name: &str) -> Result<Vec<u8>> {
    let resource =
        provider.stored.descriptor.resource(name).with_context(|| format!("{} has no resource {name}", provider.at))?;
    let Access::LocalBlob { local_reference, .. } = &resource.access else {
        bail!("resource {name} of {} is not a local blob", provider.at);
    };
    let bytes = repository::local_blob(registries, &provider.at, &provider.stored, local_reference).await?;
    if resource.recorded_digest() != Some(sha256(&bytes)) {
        bail!("resource {name} of {} does not match the digest its descriptor records", provider.at);
    }
    Ok(bytes)
}

/// The provider's CRDs for the platform cluster: the top-level YAML files
/// of `<component>-crds` labelled `openmcp.cloud/cluster: platform`.
pub async fn platform_crds(registries: &Registries, provider: &Provider) -> Result<Vec<(String, Value)>> {
    let name = component::crds_resource(&provider.at.name);
    let tar = local_blob(registries, provider, &name).await?;
    let mut kept = Vec::new();
    for (file, bytes) in repository::untar(&tar, repository::MAX_LOCAL_BLOB)? {
        let top_level_yaml = !file.contains('/') && (file.ends_with(".yaml") || file.ends_with(".yml"));
        if !top_level_yaml {
            continue;
        }
        let text = String::from_utf8(bytes).with_context(|| format!("{file} is not UTF-8"))?;
        let object: Value = serde_saphyr::from_str(&text).with_context(|| format!("{file} of {name}"))?;
        if object["metadata"]["labels"][CLUSTER_LABEL] == "platform" {
            kept.push((file, object));
        }
    }
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(kept)
}

/// The ServiceProvider configuration the component carries, with the
/// plugin named where the component's `plugin` resource is now (after a
/// transfer: the mirror), pinned to the same digest.
pub async fn config(registries: &Registries, provider: &Provider) -> Result<Value> {
    let text = String::from_utf8(local_blob(registries, provider, component::CONFIG).await?)?;
    let mut config: Value = serde_saphyr::from_str(&text).context("the ServiceProvider config")?;
    let plugin = provider.stored.descriptor.resource(component::PLUGIN).context("the component has no plugin")?;
    let plugin = oci_reference(plugin)?;
    let env = config.get_mut("env").and_then(Value::as_array_mut).context("the config has no env")?;
    let entry = env.iter_mut().find(|e| e["name"] == PLUGIN_VARIABLE).context("the config's env has no PLUGIN")?;
    let published = entry["value"].as_str().unwrap_or_default();
    let digest = component::pinned_digest(plugin)?;
    if !published.ends_with(&format!("@{digest}")) {
        bail!("the config runs plugin {published}, the component carries {digest}");
    }
    entry["value"] = json!(format!("oci://{plugin}"));
    Ok(config)
}

/// The ServiceProvider as the bootstrapper writes it: name, image, and the
/// configuration's keys as `spec` fields.
pub fn service_provider(name: &str, image: &str, config: &Value) -> Value {
    let mut spec = config.as_object().cloned().unwrap_or_default();
    spec.insert("image".into(), json!(image));
    json!({
        "apiVersion": "openmcp.cloud/v1alpha1",
        "kind": "ServiceProvider",
        "metadata": {"name": name},
        "spec": spec,
    })
}
