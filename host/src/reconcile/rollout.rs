//! The components beside the plugin while an upgrade of it is rolled out
//! in steps (see docs/operations.md, "Upgrading a plugin"): which one an
//! instance is reconciled with, and what a shadow says.
//!
//! A canary (`run --plugin-canary`) reconciles the instances of its cohort
//! (a label selector, or a share of instances by a stable hash of their
//! names) while the plugin reconciles the rest. When more cohort instances
//! than a threshold fail by the canary (a plugin error or timeout, a
//! refused plan), the canary is halted: the host says why (a log line,
//! `service_provider_host_plugin_halted{role="canary"}`, a `CanaryHalted` Event)
//! and reconciles every instance again, the cohort with the plugin.
//! Promotion is the operator's next rollout: the canary becomes `--plugin`.
//!
//! A shadow (`run --shadow-plugin`) plans along on every reconcile, with
//! the very input the plugin got; nothing of its answer is applied, and a
//! failure of it (a trap, a deadline, a refused plan) is only a
//! difference, never the instance's. When its answer differs from the
//! plugin's, anew for an instance, the host counts it
//! (`service_provider_host_shadow_differences_total` by the shadow's
//! digest), logs the differences' summary and records a `ShadowDiffers`
//! Event on the service object.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::{Expression, Selector, SelectorExt};
use service_provider_sdk::contract::{Cluster, Context, Input, PlanError};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tracing::{error, info};

use super::apply::Scope;
use super::loaded::Loaded;
use super::memory::Memory;
use super::status::StatusWriter;
use crate::Error;
use crate::error::{Category, report};
use crate::keys::InstanceKey;
use crate::metrics::Metrics;
use crate::plugin::plan::compare::{self, Answer};
use crate::plugin::plan::{self, CheckedPlan, Planner};
use crate::syntax;

/// The components beside the plugin.
#[derive(Default)]
pub struct Rollout {
    /// Plans along on every reconcile; never applied.
    pub shadow: Option<Planner>,
    /// Reconciles its cohort until halted.
    pub canary: Option<Canary>,
}

impl Rollout {
    /// The component `object` is reconciled with: the canary for an
    /// instance of its cohort while it is not halted, else `plugin`.
    pub(crate) fn plugin_for<'a>(&'a self, plugin: &'a Loaded, object: &DynamicObject) -> &'a Loaded {
        match &self.canary {
            Some(canary) if canary.active() && canary.cohort.contains(object) => &canary.plugin,
            _ => plugin,
        }
    }

    /// Every kind and namespace the plugin, or the canary beside it, may
    /// write on `cluster`: what a prune looks at, so that what either wrote
    /// is never left behind.
    pub(crate) fn writable(&self, plugin: &Loaded, context: &Context, cluster: Cluster) -> Vec<Scope> {
        let mut scopes = Scope::writable(plugin.descriptor(), context, cluster);
        if let Some(canary) = &self.canary {
            for scope in Scope::writable(canary.plugin.descriptor(), context, cluster) {
                if !scopes.iter().any(|s| s.resource == scope.resource && s.namespace == scope.namespace) {
                    scopes.push(scope);
                }
            }
        }
        scopes
    }

    /// Records how a reconcile ended (`used` is the component it ran with):
    /// a failure by the canary's fault counts toward halting it.
    pub(crate) async fn ended<T>(
        &self,
        used: &Loaded,
        to: &Recorders<'_>,
        object: &DynamicObject,
        result: &Result<T, Error>,
    ) {
        let Some(canary) = &self.canary else { return };
        let Err(error) = result else { return };
        if !std::ptr::eq(used, &canary.plugin) || !by_the_plugin(error.category()) {
            return;
        }
        let key = InstanceKey::of(object);
        let Some(why) = canary.failed(key, error) else { return };
        let digest = canary.plugin.planner.plugin.digest();
        error!(canary = digest, reason = %why, "halted the canary plugin: its cohort is reconciled with the plugin again");
        canary.plugin.planner.plugin.halted();
        to.status.rollout(object, "CanaryHalted", &format!("canary plugin {digest} halted: {why}")).await;
    }
}

/// Failures that are the plugin's: what halts a canary.
fn by_the_plugin(category: Category) -> bool {
    matches!(category, Category::Plugin | Category::PluginTimeout | Category::CapabilityDenied)
}

/// Which instances a canary reconciles.
#[derive(Debug, Clone)]
pub enum Cohort {
    /// Service objects whose labels a selector matches. Their tenants
    /// write these labels: `run` takes a selector only when the platform
    /// says it trusts them (`--canary-selector-trusted`).
    Selector(Selector),
    /// This share of instances (0 to 100), by a stable hash of the service
    /// object's `uid`: the same instances on every start, and none a
    /// tenant picks by choosing a name (the API server sets the uid).
    Percent(u8),
}

impl Cohort {
    /// A label selector as `kubectl` takes it: `k=v`, `k==v`, `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, separated by commas.
    pub fn selector(text: &str) -> Result<Cohort, String> {
        let mut expressions = Vec::new();
        for term in terms(text) {
            expressions.push(expression(term.trim())?);
        }
        if expressions.is_empty() {
            return Err("an empty label selector would select every instance; say so with --canary-percent 100".into());
        }
        Ok(Cohort::Selector(expressions.into_iter().collect()))
    }

    /// Whether `object` is in the cohort.
    pub fn contains(&self, object: &DynamicObject) -> bool {
        match self {
            Cohort::Selector(selector) => selector.matches(object.labels()),
            Cohort::Percent(percent) => {
                // Without a uid (an object not yet stored), its place.
                let key = object.uid().unwrap_or_else(|| InstanceKey::of(object).to_string());
                let digest = Sha256::digest(key.as_bytes());
                let bucket = u64::from_be_bytes(digest[..8].try_into().expect("eight bytes")) % 100;
                bucket < u64::from(*percent)
            }
        }
    }
}

/// The terms of a selector: split at commas outside parentheses.
fn terms(text: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

fn expression(term: &str) -> Result<Expression, String> {
    let key = |k: &str| {
        let k = k.trim();
        syntax::qualified_name(k).then(|| k.to_string()).ok_or_else(|| format!("{k:?} is not a label key"))
    };
    let value = |v: &str| {
        let v = v.trim();
        syntax::label_value(v).then(|| v.to_string()).ok_or_else(|| format!("{v:?} is not a label value"))
    };
    let set = |rest: &str| -> Result<BTreeSet<String>, String> {
        let inner = rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')'));
        let inner = inner.ok_or_else(|| format!("{term:?}: a set is written (a,b)"))?;
        inner.split(',').map(value).collect()
    };
    if let Some((k, rest)) = term.split_once(" notin ") {
        return Ok(Expression::NotIn(key(k)?, set(rest)?));
    }
    if let Some((k, rest)) = term.split_once(" in ") {
        return Ok(Expression::In(key(k)?, set(rest)?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Expression::NotEqual(key(k)?, value(v)?));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Expression::Equal(key(k)?, value(v)?));
    }
    match term.strip_prefix('!') {
        Some(k) => Ok(Expression::DoesNotExist(key(k)?)),
        None => Ok(Expression::Exists(key(term)?)),
    }
}

/// The cohort instances that failed by a canary and why it was halted,
/// once it was: kept across the controller's restarts in one process (new
/// onboarding credentials), so that a halted canary stays
/// halted until the host restarts, and failures add up across starts.
#[derive(Debug, Clone, Default)]
pub struct Halt(std::sync::Arc<Mutex<HaltState>>);

#[derive(Debug, Default)]
struct HaltState {
    /// Cohort instances that failed by the canary, and why (the last time).
    failed: BTreeMap<InstanceKey, String>,
    /// Why it was halted, once it was.
    why: Option<String>,
}

/// A canary component, its cohort, and whether it was halted.
pub struct Canary {
    pub(crate) plugin: Loaded,
    pub(crate) cohort: Cohort,
    /// How many cohort instances may fail by the canary: one more halts it.
    allowed: usize,
    /// Its failures, and why it was halted.
    halted: Halt,
    /// Told when it is halted: every instance is reconciled again.
    pub(crate) wake: Notify,
}

impl Canary {
    pub fn new(plugin: Loaded, cohort: Cohort, allowed: usize, halted: Halt) -> Self {
        Canary { plugin, cohort, allowed, halted, wake: Notify::new() }
    }

    /// Whether it still reconciles its cohort.
    pub fn active(&self) -> bool {
        self.halted.0.lock().expect("not poisoned").why.is_none()
    }

    /// Records a cohort instance's failure; why the canary is halted when
    /// this failure halts it.
    fn failed(&self, key: InstanceKey, error: &Error) -> Option<String> {
        let said = syntax::one_line(&report(error), 300);
        let instance = key.to_string();
        let mut state = self.halted.0.lock().expect("not poisoned");
        let HaltState { failed, why: halted } = &mut *state;
        failed.insert(key, said.clone());
        if halted.is_some() || failed.len() <= self.allowed {
            return None;
        }
        let why = format!(
            "{} instance(s) of its cohort failed by it (at most {} may), the last {instance}: {said}",
            failed.len(),
            self.allowed
        );
        *halted = Some(why.clone());
        self.wake.notify_one();
        Some(why)
    }
}

/// What the shadow step needs of the reconcile's parts.
pub(crate) struct Recorders<'a> {
    pub status: &'a StatusWriter,
    pub memory: &'a Memory,
    pub metrics: &'a Metrics,
}

/// Step: the shadow's answer to `input`, compared with the plugin's
/// (`planned`), and recorded when it differs anew.
pub(crate) async fn shadow(
    rollout: &Rollout,
    to: &Recorders<'_>,
    object: &DynamicObject,
    key: &InstanceKey,
    input: &Input,
    planned: &Result<Result<CheckedPlan, PlanError>, crate::plugin::Error>,
) {
    let Some(shadow) = &rollout.shadow else { return };
    let theirs = Answer::of(plan::reconcile(shadow, input).await);
    let differences = compare::compare(&Answer::of_ref(planned), &theirs);
    let digest = (!differences.is_empty()).then(|| {
        let mut hasher = DefaultHasher::new();
        serde_json::to_string(&differences).unwrap_or_default().hash(&mut hasher);
        hasher.finish()
    });
    if !to.memory.shadow_differs_anew(key, digest) {
        return;
    }
    let component = shadow.plugin.digest();
    let summary = differences.summary();
    to.metrics.shadow_differed(component);
    info!(shadow = component, differences = %summary, "the shadow plugin answers differently");
    let note = format!("shadow plugin {component} would answer differently: {summary}");
    to.status.rollout(object, "ShadowDiffers", &note).await;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(name: &str, labels: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "ns", "labels": labels}
        }))
        .unwrap()
    }

    #[test]
    fn a_selector_picks_its_cohort_as_kubectl_would() {
        let cohort = Cohort::selector("rollout=canary, tier in (dev,test),!frozen").unwrap();
        assert!(cohort.contains(&object("a", json!({"rollout": "canary", "tier": "dev"}))));
        assert!(!cohort.contains(&object("b", json!({"rollout": "canary", "tier": "prod"}))));
        assert!(!cohort.contains(&object("c", json!({"rollout": "canary", "tier": "test", "frozen": "yes"}))));
        assert!(!cohort.contains(&object("d", json!({}))));
        let other = Cohort::selector("rollout!=stable,tier notin (prod),team").unwrap();
        assert!(other.contains(&object("e", json!({"team": "x"}))));
        assert!(!other.contains(&object("f", json!({"team": "x", "tier": "prod"}))));
    }

    #[test]
    fn a_selector_that_is_not_one_is_refused() {
        for bad in ["", " , ", "a in b", "a=b c", "a b=c", "=x", "a in (b c)"] {
            assert!(Cohort::selector(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_share_is_stable_and_about_its_size() {
        let cohort = Cohort::Percent(30);
        let names: Vec<String> = (0..1000).map(|i| format!("i-{i}")).collect();
        let picked = names.iter().filter(|n| cohort.contains(&object(n, json!({})))).count();
        assert!((250..350).contains(&picked), "{picked} of 1000");
        let again = names.iter().filter(|n| cohort.contains(&object(n, json!({})))).count();
        assert_eq!(picked, again);
        assert!(!names.iter().any(|n| Cohort::Percent(0).contains(&object(n, json!({})))));
        assert!(names.iter().all(|n| Cohort::Percent(100).contains(&object(n, json!({})))));
    }

    #[test]
    fn a_share_is_picked_by_uid_not_by_a_name_a_tenant_chooses() {
        let cohort = Cohort::Percent(50);
        let with_uid = |uid: &str| {
            let mut o = object("same-name", json!({}));
            o.metadata.uid = Some(uid.to_string());
            o
        };
        let picked: Vec<bool> = (0..64).map(|i| cohort.contains(&with_uid(&format!("uid-{i}")))).collect();
        assert!(picked.contains(&true) && picked.contains(&false), "one name, in and out by uid: {picked:?}");
        assert_eq!(cohort.contains(&with_uid("uid-7")), picked[7], "stable for one uid");
    }
}
