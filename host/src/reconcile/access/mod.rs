//! Cluster access through openmcp: ClusterRequests and AccessRequests on the
//! platform cluster, with the exact names, labels and finalizer the openmcp
//! cluster-access library uses, so openmcp-operator and cluster providers
//! treat them like any Go provider's.
//!
//! - Onboarding access (start-up): ClusterRequest + AccessRequest
//!   `<controller>--onboarding-init|run` in the pod namespace; and, asked
//!   for by `run` without waiting, the preview's read-only AccessRequest
//!   `<controller>--preview` on `run`'s ClusterRequest.
//! - ControlPlane access (per instance): AccessRequest
//!   `<controller>--<name>--mcp` in the tenant namespace, referring to the
//!   ControlPlane's ClusterRequest `<name>`, with the plugin's token rules.
//! - Workload access (per instance, when the plugin asks): ClusterRequest and
//!   AccessRequest `<controller>--<name>--wl` (purpose `workload`) in the
//!   tenant namespace.
//!
//! The controller name is the service's API group, as in the Go providers.

mod onboarding;
mod requests;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Deserialize;
use serde_json::{Value, json};
use service_provider_sdk::contract::{Cluster, KubeconfigRef, PolicyRule};
use service_provider_sdk::names;

use crate::syntax;

pub use onboarding::{
    PREVIEW, granted_preview_access, preview_request_name, request_onboarding_access, request_preview_access,
};
pub use requests::{
    Ensured, delete_access_request, delete_cluster_request, ensure_access_request, ensure_cluster_request,
    get_access_request,
};

pub const GROUP: &str = "clusters.openmcp.cloud";
/// The finalizer the cluster-access library puts on its AccessRequests.
pub const FINALIZER: &str = "clusters.openmcp.cloud/clusteraccess";
pub const LABEL_MANAGED_BY: &str = "openmcp.cloud/managed-by";
pub const LABEL_MANAGED_PURPOSE: &str = "openmcp.cloud/managed-purpose";
pub const LABEL_ONBOARDING_NAME: &str = "openmcp.cloud/onboarding-name";
pub const LABEL_ONBOARDING_NAMESPACE: &str = "openmcp.cloud/onboarding-namespace";
/// Data key of the kubeconfig in an AccessRequest's Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

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
    /// The tenant cluster this access is for.
    pub fn cluster(self) -> Cluster {
        match self {
            Target::ControlPlane => Cluster::ControlPlane,
            Target::Workload => Cluster::Workload,
        }
    }

    /// Name suffix (openmcp's library: `mcp`, `wl`).
    pub fn suffix(self) -> &'static str {
        match self {
            Target::ControlPlane => "mcp",
            Target::Workload => "wl",
        }
    }

    /// The part of the purpose label (openmcp's library: the registration's
    /// id, `mcp` or `workload`).
    pub fn id(self) -> &'static str {
        match self {
            Target::ControlPlane => "mcp",
            Target::Workload => "workload",
        }
    }

    /// The name of an instance's AccessRequest (and workload ClusterRequest)
    /// for this target: `<controller>--<instance>--<suffix>`, shortened like
    /// openmcp does. The one place these names are made.
    pub fn request_name(self, controller: &str, instance_name: &str) -> String {
        names::access_request_name(controller, instance_name, self.suffix())
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
        self.target.request_name(self.controller, self.instance_name)
    }

    /// The labels that mark the requests as ours (openmcp's scheme).
    pub fn labels(&self) -> Value {
        self.labels_with(self.target.id())
    }

    /// The labels a host before 0.2 gave a workload request: the name
    /// suffix `wl` where openmcp's library writes `workload`. Still
    /// recognised as the instance's, and relabelled.
    pub fn legacy_labels(&self) -> Option<Value> {
        (self.target.suffix() != self.target.id()).then(|| self.labels_with(self.target.suffix()))
    }

    fn labels_with(&self, purpose_part: &str) -> Value {
        let purpose = format!("{}.{}.{}", self.instance_namespace, self.instance_name, purpose_part);
        json!({
            LABEL_MANAGED_BY: names::label_value(self.controller),
            LABEL_MANAGED_PURPOSE: names::label_value(&purpose),
            LABEL_ONBOARDING_NAME: names::label_value(self.instance_name),
            LABEL_ONBOARDING_NAMESPACE: names::label_value(self.instance_namespace),
        })
    }

    /// The instance annotation that marks the AccessRequest as this host's
    /// (openmcp's labels alone do not: a Go provider sets the same).
    pub fn annotation(&self) -> String {
        format!("{}/{}", self.instance_namespace, self.instance_name)
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
            "metadata": {
                "name": self.name(),
                "namespace": self.tenant_namespace,
                "labels": self.labels(),
                "finalizers": [FINALIZER],
            },
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
                "annotations": {crate::owner::ANNOTATION_INSTANCE: self.annotation()},
                "finalizers": [FINALIZER],
            },
            "spec": {
                "requestRef": self.request_ref(),
                "token": self.token(),
            }
        })
    }
}

/// Where an AccessRequest (or ClusterRequest) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Granted for the current generation; the kubeconfig is here
    /// (ClusterRequests have no Secret: the reference has an empty name).
    Granted(KubeconfigRef),
    /// Denied by openmcp.
    Denied,
    /// Not (yet) granted for the current spec.
    Pending,
}

/// The part of an AccessRequest's or ClusterRequest's status the host reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestStatus {
    #[serde(default)]
    phase: String,
    observed_generation: Option<i64>,
    secret_ref: Option<SecretRef>,
}

#[derive(Debug, Deserialize)]
struct SecretRef {
    name: String,
}

/// Reads the grant state off an AccessRequest (or ClusterRequest).
pub fn answer(request: &DynamicObject) -> Answer {
    let status: RequestStatus =
        request.data.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default();
    match status.phase.as_str() {
        "Denied" => Answer::Denied,
        // A Secret name that is not one is not a grant: the name becomes a
        // request path (cluster data is data, like a plugin's).
        "Granted" if status.secret_ref.as_ref().is_some_and(|s| !syntax::dns_subdomain(&s.name)) => Answer::Pending,
        "Granted" if status.observed_generation == request.metadata.generation => {
            let (name, key) = match status.secret_ref {
                Some(secret) => (secret.name, KUBECONFIG_KEY.to_string()),
                None => (String::new(), String::new()),
            };
            Answer::Granted(KubeconfigRef {
                namespace: request.metadata.namespace.clone().unwrap_or_default(),
                name,
                key,
            })
        }
        _ => Answer::Pending,
    }
}

/// Where an AccessRequest stands for the instance using it: its answer,
/// except that while a changed spec is pending the grant of the previous
/// one still serves ([`previous_kubeconfig`]).
pub fn serving(request: &DynamicObject) -> Answer {
    match answer(request) {
        Answer::Pending => previous_kubeconfig(request).map_or(Answer::Pending, Answer::Granted),
        other => other,
    }
}

/// The grant an AccessRequest had for its previous spec, while the cluster
/// provider has not yet granted the current one: the kubeconfig issued
/// then still serves, so a change of the token rules (a take-over, a
/// plugin update) does not show an instance as waiting for access it has.
pub fn previous_kubeconfig(request: &DynamicObject) -> Option<KubeconfigRef> {
    let status: RequestStatus = serde_json::from_value(request.data.get("status")?.clone()).ok()?;
    let older = status.observed_generation.zip(request.metadata.generation).is_some_and(|(seen, now)| seen < now);
    let secret = status.secret_ref.filter(|s| syntax::dns_subdomain(&s.name))?;
    (status.phase == "Granted" && older).then(|| KubeconfigRef {
        namespace: request.metadata.namespace.clone().unwrap_or_default(),
        name: secret.name,
        key: KUBECONFIG_KEY.to_string(),
    })
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
        assert_eq!(ar["metadata"]["labels"]["openmcp.cloud/managed-purpose"], "default.test-mcp.workload");
        let cr = workload.cluster_request_manifest();
        assert_eq!(cr["spec"]["purpose"], "workload");
        assert_eq!(cr["metadata"]["name"], ar["metadata"]["name"]);
    }

    #[test]
    fn grant_needs_phase_and_current_generation() {
        let ar = |phase: &str, generation: i64, observed: i64| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "AccessRequest",
                "metadata": {"name": "ar", "namespace": "ns", "generation": generation},
                "status": {"phase": phase, "observedGeneration": observed, "secretRef": {"name": "kc"}}
            }))
            .unwrap()
        };
        assert_eq!(
            answer(&ar("Granted", 2, 2)),
            Answer::Granted(KubeconfigRef { namespace: "ns".into(), name: "kc".into(), key: "kubeconfig".into() })
        );
        assert_eq!(answer(&ar("Granted", 3, 2)), Answer::Pending);
        assert_eq!(previous_kubeconfig(&ar("Granted", 3, 2)).map(|at| at.name), Some("kc".to_string()));
        assert_eq!(previous_kubeconfig(&ar("Granted", 2, 2)), None, "current: a grant, not a previous one");
        assert_eq!(previous_kubeconfig(&ar("Denied", 3, 2)), None);
        assert_eq!(previous_kubeconfig(&ar("Pending", 3, 2)), None);
        assert_eq!(answer(&ar("Pending", 1, 1)), Answer::Pending);
        assert_eq!(answer(&ar("Denied", 1, 1)), Answer::Denied);
        let mut bent = ar("Granted", 2, 2);
        bent.data["status"]["secretRef"]["name"] = json!("kc/../../secrets#");
        assert_eq!(answer(&bent), Answer::Pending, "a name that is not one is no grant");
        bent.metadata.generation = Some(3);
        assert_eq!(previous_kubeconfig(&bent), None);
        let bare: DynamicObject =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}})).unwrap();
        assert_eq!(answer(&bare), Answer::Pending);
    }
}
