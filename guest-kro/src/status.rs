//! Status mapping: from the Flux objects' conditions to `status.resources`
//! and the instance's phase and `Ready` condition.

use serde_json::Value;
use service_provider_sdk::contract::{Condition, ConditionStatus, ResourceStatus, ServiceStatus};

use crate::desired::{HELM_RELEASE, OCI_REPOSITORY};

pub const PHASE_READY: &str = "Ready";
pub const PHASE_PROGRESSING: &str = "Progressing";
pub const PHASE_TERMINATING: &str = "Terminating";

pub const CONDITION_READY: &str = "Ready";
pub const REASON_RECONCILING: &str = "Reconciling";
pub const REASON_SUCCESS: &str = "ReconcileSuccess";

pub const LOCATION_PLATFORM: &str = "PlatformCluster";

/// The phase and message of one managed Flux object, read from its `Ready`
/// condition:
/// - `Ready=True` → Ready, no message;
/// - `Ready=False|Unknown` → Progressing with the condition's message;
/// - no `Ready` condition (or no object yet) → Progressing, no message;
/// - a status older than the spec (`observedGeneration < generation`) →
///   Progressing: Flux has not looked at the latest spec yet, so an old
///   `Ready=True` says nothing about it.
pub fn flux_phase(object: Option<&Value>) -> (&'static str, Option<String>) {
    let Some(object) = object else {
        return (PHASE_PROGRESSING, None);
    };
    let generation = object.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = object.pointer("/status/observedGeneration").and_then(Value::as_i64);
    if let (Some(generation), Some(observed)) = (generation, observed)
        && observed < generation
    {
        return (PHASE_PROGRESSING, Some(format!("waiting for Flux to reconcile generation {generation}")));
    }
    let ready = object.pointer("/status/conditions").and_then(Value::as_array).and_then(|conditions| {
        conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_READY))
    });
    match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => (PHASE_READY, None),
        Some(c) => {
            (PHASE_PROGRESSING, c.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_string))
        }
        None => (PHASE_PROGRESSING, None),
    }
}

fn entry(
    api_group: &str,
    kind: &str,
    name: &str,
    namespace: &str,
    phase: &str,
    message: Option<String>,
) -> ResourceStatus {
    ResourceStatus {
        api_group: Some(api_group.to_string()),
        kind: kind.to_string(),
        name: name.to_string(),
        namespace: Some(namespace.to_string()),
        phase: phase.to_string(),
        message,
        location: Some(LOCATION_PLATFORM.to_string()),
    }
}

/// `status.resources` for the two Flux objects, from what the host observed.
pub fn resources(
    tenant_namespace: &str,
    oci_repository: Option<&Value>,
    helm_release: Option<&Value>,
) -> Vec<ResourceStatus> {
    let (repo_phase, repo_message) = flux_phase(oci_repository);
    let (release_phase, release_message) = flux_phase(helm_release);
    vec![
        entry("source.toolkit.fluxcd.io", "OCIRepository", OCI_REPOSITORY, tenant_namespace, repo_phase, repo_message),
        entry("helm.toolkit.fluxcd.io", "HelmRelease", HELM_RELEASE, tenant_namespace, release_phase, release_message),
    ]
}

/// Both Flux objects in phase Terminating, as shown during deletion.
pub fn terminating_resources(tenant_namespace: &str) -> Vec<ResourceStatus> {
    resources(tenant_namespace, None, None)
        .into_iter()
        .map(|r| ResourceStatus { phase: PHASE_TERMINATING.to_string(), message: None, ..r })
        .collect()
}

/// Ready when every managed object is Ready, Progressing otherwise.
pub fn overall(resources: Vec<ResourceStatus>) -> ServiceStatus {
    let ready = resources.iter().all(|r| r.phase == PHASE_READY);
    let (phase, status, reason, message) = if ready {
        (PHASE_READY, ConditionStatus::True, REASON_SUCCESS, "Domain Service is ready")
    } else {
        (PHASE_PROGRESSING, ConditionStatus::False, REASON_RECONCILING, "Waiting for managed resources to become ready")
    };
    ServiceStatus {
        phase: phase.to_string(),
        conditions: vec![Condition {
            type_: CONDITION_READY.to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
        }],
        resources: Some(resources),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_conditions(conditions: Value) -> Value {
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "conditions": conditions}})
    }

    #[test]
    fn no_object_or_no_conditions_is_progressing_without_message() {
        assert_eq!(flux_phase(None), (PHASE_PROGRESSING, None));
        assert_eq!(flux_phase(Some(&json!({"metadata": {}}))), (PHASE_PROGRESSING, None));
        assert_eq!(flux_phase(Some(&with_conditions(json!([])))), (PHASE_PROGRESSING, None));
    }

    #[test]
    fn ready_true_is_ready_and_drops_the_message() {
        let obj = with_conditions(json!([{"type": "Ready", "status": "True", "message": "stored artifact"}]));
        assert_eq!(flux_phase(Some(&obj)), (PHASE_READY, None));
    }

    #[test]
    fn ready_false_or_unknown_is_progressing_with_the_message() {
        for status in ["False", "Unknown"] {
            let obj = with_conditions(json!([{"type": "Ready", "status": status, "message": "pulling chart"}]));
            assert_eq!(flux_phase(Some(&obj)), (PHASE_PROGRESSING, Some("pulling chart".into())), "{status}");
        }
    }

    #[test]
    fn only_a_stalled_condition_is_progressing_without_message() {
        let obj = with_conditions(json!([{"type": "Stalled", "status": "True", "message": "broken"}]));
        assert_eq!(flux_phase(Some(&obj)), (PHASE_PROGRESSING, None));
    }

    #[test]
    fn a_status_older_than_the_spec_is_progressing() {
        let obj = json!({
            "metadata": {"generation": 3},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let (phase, message) = flux_phase(Some(&obj));
        assert_eq!(phase, PHASE_PROGRESSING);
        assert!(message.unwrap().contains("generation 3"));
    }

    #[test]
    fn overall_is_ready_only_when_every_resource_is_ready() {
        let ready = with_conditions(json!([{"type": "Ready", "status": "True"}]));
        let status = overall(resources("ns", Some(&ready), Some(&ready)));
        assert_eq!(status.phase, PHASE_READY);
        assert_eq!(status.conditions[0].status, ConditionStatus::True);
        assert_eq!(status.conditions[0].reason, "ReconcileSuccess");
        assert_eq!(status.conditions[0].message, "Domain Service is ready");

        let status = overall(resources("ns", Some(&ready), None));
        assert_eq!(status.phase, PHASE_PROGRESSING);
        assert_eq!(status.conditions[0].reason, "Reconciling");
        assert_eq!(status.conditions[0].message, "Waiting for managed resources to become ready");
        let resources = status.resources.unwrap();
        assert_eq!(resources[0].phase, PHASE_READY);
        assert_eq!(resources[1].phase, PHASE_PROGRESSING);
    }

    #[test]
    fn resources_carry_group_namespace_and_location() {
        let entries = resources("mcp--x", None, None);
        assert_eq!(entries[0].api_group.as_deref(), Some("source.toolkit.fluxcd.io"));
        assert_eq!(entries[0].kind, "OCIRepository");
        assert_eq!(entries[0].name, "kro-oci-repository");
        assert_eq!(entries[1].api_group.as_deref(), Some("helm.toolkit.fluxcd.io"));
        assert_eq!(entries[1].kind, "HelmRelease");
        assert_eq!(entries[1].name, "kro-helm-release");
        for e in &entries {
            assert_eq!(e.namespace.as_deref(), Some("mcp--x"));
            assert_eq!(e.location.as_deref(), Some("PlatformCluster"));
        }
        assert!(terminating_resources("mcp--x").iter().all(|r| r.phase == "Terminating"));
    }
}
