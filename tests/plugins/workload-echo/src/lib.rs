//! A minimal plugin for the host's workload-cluster and pruning tests. It
//! serves the Kro API (so the project's CRDs can be reused) but asks for a
//! workload cluster and echoes `spec.version` into the ConfigMap
//! `default/echo` there. A version `v7+a+b` echoes `v7` and also plans the
//! ConfigMaps `echo-a` and `echo-b`, so a test can make the plan shrink. It
//! also brings a CRD for the workload cluster, which the host installs there
//! (there is one workload cluster per instance, so `init` cannot).

use serde_json::{Value, json};
use service_provider_sdk::contract::{
    Access, ApiKind, Capability, CleanupPlan, Cluster, Condition, ConditionStatus, Crd, Descriptor, DesiredObject,
    Input, InvalidInput, NamespaceScope, ObjectRef, Plan, PlanError, PolicyRule, Provider, ServiceStatus, Teardown,
};

pub struct Echo;

/// A CRD of the plugin's own group, for the workload cluster.
pub const ECHO_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: echoes.kro.services.open-control-plane.io\n  labels:\n    openmcp.cloud/cluster: workload\nspec:\n  group: kro.services.open-control-plane.io\n  names: {kind: Echo, plural: echoes, singular: echo, listKind: EchoList}\n  scope: Namespaced\n  versions:\n  - name: v1alpha1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

fn configmaps(verbs: &[&str]) -> PolicyRule {
    PolicyRule::new(&[""], &["configmaps"], verbs)
}

impl Provider for Echo {
    fn describe() -> Descriptor {
        let group = "kro.services.open-control-plane.io";
        Descriptor {
            access: Access {
                control_plane_rules: vec![configmaps(&["get"])],
                workload_cluster: true,
                workload_rules: vec![configmaps(&["get", "list", "watch", "create", "update", "patch", "delete"])],
            },
            capabilities: vec![Capability {
                cluster: Cluster::Workload,
                api: ApiKind::new("", "v1", "ConfigMap", "configmaps", true),
                scope: NamespaceScope::Named("default".into()),
                names: vec![],
            }],
            crds: vec![Crd { cluster: Cluster::Workload, manifest: ECHO_CRD.into() }],
            ..Descriptor::new(
                "echo",
                ApiKind::new(group, "v1alpha1", "Kro", "kroes", true),
                ApiKind::new(group, "v1alpha1", "ProviderConfig", "providerconfigs", false),
                "echo.test/finalizer",
            )
        }
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let object: Value = serde_json::from_str(&input.object).map_err(|e| PlanError::Transient(e.to_string()))?;
        let Some(version) = object.pointer("/spec/version").and_then(Value::as_str) else {
            return Err(PlanError::InvalidInput(InvalidInput {
                message: "spec.version is missing".into(),
                requeue_after_seconds: 60,
            }));
        };
        if input.context.workload.is_none() {
            return Err(PlanError::Transient("no workload cluster access".into()));
        }
        let mut parts = version.split('+');
        let echoed = parts.next().unwrap_or_default();
        let config_map = |name: String| {
            let manifest = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"version": echoed},
            });
            DesiredObject { cluster: Cluster::Workload, manifest: manifest.to_string() }
        };
        let objects = std::iter::once("echo".to_string()).chain(parts.map(|p| format!("echo-{p}"))).map(config_map);
        Ok(Plan {
            objects: objects.collect(),
            copies: vec![],
            status: ServiceStatus {
                phase: "Ready".into(),
                conditions: vec![Condition {
                    type_: "Ready".into(),
                    status: ConditionStatus::True,
                    reason: "ReconcileSuccess".into(),
                    message: "echoed".into(),
                }],
                resources: None,
            },
            requeue_after_seconds: 60,
        })
    }

    fn cleanup(_input: &Input) -> Result<CleanupPlan, PlanError> {
        Ok(CleanupPlan::Teardown(Teardown {
            objects: vec![ObjectRef {
                cluster: Cluster::Workload,
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespace: Some("default".into()),
                name: "echo".into(),
            }],
            copies: vec![],
            resources: None,
        }))
    }
}

service_provider_sdk::export_provider!(crate::Echo);
