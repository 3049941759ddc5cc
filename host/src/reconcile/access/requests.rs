//! An instance's requests on the platform cluster: its AccessRequests and
//! its workload ClusterRequest, created, kept up to date and deleted with
//! the cluster-access library's finalizer handling.
//!
//! openmcp's labels name the instance a request is for, not who made it: a
//! Go provider for the same service labels its requests alike. So an
//! AccessRequest is this host's only with its instance annotation, or (one
//! an earlier version made) with an entry of its field manager; one with
//! the labels and neither is a predecessor's, taken over only with
//! `--adopt-from` ([`crate::adopt`]).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{FINALIZER, InstanceAccess, access_request_resource, cluster_request_resource};
use crate::adopt::Adoption;
use crate::error::{Conflicting, Error, UserInput};
use crate::owner::ANNOTATION_INSTANCE;
use crate::stores::Lookup;

/// Whether the object carries every label of `labels` (a JSON object).
fn has_labels(meta: &ObjectMeta, labels: &Value) -> bool {
    let live = meta.labels.as_ref();
    labels
        .as_object()
        .is_some_and(|want| want.iter().all(|(k, v)| live.and_then(|l| l.get(k)).map(String::as_str) == v.as_str()))
}

/// Whether `meta` has the instance's labels, today's or a former host's
/// ([`InstanceAccess::legacy_labels`]).
fn labelled(meta: &ObjectMeta, request: &InstanceAccess<'_>) -> bool {
    has_labels(meta, &request.labels()) || request.legacy_labels().is_some_and(|l| has_labels(meta, &l))
}

/// Whether the namespace exists on the platform cluster. Asked only when
/// creating a request there found nothing: where it exists, as it does for
/// every ControlPlane in openmcp, that costs no read.
async fn namespace_exists(platform: Client, name: &str) -> Result<bool, Error> {
    let api = Api::<Namespace>::all(platform);
    let found = api.get_opt(name).await.map_err(|e| Error::kube(format!("reading namespace {name}"), e))?;
    Ok(found.is_some())
}

/// One of an instance's requests (AccessRequest or workload ClusterRequest)
/// on the platform cluster.
struct Handle {
    api: Api<DynamicObject>,
    name: String,
    /// `Kind namespace/name`, for messages.
    what: String,
}

/// What a lookup found.
enum Found {
    Missing,
    /// Exists, but without this instance's labels: not ours to touch.
    Foreign,
    /// This instance's labels, but written by someone else and never by
    /// this host (the Go provider's request for the same instance).
    Predecessor(Box<DynamicObject>),
    Ours(Box<DynamicObject>),
}

/// What makes a labelled request this host's.
enum Mark<'a> {
    /// The labels suffice: the workload ClusterRequest, which no
    /// predecessor makes.
    Labels,
    /// Its instance annotation, or an entry of its field manager (requests
    /// made before the annotation).
    Annotated { annotation: String, field_manager: &'a str },
}

impl<'a> Mark<'a> {
    fn annotated_for(request: &InstanceAccess<'_>, field_manager: &'a str) -> Self {
        Mark::Annotated { annotation: request.annotation(), field_manager }
    }

    fn annotated(&self, meta: &ObjectMeta) -> bool {
        match self {
            Mark::Labels => true,
            Mark::Annotated { annotation, .. } => {
                meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_INSTANCE)) == Some(annotation)
            }
        }
    }

    fn written(&self, meta: &ObjectMeta) -> bool {
        let Mark::Annotated { field_manager, .. } = self else { return true };
        meta.managed_fields.iter().flatten().any(|e| e.manager.as_deref() == Some(*field_manager))
    }
}

impl Handle {
    fn new(platform: &Client, request: &InstanceAccess<'_>, resource: &ApiResource) -> Self {
        let name = request.name();
        Handle {
            api: Api::namespaced_with(platform.clone(), request.tenant_namespace, resource),
            what: format!("{} {}/{name}", resource.kind, request.tenant_namespace),
            name,
        }
    }

    /// What is there: from the store when it knows, else from the API.
    /// A labelled request without the annotation is read from the API
    /// (stores keep no `managedFields`) to see who wrote it.
    async fn find(&self, request: &InstanceAccess<'_>, mark: &Mark<'_>, cached: Lookup) -> Result<Found, Error> {
        let Some(mut live) = self.get(cached).await? else { return Ok(Found::Missing) };
        if !labelled(&live.metadata, request) {
            return Ok(Found::Foreign);
        }
        if mark.annotated(&live.metadata) {
            return Ok(Found::Ours(Box::new(live)));
        }
        if live.metadata.managed_fields.as_ref().is_none_or(Vec::is_empty) {
            match self.get(Lookup::Unknown).await? {
                Some(read) => live = read,
                None => return Ok(Found::Missing),
            }
        }
        Ok(match mark.written(&live.metadata) {
            true => Found::Ours(Box::new(live)),
            false => Found::Predecessor(Box::new(live)),
        })
    }

    async fn get(&self, cached: Lookup) -> Result<Option<DynamicObject>, Error> {
        match cached {
            Lookup::Found(object) => Ok(Some(DynamicObject::clone(&object))),
            Lookup::Absent => Ok(None),
            Lookup::Unknown => {
                self.api.get_opt(&self.name).await.map_err(|e| Error::kube(format!("reading {}", self.what), e))
            }
        }
    }

    fn not_ours(&self) -> Error {
        Error::conflict(&self.what, Conflicting::NotOurs)
    }

    /// Creates the request. A 404 means its namespace, or the kind itself,
    /// is not there: a tenant namespace that does not exist is a ControlPlane
    /// that does not exist (openmcp makes the namespace with it), and the
    /// host makes neither, so an object without a ControlPlane costs the
    /// platform nothing but this attempt and one read, every 15 s.
    async fn create(&self, manifest: Value, field_manager: &str) -> Result<DynamicObject, Error> {
        let object: DynamicObject =
            serde_json::from_value(manifest).map_err(|e| Error::json(format!("building {}", self.what), e))?;
        let params = PostParams { field_manager: Some(field_manager.to_string()), ..Default::default() };
        match self.api.create(&params, &object).await {
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                let namespace = self.api.namespace().expect("requests are namespaced");
                if !namespace_exists(self.api.clone().into_client(), namespace).await? {
                    return Err(UserInput::NoControlPlane { namespace: namespace.to_string() }.into());
                }
                Err(Error::kube(format!("creating {}", self.what), kube::Error::Api(s)))
            }
            created => created.map_err(|e| Error::kube(format!("creating {}", self.what), e)),
        }
    }

    /// Deletes the request if it is ours and, once only the cluster-access
    /// finalizer is left on it, removes that finalizer; true once it is
    /// gone. One that is not ours does not block (it is left alone).
    async fn delete_ours(&self, request: &InstanceAccess<'_>, mark: &Mark<'_>, cached: Lookup) -> Result<bool, Error> {
        let live = match self.find(request, mark, cached).await? {
            Found::Missing | Found::Foreign | Found::Predecessor(_) => return Ok(true),
            Found::Ours(live) => live,
        };
        if !deleting(&live) {
            return self.delete().await;
        }
        release_finalizer(self, &live).await?;
        Ok(false)
    }

    /// Asks for deletion; true when it is gone already (see
    /// [`crate::resource::deleted_at_once`]).
    async fn delete(&self) -> Result<bool, Error> {
        match self.api.delete(&self.name, &Default::default()).await {
            Ok(answer) => Ok(answer.either(|o| crate::resource::deleted_at_once(&o.metadata), |_| true)),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(true),
            Err(e) => Err(Error::kube(format!("deleting {}", self.what), e)),
        }
    }
}

fn deleting(live: &DynamicObject) -> bool {
    live.metadata.deletion_timestamp.is_some()
}

fn finalizers(live: &DynamicObject) -> Vec<String> {
    live.metadata.finalizers.clone().unwrap_or_default()
}

/// An AccessRequest as [`ensure_access_request`] left it.
pub struct Ensured {
    pub live: DynamicObject,
    /// This call created it.
    pub created: bool,
    /// Taken over from this field manager (`--adopt-from`), by this call.
    pub adopted: Option<String>,
}

/// Creates the AccessRequest, or brings its token rules up to date. Writes
/// nothing when it already matches. `cached` may answer "absent" for "none
/// of ours": the create then finds whatever else is in the way. A
/// predecessor's request is taken over as `adoption` allows (same object:
/// access is never revoked), else it is a conflict that says how.
pub async fn ensure_access_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    cached: Lookup,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<Ensured, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let mark = Mark::annotated_for(request, field_manager);
    let mut found = handle.find(request, &mark, cached).await?;
    if let Found::Missing = found {
        match handle.create(request.manifest(), field_manager).await {
            Ok(live) => return Ok(Ensured { live, created: true, adopted: None }),
            // Ours, not yet seen by the store, or someone else's.
            Err(Error::Kube { source: kube::Error::Api(s), .. }) if s.is_already_exists() => {
                found = handle.find(request, &mark, Lookup::Unknown).await?;
            }
            Err(e) => return Err(e),
        }
    }
    let (live, adopted) = match found {
        Found::Missing => return Err(Error::conflict(&handle.what, Conflicting::Vanished)),
        Found::Foreign => return Err(handle.not_ours()),
        Found::Predecessor(live) => {
            let by = adoption.consent(&live.metadata);
            let by = by.map_err(|why| Error::conflict(&handle.what, why))?;
            (*live, Some(by))
        }
        Found::Ours(live) => (*live, None),
    };
    if deleting(&live) {
        return Ok(Ensured { live, created: false, adopted: None });
    }
    let token = request.token();
    let mut finalizers = finalizers(&live);
    let finalized = finalizers.iter().any(|f| f == FINALIZER);
    // (A predecessor's request is never annotated: it is always written.)
    let current = live.data.pointer("/spec/token") == Some(&token)
        && finalized
        && mark.annotated(&live.metadata)
        && has_labels(&live.metadata, &request.labels());
    if current {
        return Ok(Ensured { live, created: false, adopted: None });
    }
    if !finalized {
        finalizers.push(FINALIZER.to_string());
    }
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "labels": request.labels(),
            "annotations": {ANNOTATION_INSTANCE: request.annotation()},
        },
        "spec": {"token": replacing(live.data.pointer("/spec/token"), token)},
    });
    let live = handle
        .api
        .patch(&handle.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("updating {}", handle.what), e))?;
    Ok(Ensured { live, created: false, adopted })
}

/// A merge patch that makes `live` exactly `desired`: a key only `live` has
/// is removed (a predecessor's `roleRefs: [cluster-admin]` must not stay).
fn replacing(live: Option<&Value>, mut desired: Value) -> Value {
    if let (Some(Value::Object(live)), Value::Object(want)) = (live, &mut desired) {
        for key in live.keys() {
            want.entry(key.clone()).or_insert(Value::Null);
        }
    }
    desired
}

/// Deletes the instance's AccessRequest and, once only the cluster-access
/// finalizer is left on it, removes that finalizer (as the openmcp library
/// does). Returns true when it is gone. One that is not ours is left alone,
/// but does not block the deletion.
pub async fn delete_access_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    cached: Lookup,
    field_manager: &str,
) -> Result<bool, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let mark = Mark::annotated_for(request, field_manager);
    handle.delete_ours(request, &mark, cached).await
}

/// Creates the workload ClusterRequest if it does not exist (its spec is
/// immutable), with the cluster-access finalizer as openmcp's library
/// does; one a former host made gets today's labels and the finalizer.
/// Returns the live object.
pub async fn ensure_cluster_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    field_manager: &str,
) -> Result<DynamicObject, Error> {
    let handle = Handle::new(platform, request, &cluster_request_resource());
    let live = match handle.find(request, &Mark::Labels, Lookup::Unknown).await? {
        Found::Missing => return handle.create(request.cluster_request_manifest(), field_manager).await,
        Found::Foreign | Found::Predecessor(_) => return Err(handle.not_ours()),
        Found::Ours(live) => *live,
    };
    let mut finalizers = finalizers(&live);
    let current = finalizers.iter().any(|f| f == FINALIZER) && has_labels(&live.metadata, &request.labels());
    if current || deleting(&live) {
        return Ok(live);
    }
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_string());
    }
    let patch = json!({"metadata": {"finalizers": finalizers, "labels": request.labels()}});
    handle
        .api
        .patch(&handle.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("updating {}", handle.what), e))
}

/// Deletes the workload ClusterRequest and, once only the cluster-access
/// finalizer is left on it, removes that finalizer; returns true once it
/// is gone.
pub async fn delete_cluster_request(platform: &Client, request: &InstanceAccess<'_>) -> Result<bool, Error> {
    let handle = Handle::new(platform, request, &cluster_request_resource());
    handle.delete_ours(request, &Mark::Labels, Lookup::Unknown).await
}

/// Removes the cluster-access finalizer once it is the last one (as the
/// openmcp library does); a conflict or a request gone meanwhile is the
/// next round's.
async fn release_finalizer(handle: &Handle, live: &DynamicObject) -> Result<(), Error> {
    if finalizers(live) != [FINALIZER] {
        return Ok(());
    }
    let patch = json!({"metadata": {"finalizers": [], "resourceVersion": live.metadata.resource_version}});
    match handle.api.patch(&handle.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(()),
        Err(e) => Err(Error::kube(format!("removing the finalizer of {}", handle.what), e)),
    }
}

/// Reads the instance's AccessRequest, if any. One of that name without
/// the instance's labels is not its access: `None`.
pub async fn get_access_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    cached: Lookup,
    field_manager: &str,
) -> Result<Option<DynamicObject>, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let mark = Mark::annotated_for(request, field_manager);
    Ok(match handle.find(request, &mark, cached).await? {
        Found::Ours(live) => Some(*live),
        Found::Missing | Found::Foreign | Found::Predecessor(_) => None,
    })
}
