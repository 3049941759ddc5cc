//! The controller around one reconcile: the `init` and `run` subcommands
//! assembled from [`Settings`] (cluster access, CRDs, endpoints, leader
//! election; `init` in [`init`], `run` in [`run`]), the watches that wake an
//! instance ([`watch`]) and the health and metrics endpoints ([`server`]).
//!
//! It calls into [`crate::reconcile`] and the Wasm side; neither knows it.

pub mod init;
pub mod preview;
mod run;
pub mod server;
pub mod watch;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::ListParams;
use kube::runtime::events::Reporter;
pub use run::run;
use service_provider_sdk::contract::{Cluster, Descriptor, KubeconfigRef, PolicyRule};
use tracing::{info, warn};

use crate::adopt::Adoption;
use crate::clusters::onboarding::Onboarding;
use crate::clusters::{self, ClientCache, client_from_kubeconfig};
use crate::metrics::{Metrics, Role};
use crate::plugin::plan::{Planner, Refusal};
use crate::plugin::sandbox::{Method, Stopped};
use crate::reconcile::access;
use crate::reconcile::memory::Memory;
use crate::reconcile::rollout::{Canary, Cohort, Halt, Rollout};
use crate::reconcile::shared::{Clusters, Identity, Loaded, Shared, Watches};
use crate::reconcile::status::StatusWriter;
use crate::stores::blockers::Blockers;
use crate::{Error, resource};

/// Who this provider is and where it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--adopt-from`: field managers whose objects may be taken over,
    /// parsed (and refused when invalid) where the settings are made.
    pub adoption: Adoption,
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
    /// During deletion, how long a granted cluster that does not answer is
    /// waited for before the instance is cleaned up without it.
    pub unreachable_grace: Duration,
    /// Whether the tenants' clusters may be written to (`diff` only reads).
    pub writes: clusters::Writes,
    /// `--cluster-write-mib-per-minute`: what the host as a whole may write
    /// to each cluster.
    pub host_writes: crate::reconcile::budget::Rate,
}

impl Settings {
    fn field_manager(&self) -> String {
        crate::owner::field_manager(&self.provider_name)
    }
}

/// Which command asks for onboarding access: each has its own request,
/// with its own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Onboard {
    Init,
    Run,
}

impl Onboard {
    /// The local name of its ClusterRequest and AccessRequest.
    fn local_name(self) -> &'static str {
        match self {
            Onboard::Init => "onboarding-init",
            Onboard::Run => "onboarding-run",
        }
    }
}

/// Least-privilege onboarding permissions: `init` only installs CRDs; `run`
/// works on its own service kind and records Events.
pub fn onboarding_rules(descriptor: &Descriptor, command: Onboard) -> Vec<PolicyRule> {
    if command == Onboard::Init {
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
    command: Onboard,
    metrics: &Arc<Metrics>,
) -> Result<Client, Error> {
    onboarding_access(platform, settings, descriptor, command, metrics).await.map(|(client, _)| client)
}

/// Like [`onboarding_client`], with the kubeconfig Secret it came from (none
/// for the development override).
pub async fn onboarding_access(
    platform: &Client,
    settings: &Settings,
    descriptor: &Descriptor,
    command: Onboard,
    metrics: &Arc<Metrics>,
) -> Result<(Client, Option<KubeconfigRef>), Error> {
    if let Some(client) = operator_onboarding(settings, metrics).await? {
        return Ok((client, None));
    }
    let at = request_onboarding(platform, settings, descriptor, command).await?;
    let (text, _) = clusters::read_kubeconfig(platform, &at).await?;
    Ok((client_from_kubeconfig(&text, Cluster::Onboarding, metrics).await?, Some(at)))
}

/// The onboarding access of `run`, following its kubeconfig Secret.
pub async fn onboarding(
    platform: &Client,
    settings: &Settings,
    descriptor: &Descriptor,
    metrics: &Arc<Metrics>,
) -> Result<Onboarding, Error> {
    if let Some(client) = operator_onboarding(settings, metrics).await? {
        return Ok(Onboarding::fixed(client));
    }
    let at = request_onboarding(platform, settings, descriptor, Onboard::Run).await?;
    let onboarding = Onboarding::from_secret(platform, at, metrics).await?;
    let controller = &descriptor.service.group;
    let rules = preview_onboarding_rules(descriptor);
    let (namespace, field_manager) = (&settings.pod_namespace, settings.field_manager());
    let local = Onboard::Run.local_name();
    if let Err(e) = access::request_preview_access(platform, namespace, controller, local, &rules, &field_manager).await
    {
        warn!(error = %crate::error::report(&e), "the preview's read-only onboarding access was not requested");
    }
    Ok(onboarding)
}

/// What the preview (`diff`) may do on the onboarding cluster: read the
/// service objects, nothing else.
pub fn preview_onboarding_rules(descriptor: &Descriptor) -> Vec<PolicyRule> {
    let plural = &descriptor.service.plural;
    vec![PolicyRule::new(&[descriptor.service.group.as_str()], &[plural.as_str()], &["get", "list"])]
}

/// The development override, if given (writing as `settings.writes` says).
async fn operator_onboarding(settings: &Settings, metrics: &Arc<Metrics>) -> Result<Option<Client>, Error> {
    let Some(path) = &settings.onboarding_kubeconfig else { return Ok(None) };
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.clone(), source })?;
    Ok(Some(clusters::client_from_operator_kubeconfig(&text, Cluster::Onboarding, metrics, settings.writes).await?))
}

async fn request_onboarding(
    platform: &Client,
    settings: &Settings,
    descriptor: &Descriptor,
    command: Onboard,
) -> Result<KubeconfigRef, Error> {
    let local = command.local_name();
    info!(local, "requesting onboarding cluster access");
    access::request_onboarding_access(
        platform,
        &settings.pod_namespace,
        &descriptor.service.group,
        local,
        &onboarding_rules(descriptor, command),
        settings.onboarding_timeout,
        &settings.field_manager(),
    )
    .await
}

/// What `init` does beyond installing the CRDs.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// Register the service kind at the ServiceProvider (openmcp deletes
    /// service objects of a ControlPlane through it). Off for an install
    /// without an openmcp ServiceProvider.
    pub register_service_kind: bool,
    /// How long to wait for openmcp to give the ServiceProvider a status.
    pub service_provider_timeout: Duration,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions { register_service_kind: true, service_provider_timeout: Duration::from_secs(600) }
    }
}

/// `init`: CRDs onto their clusters, then the service kind into the
/// ServiceProvider's status.
pub async fn init(
    planner: &Planner,
    settings: &Settings,
    platform: Client,
    metrics: &Arc<Metrics>,
) -> Result<(), Error> {
    init_with(planner, settings, platform, metrics, &InitOptions::default()).await
}

/// [`init`] with options.
pub async fn init_with(
    planner: &Planner,
    settings: &Settings,
    platform: Client,
    metrics: &Arc<Metrics>,
    options: &InitOptions,
) -> Result<(), Error> {
    let descriptor = planner.descriptor();
    let onboarding = onboarding_client(&platform, settings, descriptor, Onboard::Init, metrics).await?;
    let field_manager = settings.field_manager();
    init::install_crds(descriptor, &planner.granted, &platform, &onboarding, &field_manager, &settings.adoption)
        .await?;
    if !options.register_service_kind {
        info!(kind = %descriptor.service.kind, "not registering the service kind (--register-service-kind=false)");
        return Ok(());
    }
    init::register_when_reconciled(descriptor, &platform, &settings.provider_name, options.service_provider_timeout)
        .await
}

/// Fails fast with a clear message when a watched kind cannot be listed
/// (missing CRD or RBAC); otherwise kube's watcher would retry silently.
/// `name` narrows the list to one object (as the watches do), so RBAC may
/// name it in `resourceNames`.
async fn probe(
    client: &Client,
    kind: &kube::api::ApiResource,
    cluster: Cluster,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<(), Error> {
    let mut params = ListParams::default().limit(1);
    if let Some(name) = name {
        params = params.fields(&format!("metadata.name={name}"));
    }
    let listed = resource::dynamic_api(client, kind, namespace).list_metadata(&params).await;
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

/// What `run` reached before a controller starts.
pub struct Reached {
    pub platform: Client,
    pub onboarding: Client,
    /// The Secret in the pod namespace the onboarding kubeconfig was read
    /// from (none for the development override): the host's own
    /// credentials, never copied.
    pub onboarding_secret: Option<String>,
    /// The group versions whose kinds the platform's discovery served at
    /// start ([`crate::clusters::kinds::check`]).
    pub platform_versions: BTreeSet<String>,
    /// What the process remembers of each instance (budgets, backoffs,
    /// memos), kept across controller starts; a fresh one when `None`.
    pub memory: Option<Arc<Memory>>,
}

impl Reached {
    /// Both clusters, nothing checked yet, no Secret of the host's own and
    /// nothing remembered.
    pub fn new(platform: Client, onboarding: Client) -> Self {
        Reached { platform, onboarding, onboarding_secret: None, platform_versions: BTreeSet::new(), memory: None }
    }
}

/// The components a host runs: the plugin, and those beside it while an
/// upgrade of it is rolled out.
#[derive(Clone)]
pub struct Plugins {
    pub plugin: Planner,
    /// Plans along, never applied (`--shadow-plugin`).
    pub shadow: Option<Planner>,
    /// Reconciles a cohort (`--plugin-canary`).
    pub canary: Option<CanaryPlugin>,
}

/// A canary: its component, its cohort, how many of the cohort may fail by
/// it before it is halted.
#[derive(Clone)]
pub struct CanaryPlugin {
    pub planner: Planner,
    pub cohort: Cohort,
    pub allowed_failures: usize,
    /// Whether it was halted: shared by every controller start of `run`.
    pub halt: Halt,
}

impl From<Planner> for Plugins {
    fn from(plugin: Planner) -> Self {
        Plugins { plugin, shadow: None, canary: None }
    }
}

/// Why a canary cannot run beside the plugin: it is not the same plugin
/// (another service kind, ProviderConfig kind, finalizer or CRDs).
pub fn check_canary(plugin: &Planner, canary: &Planner) -> Result<(), Error> {
    use crate::plugin::grant::Identity;
    let (ours, theirs) = (Identity::of(plugin.descriptor()), Identity::of(canary.descriptor()));
    match ours == theirs {
        true => Ok(()),
        false => Err(Error::Config {
            what: format!(
                "the canary plugin {} is not another version of plugin {}: its name, service kind, ProviderConfig \
                 kind, finalizer or CRDs differ",
                canary.plugin.digest(),
                plugin.plugin.digest()
            ),
            source: None,
        }),
    }
}

/// What every reconcile shares, from the settings and what `run` reached:
/// the one place it is assembled.
pub fn shared(plugins: impl Into<Plugins>, settings: &Settings, reached: Reached, metrics: Arc<Metrics>) -> Shared {
    let Plugins { plugin: planner, shadow, canary } = plugins.into();
    let Reached { platform, onboarding, onboarding_secret, platform_versions, memory } = reached;
    metrics.from_zero(&crate::error::Category::ALL, &crate::reconcile::budget::Limit::ALL);
    let planner = metered(planner, Role::Plugin, &metrics);
    let shadow = shadow.map(|shadow| {
        metrics.shadowed_by(shadow.plugin.digest());
        metered(shadow, Role::Shadow, &metrics)
    });
    let canary = canary.map(|c| {
        let planner = metered(c.planner, Role::Canary, &metrics);
        Canary::new(Loaded::new(planner, platform_versions.clone()), c.cohort, c.allowed_failures, c.halt)
    });
    let rollout = Rollout { shadow, canary };
    let field_manager = settings.field_manager();
    let blockers = Blockers::new(planner.plugin.input_limit());
    let plugin = Loaded::new(planner, platform_versions);
    let memory = memory.unwrap_or_else(|| Arc::new(Memory::new(settings.host_writes)));
    let status = StatusWriter {
        onboarding: onboarding.clone(),
        service: plugin.service.clone(),
        reporter: Reporter { controller: field_manager.clone(), instance: settings.pod_name.clone() },
        budgets: memory.budgets.clone(),
        metrics: metrics.clone(),
    };
    Shared {
        plugin,
        identity: Identity {
            provider_name: settings.provider_name.clone(),
            pod_namespace: settings.pod_namespace.clone(),
            field_manager,
            reserved_secrets: onboarding_secret.into_iter().collect(),
            adoption: settings.adoption.clone(),
        },
        clusters: Clusters {
            platform,
            onboarding,
            tenants: ClientCache::new(metrics.clone(), settings.writes),
            unreachable_grace: settings.unreachable_grace,
        },
        memory,
        watches: Watches::new(settings.watch_namespace.clone(), blockers),
        status,
        rollout,
        metrics,
    }
}

/// `planner`, reporting each call of its plugin to `metrics` in `role`.
fn metered(planner: Planner, role: Role, metrics: &Metrics) -> Planner {
    let plugin = &planner.plugin;
    let meter = metrics.plugin_meter(plugin.name(), plugin.digest(), role, plugin.bounds());
    // Every way a plan or cleanup can end, counted from zero.
    meter.from_zero(&[Method::Plan, Method::Cleanup], &Stopped::ALL, &Refusal::ALL);
    Planner { plugin: plugin.metered(meter), granted: planner.granted }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onboarding_permissions_are_least_privilege() {
        let d = guest_descriptor();
        let init = onboarding_rules(&d, Onboard::Init);
        assert_eq!(init.len(), 1);
        assert_eq!(init[0].resources, ["customresourcedefinitions"]);
        let run = onboarding_rules(&d, Onboard::Run);
        assert_eq!(run[0].api_groups, ["example.com"]);
        assert_eq!(run[0].resources, ["things", "things/status"]);
        assert!(run.iter().all(|r| !r.verbs.contains(&"*".to_string()) && !r.resources.contains(&"*".to_string())));
    }

    fn guest_descriptor() -> Descriptor {
        let kind = service_provider_sdk::contract::ApiKind::new("example.com", "v1", "Thing", "things", true);
        Descriptor::new("t", kind.clone(), kind, "f")
    }
}
