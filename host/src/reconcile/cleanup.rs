//! The cleanup path of an instance being deleted: the plugin's cleanup plan
//! (blocked, or an ordered teardown), then everything else the instance
//! owns, then its cluster access. Only when all of that is gone does the
//! finalizer go.

use std::time::Duration;

use kube::api::DynamicObject;
use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Cluster, ServiceStatus};
use tracing::info;

use super::access::{instance_access, remaining_access};
use super::{Context, WAIT, key_of, not_yet, timed};
use crate::access::{self, Target};
use crate::apply::{self, Scope};
use crate::error::report;
use crate::instance::{Instance, Reach};
use crate::plan::{self, Inventory};
use crate::{Error, gather, status};

/// Deletion. Returns `Ok` only when everything is gone, so the finalizer
/// helper removes the finalizer only then; `Error::NotYet` keeps it.
pub(super) async fn cleanup_instance(
    object: &DynamicObject,
    provider_config: Option<&Value>,
    ctx: &Context,
) -> Result<(), Error> {
    let raw = serde_json::to_value(object).map_err(|e| Error::json("reading the service object", e))?;
    let instance = Instance::from_object(&raw)?;
    match cleanup_steps(object, &raw, &instance, provider_config, ctx).await {
        Ok(()) => Ok(()),
        Err(e @ Error::NotYet { .. }) => Err(e),
        Err(e) => {
            ctx.status.write(object, &status::terminating_failed(e.category().reason(), report(&e)), true).await?;
            Err(e)
        }
    }
}

async fn cleanup_steps(
    object: &DynamicObject,
    raw: &Value,
    instance: &Instance,
    provider_config: Option<&Value>,
    ctx: &Context,
) -> Result<(), Error> {
    let tenant = instance.tenant_namespace();
    let control_plane_request = instance_access(ctx, instance, &tenant, Target::ControlPlane);
    let workload_request = instance_access(ctx, instance, &tenant, Target::Workload);
    let workload_cluster = ctx.granted().workload_cluster;
    // Access only while an AccessRequest is alive and granted: if it is
    // gone, the platform side is still cleaned up.
    let cp = remaining_access(ctx, &control_plane_request, Cluster::ControlPlane).await?;
    let wl = match workload_cluster {
        true => remaining_access(ctx, &workload_request, Cluster::Workload).await?,
        false => None,
    };
    let context = gather::context(
        instance,
        &ctx.provider_name,
        &ctx.pod_namespace,
        cp.as_ref().map(|(at, _)| at.clone()),
        wl.as_ref().map(|(at, _)| at.clone()),
    );
    let reach = Reach {
        platform: &ctx.platform,
        onboarding: &ctx.onboarding,
        control_plane: cp.as_ref().map(|(_, c)| c),
        workload: wl.as_ref().map(|(_, c)| c),
    };
    let observed = gather::observe(&reach, &ctx.granted().observations, &context, true).await?;
    let input = gather::input(raw, provider_config, context, observed);
    let owner = instance.owner(&ctx.provider_name);

    let teardown = match timed(ctx, "cleanup", plan::cleanup(&ctx.planner, &input)).await? {
        Err(e) => return Err(Error::PluginTransient(e.to_string())),
        Ok(CleanupPlan::Blocked(blocked)) => {
            let desired = ServiceStatus { resources: blocked.resources, ..status::terminating(&blocked.message) };
            ctx.status.write(object, &desired, false).await?;
            return Err(not_yet(blocked.message, Duration::from_secs(u64::from(blocked.requeue_after_seconds.max(1)))));
        }
        Ok(CleanupPlan::Teardown(teardown)) => teardown,
    };
    let in_progress =
        ServiceStatus { resources: teardown.resources.clone(), ..status::terminating("Cleanup in progress") };
    ctx.status.write(object, &in_progress, false).await?;

    // The plugin's order first, each object gone before the next, ...
    for target in &teardown.objects {
        let Some(client) = reach.client(target.cluster) else { continue };
        if !apply::delete(client, target, &owner).await? {
            return Err(not_yet(format!("waiting for {} {} to be deleted", target.kind, target.name), WAIT));
        }
    }
    // ... then the copies (nothing waits on them) and anything else the
    // instance owns, ...
    for target in &teardown.copies {
        if let Some(client) = reach.client(target.cluster) {
            apply::delete(client, target, &owner).await?;
        }
    }
    for (cluster, client) in reach.targets() {
        let scopes = Scope::writable(ctx.descriptor(), &input.context, cluster);
        apply::prune(client, cluster, &scopes, &owner, &Inventory::new()).await?;
    }
    // ... and only then its cluster access.
    let mut requests = vec![&control_plane_request];
    if workload_cluster {
        requests.push(&workload_request);
    }
    for request in requests {
        if !access::delete_access_request(&ctx.platform, request).await? {
            let reason = format!("waiting for AccessRequest {tenant}/{} to be deleted", request.name());
            return Err(not_yet(reason, WAIT));
        }
        if request.target == Target::Workload && !access::delete_cluster_request(&ctx.platform, request).await? {
            let reason = format!("waiting for ClusterRequest {tenant}/{} to be deleted", request.name());
            return Err(not_yet(reason, WAIT));
        }
    }
    for (at, _) in cp.iter().chain(wl.iter()) {
        ctx.clients.forget(at);
    }
    ctx.instances.forget(&key_of(object));
    info!("cleanup complete");
    Ok(())
}
