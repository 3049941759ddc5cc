//! The __NAME__ plugin: for every __KIND__ a tenant creates, a ConfigMap with
//! its greeting in the tenant's namespace on the platform cluster.
//!
//! Everything here is plain Rust against `service_provider_sdk::contract`:
//! `cargo test` runs it natively, and one line at the end makes it a
//! component for the host.

use serde::Deserialize;
use service_provider_sdk::contract::{
    ApiKind, Capability, CleanupPlan, Cluster, Condition, ConditionStatus, Crd, Descriptor, DesiredObject, Input,
    InvalidInput, NamespaceScope, ObjectRef, Plan, PlanError, Provider, ServiceStatus, Teardown,
};

pub const GROUP: &str = "__GROUP__";
/// The one object each instance gets: a ConfigMap of this name.
pub const CONFIG_MAP: &str = "__NAME__";

const SERVICE_CRD: &str = include_str!("../crds/__PLURAL__.__GROUP__.yaml");
const PROVIDER_CONFIG_CRD: &str = include_str!("../crds/providerconfigs.__GROUP__.yaml");

pub struct Plugin;

/// The part of a __KIND__ the plugin reads.
#[derive(Deserialize)]
struct Service {
    spec: Spec,
}

#[derive(Deserialize)]
struct Spec {
    greeting: String,
}

impl Provider for Plugin {
    fn describe() -> Descriptor {
        Descriptor {
            crds: vec![
                Crd { cluster: Cluster::Onboarding, manifest: SERVICE_CRD.into() },
                Crd { cluster: Cluster::Platform, manifest: PROVIDER_CONFIG_CRD.into() },
            ],
            capabilities: vec![Capability {
                cluster: Cluster::Platform,
                api: config_maps(),
                scope: NamespaceScope::Tenant,
                names: vec![CONFIG_MAP.into()],
            }],
            ..Descriptor::new(
                "__NAME__",
                ApiKind::new(GROUP, "v1alpha1", "__KIND__", "__PLURAL__", true),
                ApiKind::new(GROUP, "v1alpha1", "ProviderConfig", "providerconfigs", false),
                &format!("{GROUP}/finalizer"),
            )
        }
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let service: Service = serde_json::from_str(&input.object)
            .map_err(|e| invalid(format!("the __KIND__ is not valid: {e}")))?;
        let greeting = service.spec.greeting.trim();
        if greeting.is_empty() {
            return Err(invalid("spec.greeting is empty".into()));
        }
        let config_map = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": input.context.tenant_namespace},
            "data": {"greeting": greeting},
        });
        Ok(Plan {
            objects: vec![DesiredObject { cluster: Cluster::Platform, manifest: config_map.to_string() }],
            copies: vec![],
            status: ServiceStatus {
                phase: "Ready".into(),
                conditions: vec![Condition {
                    type_: "Ready".into(),
                    status: ConditionStatus::True,
                    reason: "Greeted".into(),
                    message: greeting.into(),
                }],
                resources: None,
            },
            requeue_after_seconds: 300,
        })
    }

    fn cleanup(input: &Input) -> Result<CleanupPlan, PlanError> {
        Ok(CleanupPlan::Teardown(Teardown {
            objects: vec![ObjectRef {
                cluster: Cluster::Platform,
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespace: Some(input.context.tenant_namespace.clone()),
                name: CONFIG_MAP.into(),
            }],
            copies: vec![],
            resources: None,
        }))
    }
}

/// What the tenant must fix: shown on the __KIND__ without backoff.
fn invalid(message: String) -> PlanError {
    PlanError::InvalidInput(InvalidInput { message, requeue_after_seconds: 0 })
}

fn config_maps() -> ApiKind {
    ApiKind::new("", "v1", "ConfigMap", "configmaps", true)
}

#[cfg(feature = "component")]
service_provider_sdk::export_provider!(crate::Plugin);

#[cfg(test)]
mod tests {
    use super::*;
    use service_provider_sdk::testing::granted_context;

    fn input(spec: serde_json::Value) -> Input {
        let object = serde_json::json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "__KIND__",
            "metadata": {"name": "mcp-01", "namespace": "default"},
            "spec": spec,
        });
        Input {
            object: object.to_string(),
            provider_config: None,
            context: granted_context(GROUP, "__NAME__", "openmcp-system", "mcp-01", "default"),
            observed: vec![],
        }
    }

    #[test]
    fn a_greeting_becomes_a_config_map_in_the_tenant_namespace() {
        let input = input(serde_json::json!({"greeting": "hello"}));
        let plan = Plugin::plan(&input).unwrap();
        let manifest: serde_json::Value = serde_json::from_str(&plan.objects[0].manifest).unwrap();
        assert_eq!(manifest["metadata"]["namespace"], input.context.tenant_namespace.as_str());
        assert_eq!(manifest["data"]["greeting"], "hello");
        assert_eq!(plan.status.phase, "Ready");
    }

    #[test]
    fn an_empty_greeting_is_the_tenants_to_fix() {
        let error = Plugin::plan(&input(serde_json::json!({"greeting": " "}))).unwrap_err();
        assert!(matches!(error, PlanError::InvalidInput(_)), "{error:?}");
    }
}
