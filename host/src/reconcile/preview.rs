//! The preview path: one instance as the current component plans it and
//! as a candidate would, and what switching would change on its clusters,
//! written nowhere.
//!
//! access (only what is granted already) → connect (the tenant's clusters
//! only when asked: that reads their kubeconfig Secrets) → gather (each
//! component its own observations) → plan (both, each checked against its
//! grant) → compare: the candidate's objects against what is live (a
//! server-side dry run; on a cluster not reached, against the current
//! component's plan), what it no longer plans (pruned after a switch),
//! its copies, status and refusals against the current answer, and the
//! token rules of its AccessRequests against the live ones.
//!
//! Every client of a preview refuses writes before they are sent
//! ([`crate::clusters::Writes::Refused`]): a preview never asks for access,
//! never applies, copies, prunes or writes a status.

use std::collections::BTreeSet;

use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::Value;
use service_provider_sdk::contract::{Cluster, KubeconfigRef, PolicyRule};

use super::Shared;
use super::access::{self, Answer as AccessAnswer, Target};
use super::apply::dry_run::{Compared, Forbidden, WouldApply, would_apply};
use super::live::{Kubeconfigs, connect, observe};
use super::reach::{check_kinds, current_request, instance_access};
use super::shared::Loaded;
use crate::Error;
use crate::error::report;
use crate::instance::{Instance, Reach};
use crate::keys::InstanceKey;
use crate::plugin::grant::delta;
use crate::plugin::plan::compare::{self, Answer, FieldChange, StatusChange};
use crate::plugin::plan::{self, CheckedPlan, ObjectKey};
use crate::stores::Lookup;

/// How one instance would fare under the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Nothing would change.
    Unchanged,
    /// Objects, copies, status or token rules would change.
    Changed,
    /// The current component plans it; the candidate's answer is refused
    /// (or fails).
    NewlyRefused,
    /// The current answer is refused; the candidate plans it.
    NoLongerRefused,
    /// Not previewed: no access granted yet, or being deleted.
    Skipped,
    /// The preview itself failed (a cluster did not answer): why.
    Failed,
}

/// What would happen to one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChange {
    pub object: ObjectKey,
    pub action: Action,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared: Option<Compared>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Create,
    Update,
    /// No longer planned: deleted by the next prune.
    Prune,
    /// No longer planned, and kept: Namespaces are never pruned.
    Keep,
}

/// The token rules of one of the instance's AccessRequests that would
/// change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RuleChanges {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

impl RuleChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// One instance previewed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstancePreview {
    /// `<namespace>/<name>` on the onboarding cluster.
    pub instance: String,
    pub verdict: Verdict,
    /// The current component's answer, in a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The candidate's answer, in a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectChange>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies_added: Vec<ObjectKey>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies_removed: Vec<ObjectKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusChange>,
    #[serde(skip_serializing_if = "RuleChanges::is_empty")]
    pub token_rules: RuleChanges,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl InstancePreview {
    fn new(instance: String, verdict: Verdict, reason: Option<String>) -> Self {
        InstancePreview {
            instance,
            verdict,
            current: None,
            candidate: None,
            objects: Vec::new(),
            copies_added: Vec::new(),
            copies_removed: Vec::new(),
            status: None,
            token_rules: RuleChanges::default(),
            reason,
        }
    }
}

/// What every instance of one preview shares: the ProviderConfigs to plan
/// with (the live one for the current component, and the candidate's:
/// another one, to preview a change of it), and where dry runs are refused.
pub struct Fleet<'a> {
    pub current: Option<&'a Value>,
    pub candidate: Option<&'a Value>,
    pub forbidden: &'a Forbidden,
    /// Whether each instance's ControlPlane (and workload cluster) is
    /// reached, with the kubeconfig Secrets of its AccessRequests; if not,
    /// the objects there are compared with the current component's plan.
    pub tenant_clusters: bool,
}

/// Previews one instance; never fails: what could not be previewed is the
/// instance's verdict, with why.
pub async fn preview(ctx: &Shared, candidate: &Loaded, object: &DynamicObject, fleet: &Fleet<'_>) -> InstancePreview {
    let label = InstanceKey::of(object).to_string();
    if object.metadata.deletion_timestamp.is_some() {
        return InstancePreview::new(label, Verdict::Skipped, Some("being deleted".into()));
    }
    match previewed(ctx, candidate, object, fleet, &label).await {
        Ok(done) => done,
        Err(e) => InstancePreview::new(label, Verdict::Failed, Some(crate::syntax::flat(&report(&e)))),
    }
}

/// The steps of one preview.
async fn previewed(
    ctx: &Shared,
    candidate: &Loaded,
    object: &DynamicObject,
    fleet: &Fleet<'_>,
    label: &str,
) -> Result<InstancePreview, Error> {
    let raw = serde_json::to_value(object).map_err(|e| Error::json("reading the service object", e))?;
    let instance = Instance::from_object(&raw)?;
    let key = InstanceKey::of(object);
    let tenant = instance.tenant_namespace();
    // Step: the access already granted (a preview requests none).
    let control_plane = granted(ctx, &instance, &tenant, Target::ControlPlane).await?;
    let Some((control_plane, control_plane_request)) = control_plane else {
        let why = format!("no ControlPlane access granted yet (AccessRequest {tenant})");
        return Ok(InstancePreview::new(label.into(), Verdict::Skipped, Some(why)));
    };
    let workload = match ctx.plugin.granted().workload_cluster || candidate.granted().workload_cluster {
        true => granted(ctx, &instance, &tenant, Target::Workload).await?,
        false => None,
    };
    let kubeconfigs =
        || Kubeconfigs { control_plane: control_plane.clone(), workload: workload.as_ref().map(|(at, _)| at.clone()) };
    // Step: clients of the tenant's clusters, when asked for, both
    // components' kinds checked on them.
    let clients = match fleet.tenant_clusters {
        true => Some(connect(ctx, &ctx.plugin, &key, &kubeconfigs()).await?),
        false => None,
    };
    if let Some(clients) = &clients {
        check_kinds(candidate, &ctx.memory, &key, Cluster::ControlPlane, &clients.control_plane).await?;
        if let Some(workload) = &clients.workload {
            check_kinds(candidate, &ctx.memory, &key, Cluster::Workload, workload).await?;
        }
    }
    let reach = Reach {
        platform: &ctx.clusters.platform,
        onboarding: &ctx.clusters.onboarding,
        control_plane: clients.as_ref().map(|c| &c.control_plane),
        workload: clients.as_ref().and_then(|c| c.workload.as_ref()),
    };
    // Step: each component's input, then its checked answer.
    let asked = Asked { raw: &raw, instance: &instance, reach: &reach };
    let current = asked.answer(ctx, &ctx.plugin, fleet.current, kubeconfigs()).await?;
    let next = asked.answer(ctx, candidate, fleet.candidate, kubeconfigs()).await?;
    let mut preview = InstancePreview::new(label.into(), Verdict::Unchanged, None);
    preview.current = Some(current.line());
    preview.candidate = Some(next.line());
    // Step: what the candidate's answer would change: its objects against
    // what is live; against the current answer, its status, and what it no
    // longer writes or newly copies.
    let compare::Differences { added, removed, changed, status, .. } = compare::compare(&current, &next);
    preview.status = status;
    if let Some(plan) = next.plan() {
        let owner = instance.owner(&ctx.identity.provider_name);
        for (manifest, key) in plan.manifests.iter().zip(plan.inventory_in_order()) {
            let change = match reach.client(manifest.cluster) {
                Some(client) => {
                    let manager = &ctx.identity.field_manager;
                    object_change(key, would_apply(client, manifest, &owner, manager, fleet.forbidden).await?)
                }
                None => planned_change(key, &current, &added, &changed),
            };
            preview.objects.extend(change);
        }
    }
    if let (Some(was), Some(now)) = (current.plan(), next.plan()) {
        let (was, now) = (copies(was), copies(now));
        preview.copies_added = added.into_iter().filter(|key| now.contains(key)).collect();
        for key in removed {
            match was.contains(&key) {
                true => preview.copies_removed.push(key),
                false => preview.objects.push(no_longer_planned(key)),
            }
        }
    }
    // Step: the token rules each AccessRequest would ask for.
    let mut requests = vec![(Target::ControlPlane, control_plane_request)];
    requests.extend(workload.map(|(_, request)| (Target::Workload, request)));
    for (target, live) in requests {
        let wanted = instance_access(candidate, &instance, &tenant, target);
        let changes = rule_changes(&live, wanted.rules, target.cluster());
        preview.token_rules.added.extend(changes.added);
        preview.token_rules.removed.extend(changes.removed);
    }
    preview.verdict = verdict(&current, &next, &preview);
    Ok(preview)
}

/// What both components are asked about.
struct Asked<'a> {
    raw: &'a Value,
    instance: &'a Instance,
    reach: &'a Reach<'a>,
}

impl Asked<'_> {
    /// Step: `plugin`'s input with `config`, then its checked answer.
    async fn answer(
        &self,
        ctx: &Shared,
        plugin: &Loaded,
        config: Option<&Value>,
        kubeconfigs: Kubeconfigs,
    ) -> Result<Answer, Error> {
        let Some(config) = config else { return Ok(Answer::InvalidInput("no ProviderConfig".into())) };
        let (input, _) = observe(ctx, plugin, self.raw, self.instance, config, kubeconfigs, self.reach).await?;
        Ok(Answer::of(plan::reconcile(&plugin.planner, &input).await))
    }
}

/// The kubeconfig of the instance's AccessRequest for `target`, if it is
/// granted, and the request as it is.
async fn granted(
    ctx: &Shared,
    instance: &Instance,
    tenant: &str,
    target: Target,
) -> Result<Option<(KubeconfigRef, DynamicObject)>, Error> {
    let request = instance_access(&ctx.plugin, instance, tenant, target);
    let Lookup::Found(live) = current_request(ctx, &request).await? else { return Ok(None) };
    match access::serving(&live) {
        AccessAnswer::Granted(at) => Ok(Some((at, DynamicObject::clone(&live)))),
        AccessAnswer::Pending | AccessAnswer::Denied => Ok(None),
    }
}

fn object_change(object: ObjectKey, would: WouldApply) -> Option<ObjectChange> {
    if !would.changes() {
        return None;
    }
    let action = if would.create { Action::Create } else { Action::Update };
    Some(ObjectChange { object, action, fields: would.fields, compared: Some(would.compared) })
}

/// An object on a cluster the preview did not reach, against the current
/// component's plan: created if only the candidate plans it (or the
/// current component has no plan), updated if it plans it otherwise.
fn planned_change(
    object: ObjectKey,
    current: &Answer,
    added: &[ObjectKey],
    changed: &[compare::Changed],
) -> Option<ObjectChange> {
    let compared = Some(Compared::Plans);
    // Without a current plan (refused, failed), everything is new.
    if current.plan().is_none() || added.contains(&object) {
        return Some(ObjectChange { object, action: Action::Create, fields: Vec::new(), compared });
    }
    let fields = changed.iter().find(|c| c.object == object)?.fields.clone();
    Some(ObjectChange { object, action: Action::Update, fields, compared })
}

/// An object the current plan writes and the candidate's does not: pruned
/// after a switch (a Namespace is kept).
fn no_longer_planned(object: ObjectKey) -> ObjectChange {
    let namespace = object.kind == "Namespace" && object.group.is_empty();
    let action = if namespace { Action::Keep } else { Action::Prune };
    ObjectChange { object, action, fields: Vec::new(), compared: None }
}

/// The copies of a plan, by target.
fn copies(plan: &CheckedPlan) -> BTreeSet<ObjectKey> {
    let objects = plan.manifests.len();
    plan.inventory_in_order().into_iter().skip(objects).collect()
}

/// The rules `wanted` adds to and drops from the live AccessRequest's.
fn rule_changes(live: &DynamicObject, wanted: &[PolicyRule], cluster: Cluster) -> RuleChanges {
    let rules = live.data.pointer("/spec/token/permissions/0/rules").cloned().unwrap_or(Value::Null);
    let live: Vec<PolicyRule> = serde_json::from_value(rules).unwrap_or_default();
    let name = match cluster {
        Cluster::Workload => "workload",
        _ => "ControlPlane",
    };
    let line = |r: &PolicyRule| delta::token_rule(name, r);
    RuleChanges {
        added: wanted.iter().filter(|r| !live.contains(r)).map(line).collect(),
        removed: live.iter().filter(|r| !wanted.contains(r)).map(line).collect(),
    }
}

fn verdict(current: &Answer, next: &Answer, preview: &InstancePreview) -> Verdict {
    let refused = |a: &Answer| matches!(a, Answer::Refused(_));
    match (refused(current), refused(next)) {
        (false, true) => return Verdict::NewlyRefused,
        (true, false) => return Verdict::NoLongerRefused,
        _ => {}
    }
    let changed = current.word() != next.word()
        || !preview.objects.is_empty()
        || !preview.copies_added.is_empty()
        || !preview.copies_removed.is_empty()
        || preview.status.is_some()
        || !preview.token_rules.is_empty();
    if changed { Verdict::Changed } else { Verdict::Unchanged }
}
