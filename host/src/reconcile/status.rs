//! The status the host writes on service objects, and the Events that go
//! with it.
//!
//! Plugins say *what* the status is (phase, conditions, resources); the host
//! owns the bookkeeping that must be the same for every provider:
//! `observedGeneration`, `lastTransitionTime` that only changes when a
//! condition's status flips (so an unchanged reconcile produces an identical
//! status and therefore no write), and keeping conditions the plugin did not
//! mention. The helpers mirror the openmcp runtime's status helpers.
//!
//! What it writes is bounded ([`crate::reconcile::budget`]): a status is at most
//! [`MAX_STATUS_BYTES`] (the plugin's messages are cut first), a change of
//! messages only is written at most every [`budget::MESSAGE_INTERVAL`],
//! and an instance's writes to the onboarding cluster have a budget. What
//! was cut or held back is said in the host's own `Limited` condition.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use service_provider_sdk::contract::{Condition, ConditionStatus, Descriptor, ResourceStatus, ServiceStatus};
use tracing::warn;

use crate::error::UserInput;
use crate::keys::InstanceKey;
use crate::metrics::Metrics;
use crate::plugin::plan::report::{CONDITION_LIMITED, MAX_CONDITIONS};
use crate::reconcile::budget::{self, Budgets, Limit};
use crate::{Error, syntax};

pub const PHASE_PROGRESSING: &str = "Progressing";
pub const PHASE_TERMINATING: &str = "Terminating";
pub const CONDITION_READY: &str = "Ready";
pub const REASON_RECONCILE_ERROR: &str = "ReconcileError";
pub const REASON_RECONCILING: &str = "Reconciling";
pub const REASON_TERMINATING: &str = "Terminating";

/// Longest Event note the host writes (the API server refuses > 1 KiB).
const MAX_NOTE: usize = 1000;

/// Longest message the host writes into a condition or a resource entry
/// (metav1.Condition's limit).
pub const MAX_MESSAGE: usize = 32 * 1024;

/// The most bytes of status the host writes into a service object (its
/// JSON): far below etcd's 1.5 MiB per object, and every revision of the
/// object carries it.
pub const MAX_STATUS_BYTES: usize = 64 << 10;

/// What a plugin's messages are cut to, one by one, when a status is too
/// large: resource entries' first, then conditions'.
const CUT_RESOURCE_MESSAGE: usize = 256;
const CUT_CONDITION_MESSAGE: usize = 2 << 10;

/// `status` of a service object as the host reads and writes it. Fields the
/// host does not know are left alone: the status is written as a merge
/// patch of exactly these fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    pub phase: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionEntry>,
    /// The plugin's `status.resources`, kept as it wrote them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Value>,
}

/// One condition as stored in the status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionEntry {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl ObjectStatus {
    /// The status of a service object; `None` if it has none (or one the
    /// host cannot read, which it then replaces).
    pub fn of(object: &DynamicObject) -> Option<ObjectStatus> {
        object.data.get("status").filter(|s| !s.is_null()).and_then(|s| serde_json::from_value(s.clone()).ok())
    }

    pub fn ready(&self) -> Option<&ConditionEntry> {
        self.conditions.iter().find(|c| c.type_ == CONDITION_READY)
    }
}

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

/// Progressing with `Ready=False` for a failed reconcile, with the reason
/// of its error category (e.g. `PluginTimeout`, `CapabilityDenied`).
pub fn failed(reason: &str, message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_PROGRESSING, reason, message)
}

/// Terminating with `Ready=False` for a failed deletion step.
pub fn terminating_failed(reason: &str, message: impl Into<String>) -> ServiceStatus {
    ready_false(PHASE_TERMINATING, reason, message)
}

/// What the host reports when the ProviderConfig does not exist.
pub fn missing_provider_config(descriptor: &Descriptor, name: &str) -> UserInput {
    let (kind, api_version) = (descriptor.provider_config.kind.clone(), descriptor.provider_config.api_version());
    UserInput::NoProviderConfig { kind, api_version, name: name.to_string() }
}

/// The current time as a Kubernetes timestamp (whole seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn entry(c: &Condition, generation: i64, last_transition: &str) -> ConditionEntry {
    ConditionEntry {
        type_: c.type_.clone(),
        status: c.status.as_str().to_string(),
        observed_generation: generation,
        last_transition_time: last_transition.to_string(),
        reason: c.reason.clone(),
        message: message(&c.message),
    }
}

/// Free text for a status (a plugin's, or what it echoes from a cluster):
/// on one line ([`syntax::flat`]: `kubectl describe` prints a message as
/// it is, so a line break in it would forge rows), and at most
/// [`MAX_MESSAGE`] bytes.
fn message(text: &str) -> String {
    truncate(&syntax::flat(text), MAX_MESSAGE - '…'.len_utf8())
}

/// Keeps at most [`MAX_CONDITIONS`]: the ones `wanted` names always, then
/// of the others those that changed last.
fn bound(conditions: &mut Vec<ConditionEntry>, wanted: &[Condition]) {
    while conditions.len() > MAX_CONDITIONS {
        let stale = conditions
            .iter()
            .enumerate()
            .filter(|(_, c)| !wanted.iter().any(|w| w.type_ == c.type_))
            .min_by(|(_, a), (_, b)| a.last_transition_time.cmp(&b.last_transition_time))
            .map(|(i, _)| i);
        match stale {
            Some(i) => conditions.remove(i),
            None => break,
        };
    }
}

/// The full status to write, given the current one (if any).
///
/// Condition order: the current conditions in their order (updated in
/// place), then new ones in the plugin's order.
pub fn next(current: Option<&ObjectStatus>, generation: i64, desired: &ServiceStatus, now: &str) -> ObjectStatus {
    let mut conditions = current.map(|s| s.conditions.clone()).unwrap_or_default();
    for wanted in &desired.conditions {
        match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
            Some(slot) => {
                let since = match slot.status == wanted.status.as_str() && !slot.last_transition_time.is_empty() {
                    true => slot.last_transition_time.clone(),
                    false => now.to_string(),
                };
                *slot = entry(wanted, generation, &since);
            }
            None => conditions.push(entry(wanted, generation, now)),
        }
    }
    bound(&mut conditions, &desired.conditions);
    let resources = match &desired.resources {
        Some(list) => {
            let list: Vec<ResourceStatus> = list
                .iter()
                .map(|r| ResourceStatus { message: r.message.as_deref().map(message), ..r.clone() })
                .collect();
            Some(serde_json::to_value(list).expect("resource status serializes"))
        }
        None => current.and_then(|s| s.resources.clone()),
    };
    ObjectStatus { observed_generation: generation, phase: desired.phase.clone(), conditions, resources }
}

/// Cuts `status` to [`MAX_STATUS_BYTES`] (less `room` for what the host
/// adds): the plugin's resource messages first, then its condition
/// messages, then resource entries from the end. What was cut, if anything.
pub fn fit(status: &mut ObjectStatus, room: usize) -> Option<String> {
    let max = MAX_STATUS_BYTES.saturating_sub(room);
    let size = |s: &ObjectStatus| serde_json::to_vec(s).map_or(usize::MAX, |b| b.len());
    let before = size(status);
    if before <= max {
        return None;
    }
    let cut_resources = |status: &mut ObjectStatus, keep: Option<usize>| {
        if let Some(list) = status.resources.as_mut().and_then(Value::as_array_mut) {
            for entry in list.iter_mut() {
                match keep {
                    Some(max) => {
                        if let Some(m) = entry.get("message").and_then(Value::as_str).filter(|m| m.len() > max) {
                            entry["message"] = json!(truncate(m, max));
                        }
                    }
                    None => {
                        if let Some(entry) = entry.as_object_mut() {
                            entry.remove("message");
                        }
                    }
                }
            }
        }
    };
    cut_resources(status, Some(CUT_RESOURCE_MESSAGE));
    if size(status) > max {
        for c in &mut status.conditions {
            c.message = truncate(&c.message, CUT_CONDITION_MESSAGE);
        }
    }
    if size(status) > max {
        cut_resources(status, None);
    }
    let mut dropped = 0;
    while size(status) > max {
        match status.resources.as_mut().and_then(Value::as_array_mut) {
            Some(list) if !list.is_empty() => {
                list.pop();
                dropped += 1;
            }
            _ => break,
        }
    }
    let dropped = match dropped {
        0 => String::new(),
        n => format!(", and {n} resource entries dropped"),
    };
    Some(format!(
        "the status the plugin reported is {before} bytes, more than the {} KiB the host writes: its messages were cut{dropped}",
        MAX_STATUS_BYTES >> 10
    ))
}

/// Sets the host's [`CONDITION_LIMITED`] condition to what it held back
/// (`said`, one sentence each), or removes it when it held back nothing.
/// Its transition time moves only when it appears.
fn limited(status: &mut ObjectStatus, said: &[String], reason: &str, generation: i64, now: &str) {
    let since = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_LIMITED && c.status == "True")
        .map(|c| c.last_transition_time.clone())
        .filter(|t| !t.is_empty());
    status.conditions.retain(|c| c.type_ != CONDITION_LIMITED);
    if said.is_empty() {
        return;
    }
    status.conditions.push(ConditionEntry {
        type_: CONDITION_LIMITED.to_string(),
        status: "True".to_string(),
        observed_generation: generation,
        last_transition_time: since.unwrap_or_else(|| now.to_string()),
        reason: reason.to_string(),
        message: message(&said.join("; ")),
    });
}

/// Whether `next` differs from `current` in the plugin's messages only.
fn only_messages_differ(current: &ObjectStatus, next: &ObjectStatus) -> bool {
    let blank = |s: &ObjectStatus| {
        let mut s = s.clone();
        s.conditions.iter_mut().for_each(|c| c.message.clear());
        if let Some(list) = s.resources.as_mut().and_then(Value::as_array_mut) {
            for entry in list.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("message");
            }
        }
        s
    };
    current != next && blank(current) == blank(next)
}

/// What the host held back of an instance's writes this round, besides
/// what the status writer cuts itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its writes to this cluster wait until the budget that is spent (its
    /// own, or the host's) refills.
    Writes {
        cluster: service_provider_sdk::contract::Cluster,
        wait: Duration,
        spent: budget::Spent,
        rate: budget::Rate,
    },
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Writes { cluster, spent: budget::Spent::Instance, rate, .. } => write!(
                f,
                "the plan's writes to the {cluster} cluster wait: the host writes at most {} KiB per minute for an instance there, and this one wrote more",
                rate.per_minute >> 10
            ),
            Held::Writes { cluster, spent: budget::Spent::Host, rate, .. } => write!(
                f,
                "the plan's writes to the {cluster} cluster wait: the host writes at most {} MiB per minute there for all instances together, and they wrote more",
                rate.per_minute >> 20
            ),
        }
    }
}

impl Held {
    /// The writes of `key` to `cluster`, a round of `need` bytes, held by
    /// `budgets`, if they are.
    pub fn writes(
        budgets: &Budgets,
        key: &InstanceKey,
        cluster: service_provider_sdk::contract::Cluster,
        need: usize,
    ) -> Option<Held> {
        let (wait, spent) = budgets.held(key, cluster, need)?;
        let rate = match spent {
            budget::Spent::Instance => budget::rate(cluster),
            budget::Spent::Host => budgets.host_rate(),
        };
        Some(Held::Writes { cluster, wait, spent, rate })
    }
}

/// What writing a status came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrote {
    /// It was as wanted already: no request.
    Unchanged,
    Written,
    /// Not written now (only messages changed since a moment ago, or the
    /// instance's onboarding budget is spent): look again after this.
    Held(Duration),
}

/// Writes service-object status and records Events, on the onboarding
/// cluster.
pub struct StatusWriter {
    pub onboarding: Client,
    pub service: ApiResource,
    /// Who records the Events. Each Event goes through a fresh
    /// [`Recorder`]: a shared one folds every Event with the same type,
    /// reason and object of the last minutes into the first (raising its
    /// count, keeping its note), so a new Ready message would never be
    /// seen. The writer publishes only on changes, so nothing floods.
    pub reporter: Reporter,
    /// What each instance may still write ([`crate::reconcile::budget`]).
    pub budgets: Arc<Budgets>,
    pub metrics: Arc<Metrics>,
}

/// What a status says happened: the kind of Event a change of it records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Progress or success: a Normal Event named after the phase.
    Normal,
    /// A failure: a Warning Event named after the `Ready` reason.
    Warning,
}

impl StatusWriter {
    /// Writes the status if it changed, and records an Event when the phase
    /// or the `Ready` condition changed. Unchanged status: no request at all.
    pub async fn write(
        &self,
        object: &DynamicObject,
        desired: &ServiceStatus,
        severity: Severity,
    ) -> Result<Wrote, Error> {
        self.write_held(object, desired, severity, None).await
    }

    /// Like [`Self::write`], saying in the `Limited` condition what else the
    /// host held back this round (`held`).
    #[tracing::instrument(level = "debug", name = "status", skip_all)]
    pub async fn write_held(
        &self,
        object: &DynamicObject,
        desired: &ServiceStatus,
        severity: Severity,
        held: Option<Held>,
    ) -> Result<Wrote, Error> {
        let current = ObjectStatus::of(object);
        let (generation, now) = (object.metadata.generation.unwrap_or(0), now());
        let mut next = next(current.as_ref(), generation, desired, &now);
        let mut said: Vec<String> = held.iter().map(ToString::to_string).collect();
        let reason = match held {
            Some(Held::Writes { .. }) => "WriteBudget",
            None => "StatusTooLarge",
        };
        // Room for the Limited condition the cut itself adds.
        if let Some(cut) = fit(&mut next, 2 << 10) {
            self.metrics.limited(Limit::StatusSize);
            said.push(cut);
        }
        limited(&mut next, &said, reason, generation, &now);
        if current.as_ref() == Some(&next) {
            return Ok(Wrote::Unchanged);
        }
        let key = InstanceKey::of(object);
        if let Some(current) = &current
            && only_messages_differ(current, &next)
            && let Some(wait) = self
                .budgets
                .since_status(&key)
                .and_then(|since| budget::MESSAGE_INTERVAL.checked_sub(since))
                .filter(|wait| !wait.is_zero())
        {
            self.metrics.limited(Limit::MessageInterval);
            return Ok(Wrote::Held(wait));
        }
        if let Some(wait) = self.budgets.wait(&key, service_provider_sdk::contract::Cluster::Onboarding) {
            self.metrics.limited(Limit::WriteRate);
            return Ok(Wrote::Held(wait));
        }
        let (namespace, name) = (&key.namespace, &key.name);
        let api: Api<DynamicObject> = Api::namespaced_with(self.onboarding.clone(), namespace, &self.service);
        match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": next}))).await {
            Ok(written) => {
                let bytes = crate::resource::stored_size(&written);
                self.budgets.spend(&key, service_provider_sdk::contract::Cluster::Onboarding, bytes);
                self.budgets.status_written(&key);
                self.metrics.written("onboarding", bytes);
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(Wrote::Unchanged),
            Err(e) => return Err(Error::kube(format!("writing the status of {namespace}/{name}"), e)),
        }
        let ready =
            |s: Option<&ObjectStatus>| s.and_then(ObjectStatus::ready).map(|c| (c.reason.clone(), c.message.clone()));
        let phase_changed = current.as_ref().map(|c| c.phase.as_str()) != Some(next.phase.as_str());
        if phase_changed || ready(current.as_ref()) != ready(Some(&next)) {
            let (reason, message) = ready(Some(&next)).unwrap_or_default();
            let (type_, reason) = match severity {
                Severity::Warning => (EventType::Warning, reason),
                Severity::Normal => (EventType::Normal, desired.phase.clone()),
            };
            self.publish(object, type_, reason, &message, "Reconcile").await;
        }
        Ok(Wrote::Written)
    }

    /// Records what a take-over (`--adopt-from`) did: `Adopted`, `Retired`.
    pub async fn took_over(&self, object: &DynamicObject, reason: &str, note: &str) {
        self.publish(object, EventType::Normal, reason.into(), note, "Adopt").await;
    }

    /// Records what another component (a shadow, a canary) says of the
    /// instance: `ShadowDiffers`, `CanaryHalted`.
    pub async fn rollout(&self, object: &DynamicObject, reason: &str, note: &str) {
        self.publish(object, EventType::Normal, reason.into(), note, "Rollout").await;
    }

    /// A Warning Event instead of a status: where writing the status would
    /// cost more than telling (a service object too large to read whole,
    /// whose every status write stores the whole object again).
    pub async fn warning(&self, object: &DynamicObject, reason: &str, note: &str) {
        self.publish(object, EventType::Warning, reason.into(), note, "Reconcile").await;
    }

    /// Events are best effort: the status carries the same message.
    async fn publish(&self, object: &DynamicObject, type_: EventType, reason: String, note: &str, action: &str) {
        let note = Some(truncate(&syntax::flat(note), MAX_NOTE));
        let event = Event { type_, reason, note, action: action.into(), secondary: None };
        let recorder = Recorder::new(self.onboarding.clone(), self.reporter.clone());
        match recorder.publish(&event, &object.object_ref(&self.service)).await {
            Ok(()) => {
                let key = InstanceKey::of(object);
                let cluster = service_provider_sdk::contract::Cluster::Onboarding;
                self.budgets.spend(&key, cluster, budget::EVENT_BYTES);
                self.metrics.written("onboarding", budget::EVENT_BYTES);
            }
            Err(e) => warn!(error = %e, "could not record an Event"),
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary, with an
/// ellipsis when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
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

    fn as_json(s: &ObjectStatus) -> Value {
        serde_json::to_value(s).unwrap()
    }

    #[test]
    fn first_status_sets_generation_and_timestamps() {
        let s = as_json(&next(None, 3, &ready(), T0));
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
        // Also after a round trip through the API server's JSON.
        let read: ObjectStatus = serde_json::from_value(as_json(&first)).unwrap();
        assert_eq!(next(Some(&read), 1, &ready(), T1), read);
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let first = next(None, 1, &ready(), T0);
        let mut msg = ready();
        msg.conditions[0].message = "still ready".into();
        let same_status = next(Some(&first), 2, &msg, T1);
        assert_eq!(same_status.conditions[0].last_transition_time, T0);
        assert_eq!(same_status.conditions[0].observed_generation, 2);
        let flipped = next(Some(&first), 2, &reconcile_error("boom"), T1);
        assert_eq!(flipped.conditions[0].last_transition_time, T1);
        assert_eq!(flipped.conditions[0].reason, "ReconcileError");
        assert_eq!(flipped.phase, "Progressing");
    }

    #[test]
    fn resources_are_kept_when_the_plugin_leaves_them_alone() {
        let first = next(None, 1, &ready(), T0);
        let err = next(Some(&first), 1, &reconcile_error("bad version"), T1);
        assert_eq!(err.resources, first.resources);
    }

    #[test]
    fn other_conditions_are_kept() {
        let current: ObjectStatus = serde_json::from_value(json!({"conditions": [
            {"type": "Custom", "status": "True", "lastTransitionTime": T0, "reason": "X", "message": ""}
        ]}))
        .unwrap();
        let s = next(Some(&current), 1, &terminating("Cleanup in progress"), T1);
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Custom", "Ready"]);
        assert_eq!(s.phase, "Terminating");
    }

    fn named(type_: &str) -> Condition {
        Condition { type_: type_.into(), status: ConditionStatus::True, reason: "R".into(), message: String::new() }
    }

    #[test]
    fn conditions_a_plugin_keeps_renaming_do_not_pile_up() {
        // A plugin that names new condition types on every reconcile (16,
        // the most it may name at once) keeps at most 16 in the status.
        let mut status: Option<ObjectStatus> = None;
        for round in 0..10 {
            let mut wanted = ready();
            wanted.conditions.extend((1..MAX_CONDITIONS).map(|i| named(&format!("Round{round}Type{i}"))));
            let time = format!("2026-01-01T00:{round:02}:00Z");
            status = Some(next(status.as_ref(), 1, &wanted, &time));
        }
        let types: Vec<String> = status.unwrap().conditions.iter().map(|c| c.type_.clone()).collect();
        assert_eq!(types.len(), MAX_CONDITIONS, "{types:?}");
        assert!(types.iter().all(|t| t == "Ready" || t.starts_with("Round9")), "only the last round's: {types:?}");
    }

    #[test]
    fn of_the_conditions_no_longer_named_the_oldest_go_first() {
        let current: Vec<Value> = (0..MAX_CONDITIONS)
            .map(|i| json!({"type": format!("Old{i}"), "status": "True", "lastTransitionTime": format!("2025-01-{:02}T00:00:00Z", 20 - i), "reason": "X"}))
            .collect();
        let current: ObjectStatus = serde_json::from_value(json!({"conditions": current})).unwrap();
        let s = next(Some(&current), 1, &ready(), T1);
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types.len(), MAX_CONDITIONS);
        assert!(!types.contains(&"Old15") && types.contains(&"Old14") && types.contains(&"Ready"), "{types:?}");
    }

    #[test]
    fn messages_lose_control_characters_and_are_bounded() {
        let mut wanted = ready();
        wanted.conditions[0].message = "line one\nline two\t\u{1b}[2J\r".into();
        wanted.resources.as_mut().unwrap()[0].message = Some("é".repeat(MAX_MESSAGE));
        let s = next(None, 1, &wanted, T0);
        assert_eq!(s.conditions[0].message, "line one line two  [2J ");
        let long = s.resources.unwrap()[0]["message"].as_str().unwrap().to_string();
        assert!(long.len() <= MAX_MESSAGE && long.ends_with('…'), "{}", long.len());
        let error = next(None, 1, &reconcile_error("x".repeat(MAX_MESSAGE * 2)), T0);
        assert!(error.conditions[0].message.len() <= MAX_MESSAGE);
    }

    #[test]
    fn now_is_a_kubernetes_timestamp() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }

    #[test]
    fn long_notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        let cut = truncate(&"é".repeat(10), 5);
        assert_eq!(cut, "éé…");
    }
}
