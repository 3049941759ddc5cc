//! A test double for openmcp-operator and a cluster provider, for local
//! testbed clusters. Also meant for a local demo.
//!
//! What it emulates (and what real component it stands in for):
//!
//! - **ControlPlane controller** ([`OpenMcpSimulator::register_control_plane`]):
//!   creates the tenant namespace `mcp--<uuid>` on the platform cluster and a
//!   ClusterRequest named after the ControlPlane with purpose `mcp`, already
//!   `Granted` and bound to the given local cluster.
//! - **Cluster provider / AccessRequest controller** (the background loop):
//!   - ClusterRequests with purpose `onboarding` (e.g. the
//!     `<group>--onboarding-init|run` pair a provider asks for at start-up)
//!     or `mcp` (for registered tenant namespaces) get `status.phase:
//!     Granted`, `observedGeneration` and `status.cluster` (a name only: no
//!     `Cluster` objects are created). Other purposes stay pending.
//!   - AccessRequests are resolved `spec.clusterRef` (by cluster name) or
//!     `spec.requestRef` → ClusterRequest → purpose → local cluster. The
//!     simulator adds its own finalizer [`SIMULATOR_FINALIZER`] (as a real
//!     cluster provider keeps the AR until credentials are revoked), writes a
//!     Secret with the AR's name holding the cluster's admin kubeconfig
//!     under data key `kubeconfig`, then sets `status.phase: Granted`,
//!     `observedGeneration = metadata.generation` and `status.secretRef.name`
//!     through the status subresource.
//!   - On AR deletion it deletes the Secret and removes its own finalizer and,
//!     unless [`SimulatorOptions::remove_clusteraccess_finalizer`] is false,
//!     also `clusters.openmcp.cloud/clusteraccess`. (In openmcp that
//!     finalizer belongs to the provider's cluster-access library, which
//!     removes it once it is the last one; set the option to false to test a
//!     provider that does this itself.)
//!
//! Not emulated: token/OIDC permissions (every kubeconfig is the cluster's
//! admin), AR TTLs, `Cluster`/`ClusterProfile` objects, ClusterRequest
//! finalizers, Denied phases.
//!
//! Scope: the loop only looks at namespaces it knows — the provider
//! namespaces from the options or [`OpenMcpSimulator::watch_namespace`], and
//! registered tenant namespaces — so tests sharing a platform cluster can
//! each run their own simulator.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;

use crate::background::Background;
use crate::cluster::{Cluster, client_from_kubeconfig};
use crate::error::{Error, Result};
use crate::process::lock_unpoisoned;
use crate::watched::{Outcome, Watched};

/// Finalizer of openmcp's cluster-access library on AccessRequests.
pub const CLUSTER_ACCESS_FINALIZER: &str = "clusters.openmcp.cloud/clusteraccess";
/// The simulator's own finalizer on AccessRequests it granted.
pub const SIMULATOR_FINALIZER: &str = "envtest.openmcp.cloud/cluster-provider";
/// Data key of the kubeconfig in AccessRequest Secrets.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// `status.cluster.namespace` written into granted ClusterRequests.
pub const CLUSTER_NAMESPACE: &str = "envtest-clusters";
/// Field manager / `managed-by` value of everything the simulator writes.
pub const MANAGER: &str = "envtest-openmcp-simulator";

/// Minimal typed views of the openmcp-operator API (v1.3.0) objects the
/// simulator and tests touch. Unknown fields are ignored on read; write
/// through patches only, so nothing is lost.
pub mod api {
    use super::*;

    /// `{name, namespace}` reference.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct NamespacedRef {
        pub name: String,
        pub namespace: String,
    }

    /// `{name}` reference to an object in the same namespace.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct LocalRef {
        pub name: String,
    }

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "clusters.openmcp.cloud",
        version = "v1alpha1",
        kind = "ClusterRequest",
        namespaced,
        status = "ClusterRequestStatus",
        schema = "disabled"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterRequestSpec {
        pub purpose: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wait_for_cluster_deletion: Option<bool>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterRequestStatus {
        #[serde(default)]
        pub observed_generation: i64,
        #[serde(default)]
        pub phase: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster: Option<NamespacedRef>,
    }

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "clusters.openmcp.cloud",
        version = "v1alpha1",
        kind = "AccessRequest",
        namespaced,
        status = "AccessRequestStatus",
        schema = "disabled"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct AccessRequestSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_ref: Option<NamespacedRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub request_ref: Option<NamespacedRef>,
        /// `TokenConfig` (`permissions`, `roleRefs`), kept untyped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub token: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub oidc: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ttl: Option<String>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct AccessRequestStatus {
        #[serde(default)]
        pub observed_generation: i64,
        #[serde(default)]
        pub phase: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub secret_ref: Option<LocalRef>,
    }

    /// Cluster-scoped `openmcp.cloud/v1alpha1` ServiceProvider; only what
    /// tests need to create one (`spec.image` is required).
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "openmcp.cloud",
        version = "v1alpha1",
        kind = "ServiceProvider",
        status = "serde_json::Value",
        schema = "disabled"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ServiceProviderSpec {
        pub image: String,
    }
}

use api::{AccessRequest, ClusterRequest, NamespacedRef};

/// A cluster an AccessRequest can be granted for.
#[derive(Clone, Debug)]
pub struct TargetCluster {
    pub name: String,
    pub kubeconfig: String,
}

impl From<&Cluster> for TargetCluster {
    fn from(c: &Cluster) -> Self {
        Self { name: c.name().to_string(), kubeconfig: c.kubeconfig_yaml().to_string() }
    }
}

/// Simulator settings.
#[derive(Clone, Debug)]
pub struct SimulatorOptions {
    /// Delay between reconcile rounds.
    pub poll_interval: Duration,
    /// Namespaces (on the platform cluster) where providers create their
    /// onboarding ClusterRequest/AccessRequest pair (`POD_NAMESPACE`).
    pub provider_namespaces: Vec<String>,
    /// Also remove `clusters.openmcp.cloud/clusteraccess` on AR deletion.
    pub remove_clusteraccess_finalizer: bool,
    /// The cluster granted to ClusterRequests with purpose `workload`
    /// (pending when unset).
    pub workload: Option<TargetCluster>,
    /// Watch requests across all namespaces, act on changes as they arrive
    /// and on several at once, instead of listing each namespace per round:
    /// with hundreds of tenants, per-namespace polling would make the
    /// simulator, not the provider, what a benchmark measures.
    pub cluster_wide: bool,
}

impl Default for SimulatorOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(200),
            provider_namespaces: Vec::new(),
            remove_clusteraccess_finalizer: true,
            workload: None,
            cluster_wide: false,
        }
    }
}

#[derive(Default)]
struct State {
    namespaces: BTreeSet<String>,
    /// Tenant namespace → its ControlPlane cluster.
    control_planes: HashMap<String, TargetCluster>,
}

struct Shared {
    platform_kubeconfig: String,
    onboarding: TargetCluster,
    options: SimulatorOptions,
    state: Mutex<State>,
}

/// The running simulator; stops when dropped or via [`Self::stop`].
pub struct OpenMcpSimulator {
    shared: Arc<Shared>,
    background: Background,
}

impl OpenMcpSimulator {
    /// Starts the reconcile loop against `platform`, granting onboarding
    /// access to `onboarding`.
    pub fn start(platform: &Cluster, onboarding: &Cluster, options: SimulatorOptions) -> Self {
        Self::start_with(platform.kubeconfig_yaml(), onboarding.into(), options)
    }

    /// Like [`Self::start`], from kubeconfig text (e.g. for a demo that did
    /// not start the clusters itself).
    pub fn start_with(platform_kubeconfig: &str, onboarding: TargetCluster, options: SimulatorOptions) -> Self {
        let state = State { namespaces: options.provider_namespaces.iter().cloned().collect(), ..State::default() };
        let shared = Arc::new(Shared {
            platform_kubeconfig: platform_kubeconfig.to_string(),
            onboarding,
            options: options.clone(),
            state: Mutex::new(state),
        });
        let for_loop = shared.clone();
        let client = Arc::new(tokio::sync::OnceCell::<Client>::new());
        let wake = Arc::new(Notify::new());
        let watches = Arc::new(tokio::sync::OnceCell::<Watches>::new());
        let background = Background::spawn_woken("openmcp simulator", options.poll_interval, wake.clone(), move || {
            let (shared, client, watches, wake) = (for_loop.clone(), client.clone(), watches.clone(), wake.clone());
            async move {
                let client = client.get_or_try_init(|| client_from_kubeconfig(&shared.platform_kubeconfig)).await?;
                if shared.options.cluster_wide {
                    let watches = watches.get_or_init(|| async { Watches::start(client, wake) }).await;
                    return reconcile_watched(client, &shared, watches).await;
                }
                reconcile_round(client, &shared).await
            }
        });
        Self { shared, background }
    }

    /// Adds a namespace to the simulator's scope (creating it on the
    /// platform cluster if missing), e.g. a provider's `POD_NAMESPACE`.
    pub async fn watch_namespace(&self, namespace: &str) -> Result<()> {
        let client = client_from_kubeconfig(&self.shared.platform_kubeconfig).await?;
        ensure_namespace(&client, namespace, BTreeMap::new()).await?;
        lock_unpoisoned(&self.shared.state).namespaces.insert(namespace.to_string());
        Ok(())
    }

    /// Plays the ControlPlane controller for ControlPlane `namespace/name`
    /// whose cluster is `cluster`: creates the tenant namespace and a
    /// Granted ClusterRequest `name` (purpose `mcp`) in it. Returns the
    /// tenant namespace.
    pub async fn register_control_plane(&self, name: &str, namespace: &str, cluster: &Cluster) -> Result<String> {
        self.register_control_plane_with(name, namespace, cluster.into()).await
    }

    /// [`Self::register_control_plane`] from kubeconfig text.
    pub async fn register_control_plane_with(
        &self,
        name: &str,
        namespace: &str,
        cluster: TargetCluster,
    ) -> Result<String> {
        let tenant =
            service_provider_sdk::names::tenant_namespace(name, namespace).map_err(|e| Error::Other(e.to_string()))?;
        let client = client_from_kubeconfig(&self.shared.platform_kubeconfig).await?;
        let labels = BTreeMap::from([
            ("core.openmcp.cloud/mcp-name".to_string(), name.to_string()),
            ("core.openmcp.cloud/mcp-namespace".to_string(), namespace.to_string()),
            ("openmcp.cloud/managed-by".to_string(), MANAGER.to_string()),
        ]);
        ensure_namespace(&client, &tenant, labels).await?;
        {
            let mut state = lock_unpoisoned(&self.shared.state);
            state.control_planes.insert(tenant.clone(), cluster.clone());
            state.namespaces.insert(tenant.clone());
        }
        let api: Api<ClusterRequest> = Api::namespaced(client.clone(), &tenant);
        let request = ClusterRequest::new(
            name,
            api::ClusterRequestSpec { purpose: "mcp".into(), wait_for_cluster_deletion: Some(true) },
        );
        match api.create(&PostParams::default(), &request).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let current = api.get(name).await?;
        grant_cluster_request(&api, &current, &cluster.name).await?;
        Ok(tenant)
    }

    /// Plays ControlPlane deletion: deletes the ClusterRequest and forgets
    /// the mapping (the tenant namespace stays, as in openmcp).
    pub async fn unregister_control_plane(&self, name: &str, namespace: &str) -> Result<()> {
        let tenant =
            service_provider_sdk::names::tenant_namespace(name, namespace).map_err(|e| Error::Other(e.to_string()))?;
        let client = client_from_kubeconfig(&self.shared.platform_kubeconfig).await?;
        let api: Api<ClusterRequest> = Api::namespaced(client, &tenant);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        lock_unpoisoned(&self.shared.state).control_planes.remove(&tenant);
        Ok(())
    }

    /// The error of the latest reconcile round, if any.
    pub fn last_error(&self) -> Option<String> {
        self.background.last_error()
    }

    /// Stops the loop (waits for the current round).
    pub async fn stop(self) {
        self.background.stop().await;
    }
}

async fn ensure_namespace(client: &Client, name: &str, labels: BTreeMap<String, String>) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: (!labels.is_empty()).then_some(labels),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile_round(client: &Client, shared: &Shared) -> Result<()> {
    let namespaces: Vec<String> = lock_unpoisoned(&shared.state).namespaces.iter().cloned().collect();
    let mut first_error = None;
    for ns in namespaces {
        if let Err(e) = reconcile_namespace(client, shared, &ns).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The watches of [`SimulatorOptions::cluster_wide`].
struct Watches {
    requests: Watched<ClusterRequest>,
    access: Watched<AccessRequest>,
}

impl Watches {
    fn start(client: &Client, wake: Arc<Notify>) -> Self {
        Self {
            requests: Watched::start(Api::all(client.clone()), (), wake.clone()),
            access: Watched::start(Api::all(client.clone()), (), wake),
        }
    }
}

/// One round over the watched requests of every known namespace.
async fn reconcile_watched(client: &Client, shared: &Shared, watches: &Watches) -> Result<()> {
    let namespaces: BTreeSet<String> = lock_unpoisoned(&shared.state).namespaces.clone();
    let known = |o: &ObjectMeta| o.namespace.as_ref().is_some_and(|ns| namespaces.contains(ns));
    let requests: Vec<_> = (watches.requests.snapshot().await?.into_iter())
        .filter(|r| known(&r.metadata) && r.metadata.deletion_timestamp.is_none())
        .collect();
    let granted = watches
        .requests
        .act_on_changed(requests, |request| async move {
            let Some(target) = target_for_request(shared, &request) else {
                return Ok(Outcome::Retry); // its ControlPlane may be registered later
            };
            let api: Api<ClusterRequest> = Api::namespaced(client.clone(), &request.namespace().unwrap_or_default());
            grant_cluster_request(&api, &request, &target.name).await
        })
        .await;
    let access: Vec<_> = watches.access.snapshot().await?.into_iter().filter(|ar| known(&ar.metadata)).collect();
    let accessed = watches
        .access
        .act_on_changed(access, |ar| async move {
            let api: Api<AccessRequest> = Api::namespaced(client.clone(), &ar.namespace().unwrap_or_default());
            reconcile_access_request(client, shared, Some(&watches.requests), &api, &ar).await
        })
        .await;
    granted.and(accessed)
}

async fn reconcile_namespace(client: &Client, shared: &Shared, ns: &str) -> Result<()> {
    let requests: Api<ClusterRequest> = Api::namespaced(client.clone(), ns);
    for request in requests.list(&ListParams::default()).await? {
        if request.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(target) = target_for_request(shared, &request) {
            grant_cluster_request(&requests, &request, &target.name).await?;
        }
    }
    let access: Api<AccessRequest> = Api::namespaced(client.clone(), ns);
    for ar in access.list(&ListParams::default()).await? {
        reconcile_access_request(client, shared, None, &access, &ar).await?;
    }
    Ok(())
}

/// The cluster a ClusterRequest is for, by purpose; `None` leaves it pending.
fn target_for_request(shared: &Shared, request: &ClusterRequest) -> Option<TargetCluster> {
    match request.spec.purpose.as_str() {
        "onboarding" => Some(shared.onboarding.clone()),
        "mcp" => lock_unpoisoned(&shared.state).control_planes.get(&request.namespace()?).cloned(),
        "workload" => shared.options.workload.clone(),
        _ => None,
    }
}

fn is_granted(phase: &str, observed: i64, generation: Option<i64>) -> bool {
    phase == "Granted" && Some(observed) == generation
}

/// Grants a ClusterRequest.
async fn grant_cluster_request(api: &Api<ClusterRequest>, request: &ClusterRequest, cluster: &str) -> Result<Outcome> {
    if let Some(s) = &request.status
        && is_granted(&s.phase, s.observed_generation, request.metadata.generation)
    {
        return Ok(Outcome::Settled);
    }
    let status = json!({
        "status": {
            "phase": "Granted",
            "observedGeneration": request.metadata.generation.unwrap_or(0),
            "cluster": { "name": cluster, "namespace": CLUSTER_NAMESPACE },
        }
    });
    api.patch_status(&request.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(Outcome::Settled)
}

/// Resolves the cluster an AccessRequest should get, or `None` to wait.
/// Reads the ClusterRequest from `watched` when there is one.
async fn target_for_access(
    client: &Client,
    shared: &Shared,
    watched: Option<&Watched<ClusterRequest>>,
    ar: &AccessRequest,
) -> Result<Option<TargetCluster>> {
    if let Some(NamespacedRef { name, .. }) = &ar.spec.cluster_ref {
        if *name == shared.onboarding.name {
            return Ok(Some(shared.onboarding.clone()));
        }
        if let Some(workload) = shared.options.workload.as_ref().filter(|w| w.name == *name) {
            return Ok(Some(workload.clone()));
        }
        let state = lock_unpoisoned(&shared.state);
        return Ok(state.control_planes.values().find(|c| c.name == *name).cloned());
    }
    let Some(NamespacedRef { name, namespace }) = &ar.spec.request_ref else {
        return Ok(None);
    };
    let request = match watched {
        Some(watched) => watched.get(namespace, name).map(|r| ClusterRequest::clone(&r)),
        None => Api::<ClusterRequest>::namespaced(client.clone(), namespace).get_opt(name).await?,
    };
    let Some(request) = request else {
        return Ok(None);
    };
    let granted = request
        .status
        .as_ref()
        .is_some_and(|s| is_granted(&s.phase, s.observed_generation, request.metadata.generation));
    Ok(if granted { target_for_request(shared, &request) } else { None })
}

/// Grants or revokes one AccessRequest.
async fn reconcile_access_request(
    client: &Client,
    shared: &Shared,
    requests: Option<&Watched<ClusterRequest>>,
    api: &Api<AccessRequest>,
    ar: &AccessRequest,
) -> Result<Outcome> {
    let name = ar.name_any();
    let ns = ar.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let finalizers = ar.finalizers();

    if ar.metadata.deletion_timestamp.is_some() {
        let remaining: Vec<&String> = finalizers
            .iter()
            .filter(|f| {
                *f != SIMULATOR_FINALIZER
                    && !(shared.options.remove_clusteraccess_finalizer && *f == CLUSTER_ACCESS_FINALIZER)
            })
            .collect();
        if remaining.len() == finalizers.len() {
            return Ok(Outcome::Settled); // nothing of ours (left) to clean up
        }
        match secrets.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        set_finalizers(api, ar, &remaining).await?;
        return Ok(Outcome::Settled);
    }

    if let Some(s) = &ar.status
        && is_granted(&s.phase, s.observed_generation, ar.metadata.generation)
        && s.secret_ref.is_some()
    {
        return Ok(Outcome::Settled);
    }
    let Some(target) = target_for_access(client, shared, requests, ar).await? else {
        return Ok(Outcome::Retry); // stays pending until its ClusterRequest is granted
    };
    if !finalizers.iter().any(|f| f == SIMULATOR_FINALIZER) {
        let mut with_ours: Vec<&String> = finalizers.iter().collect();
        let ours = SIMULATOR_FINALIZER.to_string();
        with_ours.push(&ours);
        set_finalizers(api, ar, &with_ours).await?;
    }

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(BTreeMap::from([
                ("openmcp.cloud/managed-by".to_string(), MANAGER.to_string()),
                ("envtest.openmcp.cloud/cluster".to_string(), target.name.clone()),
            ])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_string(), ByteString(target.kubeconfig.clone().into_bytes()))])),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    secrets.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&secret)).await?;
    let status = json!({
        "status": {
            "phase": "Granted",
            "observedGeneration": ar.metadata.generation.unwrap_or(0),
            "secretRef": { "name": name },
        }
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(Outcome::Settled)
}

/// Replaces `metadata.finalizers`, guarded by `resourceVersion` so a
/// concurrent change (e.g. the provider removing its own finalizer) makes
/// this round fail with a conflict and retry, instead of being overwritten.
async fn set_finalizers(api: &Api<AccessRequest>, ar: &AccessRequest, finalizers: &[&String]) -> Result<()> {
    let patch = json!({
        "metadata": {
            "resourceVersion": ar.resource_version(),
            "finalizers": finalizers,
        }
    });
    api.patch(&ar.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}
