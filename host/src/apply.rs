//! Applying a plan: server-side apply of the desired objects, Secret copies,
//! removal of copies no longer wanted, and ordered deletion.
//!
//! Every object the host writes carries owner labels (provider and instance),
//! which is how watches map it back to its instance and how stale copies are
//! found: no owner references cross clusters.
//!
//! A no-op reconcile must not write. Each applied object carries the hash of
//! what was applied; when the live object still has that hash and still
//! contains every applied field with the applied value, applying again would
//! change nothing and is skipped. A user's edit of an applied field, or a
//! changed plan, makes the check fail and the object is applied again.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use service_provider_sdk::contract::{ObjectRef, SecretCopy};
use service_provider_sdk::names;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::plan::Manifest;

const PREFIX: &str = "service-provider.open-control-plane.io";
pub const LABEL_PROVIDER: &str = "service-provider.open-control-plane.io/provider";
pub const LABEL_INSTANCE_NAME: &str = "service-provider.open-control-plane.io/instance-name";
pub const LABEL_INSTANCE_NAMESPACE: &str = "service-provider.open-control-plane.io/instance-namespace";
/// On Secret copies: the (possibly shortened) name of the source Secret.
pub const LABEL_COPY_OF: &str = "service-provider.open-control-plane.io/copy-of";
/// Exact instance identity (labels may be shortened).
pub const ANNOTATION_INSTANCE: &str = "service-provider.open-control-plane.io/instance";
pub const ANNOTATION_APPLIED: &str = "service-provider.open-control-plane.io/applied-hash";

/// The service instance that owns what the host writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub provider: String,
    pub name: String,
    pub namespace: String,
}

impl Owner {
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_PROVIDER.to_string(), names::label_value(&self.provider)),
            (LABEL_INSTANCE_NAME.to_string(), names::label_value(&self.name)),
            (LABEL_INSTANCE_NAMESPACE.to_string(), names::label_value(&self.namespace)),
        ])
    }

    /// Label selector for everything this instance owns.
    pub fn selector(&self) -> String {
        self.labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Label selector for everything any instance of this provider owns.
    pub fn provider_selector(provider: &str) -> String {
        format!("{LABEL_PROVIDER}={}", names::label_value(provider))
    }

    fn annotation(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The owning instance `(namespace, name)` of an object the host wrote.
    pub fn of(object_meta: &kube::api::ObjectMeta, provider: &str) -> Option<(String, String)> {
        let labels = object_meta.labels.as_ref()?;
        if labels.get(LABEL_PROVIDER)? != &names::label_value(provider) {
            return None;
        }
        if let Some((ns, name)) =
            object_meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_INSTANCE)).and_then(|v| v.split_once('/'))
        {
            return Some((ns.to_string(), name.to_string()));
        }
        Some((labels.get(LABEL_INSTANCE_NAMESPACE)?.clone(), labels.get(LABEL_INSTANCE_NAME)?.clone()))
    }
}

/// What applying did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Unchanged,
    Written,
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

pub fn api_resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = split_api_version(api_version);
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

fn dynamic_api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Whether every field of `want` is in `have` with the same value. Lists must
/// match element by element; extra fields in `have` (server defaults, status,
/// other managers' fields) do not matter.
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Value::Array(h), Value::Array(w)) => h.len() == w.len() && h.iter().zip(w).all(|(hv, wv)| contains(hv, wv)),
        (Value::Number(h), Value::Number(w)) => h.as_f64() == w.as_f64(),
        _ => have == want,
    }
}

fn hash(value: &Value) -> String {
    let digest = Sha256::digest(value.to_string().as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The object as the host applies it: owner labels, the exact owner, and the
/// hash of all that.
pub fn decorate(object: &Value, owner: &Owner) -> Value {
    let mut object = object.clone();
    let meta = object.as_object_mut().expect("manifests are objects").entry("metadata").or_insert_with(|| json!({}));
    let labels = meta.as_object_mut().expect("metadata is an object").entry("labels").or_insert_with(|| json!({}));
    for (k, v) in owner.labels() {
        labels[k] = json!(v);
    }
    meta["annotations"][ANNOTATION_INSTANCE] = json!(owner.annotation());
    let digest = hash(&object);
    object["metadata"]["annotations"][ANNOTATION_APPLIED] = json!(digest);
    object
}

/// Server-side applies one desired object, unless that would change nothing.
pub async fn apply(client: &Client, manifest: &Manifest, owner: &Owner, field_manager: &str) -> Result<Change, Error> {
    let resource = api_resource(&manifest.api_version, &manifest.kind, &manifest.plural);
    let api = dynamic_api(client, &resource, manifest.namespace.as_deref());
    let desired = decorate(&manifest.object, owner);
    let what = || {
        format!(
            "{} {}",
            manifest.kind,
            manifest.namespace.as_ref().map_or(manifest.name.clone(), |ns| format!("{ns}/{}", manifest.name))
        )
    };
    let live = api.get_opt(&manifest.name).await.map_err(|e| Error::kube(format!("reading {}", what()), e))?;
    if let Some(live) = live
        && contains(&serde_json::to_value(&live)?, &desired)
    {
        return Ok(Change::Unchanged);
    }
    api.patch(&manifest.name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&desired))
        .await
        .map_err(|e| Error::kube(format!("applying {} on the {} cluster", what(), manifest.cluster), e))?;
    Ok(Change::Written)
}

/// Deletes one object the host manages. Returns true once it is gone.
/// Objects without this instance's owner labels are not ours and count as
/// gone: the host never deletes what it did not create.
pub async fn delete(client: &Client, target: &ObjectRef, owner: &Owner) -> Result<bool, Error> {
    let resource = api_resource(&target.api_version, &target.kind, &target.plural);
    let api = dynamic_api(client, &resource, target.namespace.as_deref());
    let what = || format!("{} {}", target.kind, target.name);
    let live = match api.get_opt(&target.name).await {
        Ok(live) => live,
        // The kind itself is not served (CRD gone): nothing left to delete.
        Err(kube::Error::Api(s)) if s.is_not_found() => None,
        Err(e) => return Err(Error::kube(format!("reading {}", what()), e)),
    };
    let Some(live) = live else { return Ok(true) };
    if Owner::of(&live.metadata, &owner.provider).as_ref() != Some(&(owner.namespace.clone(), owner.name.clone())) {
        return Ok(true);
    }
    if live.metadata.deletion_timestamp.is_none() {
        match api.delete(&target.name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(true),
            Err(e) => return Err(Error::kube(format!("deleting {}", what()), e)),
        }
    }
    Ok(false)
}

/// A problem only a person can fix (wrong Secret type, missing source).
fn invalid(message: String) -> Error {
    Error::Invalid(message)
}

/// Copies a Secret from the pod namespace on the platform cluster to the
/// target. The data never leaves the host.
pub async fn copy_secret(
    platform: &Client,
    pod_namespace: &str,
    target: &Client,
    copy: &SecretCopy,
    owner: &Owner,
    field_manager: &str,
) -> Result<Change, Error> {
    let source = Api::<Secret>::namespaced(platform.clone(), pod_namespace)
        .get_opt(&copy.source_name)
        .await
        .map_err(|e| Error::kube(format!("reading Secret {pod_namespace}/{}", copy.source_name), e))?
        .ok_or_else(|| {
            invalid(format!("Secret {pod_namespace}/{} does not exist on the platform cluster", copy.source_name))
        })?;
    let source_type = source.type_.clone().unwrap_or_else(|| "Opaque".to_string());
    if let Some(required) = &copy.required_type
        && &source_type != required
    {
        return Err(invalid(format!(
            "Secret {pod_namespace}/{} has type {source_type}, but {required} is required",
            copy.source_name
        )));
    }

    let api = Api::<Secret>::namespaced(target.clone(), &copy.target_namespace);
    let place = format!("{}/{} on the {} cluster", copy.target_namespace, copy.target_name, copy.target_cluster);
    let mut labels = owner.labels();
    labels.insert(LABEL_COPY_OF.to_string(), names::label_value(&copy.source_name));
    let data = source.data.clone().unwrap_or_default();
    if let Some(live) =
        api.get_opt(&copy.target_name).await.map_err(|e| Error::kube(format!("reading Secret {place}"), e))?
    {
        let live_labels = live.metadata.labels.clone().unwrap_or_default();
        if !live_labels.contains_key(LABEL_COPY_OF) || Owner::of(&live.metadata, &owner.provider).is_none() {
            return Err(invalid(format!(
                "Secret {place} already exists and is not a copy made by this provider; remove or rename it"
            )));
        }
        let same_type = live.type_.as_deref().unwrap_or("Opaque") == source_type;
        let same_labels = labels.iter().all(|(k, v)| live_labels.get(k) == Some(v));
        if same_type && same_labels && live.data.clone().unwrap_or_default() == data {
            return Ok(Change::Unchanged);
        }
        if !same_type {
            // The type of a Secret is immutable.
            api.delete(&copy.target_name, &DeleteParams::default())
                .await
                .map_err(|e| Error::kube(format!("replacing Secret {place}"), e))?;
        }
    }
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(copy.target_name.clone()),
            namespace: Some(copy.target_namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_INSTANCE.to_string(), owner.annotation()),
                (format!("{PREFIX}/copy-of"), format!("{pod_namespace}/{}", copy.source_name)),
            ])),
            ..Default::default()
        },
        type_: Some(source_type),
        data: Some(data.into_iter().collect::<BTreeMap<String, ByteString>>()),
        ..Default::default()
    };
    api.patch(&copy.target_name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&secret))
        .await
        .map_err(|e| Error::kube(format!("writing Secret {place}"), e))?;
    Ok(Change::Written)
}

/// Deletes this instance's Secret copies on one cluster, except `keep`
/// (`(namespace, name)` pairs). Returns how many were deleted.
pub async fn remove_copies(client: &Client, owner: &Owner, keep: &[(String, String)]) -> Result<usize, Error> {
    let selector = format!("{},{LABEL_COPY_OF}", owner.selector());
    let copies = Api::<Secret>::all(client.clone())
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube("listing Secret copies".into(), e))?;
    let mut removed = 0;
    for copy in copies.items {
        let (Some(ns), Some(name)) = (copy.metadata.namespace.clone(), copy.metadata.name.clone()) else { continue };
        if keep.iter().any(|(kn, kname)| *kn == ns && *kname == name) || copy.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match Api::<Secret>::namespaced(client.clone(), &ns).delete(&name, &DeleteParams::default()).await {
            Ok(_) => removed += 1,
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(Error::kube(format!("deleting stale Secret copy {ns}/{name}"), e)),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner { provider: "kro".into(), name: "mcp-01".into(), namespace: "default".into() }
    }

    #[test]
    fn containment_ignores_extra_fields_but_not_changed_ones() {
        let live = json!({"spec": {"interval": "1m", "timeout": "60s", "ref": {"tag": "0.9.3"}, "list": [{"a": 1, "b": 2}]}, "status": {}});
        assert!(contains(&live, &json!({"spec": {"interval": "1m", "ref": {"tag": "0.9.3"}}})));
        assert!(contains(&live, &json!({"spec": {"list": [{"a": 1}]}})));
        assert!(!contains(&live, &json!({"spec": {"ref": {"tag": "0.9.4"}}})));
        assert!(!contains(&live, &json!({"spec": {"list": [{"a": 1}, {"a": 2}]}})));
        assert!(!contains(&live, &json!({"spec": {"missing": true}})));
        assert!(contains(&json!({"n": 3.0}), &json!({"n": 3})));
    }

    #[test]
    fn decoration_adds_owner_labels_and_a_stable_hash() {
        let m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"app": "y"}}});
        let a = decorate(&m, &owner());
        assert_eq!(a["metadata"]["labels"]["app"], "y");
        assert_eq!(a["metadata"]["labels"][LABEL_PROVIDER], "kro");
        assert_eq!(a["metadata"]["labels"][LABEL_INSTANCE_NAME], "mcp-01");
        assert_eq!(a["metadata"]["annotations"][ANNOTATION_INSTANCE], "default/mcp-01");
        assert_eq!(a, decorate(&m, &owner()), "deterministic");
        let mut changed = m.clone();
        changed["data"] = json!({"k": "v"});
        assert_ne!(
            decorate(&changed, &owner())["metadata"]["annotations"][ANNOTATION_APPLIED],
            a["metadata"]["annotations"][ANNOTATION_APPLIED]
        );
    }

    #[test]
    fn a_field_dropped_from_the_plan_forces_a_new_apply() {
        let with = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1, "b": 2}});
        let without = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1}});
        let live = decorate(&with, &owner());
        // `without` is contained field-wise, but its hash differs.
        assert!(!contains(&live, &decorate(&without, &owner())));
        assert!(contains(&live, &decorate(&with, &owner())));
    }

    #[test]
    fn owners_are_read_back_from_labels_and_annotations() {
        let decorated = decorate(&json!({"metadata": {"name": "x"}}), &owner());
        let meta: kube::api::ObjectMeta = serde_json::from_value(decorated["metadata"].clone()).unwrap();
        assert_eq!(Owner::of(&meta, "kro"), Some(("default".into(), "mcp-01".into())));
        assert_eq!(Owner::of(&meta, "flux"), None);
        assert_eq!(
            owner().selector(),
            "service-provider.open-control-plane.io/instance-name=mcp-01,service-provider.open-control-plane.io/instance-namespace=default,service-provider.open-control-plane.io/provider=kro"
        );
    }

    #[test]
    fn api_resources_split_core_and_grouped_versions() {
        let core = api_resource("v1", "Secret", "secrets");
        assert_eq!((core.group.as_str(), core.version.as_str()), ("", "v1"));
        let flux = api_resource("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases");
        assert_eq!((flux.group.as_str(), flux.version.as_str()), ("helm.toolkit.fluxcd.io", "v2"));
    }
}
