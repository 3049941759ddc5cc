//! Two answers to one question, compared: what another component (a
//! shadow, a canary, a candidate of a preview) would have the host do
//! differently for the same instance. Pure: no cluster is asked; a preview
//! compares against what is live on its own (`crate::reconcile::preview`).

use serde::Serialize;
use serde_json::Value;
use service_provider_sdk::contract::{ConditionStatus, PlanError, ServiceStatus};

use super::{CheckedPlan, ObjectKey};
use crate::plugin::Error;

/// What a component answered for one input, after the host's checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A plan that passed every check.
    Planned(CheckedPlan),
    /// The plugin said the input is invalid (its message).
    InvalidInput(String),
    /// The plugin asked to be called again later (its message).
    Transient(String),
    /// The host refused the plan (a grant or shape check), or the call
    /// failed: why, in one line.
    Refused(String),
}

/// A plugin's error text as the host keeps it ([`crate::syntax::PLUGIN_TEXT`]).
fn said(text: &str) -> String {
    crate::syntax::one_line(text, crate::syntax::PLUGIN_TEXT)
}

impl Answer {
    /// The answer of `plan::reconcile`.
    pub fn of(result: Result<Result<CheckedPlan, PlanError>, Error>) -> Answer {
        match result {
            Ok(Ok(plan)) => Answer::Planned(plan),
            other => Answer::of_ref(&other),
        }
    }

    /// Like [`Answer::of`], for a result the caller keeps.
    pub fn of_ref(result: &Result<Result<CheckedPlan, PlanError>, Error>) -> Answer {
        match result {
            Ok(Ok(plan)) => Answer::Planned(plan.clone()),
            // A plugin's words, one line of bounded length, as the live
            // path keeps them (a shadow's answer is logged).
            Ok(Err(PlanError::InvalidInput(i))) => Answer::InvalidInput(said(&i.message)),
            Ok(Err(PlanError::Transient(message))) => Answer::Transient(said(message)),
            Err(e) => Answer::Refused(crate::syntax::flat(&chain(e))),
        }
    }

    /// The plan, if there is one.
    pub fn plan(&self) -> Option<&CheckedPlan> {
        match self {
            Answer::Planned(plan) => Some(plan),
            _ => None,
        }
    }

    /// What kind of answer it is, in a word.
    pub fn word(&self) -> &'static str {
        match self {
            Answer::Planned(_) => "planned",
            Answer::InvalidInput(_) => "invalid-input",
            Answer::Transient(_) => "transient",
            Answer::Refused(_) => "refused",
        }
    }

    /// The answer in one line: its word, and the message of one that is
    /// not a plan.
    pub fn line(&self) -> String {
        match self {
            Answer::Planned(_) => "planned".into(),
            Answer::InvalidInput(m) | Answer::Transient(m) | Answer::Refused(m) => format!("{}: {m}", self.word()),
        }
    }
}

/// An error and its causes on one line, each cause the line does not
/// already say.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !line.contains(&text) {
            line = format!("{line}: {text}");
        }
        next = cause.source();
    }
    line
}

/// One field that differs between two versions of an object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// A JSON pointer.
    pub path: String,
    /// `None`: absent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// `None`: absent after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// Every field in which `after` differs from `before` (json-patch's diff:
/// each object member, each list element), before values included.
pub fn field_changes(before: &Value, after: &Value) -> Vec<FieldChange> {
    use json_patch::PatchOperation as Op;
    let at = |path: &str| before.pointer(path).cloned();
    json_patch::diff(before, after)
        .0
        .into_iter()
        .filter_map(|op| {
            let (path, after) = match op {
                Op::Add(o) => (o.path.to_string(), Some(o.value)),
                Op::Replace(o) => (o.path.to_string(), Some(o.value)),
                Op::Remove(o) => (o.path.to_string(), None),
                // The diff makes only the three above.
                _ => return None,
            };
            let before = at(&path);
            Some(FieldChange { path, before, after })
        })
        .collect()
}

/// An object (or copy) both answers write, differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed {
    pub object: ObjectKey,
    pub fields: Vec<FieldChange>,
}

/// What a status change comes to: the phases, and whether the Ready
/// condition changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusChange {
    pub phase_before: String,
    pub phase_after: String,
    pub ready_before: Option<String>,
    pub ready_after: Option<String>,
}

/// What the second answer would have the host do differently.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Differences {
    /// The kinds of answer differ (`planned` → `refused: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<(String, String)>,
    /// Objects and copies only the second answer writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<ObjectKey>,
    /// Objects and copies only the first answer writes (pruned after a switch).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<ObjectKey>,
    /// Objects and copies both write, differently.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<Changed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusChange>,
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        *self == Differences::default()
    }

    /// The differences in one line, e.g. `1 object added, 1 removed, 1
    /// changed; phase Ready → Progressing`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no differences".into();
        }
        let mut parts = Vec::new();
        if let Some((before, after)) = &self.answer {
            parts.push(format!("{before} → {after}"));
        }
        let counts = [("added", self.added.len()), ("removed", self.removed.len()), ("changed", self.changed.len())];
        let objects: Vec<String> =
            counts.iter().filter(|(_, n)| *n > 0).map(|(what, n)| format!("{n} {what}")).collect();
        if !objects.is_empty() {
            parts.push(format!("objects: {}", objects.join(", ")));
        }
        if let Some(s) = &self.status {
            parts.push(format!("phase {} → {}", or_none(&s.phase_before), or_none(&s.phase_after)));
        }
        parts.join("; ")
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "(none)" } else { text }
}

/// The objects and copies of a plan by key, each as the value the host
/// would write (a copy as what it says: source, target, kind).
pub fn written(plan: &CheckedPlan) -> Vec<(ObjectKey, Value)> {
    let keys = plan.inventory_in_order();
    let values = plan
        .manifests
        .iter()
        .map(|m| m.object.clone())
        .chain(plan.copies.iter().map(|c| serde_json::to_value(c).unwrap_or(Value::Null)));
    keys.into_iter().zip(values).collect()
}

/// What `second` would have the host do differently from `first`.
pub fn compare(first: &Answer, second: &Answer) -> Differences {
    let mut differences = Differences::default();
    if first.word() != second.word() {
        differences.answer = Some((first.line(), second.line()));
    }
    let (Some(a), Some(b)) = (first.plan(), second.plan()) else { return differences };
    let (was, now) = (written(a), written(b));
    for (key, value) in &now {
        match was.iter().find(|(k, _)| k == key) {
            None => differences.added.push(key.clone()),
            Some((_, old)) if old != value => {
                differences.changed.push(Changed { object: key.clone(), fields: field_changes(old, value) })
            }
            Some(_) => {}
        }
    }
    differences.removed =
        was.iter().filter(|(k, _)| !now.iter().any(|(n, _)| n == k)).map(|(k, _)| k.clone()).collect();
    differences.status = status_change(&a.status, &b.status);
    differences
}

/// The Ready condition's status, if the status has one.
fn ready(status: &ServiceStatus) -> Option<String> {
    status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| {
        let word = match c.status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        };
        format!("{word} ({})", c.reason)
    })
}

/// How the status changes, if its phase or Ready condition does (messages
/// alone are not a change: they often carry times).
pub fn status_change(before: &ServiceStatus, after: &ServiceStatus) -> Option<StatusChange> {
    let change = StatusChange {
        phase_before: before.phase.clone(),
        phase_after: after.phase.clone(),
        ready_before: ready(before),
        ready_after: ready(after),
    };
    (change.phase_before != change.phase_after || change.ready_before != change.ready_after).then_some(change)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_provider_sdk::contract::{Cluster, ObjectCopy};

    use super::*;
    use crate::plugin::plan::Manifest;

    fn manifest(name: &str, spec: Value) -> Manifest {
        Manifest {
            cluster: Cluster::Platform,
            api_version: "source.toolkit.fluxcd.io/v1".into(),
            kind: "OCIRepository".into(),
            plural: "ocirepositories".into(),
            name: name.into(),
            namespace: Some("mcp--t".into()),
            object: json!({"metadata": {"name": name}, "spec": spec}),
        }
    }

    fn plan(manifests: Vec<Manifest>, phase: &str) -> Answer {
        Answer::Planned(CheckedPlan {
            manifests,
            copies: vec![ObjectCopy::secret(
                "pull",
                "kubernetes.io/dockerconfigjson",
                Cluster::Platform,
                "mcp--t",
                "c",
            )],
            status: ServiceStatus { phase: phase.into(), conditions: Vec::new(), resources: None },
            requeue_after_seconds: 0,
        })
    }

    #[test]
    fn the_same_answer_has_no_differences() {
        let a = plan(vec![manifest("a", json!({"url": "oci://x"}))], "Ready");
        assert!(compare(&a, &a.clone()).is_empty());
        assert_eq!(compare(&a, &a).summary(), "no differences");
    }

    #[test]
    fn objects_added_removed_and_changed_are_named_with_their_fields() {
        let a = plan(
            vec![manifest("a", json!({"url": "oci://x", "ref": {"tag": "1"}})), manifest("b", json!({}))],
            "Ready",
        );
        let b =
            plan(vec![manifest("a", json!({"url": "oci://y", "ref": {}})), manifest("c", json!({}))], "Progressing");
        let d = compare(&a, &b);
        assert_eq!(d.added.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["c"]);
        assert_eq!(d.removed.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(d.changed.len(), 1);
        let fields = &d.changed[0].fields;
        let tag = FieldChange { path: "/spec/ref/tag".into(), before: Some(json!("1")), after: None };
        let url =
            FieldChange { path: "/spec/url".into(), before: Some(json!("oci://x")), after: Some(json!("oci://y")) };
        assert!(fields.contains(&tag) && fields.contains(&url) && fields.len() == 2, "{fields:?}");
        assert_eq!(d.summary(), "objects: 1 added, 1 removed, 1 changed; phase Ready → Progressing");
    }

    #[test]
    fn a_refusal_that_appears_is_a_difference_of_the_answer() {
        let a = plan(vec![manifest("a", json!({}))], "Ready");
        let b = Answer::Refused("OCIRepository mcp--t/a is refused: too often".into());
        let d = compare(&a, &b);
        assert_eq!(d.answer, Some(("planned".into(), "refused: OCIRepository mcp--t/a is refused: too often".into())));
        assert!(d.added.is_empty() && d.removed.is_empty() && d.status.is_none());
    }
}
