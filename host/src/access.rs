//! Cluster access through openmcp: ClusterRequests and AccessRequests on the
//! platform cluster, with the exact names, labels and finalizer the openmcp
//! cluster-access library uses, so openmcp-operator and cluster providers
//! treat them like any Go provider's.
//!
//! - Onboarding access (start-up): ClusterRequest + AccessRequest
//!   `<controller>--onboarding-init|run` in the pod namespace.
//! - ControlPlane access (per instance): AccessRequest
//!   `<controller>--<name>--mcp` in the tenant namespace, referring to the
//!   ControlPlane's ClusterRequest `<name>`, with the plugin's token rules.
//! - Workload access (per instance, when the plugin asks): ClusterRequest and
//!   AccessRequest `<controller>--<name>--wl` (purpose `workload`) in the
//!   tenant namespace.
//!
//! The controller name is the service's API group, as in the Go providers.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use service_provider_sdk::contract::{KubeconfigRef, PolicyRule};
use service_provider_sdk::names;

use crate::Error;
use crate::gather::KUBECONFIG_KEY;

pub const GROUP: &str = "clusters.openmcp.cloud";
/// The finalizer the cluster-access library puts on its AccessRequests.
pub const FINALIZER: &str = "clusters.openmcp.cloud/clusteraccess";
pub const LABEL_MANAGED_BY: &str = "openmcp.cloud/managed-by";
pub const LABEL_MANAGED_PURPOSE: &str = "openmcp.cloud/managed-purpose";
pub const LABEL_ONBOARDING_NAME: &str = "openmcp.cloud/onboarding-name";
pub const LABEL_ONBOARDING_NAMESPACE: &str = "openmcp.cloud/onboarding-namespace";

pub fn access_request_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", "AccessRequest"), "accessrequests")
}

pub fn cluster_request_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", "ClusterRequest"), "clusterrequests")
}

fn rules_json(rules: &[PolicyRule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| {
                let mut rule = json!({"apiGroups": r.api_groups, "resources": r.resources, "verbs": r.verbs});
                if !r.resource_names.is_empty() {
                    rule["resourceNames"] = json!(r.resource_names);
                }
                rule
            })
            .collect(),
    )
}

/// Which cluster an instance's access is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The tenant's ControlPlane; its ClusterRequest is openmcp's.
    ControlPlane,
    /// A workload cluster; the host requests it with its own ClusterRequest.
    Workload,
}

impl Target {
    /// Name suffix and purpose label part (openmcp: `mcp`, `wl`).
    pub fn suffix(self) -> &'static str {
        match self {
            Target::ControlPlane => "mcp",
            Target::Workload => "wl",
        }
    }
}

/// The AccessRequest (and, for a workload cluster, the ClusterRequest) of
/// one instance.
pub struct InstanceAccess<'a> {
    /// Controller name (the service API group).
    pub controller: &'a str,
    pub instance_name: &'a str,
    pub instance_namespace: &'a str,
    pub tenant_namespace: &'a str,
    pub rules: &'a [PolicyRule],
    pub target: Target,
}

impl InstanceAccess<'_> {
    /// The AccessRequest's name (and the workload ClusterRequest's).
    pub fn name(&self) -> String {
        names::access_request_name(self.controller, self.instance_name, self.target.suffix())
    }

    /// The labels that mark the requests as ours (openmcp's scheme).
    pub fn labels(&self) -> Value {
        let purpose = format!("{}.{}.{}", self.instance_namespace, self.instance_name, self.target.suffix());
        json!({
            LABEL_MANAGED_BY: names::label_value(self.controller),
            LABEL_MANAGED_PURPOSE: names::label_value(&purpose),
            LABEL_ONBOARDING_NAME: names::label_value(self.instance_name),
            LABEL_ONBOARDING_NAMESPACE: names::label_value(self.instance_namespace),
        })
    }

    /// The ClusterRequest the AccessRequest refers to: the ControlPlane's
    /// (named like the instance), or the host's own workload request.
    fn request_ref(&self) -> Value {
        match self.target {
            Target::ControlPlane => json!({"name": self.instance_name, "namespace": self.tenant_namespace}),
            Target::Workload => json!({"name": self.name(), "namespace": self.tenant_namespace}),
        }
    }

    /// The workload ClusterRequest.
    pub fn cluster_request_manifest(&self) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"),
            "kind": "ClusterRequest",
            "metadata": {"name": self.name(), "namespace": self.tenant_namespace, "labels": self.labels()},
            "spec": {"purpose": "workload"},
        })
    }

    fn token(&self) -> Value {
        json!({"permissions": [{"rules": rules_json(self.rules)}]})
    }

    pub fn manifest(&self) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/v1alpha1"),
            "kind": "AccessRequest",
            "metadata": {
                "name": self.name(),
                "namespace": self.tenant_namespace,
                "labels": self.labels(),
                "finalizers": [FINALIZER],
            },
            "spec": {
                "requestRef": self.request_ref(),
                "token": self.token(),
            }
        })
    }
}

/// Where an AccessRequest stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Granted for the current generation; the kubeconfig is here.
    Granted(KubeconfigRef),
    /// Denied by openmcp.
    Denied,
    /// Not (yet) granted for the current spec.
    Pending,
}

/// Reads the grant state off an AccessRequest (or ClusterRequest).
pub fn grant(request: &Value) -> Grant {
    let phase = request.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    let generation = request.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = request.pointer("/status/observedGeneration").and_then(Value::as_i64);
    match phase {
        "Denied" => Grant::Denied,
        "Granted" if generation == observed => {
            let namespace = request.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            match request.pointer("/status/secretRef/name").and_then(Value::as_str) {
                Some(name) => Grant::Granted(KubeconfigRef {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    key: KUBECONFIG_KEY.to_string(),
                }),
                // ClusterRequests have no Secret; Granted is all there is.
                None => Grant::Granted(KubeconfigRef {
                    namespace: namespace.to_string(),
                    name: String::new(),
                    key: String::new(),
                }),
            }
        }
        _ => Grant::Pending,
    }
}

/// Whether `live` carries all of `labels`.
fn has_labels(live: &Value, labels: &Value) -> bool {
    labels.as_object().is_some_and(|want| {
        want.iter().all(|(k, v)| live.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
    })
}

/// Creates the namespace if it does not exist yet (the ControlPlane
/// controller normally has). Never updates or deletes it.
pub async fn ensure_namespace(platform: &Client, name: &str) -> Result<(), Error> {
    let api = Api::<Namespace>::all(platform.clone());
    if api.get_opt(name).await.map_err(|e| Error::kube(format!("reading namespace {name}"), e))?.is_some() {
        return Ok(());
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(Error::kube(format!("creating namespace {name}"), e)),
    }
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
    Ours(Value),
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

    async fn find(&self, labels: &Value) -> Result<Found, Error> {
        let live = self.api.get_opt(&self.name).await.map_err(|e| Error::kube(format!("reading {}", self.what), e))?;
        let Some(live) = live else { return Ok(Found::Missing) };
        let live = serde_json::to_value(live)?;
        Ok(if has_labels(&live, labels) { Found::Ours(live) } else { Found::Foreign })
    }

    fn not_ours(&self) -> Error {
        Error::Cluster(format!("{} already exists but is not managed by this provider", self.what))
    }

    async fn create(&self, manifest: Value, field_manager: &str) -> Result<Value, Error> {
        let object: DynamicObject = serde_json::from_value(manifest)?;
        let created = self
            .api
            .create(&PostParams { field_manager: Some(field_manager.to_string()), ..Default::default() }, &object)
            .await
            .map_err(|e| Error::kube(format!("creating {}", self.what), e))?;
        Ok(serde_json::to_value(created)?)
    }

    /// Asks for deletion; true if it was already gone.
    async fn delete(&self) -> Result<bool, Error> {
        match self.api.delete(&self.name, &Default::default()).await {
            Ok(_) => Ok(false),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(true),
            Err(e) => Err(Error::kube(format!("deleting {}", self.what), e)),
        }
    }
}

fn deleting(live: &Value) -> bool {
    live.pointer("/metadata/deletionTimestamp").is_some()
}

/// Creates the AccessRequest, or brings its token rules up to date. Writes
/// nothing when it already matches. Returns the live object.
pub async fn ensure_access_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    field_manager: &str,
) -> Result<Value, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let live = match handle.find(&request.labels()).await? {
        Found::Missing => return handle.create(request.manifest(), field_manager).await,
        Found::Foreign => return Err(handle.not_ours()),
        Found::Ours(live) => live,
    };
    if deleting(&live) {
        return Ok(live);
    }
    let token = request.token();
    let finalized = live
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER));
    if live.pointer("/spec/token") == Some(&token) && finalized {
        return Ok(live);
    }
    let mut finalizers: Vec<Value> =
        live.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
    if !finalized {
        finalizers.push(json!(FINALIZER));
    }
    let patch = json!({"metadata": {"finalizers": finalizers}, "spec": {"token": token}});
    let patched = handle
        .api
        .patch(&handle.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("updating {}", handle.what), e))?;
    Ok(serde_json::to_value(patched)?)
}

/// Deletes the instance's AccessRequest and, once only the cluster-access
/// finalizer is left on it, removes that finalizer (as the openmcp library
/// does). Returns true when it is gone. One that is not ours is left alone,
/// but does not block the deletion.
pub async fn delete_access_request(platform: &Client, request: &InstanceAccess<'_>) -> Result<bool, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let live = match handle.find(&request.labels()).await? {
        Found::Missing | Found::Foreign => return Ok(true),
        Found::Ours(live) => live,
    };
    if !deleting(&live) {
        return handle.delete().await;
    }
    let finalizers: Vec<&str> = live
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if finalizers == [FINALIZER] {
        let patch =
            json!({"metadata": {"finalizers": [], "resourceVersion": live.pointer("/metadata/resourceVersion")}});
        match handle.api.patch(&handle.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
            Err(e) => return Err(Error::kube(format!("removing the finalizer of {}", handle.what), e)),
        }
    }
    Ok(false)
}

/// Creates the workload ClusterRequest if it does not exist (its spec is
/// immutable). Returns the live object.
pub async fn ensure_cluster_request(
    platform: &Client,
    request: &InstanceAccess<'_>,
    field_manager: &str,
) -> Result<Value, Error> {
    let handle = Handle::new(platform, request, &cluster_request_resource());
    match handle.find(&request.labels()).await? {
        Found::Missing => handle.create(request.cluster_request_manifest(), field_manager).await,
        Found::Foreign => Err(handle.not_ours()),
        Found::Ours(live) => Ok(live),
    }
}

/// Deletes the workload ClusterRequest; returns true once it is gone.
pub async fn delete_cluster_request(platform: &Client, request: &InstanceAccess<'_>) -> Result<bool, Error> {
    let handle = Handle::new(platform, request, &cluster_request_resource());
    match handle.find(&request.labels()).await? {
        Found::Missing | Found::Foreign => Ok(true),
        Found::Ours(live) if !deleting(&live) => handle.delete().await,
        Found::Ours(_) => Ok(false),
    }
}

/// Reads the instance's AccessRequest, if any.
pub async fn get_access_request(platform: &Client, request: &InstanceAccess<'_>) -> Result<Option<Value>, Error> {
    let handle = Handle::new(platform, request, &access_request_resource());
    let live =
        handle.api.get_opt(&handle.name).await.map_err(|e| Error::kube(format!("reading {}", handle.what), e))?;
    Ok(live.map(serde_json::to_value).transpose()?)
}

/// Onboarding access at start-up: the ClusterRequest and AccessRequest
/// `<controller>--<local_name>` in the pod namespace; waits for both to be
/// granted and returns the kubeconfig Secret reference.
pub async fn request_onboarding_access(
    platform: &Client,
    pod_namespace: &str,
    controller: &str,
    local_name: &str,
    rules: &[PolicyRule],
    timeout: Duration,
    field_manager: &str,
) -> Result<KubeconfigRef, Error> {
    let name =
        names::shorten(&format!("{}--{}", controller.to_lowercase(), local_name.to_lowercase()), names::MAX_NAME_LEN);
    let labels = json!({LABEL_MANAGED_BY: names::label_value(controller)});
    let params = PatchParams::apply(field_manager).force();
    let deadline = Instant::now() + timeout;

    let cr_api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &cluster_request_resource());
    let cr = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterRequest",
        "metadata": {"name": name, "namespace": pod_namespace, "labels": labels},
        "spec": {"purpose": "onboarding"},
    });
    cr_api
        .patch(&name, &params, &Patch::Apply(&cr))
        .await
        .map_err(|e| Error::kube(format!("applying ClusterRequest {pod_namespace}/{name}"), e))?;
    wait_for_grant(&cr_api, &name, "ClusterRequest", deadline).await?;

    let ar_api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &access_request_resource());
    let ar = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "AccessRequest",
        "metadata": {"name": name, "namespace": pod_namespace, "labels": labels},
        "spec": {
            "requestRef": {"name": name, "namespace": pod_namespace},
            "token": {"permissions": [{"rules": rules_json(rules)}]},
        },
    });
    ar_api
        .patch(&name, &params, &Patch::Apply(&ar))
        .await
        .map_err(|e| Error::kube(format!("applying AccessRequest {pod_namespace}/{name}"), e))?;
    match wait_for_grant(&ar_api, &name, "AccessRequest", deadline).await? {
        at if at.name.is_empty() => {
            Err(Error::Cluster(format!("AccessRequest {pod_namespace}/{name} is granted without status.secretRef")))
        }
        at => Ok(at),
    }
}

async fn wait_for_grant(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    deadline: Instant,
) -> Result<KubeconfigRef, Error> {
    let mut delay = Duration::from_millis(200);
    loop {
        let live = api.get(name).await.map_err(|e| Error::kube(format!("reading {kind} {name}"), e))?;
        match grant(&serde_json::to_value(live)?) {
            Grant::Granted(at) => return Ok(at),
            Grant::Denied => return Err(Error::Cluster(format!("{kind} {name} was denied"))),
            Grant::Pending if Instant::now() >= deadline => {
                return Err(Error::Cluster(format!("{kind} {name} was not granted in time")));
            }
            Grant::Pending => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(rules: &[PolicyRule]) -> InstanceAccess<'_> {
        InstanceAccess {
            target: Target::ControlPlane,
            controller: "kro.services.open-control-plane.io",
            instance_name: "test-mcp",
            instance_namespace: "default",
            tenant_namespace: "mcp--eaedbc8f-bfe8-889c-bc87-4958803d9f94",
            rules,
        }
    }

    #[test]
    fn control_plane_request_follows_openmcp_naming_and_labels() {
        let rules = [PolicyRule {
            api_groups: vec!["kro.run".into()],
            resources: vec!["resourcegraphdefinitions".into()],
            resource_names: vec![],
            verbs: vec!["list".into()],
        }];
        let m = request(&rules).manifest();
        assert_eq!(m["metadata"]["name"], "kro.services.open-control-plane.io--test-mcp--mcp");
        assert_eq!(m["metadata"]["namespace"], "mcp--eaedbc8f-bfe8-889c-bc87-4958803d9f94");
        assert_eq!(m["metadata"]["labels"]["openmcp.cloud/managed-by"], "kro.services.open-control-plane.io");
        assert_eq!(m["metadata"]["labels"]["openmcp.cloud/managed-purpose"], "default.test-mcp.mcp");
        assert_eq!(m["metadata"]["labels"]["openmcp.cloud/onboarding-name"], "test-mcp");
        assert_eq!(m["metadata"]["labels"]["openmcp.cloud/onboarding-namespace"], "default");
        assert_eq!(m["metadata"]["finalizers"][0], FINALIZER);
        assert_eq!(m["spec"]["requestRef"]["name"], "test-mcp");
        assert_eq!(m["spec"]["token"]["permissions"][0]["rules"][0]["resources"][0], "resourcegraphdefinitions");
        assert!(m["spec"]["token"].get("roleRefs").is_none(), "no cluster-admin role");
    }

    #[test]
    fn workload_requests_have_their_own_cluster_request() {
        let workload = InstanceAccess { target: Target::Workload, ..request(&[]) };
        assert_eq!(workload.name(), "kro.services.open-control-plane.io--test-mcp--wl");
        let ar = workload.manifest();
        assert_eq!(ar["spec"]["requestRef"]["name"], "kro.services.open-control-plane.io--test-mcp--wl");
        assert_eq!(ar["metadata"]["labels"]["openmcp.cloud/managed-purpose"], "default.test-mcp.wl");
        let cr = workload.cluster_request_manifest();
        assert_eq!(cr["spec"]["purpose"], "workload");
        assert_eq!(cr["metadata"]["name"], ar["metadata"]["name"]);
    }

    #[test]
    fn grant_needs_phase_and_current_generation() {
        let ar = |phase: &str, generation: i64, observed: i64| {
            json!({"metadata": {"namespace": "ns", "generation": generation},
                   "status": {"phase": phase, "observedGeneration": observed, "secretRef": {"name": "kc"}}})
        };
        assert_eq!(
            grant(&ar("Granted", 2, 2)),
            Grant::Granted(KubeconfigRef { namespace: "ns".into(), name: "kc".into(), key: "kubeconfig".into() })
        );
        assert_eq!(grant(&ar("Granted", 3, 2)), Grant::Pending);
        assert_eq!(grant(&ar("Pending", 1, 1)), Grant::Pending);
        assert_eq!(grant(&ar("Denied", 1, 1)), Grant::Denied);
        assert_eq!(grant(&json!({})), Grant::Pending);
    }
}
