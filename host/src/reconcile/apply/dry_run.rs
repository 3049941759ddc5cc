//! What applying one object would change, without changing it: a
//! server-side apply with `dryRun=All` (so defaulting, conversion and
//! field ownership are the API server's), compared with what is live.
//!
//! Kubernetes authorizes a dry run like the write itself. Where the
//! credentials may only read (the preview's Role), the answer is a 403 and
//! the object is compared here instead: the plan's fields laid over the
//! live object, which misses what the API server would default or a field
//! the host no longer sets. The result says which of the two it is, and
//! [`Forbidden`] remembers where dry runs are refused, so that each kind
//! of each cluster is asked once.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kube::Client;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::Value;

use super::decorate;
use crate::Error;
use crate::owner::{ANNOTATION_APPLIED, Owner};
use crate::plugin::plan::Manifest;
use crate::plugin::plan::compare::{FieldChange, field_changes};
use crate::resource::{api_resource, dynamic_api};

/// How the live object was compared with what would be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compared {
    /// The API server's answer to a dry-run apply.
    ServerDryRun,
    /// The plan's fields laid over the live object, here (no permission to
    /// dry-run).
    Client,
    /// Not with the live object: the cluster was not reached (the preview
    /// reads no tenant kubeconfig unless asked), so with what the current
    /// component plans for it.
    Plans,
}

/// What applying one object would do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WouldApply {
    /// Nothing is there yet: it would be created.
    pub create: bool,
    /// The fields that would change (none when created or unchanged).
    pub fields: Vec<FieldChange>,
    pub compared: Compared,
}

impl WouldApply {
    pub fn changes(&self) -> bool {
        self.create || !self.fields.is_empty()
    }
}

/// The kinds of the clusters where a dry run was refused (403).
#[derive(Debug, Default)]
pub struct Forbidden(Mutex<BTreeSet<String>>);

impl Forbidden {
    fn key(manifest: &Manifest) -> String {
        format!("{} {} {}", manifest.cluster, manifest.api_version, manifest.kind)
    }

    fn contains(&self, manifest: &Manifest) -> bool {
        self.0.lock().expect("not poisoned").contains(&Self::key(manifest))
    }

    fn insert(&self, manifest: &Manifest) {
        self.0.lock().expect("not poisoned").insert(Self::key(manifest));
    }
}

/// What applying `manifest` (as `owner`'s, by `field_manager`) would change
/// on its cluster.
pub async fn would_apply(
    client: &Client,
    manifest: &Manifest,
    owner: &Owner,
    field_manager: &str,
    forbidden: &Forbidden,
) -> Result<WouldApply, Error> {
    let resource = api_resource(&manifest.api_version, &manifest.kind, &manifest.plural);
    let api = dynamic_api(client, &resource, manifest.namespace.as_deref());
    let place = || manifest.place();
    let desired = decorate(&manifest.object, owner)?;
    let live = api.get_opt(&manifest.name).await.map_err(|e| Error::kube(format!("reading {}", place()), e))?;
    let params = PatchParams::apply(field_manager).force().dry_run();
    let dry_run = match forbidden.contains(manifest) {
        true => None,
        false => match api.patch(&manifest.name, &params, &Patch::Apply(&desired)).await {
            Ok(after) => Some(to_value(&after, &place)?),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                forbidden.insert(manifest);
                None
            }
            Err(e) => return Err(Error::kube(format!("dry-running the apply of {}", place()), e)),
        },
    };
    let (after, compared) = match dry_run {
        Some(after) => (after, Compared::ServerDryRun),
        None => {
            let mut laid = live.as_ref().map(|l| to_value(l, &place)).transpose()?.unwrap_or(Value::Null);
            lay_over(&mut laid, &desired);
            (laid, Compared::Client)
        }
    };
    let Some(live) = live else { return Ok(WouldApply { create: true, fields: Vec::new(), compared }) };
    let before = comparable(to_value(&live, &place)?);
    Ok(WouldApply { create: false, fields: field_changes(&before, &comparable(after)), compared })
}

fn to_value(object: &impl Serialize, place: &impl Fn() -> String) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(|e| Error::json(format!("reading {}", place()), e))
}

/// An object without what changes on every write or is not the host's to
/// set: the server's bookkeeping, the status, and the hash of what the host
/// applied (which changes whenever a field it is taken over does).
fn comparable(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"] {
            meta.remove(field);
        }
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove(ANNOTATION_APPLIED);
        }
    }
    object
}

/// Lays every field of `fields` over `base` (objects merged member by
/// member, everything else replaced).
fn lay_over(base: &mut Value, fields: &Value) {
    match (base, fields) {
        (Value::Object(base), Value::Object(fields)) => {
            for (key, value) in fields {
                lay_over(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, fields) => *base = fields.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bookkeeping_and_status_are_not_compared() {
        let live = json!({
            "metadata": {"name": "x", "resourceVersion": "7", "generation": 2, "uid": "u",
                         "annotations": {ANNOTATION_APPLIED: "abc", "keep": "1"}, "managedFields": []},
            "spec": {"a": 1}, "status": {"ready": true}
        });
        let after = json!({"metadata": {"name": "x", "resourceVersion": "8", "annotations": {ANNOTATION_APPLIED: "def", "keep": "1"}}, "spec": {"a": 1}});
        assert!(field_changes(&comparable(live), &comparable(after)).is_empty());
    }

    #[test]
    fn fields_are_laid_over_what_is_live() {
        let mut base = json!({"spec": {"a": 1, "list": [1, 2], "keep": true}});
        lay_over(&mut base, &json!({"spec": {"a": 2, "list": [3]}, "extra": "x"}));
        assert_eq!(base, json!({"spec": {"a": 2, "list": [3], "keep": true}, "extra": "x"}));
    }
}
