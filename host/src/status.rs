//! The status the host writes on service objects.
//!
//! Plugins say *what* the status is (phase, conditions, resources); the host
//! owns the bookkeeping that must be the same for every provider:
//! `observedGeneration`, `lastTransitionTime` that only changes when a
//! condition's status flips (so an unchanged reconcile produces an identical
//! status and therefore no write), and keeping conditions the plugin did not
//! mention. The helpers mirror the openmcp runtime's status helpers.

use serde_json::{Map, Value, json};
use service_provider_sdk::contract::{Condition, ConditionStatus, Descriptor, ServiceStatus};

pub const PHASE_PROGRESSING: &str = "Progressing";
pub const PHASE_TERMINATING: &str = "Terminating";
pub const CONDITION_READY: &str = "Ready";
pub const REASON_RECONCILE_ERROR: &str = "ReconcileError";
pub const REASON_RECONCILING: &str = "Reconciling";
pub const REASON_TERMINATING: &str = "Terminating";

fn ready_false(phase: &str, reason: &str, message: impl Into<String>) -> ServiceStatus {
    ServiceStatus {
        phase: phase.to_string(),
        conditions: vec![Condition {
            type_: CONDITION_READY.to_string(),
            status: ConditionStatus::False,
            reason: reason.to_string(),
            message: message.into(),
        }],
        resources: None,
    }
}

/// Progressing with `Ready=False`, reason `ReconcileError`.
pub fn reconcile_error(message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_PROGRESSING, REASON_RECONCILE_ERROR, message)
}

/// Progressing with `Ready=False`, reason `Reconciling` (e.g. waiting for
/// cluster access).
pub fn reconciling(message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_PROGRESSING, REASON_RECONCILING, message)
}

/// Terminating with `Ready=False`, reason `Terminating`.
pub fn terminating(message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_TERMINATING, REASON_TERMINATING, message)
}

/// Terminating with `Ready=False`, reason `ReconcileError`.
pub fn terminating_error(message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_TERMINATING, REASON_RECONCILE_ERROR, message)
}

/// The message the host shows when the ProviderConfig does not exist.
pub fn missing_provider_config(descriptor: &Descriptor, name: &str) -> String {
    format!(
        "No ProviderConfig found: create the cluster-scoped {} {name:?} ({}) on the platform cluster",
        descriptor.provider_config.kind,
        descriptor.provider_config.api_version()
    )
}

/// The current time as a Kubernetes timestamp (whole seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn condition_json(c: &Condition, generation: i64, last_transition: &str) -> Value {
    json!({
        "type": c.type_,
        "status": c.status.as_str(),
        "observedGeneration": generation,
        "lastTransitionTime": last_transition,
        "reason": c.reason,
        "message": c.message,
    })
}

/// The full `status` to write, given the current one (if any).
///
/// Condition order: the current conditions in their order (updated in
/// place), then new ones in the plugin's order.
pub fn next(current: Option<&Value>, generation: i64, desired: &ServiceStatus, now: &str) -> Value {
    let mut conditions: Vec<Value> =
        current.and_then(|s| s.get("conditions")).and_then(Value::as_array).cloned().unwrap_or_default();
    for wanted in &desired.conditions {
        let existing =
            conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(wanted.type_.as_str()));
        match existing {
            Some(slot) => {
                let unchanged = slot.get("status").and_then(Value::as_str) == Some(wanted.status.as_str());
                let since = slot
                    .get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .filter(|_| unchanged)
                    .unwrap_or(now)
                    .to_string();
                *slot = condition_json(wanted, generation, &since);
            }
            None => conditions.push(condition_json(wanted, generation, now)),
        }
    }

    let mut status = Map::new();
    status.insert("observedGeneration".into(), json!(generation));
    status.insert("phase".into(), json!(desired.phase));
    if !conditions.is_empty() {
        status.insert("conditions".into(), Value::Array(conditions));
    }
    let resources = match &desired.resources {
        Some(list) => Some(serde_json::to_value(list).expect("resource status serializes")),
        None => current.and_then(|s| s.get("resources")).cloned(),
    };
    if let Some(resources) = resources {
        status.insert("resources".into(), resources);
    }
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::ResourceStatus;

    use super::*;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:05:00Z";

    fn ready() -> ServiceStatus {
        ServiceStatus {
            phase: "Ready".into(),
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: ConditionStatus::True,
                reason: "ReconcileSuccess".into(),
                message: "Domain Service is ready".into(),
            }],
            resources: Some(vec![ResourceStatus {
                api_group: Some("g".into()),
                kind: "K".into(),
                name: "n".into(),
                namespace: None,
                phase: "Ready".into(),
                message: None,
                location: None,
            }]),
        }
    }

    #[test]
    fn first_status_sets_generation_and_timestamps() {
        let s = next(None, 3, &ready(), T0);
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["phase"], "Ready");
        assert_eq!(s["conditions"][0]["lastTransitionTime"], T0);
        assert_eq!(s["conditions"][0]["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["resources"][0]["kind"], "K");
    }

    #[test]
    fn unchanged_status_is_identical_so_nothing_is_written() {
        let first = next(None, 1, &ready(), T0);
        let second = next(Some(&first), 1, &ready(), T1);
        assert_eq!(first, second);
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let first = next(None, 1, &ready(), T0);
        let mut msg = ready();
        msg.conditions[0].message = "still ready".into();
        let same_status = next(Some(&first), 2, &msg, T1);
        assert_eq!(same_status["conditions"][0]["lastTransitionTime"], T0);
        assert_eq!(same_status["conditions"][0]["observedGeneration"], 2);
        let flipped = next(Some(&first), 2, &reconcile_error("boom"), T1);
        assert_eq!(flipped["conditions"][0]["lastTransitionTime"], T1);
        assert_eq!(flipped["conditions"][0]["reason"], "ReconcileError");
        assert_eq!(flipped["phase"], "Progressing");
    }

    #[test]
    fn resources_are_kept_when_the_plugin_leaves_them_alone() {
        let first = next(None, 1, &ready(), T0);
        let err = next(Some(&first), 1, &reconcile_error("bad version"), T1);
        assert_eq!(err["resources"], first["resources"]);
    }

    #[test]
    fn other_conditions_are_kept() {
        let current = json!({"conditions": [{"type": "Custom", "status": "True", "lastTransitionTime": T0, "reason": "X", "message": ""}]});
        let s = next(Some(&current), 1, &terminating("Cleanup in progress"), T1);
        let types: Vec<&str> =
            s["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["Custom", "Ready"]);
        assert_eq!(s["phase"], "Terminating");
    }

    #[test]
    fn now_is_a_kubernetes_timestamp() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}
