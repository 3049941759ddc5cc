//! The cleanup path of an instance being deleted: the plugin's cleanup plan
//! (blocked, or an ordered teardown), then everything else the instance
//! owns, then its cluster access. Only when all of that is gone does the
//! finalizer go.

use std::time::Duration;

use kube::Client;
use kube::api::DynamicObject;
use serde_json::Value;
use service_provider_sdk::contract::{
    Blocked, CleanupPlan, Cluster, Detail, Input, ObjectRef, Observation, ServiceStatus, Teardown,
};
use tracing::{info, warn};

use super::access::{self, InstanceAccess, Target};
use super::apply;
use super::memory::Memo;
use super::reach::{Connected, check_kinds, current_request, instance_access, remaining_access};
use super::shared::{Clusters, Identity};
use super::{Shared, WAIT, not_yet};
use super::{gather, status};
use crate::clusters::ClientCache;
use crate::error::report;
use crate::instance::{Instance, Reach};
use crate::keys::InstanceKey;
use crate::owner::Owner;
use crate::plugin::plan::scope::scope_namespace;
use crate::plugin::plan::{self, Inventory};
use crate::stores::Lookup;
use crate::stores::blockers::Wanted;
use crate::{Error, resource};

/// Deletion. Returns `Ok` only when everything is gone, so the finalizer
/// helper removes the finalizer only then; `Error::NotYet` keeps it.
pub(super) async fn run(object: &DynamicObject, provider_config: Option<&Value>, ctx: &Shared) -> Result<(), Error> {
    let raw = serde_json::to_value(object).map_err(|e| Error::json("reading the service object", e))?;
    let instance = Instance::from_object(&raw)?;
    match cleanup_steps(object, &raw, &instance, provider_config, ctx).await {
        Ok(()) => Ok(()),
        Err(e @ Error::NotYet { .. }) => Err(e),
        Err(e) => {
            ctx.status
                .write(
                    object,
                    &status::terminating_failed(e.category().reason(), report(&e)),
                    status::Severity::Warning,
                )
                .await?;
            Err(e)
        }
    }
}

/// Deletion as a list of steps; each returns "not yet" (or fails) to end
/// this round early.
async fn cleanup_steps(
    object: &DynamicObject,
    raw: &Value,
    instance: &Instance,
    provider_config: Option<&Value>,
    ctx: &Shared,
) -> Result<(), Error> {
    let key = InstanceKey::of(object);
    let tenant = instance.tenant_namespace();
    let held = hold_access(ctx, object, &key, instance, &tenant).await?;
    let reach = held.reach(&ctx.clusters);
    let input = observe(ctx, &key, raw, instance, provider_config, &held, &reach).await?;
    let teardown = match plan::cleanup(&ctx.plugin.planner, &input).await? {
        Err(e) => {
            return Err(Error::plugin_transient(&ctx.plugin.descriptor().name, &e.to_string()));
        }
        Ok(CleanupPlan::Blocked(blocked)) => {
            return wait_for_blockers(ctx, object, &key, &held, &reach, &input, blocked).await;
        }
        Ok(CleanupPlan::Teardown(teardown)) => teardown,
    };
    ctx.watches.blockers.forget(&key);
    let in_progress =
        ServiceStatus { resources: teardown.resources.clone(), ..status::terminating("Cleanup in progress") };
    ctx.status.write(object, &in_progress, status::Severity::Normal).await?;
    held.revoke_lost(&ctx.clusters, &ctx.identity).await?;
    let owner = instance.owner(&ctx.identity.provider_name);
    tear_down(ctx, &key, &reach, &teardown, &owner).await?;
    prune_the_rest(ctx, &key, &reach, &input.context, &owner).await?;
    held.revoke_all(&ctx.clusters, &ctx.identity).await?;
    held.forget_clients(&ctx.clusters.tenants);
    ctx.memory.forget(&key);
    info!("cleanup complete");
    Ok(())
}

/// One tenant cluster's access as deletion finds it.
struct ClusterHold<'a> {
    cluster: Cluster,
    request: InstanceAccess<'a>,
    /// The AccessRequest as last seen.
    known: Lookup,
    contact: Contact,
}

/// Whether deletion can act on a tenant cluster (see [`answering`]).
enum Contact {
    /// Granted and answering: the kubeconfig and a client.
    Answering(Connected),
    /// No access granted (or none left).
    NoAccess,
    /// It stopped answering past the grace: it counts as gone.
    Lost,
}

impl Contact {
    fn connected(&self) -> Option<&Connected> {
        match self {
            Contact::Answering(connected) => Some(connected),
            Contact::NoAccess | Contact::Lost => None,
        }
    }
}

/// The access of every tenant cluster the instance may have.
struct Access<'a>(Vec<ClusterHold<'a>>);

/// Step: access only while an AccessRequest is alive and granted (if it is
/// gone, the platform side is still cleaned up), and only while the
/// cluster answers; the plugin's kinds checked on each.
async fn hold_access<'a>(
    ctx: &'a Shared,
    object: &DynamicObject,
    key: &InstanceKey,
    instance: &'a Instance,
    tenant: &'a str,
) -> Result<Access<'a>, Error> {
    let mut held = Vec::new();
    for target in [Target::ControlPlane, Target::Workload] {
        if target == Target::Workload && !ctx.plugin.granted().workload_cluster {
            continue;
        }
        let cluster = target.cluster();
        let request = instance_access(&ctx.plugin, instance, tenant, target);
        let known = current_request(ctx, &request).await?;
        let access = remaining_access(ctx, key, &request, &known, cluster).await?;
        let contact = answering(ctx, object, key, cluster, access).await?;
        if let Some(connected) = contact.connected() {
            check_kinds(&ctx.plugin, &ctx.memory, key, cluster, &connected.client).await?;
        }
        held.push(ClusterHold { cluster, request, known, contact });
    }
    Ok(Access(held))
}

impl Access<'_> {
    fn access(&self, cluster: Cluster) -> Option<&Connected> {
        self.0.iter().find(|h| h.cluster == cluster)?.contact.connected()
    }

    fn reach<'c>(&'c self, clusters: &'c Clusters) -> Reach<'c> {
        Reach {
            platform: &clusters.platform,
            onboarding: &clusters.onboarding,
            control_plane: self.access(Cluster::ControlPlane).map(|c| &c.client),
            workload: self.access(Cluster::Workload).map(|c| &c.client),
        }
    }

    /// Whose credentials a tenant cluster is watched with (see `blockers`).
    fn identity(&self, cluster: Cluster) -> Option<String> {
        self.access(cluster).map(|c| format!("{cluster} {}/{}", c.kubeconfig.namespace, c.kubeconfig.name))
    }

    /// Step: access to a cluster that is gone is revoked first: nothing can
    /// act on that cluster any more, and whatever still holds on to the
    /// access to finish its own work there (a finalizer, say) can only give
    /// up once the access is gone. So is an access whose revocation has
    /// begun (it counts as gone for the plugin anyway).
    async fn revoke_lost(&self, clusters: &Clusters, identity: &Identity) -> Result<(), Error> {
        for held in &self.0 {
            let being_revoked = held.known.clone().found().is_some_and(|ar| ar.metadata.deletion_timestamp.is_some());
            if matches!(held.contact, Contact::Lost) || being_revoked {
                revoke(&clusters.platform, &identity.field_manager, &held.request, held.known.clone()).await?;
            }
        }
        Ok(())
    }

    /// Step, the last: the instance's cluster access.
    async fn revoke_all(&self, clusters: &Clusters, identity: &Identity) -> Result<(), Error> {
        for held in &self.0 {
            revoke(&clusters.platform, &identity.field_manager, &held.request, held.known.clone()).await?;
        }
        Ok(())
    }

    fn forget_clients(&self, tenants: &ClientCache) {
        for connected in self.0.iter().filter_map(|h| h.contact.connected()) {
            tenants.forget(&connected.kubeconfig);
        }
    }
}

/// Step: the plugin's input, with what a blocked deletion watches answered
/// from the watches instead of read again.
async fn observe(
    ctx: &Shared,
    key: &InstanceKey,
    raw: &Value,
    instance: &Instance,
    provider_config: Option<&Value>,
    held: &Access<'_>,
    reach: &Reach<'_>,
) -> Result<Input, Error> {
    let at = |cluster| held.access(cluster).map(|c| c.kubeconfig.clone());
    let context = gather::context(
        instance,
        &ctx.identity.provider_name,
        &ctx.identity.pod_namespace,
        at(Cluster::ControlPlane),
        at(Cluster::Workload),
    );
    let watched = |o: &Observation| {
        let packed = ctx.watches.blockers.objects(key, &o.id, &held.identity(o.cluster)?)?;
        packed.iter().map(|p| p.value().ok()).collect::<Option<Vec<_>>>()
    };
    let stores = ctx.watches.stores();
    let observer = ctx.plugin.observer(reach, &stores);
    let purpose = gather::Purpose::Cleanup { watched: &watched };
    let observed = gather::observe(&observer, &context, purpose, &mut gather::Fetched::default()).await?;
    Ok(gather::input(raw, provider_config, context, observed))
}

/// Step, when the plugin blocks the deletion: until the next round, watch
/// what it observed on the tenant's clusters instead of reading it again;
/// say why in the status; look again when the plugin asked.
async fn wait_for_blockers(
    ctx: &Shared,
    object: &DynamicObject,
    key: &InstanceKey,
    held: &Access<'_>,
    reach: &Reach<'_>,
    input: &Input,
    blocked: Blocked,
) -> Result<(), Error> {
    let purpose = gather::Purpose::Cleanup { watched: &|_| None };
    let wanted = gather::observations(&ctx.plugin.granted().observations, purpose)
        .filter_map(|o| {
            Some(Wanted {
                id: o.id.clone(),
                client: reach.client(o.cluster)?.clone(),
                resource: resource::of_kind(&o.api),
                namespace: scope_namespace(&o.scope, &input.context).map(str::to_string),
                name: o.name.clone(),
                metadata_only: o.detail == Detail::Metadata,
                identity: held.identity(o.cluster)?,
            })
        })
        .collect();
    ctx.watches.blockers.keep(key, wanted);
    let desired = ServiceStatus { resources: blocked.resources, ..status::terminating(&blocked.message) };
    ctx.status.write(object, &desired, status::Severity::Normal).await?;
    // At least the floor a plan's requeue has (a watch wakes the instance
    // sooner where it can).
    let after =
        Duration::from_secs(u64::from(blocked.requeue_after_seconds)).max(crate::reconcile::budget::REQUEUE_FLOOR);
    Err(not_yet(blocked.message, after))
}

/// What one round found gone is not looked at again in the next (for a
/// ControlPlane object that would be a read per round).
fn gone(target: &ObjectRef) -> Memo {
    let place = target.namespace.as_ref().map_or(target.name.clone(), |ns| format!("{ns}/{}", target.name));
    Memo::Gone { cluster: target.cluster, what: format!("{} {place}", target.kind) }
}

/// Step: the plugin's order first, each object gone before the next; then
/// the copies (nothing waits on them).
async fn tear_down(
    ctx: &Shared,
    key: &InstanceKey,
    reach: &Reach<'_>,
    teardown: &Teardown,
    owner: &Owner,
) -> Result<(), Error> {
    let stores = ctx.watches.stores();
    let cached = |target: &ObjectRef| match target.cluster {
        Cluster::Platform => stores.ours(&target.api_version, &target.kind, target.namespace.as_deref(), &target.name),
        _ => Lookup::Unknown,
    };
    for target in &teardown.objects {
        let Some(client) = reach.client(target.cluster) else { continue };
        if ctx.memory.is_verified(key, &gone(target)) {
            continue;
        }
        if !apply::delete(client, target, cached(target), owner).await? {
            return Err(not_yet(format!("waiting for {} {} to be deleted", target.kind, target.name), WAIT));
        }
        ctx.memory.set_verified(key, gone(target));
    }
    for target in &teardown.copies {
        if let Some(client) = reach.client(target.cluster)
            && !ctx.memory.is_verified(key, &gone(target))
        {
            apply::delete(client, target, cached(target), owner).await?;
            ctx.memory.set_verified(key, gone(target));
        }
    }
    Ok(())
}

/// Step: anything else the instance owns, listed from the API servers (the
/// last word before the finalizer goes, also on what a store may not have
/// seen yet). Once per deletion: nothing makes new objects for an instance
/// that is being deleted.
async fn prune_the_rest(
    ctx: &Shared,
    key: &InstanceKey,
    reach: &Reach<'_>,
    context: &service_provider_sdk::contract::Context,
    owner: &Owner,
) -> Result<(), Error> {
    if ctx.memory.inventory_changed(key, &Inventory::new()) {
        for (cluster, client) in reach.targets() {
            let scopes = ctx.rollout.writable(&ctx.plugin, context, cluster);
            apply::prune(client, cluster, &scopes, owner, &Inventory::new(), None).await?;
        }
        ctx.memory.pruned(key, Inventory::new());
    }
    Ok(())
}

/// Deletes the AccessRequest (and for a workload cluster the ClusterRequest)
/// of one cluster; "not yet" until they are gone.
async fn revoke(
    platform: &Client,
    field_manager: &str,
    request: &InstanceAccess<'_>,
    known: Lookup,
) -> Result<(), Error> {
    let tenant = request.tenant_namespace;
    if !access::delete_access_request(platform, request, known, field_manager).await? {
        let reason = format!("waiting for AccessRequest {tenant}/{} to be deleted", request.name());
        return Err(not_yet(reason, WAIT));
    }
    if request.target == Target::Workload && !access::delete_cluster_request(platform, request).await? {
        let reason = format!("waiting for ClusterRequest {tenant}/{} to be deleted", request.name());
        return Err(not_yet(reason, WAIT));
    }
    Ok(())
}

/// How long one check whether a cluster answers may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

fn cluster_name(cluster: Cluster) -> &'static str {
    match cluster {
        Cluster::ControlPlane => "ControlPlane",
        Cluster::Workload => "workload cluster",
        Cluster::Platform => "platform cluster",
        Cluster::Onboarding => "onboarding cluster",
    }
}

/// The rule for a granted cluster that does not answer during deletion
/// (`/version` fails or times out): deletion waits for it for
/// [`Clusters::unreachable_grace`], saying so in the status; a blip must not
/// cost the plugin its look at the cluster (e.g. a check that blocks
/// deletion). After that the cluster counts as gone: the plugin's cleanup
/// sees no access to it (no context entry, no observations, like after a
/// revoked access) and its access is revoked before the teardown (the
/// cluster is [`Contact::Lost`]).
async fn answering(
    ctx: &Shared,
    object: &DynamicObject,
    key: &InstanceKey,
    cluster: Cluster,
    access: Option<Connected>,
) -> Result<Contact, Error> {
    let Some(connected) = access else { return Ok(Contact::NoAccess) };
    // Asked once per deletion: a cluster that stops answering later makes
    // the reconcile fail, which distrusts everything verified, so the next
    // one asks again.
    let answers = Memo::Answers(cluster);
    if ctx.memory.is_verified(key, &answers) {
        return Ok(Contact::Answering(connected));
    }
    let error = match tokio::time::timeout(PROBE_TIMEOUT, connected.client.apiserver_version()).await {
        Ok(Ok(_)) => {
            ctx.memory.answered(key, cluster);
            ctx.memory.set_verified(key, answers);
            return Ok(Contact::Answering(connected));
        }
        Ok(Err(e)) => report(&e),
        Err(_) => format!("no answer within {PROBE_TIMEOUT:?}"),
    };
    let waited = ctx.memory.unanswered(key, cluster).elapsed();
    let name = cluster_name(cluster);
    if let Some(left) = ctx.clusters.unreachable_grace.checked_sub(waited).filter(|left| !left.is_zero()) {
        // A stable text (no countdown): every change is an Event.
        let message = format!(
            "the {name} does not answer ({error}); deletion waits up to {}s for it, then continues without it \
             (whatever the service installed there is then left behind)",
            ctx.clusters.unreachable_grace.as_secs()
        );
        ctx.status.write(object, &status::terminating(&message), status::Severity::Normal).await?;
        return Err(not_yet(message, WAIT.min(left)));
    }
    warn!(cluster = %cluster, error = %error, waited = ?waited, "cluster unreachable: deletion continues without it");
    Ok(Contact::Lost)
}
