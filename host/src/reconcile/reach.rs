//! Cluster access for one instance, as both reconcile paths need it: the
//! apply path requests and waits for it; the cleanup path uses only what is
//! still granted.

use kube::Client;
use service_provider_sdk::contract::{Cluster, KubeconfigRef};
use tracing::warn;

use super::Shared;
use super::access::{self, Answer, InstanceAccess, Target};
use super::memory::{Memo, Memory};
use super::shared::{Clusters, Loaded};
use crate::adopt::Predecessor;
use crate::clusters::kinds;
use crate::error::{AccessFailure, Error};
use crate::instance::Instance;
use crate::keys::InstanceKey;
use crate::stores::Lookup;

/// The request for one of the instance's clusters.
pub(super) fn instance_access<'a>(
    plugin: &'a Loaded,
    instance: &'a Instance,
    tenant: &'a str,
    target: Target,
) -> InstanceAccess<'a> {
    let granted = plugin.granted();
    InstanceAccess {
        controller: &plugin.descriptor().service.group,
        instance_name: &instance.name,
        instance_namespace: &instance.namespace,
        tenant_namespace: tenant,
        rules: match target {
            Target::ControlPlane => &granted.control_plane_rules,
            Target::Workload => &granted.workload_rules,
        },
        target,
    }
}

/// A tenant cluster the instance still reaches: its granted kubeconfig and
/// a client built from it.
pub(super) struct Connected {
    pub kubeconfig: KubeconfigRef,
    pub client: Client,
}

/// What obtaining one cluster's access came to.
pub(super) enum Obtained {
    Granted(KubeconfigRef),
    /// Not yet: the status says what we wait for.
    Waiting {
        message: String,
        /// The request was made by this very reconcile.
        just_requested: bool,
    },
}

fn what(target: Target) -> &'static str {
    match target {
        Target::ControlPlane => "ControlPlane",
        Target::Workload => "workload cluster",
    }
}

/// The client for a granted cluster. Its kubeconfig Secret is read again
/// only every [`super::memory::VERIFY_INTERVAL`], after a failure of the
/// instance (a rotated token shows as a 401) or when a `reconcile`
/// operation asks for it.
pub(super) async fn client_for(
    clusters: &Clusters,
    memory: &Memory,
    key: &InstanceKey,
    at: &KubeconfigRef,
    cluster: Cluster,
) -> Result<Client, Error> {
    let memo = Memo::Kubeconfig { namespace: at.namespace.clone(), name: at.name.clone() };
    if memory.is_verified(key, &memo)
        && let Some(client) = clusters.tenants.cached(at).await?
    {
        return Ok(client);
    }
    let client = clusters.tenants.get(&clusters.platform, at, cluster).await?;
    memory.set_verified(key, memo);
    Ok(client)
}

/// Checks the plugin's kinds on a tenant cluster against its discovery
/// (those the platform's discovery did not check at start), once per
/// [`super::memory::VERIFY_INTERVAL`] for a group version it serves; one
/// it does not serve yet is looked at again next time.
pub(super) async fn check_kinds(
    plugin: &Loaded,
    memory: &Memory,
    key: &InstanceKey,
    cluster: Cluster,
    client: &Client,
) -> Result<(), Error> {
    for (api_version, kinds) in kinds::on_cluster(plugin.descriptor(), cluster) {
        let component = plugin.planner.plugin.digest().to_string();
        let memo = Memo::Kinds { cluster, api_version: api_version.clone(), component };
        if plugin.platform_versions.contains(&api_version) || memory.is_verified(key, &memo) {
            continue;
        }
        if kinds::verify(client, cluster, &api_version, &kinds).await? {
            memory.set_verified(key, memo);
        }
    }
    Ok(())
}

/// Requests access (creating the workload ClusterRequest first when needed)
/// and reads the grant. A predecessor's AccessRequest taken over is added
/// to `adopted` (its place, and from which field manager).
pub(super) async fn obtain(
    ctx: &Shared,
    request: &InstanceAccess<'_>,
    adopted: &mut Vec<Predecessor>,
) -> Result<Obtained, Error> {
    let place = format!("{}/{}", request.tenant_namespace, request.name());
    if request.target == Target::Workload {
        let cluster_request =
            access::ensure_cluster_request(&ctx.clusters.platform, request, &ctx.identity.field_manager).await?;
        if access::answer(&cluster_request) == Answer::Denied {
            let request = format!("ClusterRequest {place}");
            return Err(AccessFailure::Denied { what: "the workload cluster".into(), request }.into());
        }
    }
    let cached = ctx.watches.stores().our_access_request(request.tenant_namespace, &request.name());
    let ensured = access::ensure_access_request(
        &ctx.clusters.platform,
        request,
        cached,
        &ctx.identity.field_manager,
        &ctx.identity.adoption,
    )
    .await?;
    if let Some(by) = ensured.adopted {
        adopted.push(Predecessor { place: format!("AccessRequest {place} on the platform cluster"), by });
    }
    let (live, just_requested) = (ensured.live, ensured.created);
    let what = what(request.target);
    // Until a changed spec is granted, the previous grant serves.
    match access::serving(&live) {
        Answer::Granted(at) => Ok(Obtained::Granted(at)),
        Answer::Denied => {
            Err(AccessFailure::Denied { what: format!("{what} access"), request: format!("AccessRequest {place}") }
                .into())
        }
        Answer::Pending => {
            let message = format!("Waiting for {what} access (AccessRequest {place})");
            Ok(Obtained::Waiting { message, just_requested })
        }
    }
}

/// The instance's AccessRequest for one cluster, from the store or else
/// read once: [`Lookup::Found`] or [`Lookup::Absent`], for the steps of one
/// deletion round to share.
pub(super) async fn current_request(ctx: &Shared, request: &InstanceAccess<'_>) -> Result<Lookup, Error> {
    let cached = ctx.watches.stores().access_request(request.tenant_namespace, &request.name());
    if !matches!(cached, Lookup::Unknown) {
        return Ok(cached);
    }
    Ok(match access::get_access_request(&ctx.clusters.platform, request, cached, &ctx.identity.field_manager).await? {
        Some(live) => Lookup::Found(std::sync::Arc::new(live)),
        None => Lookup::Absent,
    })
}

/// During deletion: access only while the AccessRequest (`known`, from
/// [`current_request`]) is alive and granted, and a client for it if the
/// cluster answers.
pub(super) async fn remaining_access(
    ctx: &Shared,
    key: &InstanceKey,
    request: &InstanceAccess<'_>,
    known: &Lookup,
    cluster: Cluster,
) -> Result<Option<Connected>, Error> {
    let live = known.clone().found();
    let granted = live.filter(|ar| ar.metadata.deletion_timestamp.is_none()).and_then(|ar| match access::answer(&ar) {
        Answer::Granted(at) => Some(at),
        _ => None,
    });
    let Some(at) = granted else { return Ok(None) };
    match client_for(&ctx.clusters, &ctx.memory, key, &at, cluster).await {
        Ok(client) => Ok(Some(Connected { kubeconfig: at, client })),
        Err(e) => {
            warn!(request = %request.name(), error = %crate::error::report(&e), "cluster unreachable during cleanup");
            Ok(None)
        }
    }
}
