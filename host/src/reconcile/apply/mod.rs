//! Applying a plan: server-side apply of the desired objects, copies of
//! Secrets ([`copy`], a predecessor's retired), ordered deletion, and
//! pruning of what the instance owns but no longer plans ([`prune`]). The
//! plugin's CRDs are [`crate::reconcile::apply::crds`]'.
//!
//! Every object the host writes carries owner labels (see [`crate::owner`]),
//! which is how watches map it back to its instance and how orphans are
//! found: no owner references cross clusters.
//!
//! A no-op reconcile must not write. Each applied object carries the hash of
//! what was applied; when the live object still has that hash and still
//! contains every applied field with the applied value, applying again would
//! change nothing and is skipped. A user's edit of an applied field, or a
//! changed plan, makes the check fail and the object is applied again.

pub mod copy;
pub(crate) mod crds;
pub mod dry_run;
mod namespaces;
pub mod prune;
mod retire;

use std::fmt::Debug;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use service_provider_sdk::contract::ObjectRef;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::adopt::Adoption;
use crate::owner::{ANNOTATION_APPLIED, ANNOTATION_INSTANCE, Owner};
use crate::plugin::plan::Manifest;
use crate::resource::{api_resource, deleted_at_once, dynamic_api, kind_absent};

pub use crate::plugin::plan::NAMESPACES_PER_INSTANCE;
pub use copy::{CopyJob, Sources};
pub use prune::{Scope, prune};

pub use crate::stores::Lookup;
/// What applying did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Unchanged,
    /// Written: `bytes` is the size of the object as the API server stored
    /// it (what the write cost its etcd, near enough).
    Written {
        bytes: usize,
    },
    /// Taken over (`--adopt-from`), now with our labels: where, from which
    /// field manager, and the size written.
    Adopted {
        place: String,
        by: String,
        bytes: usize,
    },
}

impl Change {
    /// The bytes written (0 when nothing was).
    pub fn bytes(&self) -> usize {
        match self {
            Change::Unchanged => 0,
            Change::Written { bytes } | Change::Adopted { bytes, .. } => *bytes,
        }
    }
}

pub use crate::resource::stored_size;

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
/// hash of all that. Fails (instead of panicking) on an object whose
/// metadata maps are not maps, which [`crate::plugin::plan::validate`] refuses
/// before anything gets here.
pub fn decorate(object: &Value, owner: &Owner) -> Result<Value, Error> {
    let malformed =
        |what: &str| Error::InvalidPlan { plugin: owner.provider.clone(), reason: format!("{what} is not an object") };
    let mut object = object.clone();
    let map = object.as_object_mut().ok_or_else(|| malformed("a desired object"))?;
    let meta =
        map.entry("metadata").or_insert_with(|| json!({})).as_object_mut().ok_or_else(|| malformed("metadata"))?;
    let labels = meta
        .entry("labels")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| malformed("metadata.labels"))?;
    for (k, v) in owner.labels() {
        labels.insert(k, json!(v));
    }
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| malformed("metadata.annotations"))?;
    annotations.insert(ANNOTATION_INSTANCE.to_string(), json!(owner.annotation()));
    let digest = hash(&object);
    if let Some(annotations) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.insert(ANNOTATION_APPLIED.to_string(), json!(digest));
    }
    Ok(object)
}

/// Whether an existing object that is not the instance's may simply be used
/// as it is: a Namespace is a place, not a thing to own, so the host neither
/// adopts nor refuses one that exists, never deletes one, and creates a
/// bounded number ([`namespaces`]).
fn shared_place(manifest: &Manifest) -> bool {
    manifest.is_namespace()
}

/// The `resourceVersion` that makes a server-side apply create-only. etcd
/// gives even the first write of a cluster revision 2, so no object an
/// etcd-backed API server stores has version 1: as a precondition it fails
/// (409) on whatever exists, and a create drops it. (The Java Operator
/// SDK's create-only server-side apply uses the same precondition.)
const NEVER_STORED: &str = "1";

/// Server-side applies `body` only if nothing of its name exists yet: the
/// size of what was created, or `None` when something is there.
async fn create_only<K>(
    api: &Api<K>,
    name: &str,
    mut body: Value,
    field_manager: &str,
) -> Result<Option<usize>, kube::Error>
where
    K: Clone + DeserializeOwned + Debug + Serialize,
{
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(NEVER_STORED));
    }
    match api.patch(name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&body)).await {
        Ok(created) => Ok(Some(stored_size(&created))),
        Err(kube::Error::Api(s)) if s.is_conflict() || s.is_already_exists() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates `desired` where nothing of ours was found, without reading
/// first and without ever writing over what is there ([`create_only`]):
/// [`Existing::Created`], or what is there after all (ours, not yet in a
/// store, or someone else's), for the caller to judge as if it had read it.
/// One request where reading first would take two.
pub(crate) async fn create_or_read<K>(
    api: &Api<K>,
    name: &str,
    desired: &impl Serialize,
    field_manager: &str,
    place: &str,
) -> Result<Existing<K>, Error>
where
    K: Clone + DeserializeOwned + Debug + Serialize,
{
    let body = serde_json::to_value(desired).map_err(|e| Error::json(format!("building {place}"), e))?;
    let created = create_only(api, name, body, field_manager).await;
    if let Some(bytes) = created.map_err(|e| Error::kube(format!("creating {place}"), e))? {
        return Ok(Existing::Created { bytes });
    }
    match api.get_opt(name).await.map_err(|e| Error::kube(format!("reading {place}"), e))? {
        Some(live) => Ok(Existing::Live(live)),
        // Gone again in between (or a 409 of another kind): try again
        // later, never write without the precondition.
        None => Err(Error::NotYet {
            reason: format!("{place} was in the way of its creation, then gone"),
            retry_after: Duration::from_secs(1),
        }),
    }
}

/// What is at an object's place once [`existing`] has looked.
pub(crate) enum Existing<K> {
    /// Nothing was: the desired object was just created, this big.
    Created { bytes: usize },
    /// What is there: ours or not, the caller judges.
    Live(K),
}

/// What is at `name` on `api`'s cluster: what a store knows (`cached`, made
/// a `K` by `typed`), else what the API server says. Where nothing is there,
/// `desired` is created at once ([`create_or_read`], which also finds what
/// is in the way): no read before the write a new object needs anyway.
pub(crate) async fn existing<K>(
    api: &Api<K>,
    name: &str,
    cached: Lookup,
    typed: impl FnOnce(&DynamicObject) -> Result<K, Error>,
    desired: &impl Serialize,
    field_manager: &str,
    place: &str,
) -> Result<Existing<K>, Error>
where
    K: Clone + DeserializeOwned + Debug + Serialize,
{
    let live = match cached {
        Lookup::Found(live) => Some(typed(&live)?),
        Lookup::Absent => None,
        Lookup::Unknown => api.get_opt(name).await.map_err(|e| Error::kube(format!("reading {place}"), e))?,
    };
    if let Some(live) = live {
        return Ok(Existing::Live(live));
    }
    create_or_read(api, name, desired, field_manager, place).await
}

/// `body` (an object as applied) with the uid of the object the host
/// looked at as a precondition: a store's view may be a moment old, and
/// the object at the path may have been deleted and made anew by someone
/// else since; the API server then refuses the write (the uid is
/// immutable) instead of the host taking over the new object.
pub(crate) fn on_the_one_seen(mut body: Value, seen: &kube::api::ObjectMeta) -> Value {
    if let (Some(uid), Some(meta)) = (&seen.uid, body.get_mut("metadata").and_then(Value::as_object_mut)) {
        meta.insert("uid".into(), json!(uid));
    }
    body
}

/// Server-side applies one desired object, unless that would change nothing.
#[tracing::instrument(level = "debug", skip_all, fields(cluster = %manifest.cluster, kind = %manifest.kind, name = %manifest.name))]
/// The live object comes from `cached` when a store has it, else from the
/// API server. `Absent` may mean only that none of ours is there: where
/// nothing was found, the object is created with [`create_or_read`], which
/// finds whatever else is in the way.
pub async fn apply(
    client: &Client,
    manifest: &Manifest,
    cached: Lookup,
    owner: &Owner,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<Change, Error> {
    let resource = api_resource(&manifest.api_version, &manifest.kind, &manifest.plural);
    let api = dynamic_api(client, &resource, manifest.namespace.as_deref());
    let desired = decorate(&manifest.object, owner)?;
    let place = manifest.place();
    let cached = if shared_place(manifest) { namespaces::admit(&api, cached, manifest, owner).await? } else { cached };
    let live = match existing(&api, &manifest.name, cached, |o| Ok(o.clone()), &desired, field_manager, &place).await? {
        Existing::Created { bytes } => return Ok(Change::Written { bytes }),
        Existing::Live(live) => live,
    };
    // Only what this instance created is updated, and what the operator
    // said to take over (`--adopt-from`) with proof of who wrote it.
    let mut adopted = None;
    if !owner.owns(&live.metadata) {
        if shared_place(manifest) {
            return Ok(Change::Unchanged);
        }
        let taken = adoption.take_over(&live.metadata, owner);
        adopted = Some(taken.map_err(|why| Error::conflict(&place, why))?);
    }
    let seen = live.metadata.clone();
    let live = serde_json::to_value(&live).map_err(|e| Error::json(format!("reading {}", manifest.what()), e))?;
    if adopted.is_none() && contains(&live, &desired) {
        return Ok(Change::Unchanged);
    }
    let body = on_the_one_seen(desired, &seen);
    let written = api
        .patch(&manifest.name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&body))
        .await
        .map_err(|e| Error::kube(format!("applying {place}"), e))?;
    let bytes = stored_size(&written);
    Ok(match adopted {
        Some(by) => Change::Adopted { place, by, bytes },
        None => Change::Written { bytes },
    })
}

/// Deletion of exactly the object whose metadata the host checked (its
/// uid as a precondition): never another that the same path names now.
pub fn exactly(meta: &kube::api::ObjectMeta) -> DeleteParams {
    let preconditions = kube::api::Preconditions { uid: meta.uid.clone(), resource_version: None };
    DeleteParams { preconditions: Some(preconditions), ..DeleteParams::background() }
}

/// Deletion of exactly the object the host checked, and only as it was
/// then (its uid and resourceVersion as preconditions): where the decision
/// rests on who wrote the object ([`crate::adopt`]), a write by anyone
/// since makes the deletion fail rather than delete what they changed.
pub fn unchanged(meta: &kube::api::ObjectMeta) -> DeleteParams {
    let preconditions =
        kube::api::Preconditions { uid: meta.uid.clone(), resource_version: meta.resource_version.clone() };
    DeleteParams { preconditions: Some(preconditions), ..DeleteParams::background() }
}

/// Deletes one object the host manages. Returns true once it is gone.
/// Objects without this instance's owner labels are not ours and count as
/// gone: the host never deletes what it did not create. `cached` is what a
/// store knows of *our* object there ([`crate::stores::Stores::ours`]); the
/// API server is asked only when no store can tell.
pub async fn delete(client: &Client, target: &ObjectRef, cached: Lookup, owner: &Owner) -> Result<bool, Error> {
    let resource = api_resource(&target.api_version, &target.kind, &target.plural);
    let api = dynamic_api(client, &resource, target.namespace.as_deref());
    let what = || format!("{} {}", target.kind, target.name);
    let live = match cached {
        Lookup::Found(live) => Some(DynamicObject::clone(&live)),
        Lookup::Absent => None,
        Lookup::Unknown => match api.get_opt(&target.name).await {
            Ok(live) => live,
            // The kind itself is not served (CRD gone): nothing left to delete.
            Err(e) if kind_absent(&e) => None,
            Err(e) => return Err(Error::kube(format!("reading {}", what()), e)),
        },
    };
    let Some(live) = live else { return Ok(true) };
    if !owner.owns(&live.metadata) {
        return Ok(true);
    }
    if live.metadata.deletion_timestamp.is_none() {
        match api.delete(&target.name, &exactly(&live.metadata)).await {
            Ok(answer) => return Ok(answer.either(|o| deleted_at_once(&o.metadata), |_| true)),
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(true),
            Err(e) => return Err(Error::kube(format!("deleting {}", what()), e)),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owner::{LABEL_INSTANCE_NAME, LABEL_PROVIDER};

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
        let a = decorate(&m, &owner()).unwrap();
        assert_eq!(a["metadata"]["labels"]["app"], "y");
        assert_eq!(a["metadata"]["labels"][LABEL_PROVIDER], "kro");
        assert_eq!(a["metadata"]["labels"][LABEL_INSTANCE_NAME], "mcp-01");
        assert_eq!(a["metadata"]["annotations"][ANNOTATION_INSTANCE], "default/mcp-01");
        assert_eq!(a, decorate(&m, &owner()).unwrap(), "deterministic");
        let mut changed = m.clone();
        changed["data"] = json!({"k": "v"});
        assert_ne!(
            decorate(&changed, &owner()).unwrap()["metadata"]["annotations"][ANNOTATION_APPLIED],
            a["metadata"]["annotations"][ANNOTATION_APPLIED]
        );
    }

    #[test]
    fn a_field_dropped_from_the_plan_forces_a_new_apply() {
        let with = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1, "b": 2}});
        let without = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1}});
        let live = decorate(&with, &owner()).unwrap();
        // `without` is contained field-wise, but its hash differs.
        assert!(!contains(&live, &decorate(&without, &owner()).unwrap()));
        assert!(contains(&live, &decorate(&with, &owner()).unwrap()));
    }

    #[test]
    fn odd_shapes_are_errors_not_panics() {
        for bad in [
            json!("text"),
            json!({"metadata": []}),
            json!({"metadata": {"labels": "x"}}),
            json!({"metadata": {"annotations": 1}}),
        ] {
            assert!(decorate(&bad, &owner()).is_err(), "{bad}");
        }
    }

    #[test]
    fn decorated_objects_are_owned() {
        let decorated = decorate(&json!({"metadata": {"name": "x"}}), &owner()).unwrap();
        let meta: kube::api::ObjectMeta = serde_json::from_value(decorated["metadata"].clone()).unwrap();
        assert!(owner().owns(&meta));
    }
}
