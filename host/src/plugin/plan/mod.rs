//! Asking the plugin for a plan, and holding it to its word.
//!
//! A plugin is untrusted code: whatever it asks the host to apply, copy or
//! delete must be a well-formed object ([`validate`]) on a cluster the host
//! can reach for this instance, requested in its `describe()` and allowed
//! by the operator's grant ([`check`]), and what it reports must fit a
//! status ([`report`]). A violation fails the whole reconcile before
//! anything is written.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Cluster, Descriptor, Input, ObjectCopy, PlanError, ServiceStatus};

mod check;
pub mod compare;
pub mod report;
pub mod scope;
pub mod validate;

pub use check::{NAMESPACES_PER_INSTANCE, check_blocked, check_plan, check_ref, check_teardown, manifest};

use crate::metrics::LabelValue;
use crate::plugin::Error;
use crate::plugin::grant::Effective;
use crate::plugin::sandbox::{Method, Plugin};
use crate::syntax::group_of;

/// Why the host refused a plugin's answer, as the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It asked for what its grant does not allow.
    Denied,
    /// It is not something the host can use.
    InvalidPlan,
}

impl LabelValue for Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Denied => "denied",
            Refusal::InvalidPlan => "invalid-plan",
        }
    }
}

impl Refusal {
    pub const ALL: [Refusal; 2] = [Refusal::Denied, Refusal::InvalidPlan];

    fn of(error: &Error) -> Option<Refusal> {
        match error {
            Error::Call(_) => None,
            Error::InvalidPlan { .. } => Some(Refusal::InvalidPlan),
            Error::Denied(_) => Some(Refusal::Denied),
        }
    }
}

/// Counts a refused answer on the plugin's meter.
fn refused<T>(plugin: &Plugin, method: Method, checked: Result<T, Error>) -> Result<T, Error> {
    if let Some(refusal) = checked.as_ref().err().and_then(Refusal::of) {
        plugin.refused(method, refusal);
    }
    checked
}

/// A plugin together with what the operator granted it: what the host
/// calls for plans it can trust.
#[derive(Clone)]
pub struct Planner {
    pub plugin: Plugin,
    pub granted: Arc<Effective>,
}

impl Planner {
    pub fn descriptor(&self) -> &Descriptor {
        self.plugin.descriptor()
    }
}

/// A parsed desired object with its identity pulled out.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub cluster: Cluster,
    pub api_version: String,
    pub kind: String,
    /// REST plural, from the capability that allows the object.
    pub plural: String,
    pub name: String,
    pub namespace: Option<String>,
    pub object: Value,
}

impl Manifest {
    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }

    /// `<Kind> <namespace>/<name>` (or `<Kind> <name>`), for messages.
    pub fn what(&self) -> String {
        let at = self.namespace.as_ref().map_or(self.name.clone(), |ns| format!("{ns}/{}", self.name));
        format!("{} {at}", self.kind)
    }

    /// [`Self::what`] and its cluster: `<Kind> <namespace>/<name> on the
    /// <cluster> cluster`.
    pub fn place(&self) -> String {
        format!("{} on the {} cluster", self.what(), self.cluster)
    }

    /// Whether this is a Namespace (kept when pruned; applied first).
    pub fn is_namespace(&self) -> bool {
        self.kind == "Namespace" && self.api_version == "v1"
    }
}

/// One object a plan asks the host to write (an object or a copy).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct ObjectKey {
    pub cluster: Cluster,
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// Everything one plan asks the host to write.
pub type Inventory = std::collections::BTreeSet<ObjectKey>;

/// A plan that passed the checks, with its objects parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPlan {
    pub manifests: Vec<Manifest>,
    pub copies: Vec<ObjectCopy>,
    pub status: ServiceStatus,
    pub requeue_after_seconds: u32,
}

/// One step of applying a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step<'a> {
    Apply(&'a Manifest),
    Copy(&'a ObjectCopy),
}

impl CheckedPlan {
    /// Every object and copy this plan writes.
    pub fn inventory(&self) -> Inventory {
        self.inventory_in_order().into_iter().collect()
    }

    /// Every object and copy this plan writes: the objects in the plugin's
    /// order, then the copies.
    pub fn inventory_in_order(&self) -> Vec<ObjectKey> {
        let objects = self.manifests.iter().map(|m| ObjectKey {
            cluster: m.cluster,
            group: m.group().to_string(),
            kind: m.kind.clone(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
        });
        let copies = self.copies.iter().map(|c| ObjectKey {
            cluster: c.target_cluster,
            group: String::new(),
            kind: c.kind().into(),
            namespace: Some(c.target_namespace.clone()),
            name: c.target_name.clone(),
        });
        objects.chain(copies).collect()
    }

    /// The order the host applies a plan in (and `render` shows): Namespaces
    /// first, then the copies (which may need those namespaces), then every
    /// other object in the plugin's order, except that an object another
    /// one refers to by `{kind, name}` comes before it. A round stops at its
    /// first failure, so a reference to a sibling that turns out to be
    /// someone else's object (a `Conflict`) is never written: the grant's
    /// `planned` references hold for what is applied, not only for the plan.
    pub fn steps(&self) -> impl Iterator<Item = Step<'_>> {
        let namespaces = self.manifests.iter().filter(|m| m.is_namespace());
        let others = referenced_first(self.manifests.iter().filter(|m| !m.is_namespace()).collect());
        namespaces.map(Step::Apply).chain(self.copies.iter().map(Step::Copy)).chain(others.into_iter().map(Step::Apply))
    }
}

/// `manifests` in their order, each after the siblings it refers to (in a
/// cycle, the plugin's order decides). Each object is walked once for its
/// references, looked up by place: linear in the plan's size (comparing
/// every pair was quadratic, and every comparison walked a whole object).
fn referenced_first(manifests: Vec<&Manifest>) -> Vec<&Manifest> {
    type Place<'m> = (Cluster, Option<&'m str>, &'m str, &'m str);
    let mut at: HashMap<Place<'_>, Vec<usize>> = HashMap::new();
    for (i, m) in manifests.iter().enumerate() {
        at.entry((m.cluster, m.namespace.as_deref(), m.kind.as_str(), m.name.as_str())).or_default().push(i);
    }
    let siblings: Vec<BTreeSet<usize>> = manifests
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut found = BTreeSet::new();
            references(&m.object, &mut |kind, name| {
                let here = at.get(&(m.cluster, m.namespace.as_deref(), kind, name));
                found.extend(here.into_iter().flatten().filter(|j| **j != i));
            });
            found
        })
        .collect();
    fn visit<'a>(
        i: usize,
        all: &[&'a Manifest],
        siblings: &[BTreeSet<usize>],
        state: &mut [u8],
        out: &mut Vec<&'a Manifest>,
    ) {
        if state[i] != 0 {
            return;
        }
        state[i] = 1;
        for &j in &siblings[i] {
            visit(j, all, siblings, state, out);
        }
        state[i] = 2;
        out.push(all[i]);
    }
    let mut state = vec![0u8; manifests.len()];
    let mut out = Vec::with_capacity(manifests.len());
    for i in 0..manifests.len() {
        visit(i, &manifests, &siblings, &mut state, &mut out);
    }
    out
}

/// Calls `found` with each reference `{kind, name}` in `value`.
fn references<'v>(value: &'v Value, found: &mut impl FnMut(&'v str, &'v str)) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(kind)), Some(Value::String(name))) = (map.get("kind"), map.get("name")) {
                found(kind, name);
            }
            map.values().for_each(|v| references(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, found)),
        _ => {}
    }
}

/// Calls `plan` and checks the result against the requests and the grant.
pub async fn reconcile(planner: &Planner, input: &Input) -> Result<Result<CheckedPlan, PlanError>, Error> {
    match planner.plugin.plan(input).await? {
        Ok(plan) => {
            // The ProviderConfig as the plugin got it (the host wrote it).
            let provider_config: Option<Value> =
                input.provider_config.as_deref().and_then(|text| serde_json::from_str(text).ok());
            let (descriptor, granted) = (planner.descriptor(), &planner.granted);
            let checked = check_plan(descriptor, granted, &input.context, provider_config.as_ref(), &plan);
            let manifests = refused(&planner.plugin, Method::Plan, checked)?;
            Ok(Ok(CheckedPlan {
                manifests,
                copies: plan.copies,
                status: plan.status,
                requeue_after_seconds: plan.requeue_after_seconds,
            }))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// Calls `cleanup` and checks the result against the descriptor.
pub async fn cleanup(planner: &Planner, input: &Input) -> Result<Result<CleanupPlan, PlanError>, Error> {
    let result = planner.plugin.cleanup(input).await?;
    let checked = match &result {
        Ok(CleanupPlan::Teardown(teardown)) => {
            check_teardown(planner.descriptor(), &planner.granted, &input.context, teardown)
        }
        Ok(CleanupPlan::Blocked(blocked)) => check_blocked(planner.descriptor(), blocked),
        Err(_) => Ok(()),
    };
    refused(&planner.plugin, Method::Cleanup, checked)?;
    Ok(result)
}
