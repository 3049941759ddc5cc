//! `run`: endpoints, onboarding access that follows its Secret, leader
//! election and the controller, restarted when the credentials change.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use service_provider_sdk::contract::Cluster;
use tracing::{info, warn};

use super::server::{self, Health};
use super::{Endpoints, Plugins, Reached, Settings, onboarding, probe, shared, watch};
use crate::clusters::kinds;
use crate::clusters::onboarding::Onboarding;
use crate::error::Leadership;
use crate::metrics::Metrics;
use crate::reconcile::memory::Memory;
use crate::{Error, resource};

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

/// Serves the endpoints in the background.
fn serve(endpoints: &Endpoints, metrics: &Arc<Metrics>, health: &Arc<Health>) {
    let mut servers = Vec::new();
    match (endpoints.metrics, endpoints.health) {
        (Some(m), Some(h)) if m == h => servers.push((m, true, true)),
        (m, h) => {
            servers.extend(m.map(|a| (a, true, false)));
            servers.extend(h.map(|a| (a, false, true)));
        }
    }
    for (addr, with_metrics, with_probes) in servers {
        let (metrics, health) = (metrics.clone(), health.clone());
        tokio::spawn(async move {
            if let Err(e) = server::serve(addr, with_metrics, with_probes, metrics, health).await {
                warn!(error = %e, "endpoint stopped");
            }
        });
    }
}

/// Why a controller run ended.
enum Stop {
    Shutdown,
    LostLease,
    /// The onboarding kubeconfig Secret holds new credentials.
    Credentials(String),
}

/// `run`: until SIGTERM/SIGINT (or, with leader election, until the lease
/// is lost, which ends the process so it can start over as a candidate).
///
/// Every replica loads the plugin, reaches both clusters and then is Ready:
/// the leader once its caches are synced, the others while they stand by
/// for the lease. When the onboarding kubeconfig Secret changes, the
/// controller is stopped (running reconciles finish) and started again
/// with a client built from the new credentials.
pub async fn run(
    plugins: Plugins,
    settings: &Settings,
    endpoints: Endpoints,
    leader_elect: bool,
    platform: Client,
    metrics: Arc<Metrics>,
) -> Result<(), Error> {
    let planner = &plugins.plugin;
    info!(provider = %settings.provider_name, environment = %settings.environment, plugin = %planner.descriptor().name, "starting");
    if let Some(shadow) = &plugins.shadow {
        info!(shadow = %shadow.plugin.digest(), "a shadow plugin plans along; nothing of its plans is applied");
    }
    let health = Health::new();
    serve(&endpoints, &metrics, &health);
    let (shutdown_tx, shutdown) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = shutdown_tx.send(true);
    });

    let onboarding = onboarding(&platform, settings, planner.descriptor(), &metrics).await?;
    let (service, provider_config) = (&planner.descriptor().service, &planner.descriptor().provider_config);
    let watch_namespace = settings.watch_namespace.as_deref();
    probe(&onboarding.client, &resource::of_kind(service), Cluster::Onboarding, watch_namespace, None).await?;
    let provider_name = Some(settings.provider_name.as_str());
    probe(&platform, &resource::of_kind(provider_config), Cluster::Platform, None, provider_name).await?;
    let mut platform_versions = kinds::check(planner.descriptor(), &platform, &onboarding.client).await?;
    if let Some(canary) = &plugins.canary {
        super::check_canary(planner, &canary.planner)?;
        platform_versions.extend(kinds::check(canary.planner.descriptor(), &platform, &onboarding.client).await?);
        info!(canary = %canary.planner.plugin.digest(), "a canary plugin reconciles its cohort");
    }

    // Budgets, backoffs and memos outlive a controller start: new onboarding
    // credentials give no instance a fresh budget.
    let memory = Arc::new(Memory::new(settings.host_writes));
    let lease = match leader_elect {
        true => Some(lease(&platform, settings).await?),
        false => None,
    };
    let mut replica = Replica { platform, onboarding, lease, shutdown, health, metrics };
    let stop = loop {
        if !replica.leads() && !replica.stand_by().await? {
            return Ok(());
        }
        let reached = Reached {
            platform: replica.platform.clone(),
            onboarding: replica.onboarding.client.clone(),
            onboarding_secret: replica.onboarding.secret().map(|s| s.name.clone()),
            platform_versions: platform_versions.clone(),
            memory: Some(memory.clone()),
        };
        let ctx = shared(plugins.clone(), settings, reached, replica.metrics.clone());
        match replica.term(ctx).await {
            Stop::Credentials(text) => replica.switch(text).await,
            other => break other,
        }
    };
    replica.health.not_ready("stopping");
    if let Some((leader, task)) = replica.lease {
        // With every receiver gone the lease task releases the lease, so a
        // standby replica takes over at once instead of after it expires.
        drop(leader);
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    match stop {
        Stop::LostLease => {
            warn!("lost the leader lease");
            Err(Leadership::Lost.into())
        }
        _ => Ok(()),
    }
}

/// What one replica holds across controller terms: its clients, its part
/// in the election, and how it says it is ready.
struct Replica {
    platform: Client,
    onboarding: Onboarding,
    /// Whether this replica leads, and the task that keeps the lease.
    lease: Option<(tokio::sync::watch::Receiver<bool>, LeaseTask)>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

impl Replica {
    /// Without leader election, every replica leads.
    fn leads(&mut self) -> bool {
        self.lease.as_mut().is_none_or(|(leader, _)| *leader.borrow_and_update())
    }

    /// Ready while another replica leads, following new onboarding
    /// credentials, until the lease is this replica's (`true`) or the
    /// process is told to stop (`false`).
    async fn stand_by(&mut self) -> Result<bool, Error> {
        let Some((leader, _)) = &mut self.lease else { return Ok(true) };
        self.health.ready("standing by for the leader lease");
        info!("waiting to become the leader");
        loop {
            tokio::select! {
                became = leader.wait_for(|is_leader| *is_leader) => {
                    became.map_err(|_| Leadership::Stopped)?;
                    info!("became the leader");
                    return Ok(true);
                }
                text = self.onboarding.changed(&self.platform, |why| self.health.not_ready(why)) => {
                    switch(&mut self.onboarding, text, &self.metrics, &self.health).await;
                    self.health.ready("standing by for the leader lease");
                }
                _ = self.shutdown.wait_for(|stop| *stop) => return Ok(false),
            }
        }
    }

    /// One term of the controller: from its start until a shutdown, a lost
    /// lease or new onboarding credentials end it; running reconciles
    /// finish before it returns why it ended.
    async fn term(&mut self, ctx: super::Shared) -> Stop {
        self.health.not_ready("starting the controller (caches not synced yet)");
        let (stop_controller, stopped) = tokio::sync::oneshot::channel::<()>();
        let synced = self.health.clone();
        let controller = watch::run_until(
            Arc::new(ctx),
            async move {
                let _ = stopped.await;
            },
            move || synced.ready("caches synced, reconciling"),
        );
        tokio::pin!(controller);
        let lost = async {
            match self.lease.as_mut() {
                Some((leader, _)) => drop(leader.wait_for(|is_leader| !*is_leader).await),
                None => std::future::pending().await,
            }
        };
        let health = &self.health;
        let (why, ended) = tokio::select! {
            () = &mut controller => (Stop::Shutdown, true),
            _ = self.shutdown.wait_for(|stop| *stop) => (Stop::Shutdown, false),
            () = lost => (Stop::LostLease, false),
            text = self.onboarding.changed(&self.platform, |why| health.not_ready(why)) => (Stop::Credentials(text), false),
        };
        // Running reconciles finish before anything else happens.
        let _ = stop_controller.send(());
        if !ended {
            controller.await;
        }
        why
    }

    async fn switch(&mut self, text: String) {
        switch(&mut self.onboarding, text, &self.metrics, &self.health).await;
    }
}

type LeaseTask = tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Takes part in the election for the Lease `sp-<provider>-leader` in the
/// pod namespace: a receiver that says whether this replica leads.
async fn lease(
    platform: &Client,
    settings: &Settings,
) -> Result<(tokio::sync::watch::Receiver<bool>, LeaseTask), Error> {
    let identity = settings.pod_name.clone().unwrap_or_else(|| format!("service-provider-host-{}", std::process::id()));
    let manager = LeaseManagerBuilder::new(platform.clone(), format!("sp-{}-leader", settings.provider_name))
        .with_namespace(settings.pod_namespace.clone())
        .with_identity(identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .map_err(Leadership::SetUp)?;
    Ok(manager.watch().await)
}

/// Switches the onboarding client to new credentials.
async fn switch(onboarding: &mut Onboarding, text: String, metrics: &Arc<Metrics>, health: &Health) {
    info!("the onboarding kubeconfig Secret changed: switching to the new credentials");
    if let Err(e) = onboarding.rebuild(text, metrics).await {
        let why = format!("the new onboarding kubeconfig cannot be used: {}", crate::error::report(&e));
        warn!("{why}");
        health.not_ready(&why);
    }
}
