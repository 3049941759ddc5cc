//! The `init` and `run` subcommands, assembled: cluster access, CRDs,
//! endpoints, leader election and the controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use kube::api::ListParams;
use kube::runtime::events::Reporter;
use kube_lease_manager::LeaseManagerBuilder;
use service_provider_sdk::contract::{Cluster, Descriptor, KubeconfigRef, PolicyRule};
use tracing::{info, warn};

use crate::clusters::{self, client_from_kubeconfig};
use crate::metrics::Metrics;
use crate::plan::Planner;
use crate::reconcile::Context;
use crate::{Error, access, init, resource, server, watch};

/// Who this provider is and where it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--provider-name`: the ServiceProvider and ProviderConfig name.
    pub provider_name: String,
    /// `POD_NAMESPACE`: where source Secrets and the onboarding requests live.
    pub pod_namespace: String,
    /// `POD_NAME`: identity for Events and the leader lease.
    pub pod_name: Option<String>,
    /// `--environment` (passed by openmcp; recorded in logs).
    pub environment: String,
    /// Development override: an onboarding kubeconfig instead of the openmcp
    /// bootstrap.
    pub onboarding_kubeconfig: Option<PathBuf>,
    /// How long to wait for onboarding access to be granted.
    pub onboarding_timeout: Duration,
    /// Only reconcile service objects in this onboarding namespace (all
    /// namespaces when unset).
    pub watch_namespace: Option<String>,
}

impl Settings {
    fn field_manager(&self) -> String {
        format!("service-provider-host/{}", self.provider_name)
    }
}

/// Least-privilege onboarding permissions: `init` only installs CRDs; `run`
/// works on its own service kind and records Events.
pub fn onboarding_rules(descriptor: &Descriptor, for_init: bool) -> Vec<PolicyRule> {
    if for_init {
        return vec![PolicyRule::new(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["get", "list", "watch", "create", "update", "patch"],
        )];
    }
    let plural = &descriptor.service.plural;
    vec![
        PolicyRule::new(
            &[descriptor.service.group.as_str()],
            &[plural.as_str(), &format!("{plural}/status")],
            &["get", "list", "watch", "update", "patch"],
        ),
        PolicyRule::new(&["events.k8s.io"], &["events"], &["create", "patch"]),
    ]
}

/// The onboarding cluster client: from the override file, or through the
/// openmcp bootstrap (ClusterRequest + AccessRequest `<group>--<local>`).
pub async fn onboarding_client(
    platform: &Client,
    settings: &Settings,
    descriptor: &Descriptor,
    for_init: bool,
    metrics: &Arc<Metrics>,
) -> Result<Client, Error> {
    onboarding_access(platform, settings, descriptor, for_init, metrics).await.map(|(client, _)| client)
}

/// Like [`onboarding_client`], with the kubeconfig Secret it came from (none
/// for the development override).
pub async fn onboarding_access(
    platform: &Client,
    settings: &Settings,
    descriptor: &Descriptor,
    for_init: bool,
    metrics: &Arc<Metrics>,
) -> Result<(Client, Option<KubeconfigRef>), Error> {
    if let Some(path) = &settings.onboarding_kubeconfig {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.clone(), source })?;
        return Ok((clusters::client_from_operator_kubeconfig(&text, Cluster::Onboarding, metrics).await?, None));
    }
    let local = if for_init { "onboarding-init" } else { "onboarding-run" };
    info!(local, "requesting onboarding cluster access");
    let at = access::request_onboarding_access(
        platform,
        &settings.pod_namespace,
        &descriptor.service.group,
        local,
        &onboarding_rules(descriptor, for_init),
        settings.onboarding_timeout,
        &settings.field_manager(),
    )
    .await?;
    let (text, _) = clusters::read_kubeconfig(platform, &at).await?;
    Ok((client_from_kubeconfig(&text, Cluster::Onboarding, metrics).await?, Some(at)))
}

/// `init`: CRDs onto their clusters, then the service kind into the
/// ServiceProvider's status.
pub async fn init(
    planner: &Planner,
    settings: &Settings,
    platform: Client,
    metrics: &Arc<Metrics>,
) -> Result<(), Error> {
    let descriptor = planner.descriptor();
    let onboarding = onboarding_client(&platform, settings, descriptor, true, metrics).await?;
    init::install_crds(descriptor, &planner.granted, &platform, &onboarding, &settings.field_manager()).await?;
    init::register_service_kind(descriptor, &platform, &settings.provider_name).await
}

/// Fails fast with a clear message when a watched kind cannot be listed
/// (missing CRD or RBAC); otherwise kube's watcher would retry silently.
async fn probe(
    client: &Client,
    kind: &kube::api::ApiResource,
    cluster: Cluster,
    namespace: Option<&str>,
) -> Result<(), Error> {
    let listed = resource::dynamic_api(client, kind, namespace).list_metadata(&ListParams::default().limit(1)).await;
    listed.map(drop).map_err(|e| {
        let plural = &kind.plural;
        Error::kube(format!("cannot list {plural} on the {cluster} cluster (is `init` done, is RBAC granted?)"), e)
    })
}

/// Endpoints of `run`.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    pub metrics: Option<SocketAddr>,
    pub health: Option<SocketAddr>,
}

/// Builds the shared reconcile context.
pub fn context(
    planner: Planner,
    settings: &Settings,
    platform: Client,
    onboarding: Client,
    metrics: Arc<Metrics>,
) -> Context {
    let reporter = Reporter {
        controller: format!("service-provider-host/{}", settings.provider_name),
        instance: settings.pod_name.clone(),
    };
    let mut ctx = Context::new(
        planner,
        settings.provider_name.clone(),
        settings.pod_namespace.clone(),
        platform,
        onboarding,
        reporter,
        metrics,
    );
    ctx.watch_namespace = settings.watch_namespace.clone();
    ctx
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// `run`: until SIGTERM/SIGINT (or, with leader election, until the lease
/// is lost, which ends the process so it can start over as a candidate).
pub async fn run(
    planner: Planner,
    settings: &Settings,
    endpoints: Endpoints,
    leader_elect: bool,
    platform: Client,
    metrics: Arc<Metrics>,
) -> Result<(), Error> {
    info!(provider = %settings.provider_name, environment = %settings.environment, plugin = %planner.descriptor().name, "starting");
    let ready = Arc::new(AtomicBool::new(false));
    let mut servers = Vec::new();
    match (endpoints.metrics, endpoints.health) {
        (Some(m), Some(h)) if m == h => servers.push((m, true, true)),
        (m, h) => {
            servers.extend(m.map(|a| (a, true, false)));
            servers.extend(h.map(|a| (a, false, true)));
        }
    }
    for (addr, with_metrics, with_probes) in servers {
        let (metrics, ready) = (metrics.clone(), ready.clone());
        tokio::spawn(async move {
            if let Err(e) = server::serve(addr, with_metrics, with_probes, metrics, ready).await {
                warn!(error = %e, "endpoint stopped");
            }
        });
    }

    let (onboarding, secret) = onboarding_access(&platform, settings, planner.descriptor(), false, &metrics).await?;
    let mut ctx = context(planner, settings, platform.clone(), onboarding.clone(), metrics);
    ctx.reserved_secrets.extend(secret.map(|s| s.name));
    let ctx = Arc::new(ctx);
    probe(&onboarding, &ctx.service, Cluster::Onboarding, settings.watch_namespace.as_deref()).await?;
    probe(&platform, &ctx.provider_config, Cluster::Platform, None).await?;

    if !leader_elect {
        ready.store(true, Ordering::Relaxed);
        watch::run(ctx, shutdown_signal()).await;
        return Ok(());
    }
    let identity = settings.pod_name.clone().unwrap_or_else(|| format!("service-provider-host-{}", std::process::id()));
    let lease = LeaseManagerBuilder::new(platform, format!("sp-{}-leader", settings.provider_name))
        .with_namespace(settings.pod_namespace.clone())
        .with_identity(identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .map_err(|e| Error::LeaderElection(format!("setting it up: {e}")))?;
    let (mut leader, lease_task) = lease.watch().await;
    info!("waiting to become the leader");
    while !*leader.borrow_and_update() {
        leader.changed().await.map_err(|_| Error::LeaderElection("it stopped".into()))?;
    }
    info!("became the leader");
    ready.store(true, Ordering::Relaxed);
    let mut lost = leader.clone();
    let stop = async move {
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = lost.wait_for(|is_leader| !*is_leader) => warn!("lost the leader lease"),
        }
    };
    watch::run(ctx, stop).await;
    let lost = !*leader.borrow();
    // With every receiver gone the lease task releases the lease, so a
    // standby replica takes over at once instead of after it expires.
    drop(leader);
    let _ = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
    if lost {
        return Err(Error::LeaderElection("lost the leader lease".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onboarding_permissions_are_least_privilege() {
        let d = guest_descriptor();
        let init = onboarding_rules(&d, true);
        assert_eq!(init.len(), 1);
        assert_eq!(init[0].resources, ["customresourcedefinitions"]);
        let run = onboarding_rules(&d, false);
        assert_eq!(run[0].api_groups, ["example.com"]);
        assert_eq!(run[0].resources, ["things", "things/status"]);
        assert!(run.iter().all(|r| !r.verbs.contains(&"*".to_string()) && !r.resources.contains(&"*".to_string())));
    }

    fn guest_descriptor() -> Descriptor {
        let kind = service_provider_sdk::contract::ApiKind::new("example.com", "v1", "Thing", "things", true);
        Descriptor::new("t", kind.clone(), kind, "f")
    }
}
