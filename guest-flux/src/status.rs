//! Status mapping: from the Flux objects' conditions to `status.resources`
//! and the instance's phase and `Ready` condition. How a Flux object's
//! `Ready` condition reads is shared with the Kro plugin
//! ([`guest_kro::status::flux_phase`]); the message is never empty, unlike
//! the Go provider's.

use serde_json::Value;
use service_provider_sdk::contract::{Condition, ConditionStatus, ResourceStatus, ServiceStatus};

use crate::desired::NAME;
pub use guest_kro::status::{PHASE_PROGRESSING, PHASE_READY, PHASE_TERMINATING, flux_phase};

pub const LOCATION_PLATFORM: &str = "PlatformCluster";
const READY_MESSAGE: &str = "Domain Service is ready";
const WAITING_MESSAGE: &str = "Waiting for managed resources to become ready";

fn entry(api_group: &str, kind: &str, namespace: &str, phase: &str, message: Option<String>) -> ResourceStatus {
    ResourceStatus {
        api_group: Some(api_group.to_string()),
        kind: kind.to_string(),
        name: NAME.to_string(),
        namespace: Some(namespace.to_string()),
        phase: phase.to_string(),
        message,
        location: Some(LOCATION_PLATFORM.to_string()),
    }
}

/// `status.resources` for the OCIRepository and the HelmRelease.
pub fn resources(tenant_namespace: &str, repository: Option<&Value>, release: Option<&Value>) -> Vec<ResourceStatus> {
    let (repo_phase, repo_message) = flux_phase(repository);
    let (release_phase, release_message) = flux_phase(release);
    vec![
        entry("source.toolkit.fluxcd.io", "OCIRepository", tenant_namespace, repo_phase, repo_message),
        entry("helm.toolkit.fluxcd.io", "HelmRelease", tenant_namespace, release_phase, release_message),
    ]
}

/// Both Flux objects Terminating, as shown during deletion.
pub fn terminating_resources(tenant_namespace: &str) -> Vec<ResourceStatus> {
    resources(tenant_namespace, None, None)
        .into_iter()
        .map(|r| ResourceStatus { phase: PHASE_TERMINATING.to_string(), message: None, ..r })
        .collect()
}

/// Ready when every managed object is Ready. Otherwise Progressing, with the
/// first message a Flux object gave (so a failed pull or install shows up in
/// the Ready condition itself), or a plain "waiting" message.
pub fn overall(resources: Vec<ResourceStatus>) -> ServiceStatus {
    let ready = resources.iter().all(|r| r.phase == PHASE_READY);
    let (phase, status, reason, message) = if ready {
        (PHASE_READY, ConditionStatus::True, "ReconcileSuccess", READY_MESSAGE.to_string())
    } else {
        let first = resources
            .iter()
            .find_map(|r| r.message.as_ref().map(|m| format!("{} {}: {m}", r.kind, r.name)))
            .unwrap_or_else(|| WAITING_MESSAGE.to_string());
        (PHASE_PROGRESSING, ConditionStatus::False, "Reconciling", first)
    };
    ServiceStatus {
        phase: phase.to_string(),
        conditions: vec![Condition { type_: "Ready".to_string(), status, reason: reason.to_string(), message }],
        resources: Some(resources),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(ready: &str, message: &str) -> Value {
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": ready, "reason": "Test", "message": message, "observedGeneration": 1}
        ]}})
    }

    #[test]
    fn ready_when_both_flux_objects_are() {
        let s = overall(resources("mcp--t", Some(&object("True", "ok")), Some(&object("True", "ok"))));
        assert_eq!(s.phase, "Ready");
        assert_eq!(s.conditions[0].message, READY_MESSAGE);
        assert_eq!(s.resources.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn the_message_is_never_empty_and_names_the_failing_object() {
        let failing =
            overall(resources("mcp--t", Some(&object("True", "ok")), Some(&object("False", "install failed"))));
        assert_eq!(failing.phase, "Progressing");
        assert_eq!(failing.conditions[0].message, "HelmRelease flux: install failed");
        let nothing_yet = overall(resources("mcp--t", None, None));
        assert_eq!(nothing_yet.conditions[0].message, WAITING_MESSAGE);
        assert!(terminating_resources("mcp--t").iter().all(|r| r.phase == "Terminating"));
    }
}
