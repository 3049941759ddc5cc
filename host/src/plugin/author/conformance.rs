//! `plugin test`: a language-neutral conformance run of one component
//! through the real sandbox and the host's own checks. The shared cases
//! (the JSON every SDK reads: `testdata/cases.json`) must get their
//! answers; besides, every plugin must answer the same input the same way,
//! give answers the host accepts, converge (a second plan over what the
//! first applied asks for nothing new), tear down what it created, and,
//! where it watches the ControlPlane for deletion, hold the deletion.
//!
//! Each check passes, fails (naming the case and why) or is skipped with
//! the reason; a failed check fails the run.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Cluster, Input, NamespaceScope, Observed, Stage};
use service_provider_sdk::testing::{Call, SharedCase, same_answer};

use crate::plugin::grant::{Effective, Grant};
use crate::plugin::plan::{self, CheckedPlan, ObjectKey, Planner};
use crate::plugin::sandbox::Plugin;

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "result", content = "detail")]
pub enum Outcome {
    Passed(String),
    Failed(Vec<String>),
    Skipped(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub check: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The run's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub plugin: String,
    pub component_digest: String,
    pub checks: Vec<CheckResult>,
}

impl Report {
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(|c| matches!(c.outcome, Outcome::Failed(_)))
    }

    /// One line per check, the failures' details under theirs.
    pub fn text(&self) -> String {
        let mut out = format!("plugin {} ({})\n", self.plugin, self.component_digest);
        for check in &self.checks {
            let line = match &check.outcome {
                Outcome::Passed(what) => format!("PASS  {:<20} {what}\n", check.check),
                Outcome::Skipped(why) => format!("SKIP  {:<20} {why}\n", check.check),
                Outcome::Failed(problems) => {
                    let mut text = format!("FAIL  {:<20} {} problem(s)\n", check.check, problems.len());
                    // Each line indented and flattened: a plugin's message
                    // cannot forge a PASS line or move the cursor.
                    for problem in problems {
                        let lines: Vec<String> = problem.split('\n').map(crate::syntax::flat).collect();
                        text.push_str(&format!("      - {}\n", lines.join("\n        ")));
                    }
                    text
                }
            };
            out.push_str(&line);
        }
        let failed = self.checks.iter().filter(|c| matches!(c.outcome, Outcome::Failed(_))).count();
        out.push_str(&match failed {
            0 => "conformant\n".to_string(),
            n => format!("{n} check(s) failed\n"),
        });
        out
    }
}

fn outcome(problems: Vec<String>, passed: String) -> Outcome {
    if problems.is_empty() { Outcome::Passed(passed) } else { Outcome::Failed(problems) }
}

/// Runs every check of `plugin` over `cases` under `grant` (the plugin's
/// own grant from `plugin grant` when `None`), in the order the report
/// lists them; a check that needs what an earlier one failed to give is
/// skipped, saying so.
pub async fn run(plugin: Plugin, cases: &[SharedCase], grant: Option<Grant>) -> Report {
    let descriptor = plugin.descriptor().clone();
    let mut checks = Vec::new();
    let mut check = |check: &'static str, outcome: Outcome| checks.push(CheckResult { check, outcome });
    let (granted, planner) = under_its_grant(&plugin, grant);
    check("grant", granted);
    let (answered, deterministic) = answers(&plugin, cases).await;
    check("cases", answered);
    check("deterministic", deterministic);
    match planner {
        None => {
            for name in ["host-accepts", "converges", "tears-down", "holds-deletion"] {
                check(name, Outcome::Skipped("needs a grant the plugin runs under".into()));
            }
        }
        Some(planner) => {
            let (accepted, planned) = host_accepts(&planner, cases).await;
            check("host-accepts", accepted);
            if planned.is_empty() {
                for name in ["converges", "tears-down", "holds-deletion"] {
                    check(name, Outcome::Skipped("no case plans successfully".into()));
                }
            } else {
                check("converges", converges(&planner, &planned).await);
                check("tears-down", tears_down(&planner, &planned).await);
                check("holds-deletion", holds_deletion(&planner, &planned).await);
            }
        }
    }
    not_the_plugins(&mut check);
    Report { plugin: descriptor.name, component_digest: plugin.digest().into(), checks }
}

/// Check `grant`: the grant the plugin runs under here gives all it asks
/// for (what no review covers included: the checks run the plugin as it
/// asks; the platform reviews the grant it admits it with). With it, the
/// planner the later checks call.
fn under_its_grant(plugin: &Plugin, grant: Option<Grant>) -> (Outcome, Option<Planner>) {
    let descriptor = plugin.descriptor();
    let own = super::inspect::grant_for(descriptor, plugin.digest(), true);
    let grant = match (grant, &own) {
        (Some(grant), _) => Some(grant),
        (None, Ok(text)) => Grant::parse(text).ok(),
        (None, Err(_)) => None,
    };
    match grant.map(|g| Effective::for_component(descriptor, plugin.digest(), g)) {
        Some(Ok(granted)) if granted.refused.is_empty() => (
            Outcome::Passed("its grant gives all it asks for".into()),
            Some(Planner { plugin: plugin.clone(), granted: Arc::new(granted) }),
        ),
        Some(Ok(granted)) => (Outcome::Failed(granted.refused), None),
        Some(Err(e)) => (Outcome::Failed(vec![e.to_string()]), None),
        None => (Outcome::Failed(vec![own.err().map(|e| e.to_string()).unwrap_or_default()]), None),
    }
}

/// Checks `cases` and `deterministic`: each shared case asked twice, its
/// answer the expected one, and the same both times.
async fn answers(plugin: &Plugin, cases: &[SharedCase]) -> (Outcome, Outcome) {
    let mut wrong = Vec::new();
    let mut unstable = Vec::new();
    for case in cases {
        let first = raw_answer(plugin, case).await;
        let second = raw_answer(plugin, case).await;
        if !same_answer(&case.expected, &first) {
            wrong.push(format!("case {:?}: answers differ\nwant: {}\n got: {first}", case.name, case.expected));
        }
        if first != second {
            unstable.push(format!("case {:?}: the same input answered {first} and then {second}", case.name));
        }
    }
    (
        outcome(wrong, format!("{} case(s) got their answers", cases.len())),
        outcome(unstable, "the same input got the same answer".into()),
    )
}

/// A case whose plan the host accepted, and the inputs the later checks
/// ask with: the next reconcile's once the plan is applied, and the
/// deletion's after it.
struct Planned<'c> {
    case: &'c SharedCase,
    checked: CheckedPlan,
    applied: Input,
    deleting: Input,
}

/// Check `host-accepts`: every answer through the host's checks and the
/// grant. With it, the cases that planned.
async fn host_accepts<'c>(planner: &Planner, cases: &'c [SharedCase]) -> (Outcome, Vec<Planned<'c>>) {
    let mut refused = Vec::new();
    let mut planned = Vec::new();
    for case in cases {
        match case.call {
            Call::Plan => match plan::reconcile(planner, &case.input).await {
                Ok(Ok(checked)) => {
                    let applied = applied(planner, &case.input, &checked);
                    let deleting = deleting(&applied);
                    planned.push(Planned { case, checked, applied, deleting });
                }
                Ok(Err(_)) => {}
                Err(e) => refused.push(format!("case {:?}: {}", case.name, chain(&e))),
            },
            Call::Cleanup => {
                if let Err(e) = plan::cleanup(planner, &case.input).await {
                    refused.push(format!("case {:?}: {}", case.name, chain(&e)));
                }
            }
        }
    }
    (outcome(refused, "every answer passes the host's checks and the grant".into()), planned)
}

/// Check `converges`: a plan over what the first applied asks for nothing
/// new.
async fn converges(planner: &Planner, planned: &[Planned<'_>]) -> Outcome {
    let mut diverging = Vec::new();
    for Planned { case, checked, applied, .. } in planned {
        match plan::reconcile(planner, applied).await {
            Ok(Ok(again)) => {
                let new: Vec<String> = again.inventory().difference(&checked.inventory()).map(key_text).collect();
                if !new.is_empty() {
                    diverging.push(format!(
                        "case {:?}: the plan over its applied state adds {}",
                        case.name,
                        new.join(", ")
                    ));
                }
            }
            Ok(Err(e)) => diverging.push(format!("case {:?}: the plan over its applied state fails: {e}", case.name)),
            Err(e) => diverging.push(format!("case {:?}: {}", case.name, chain(&e))),
        }
    }
    outcome(diverging, "a plan over its applied state asks for nothing new".into())
}

/// Check `tears-down`: cleanup of what a plan applied removes every object
/// it created (Namespaces stay, as the host's pruning keeps them, and
/// copies are the host's to remove).
async fn tears_down(planner: &Planner, planned: &[Planned<'_>]) -> Outcome {
    let mut left = Vec::new();
    for Planned { case, checked, deleting, .. } in planned {
        match plan::cleanup(planner, deleting).await {
            Ok(Ok(CleanupPlan::Teardown(teardown))) => {
                let torn: BTreeSet<(Cluster, String, Option<String>, String)> = teardown
                    .objects
                    .iter()
                    .map(|r| (r.cluster, r.kind.clone(), r.namespace.clone(), r.name.clone()))
                    .collect();
                let kept: Vec<String> = checked
                    .manifests
                    .iter()
                    .filter(|m| !m.is_namespace())
                    .filter(|m| !torn.contains(&(m.cluster, m.kind.clone(), m.namespace.clone(), m.name.clone())))
                    .map(|m| m.place())
                    .collect();
                if !kept.is_empty() {
                    left.push(format!("case {:?}: the teardown leaves {}", case.name, kept.join(", ")));
                }
            }
            Ok(Ok(CleanupPlan::Blocked(b))) => left.push(format!(
                "case {:?}: cleanup is blocked with nothing left on the ControlPlane: {}",
                case.name, b.message
            )),
            Ok(Err(e)) => left.push(format!("case {:?}: cleanup fails: {e}", case.name)),
            Err(e) => left.push(format!("case {:?}: {}", case.name, chain(&e))),
        }
    }
    outcome(left, "cleanup removes every object plan created".into())
}

/// Check `holds-deletion`: where the plugin watches the ControlPlane for
/// cleanup, an object it watches there blocks the deletion, with a message
/// saying why.
async fn holds_deletion(planner: &Planner, planned: &[Planned<'_>]) -> Outcome {
    let watched: Vec<_> = planner
        .plugin
        .descriptor()
        .observations
        .iter()
        .filter(|o| o.cluster == Cluster::ControlPlane && o.stage != Stage::Reconcile)
        .collect();
    if watched.is_empty() {
        return Outcome::Skipped("observes nothing on the ControlPlane for cleanup".into());
    }
    let mut unheld = Vec::new();
    for Planned { case, deleting, .. } in planned {
        for observation in &watched {
            let mut held = deleting.clone();
            let blocker = serde_json::json!({
                "apiVersion": observation.api.api_version(), "kind": observation.api.kind,
                "metadata": {
                    "name": observation.name.clone().unwrap_or_else(|| "conformance".into()),
                    "namespace": match &observation.scope {
                        NamespaceScope::Named(ns) => Some(ns.clone()),
                        NamespaceScope::Tenant | NamespaceScope::Any => Some("default".to_string()),
                        NamespaceScope::ClusterScoped => None,
                    },
                },
            });
            held.observed.retain(|o| o.id != observation.id);
            held.observed.push(Observed { id: observation.id.clone(), objects: vec![blocker.to_string()] });
            match plan::cleanup(planner, &held).await {
                Ok(Ok(CleanupPlan::Blocked(b))) if !b.message.trim().is_empty() => {}
                Ok(Ok(CleanupPlan::Blocked(_))) => {
                    unheld.push(format!("case {:?}: blocked without a message saying why", case.name))
                }
                other => unheld.push(format!(
                    "case {:?}: a {} on the ControlPlane ({}) does not hold the deletion: {}",
                    case.name,
                    observation.api.kind,
                    observation.id,
                    match other {
                        Ok(Ok(_)) => "cleanup tears down".to_string(),
                        Ok(Err(e)) => format!("cleanup fails: {e}"),
                        Err(e) => chain(&e),
                    }
                )),
            }
        }
    }
    outcome(unheld, "deletion waits while the service's objects exist on the ControlPlane".into())
}

/// openmcp's quality criteria no plugin decides, named in every report so
/// that a reader sees they were not forgotten.
fn not_the_plugins(check: &mut impl FnMut(&'static str, Outcome)) {
    check(
        "operation-annotations",
        Outcome::Skipped("the host honours openmcp.cloud/operation (ignore, reconcile) for every plugin".into()),
    );
    check("custom-ca", Outcome::Skipped("contract 0.2.0 has no custom CA declaration for a plugin to wire".into()));
}

/// A case's answer straight from the component, in the cases' JSON form;
/// a trap or a refusal by the sandbox is `{"failure": …}`.
async fn raw_answer(plugin: &Plugin, case: &SharedCase) -> Value {
    let answer = match case.call {
        Call::Plan => plugin.plan(&case.input).await.map(|r| r.map(serde_json::to_value)),
        Call::Cleanup => plugin.cleanup(&case.input).await.map(|r| r.map(serde_json::to_value)),
    };
    match answer {
        Ok(Ok(Ok(value))) => serde_json::json!({ "ok": value }),
        Ok(Err(error)) => serde_json::json!({ "err": error }),
        Ok(Ok(Err(e))) => serde_json::json!({ "failure": e.to_string() }),
        Err(e) => serde_json::json!({ "failure": chain(&e) }),
    }
}

/// The input of the next reconcile after `checked` was applied: the status
/// written to the service object, and each planned object seen by the
/// observations that cover it.
fn applied(planner: &Planner, input: &Input, checked: &CheckedPlan) -> Input {
    let mut next = input.clone();
    if let Ok(mut object) = serde_json::from_str::<Value>(&input.object) {
        object["status"] = serde_json::to_value(&checked.status).unwrap_or_default();
        next.object = object.to_string();
    }
    for observation in &planner.granted.observations {
        let seen: Vec<String> = checked
            .manifests
            .iter()
            .filter(|m| {
                m.cluster == observation.cluster && m.group() == observation.api.group && m.kind == observation.api.kind
            })
            .filter(|m| observation.name.as_ref().is_none_or(|n| *n == m.name))
            .map(|m| m.object.to_string())
            .collect();
        if seen.is_empty() {
            continue;
        }
        match next.observed.iter_mut().find(|o| o.id == observation.id) {
            Some(observed) => observed.objects.extend(seen),
            None => next.observed.push(Observed { id: observation.id.clone(), objects: seen }),
        }
    }
    next
}

/// `input` with its service object being deleted.
fn deleting(input: &Input) -> Input {
    let mut next = input.clone();
    if let Ok(mut object) = serde_json::from_str::<Value>(&input.object) {
        object["metadata"]["deletionTimestamp"] = Value::String("2026-01-01T00:00:00Z".into());
        next.object = object.to_string();
    }
    next
}

fn key_text(key: &ObjectKey) -> String {
    let at = key.namespace.as_ref().map_or(key.name.clone(), |ns| format!("{ns}/{}", key.name));
    format!("{} {at} on the {} cluster", key.kind, key.cluster.as_str())
}

/// An error and its causes, on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_words_cannot_forge_a_line_of_the_report() {
        let report = Report {
            plugin: "p".into(),
            component_digest: "sha256:00".into(),
            checks: vec![CheckResult {
                check: "cases",
                outcome: Outcome::Failed(vec!["got: x\nconformant\r\u{1b}[2KPASS  cases".into()]),
            }],
        };
        let text = report.text();
        assert!(
            text.lines().all(|l| l.starts_with("plugin ")
                || l.starts_with("FAIL")
                || l.starts_with("      ")
                || l == "1 check(s) failed"),
            "{text}"
        );
        assert!(!text.contains('\r') && !text.contains('\u{1b}'), "{text:?}");
    }
}
