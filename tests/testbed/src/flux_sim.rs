//! `FluxSimulator`: a test double for Flux's source-controller and
//! helm-controller on the platform cluster. No Flux controller runs in the
//! test environment; this stands in for the parts a service provider observes:
//!
//! - `Ready` conditions on `OCIRepository` (source.toolkit.fluxcd.io/v1) and
//!   `HelmRelease` (helm.toolkit.fluxcd.io/v2) status, set on demand
//!   ([`FluxSimulator::set_ready`]) or automatically
//!   ([`FluxOptions::auto_ready`]);
//! - helm-controller's finalizer on HelmReleases: added to every live
//!   HelmRelease, removed after [`FluxOptions::deletion_delay`] once the
//!   object is being deleted, so deletion waits like it does with real Flux
//!   (which uninstalls the chart first).
//!
//! Nothing is installed anywhere; charts are never fetched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;

use crate::background::Background;
use crate::cluster::{Cluster, client_from_kubeconfig};
use crate::error::Result;
use crate::process::lock_unpoisoned;
use crate::watched::{Outcome, Watched};

/// The finalizer helm-controller puts on HelmReleases.
pub const HELM_RELEASE_FINALIZER: &str = "finalizers.fluxcd.io";

/// The two Flux kinds the simulator handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FluxKind {
    OciRepository,
    HelmRelease,
}

impl FluxKind {
    pub fn api_resource(self) -> ApiResource {
        match self {
            FluxKind::OciRepository => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "OCIRepository"),
                "ocirepositories",
            ),
            FluxKind::HelmRelease => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"),
                "helmreleases",
            ),
        }
    }

    /// Reason used for a Ready condition, in Flux's vocabulary.
    fn reason(self, ready: bool) -> &'static str {
        match (self, ready) {
            (FluxKind::OciRepository, true) => "Succeeded",
            (FluxKind::OciRepository, false) => "OCIArtifactPullFailed",
            (FluxKind::HelmRelease, true) => "InstallSucceeded",
            (FluxKind::HelmRelease, false) => "InstallFailed",
        }
    }
}

/// Simulator settings.
#[derive(Debug, Clone)]
pub struct FluxOptions {
    pub poll_interval: Duration,
    /// Namespaces to act in, listed each round; empty means all, watched
    /// (acting on changes as they arrive and on several objects at once).
    pub namespaces: Vec<String>,
    /// Add/remove [`HELM_RELEASE_FINALIZER`] on HelmReleases.
    pub emulate_finalizer: bool,
    /// How long a deleted HelmRelease keeps the finalizer (the "uninstall").
    pub deletion_delay: Duration,
    /// Mark every OCIRepository/HelmRelease Ready=True for its current
    /// generation, as a healthy Flux would after a successful reconcile.
    pub auto_ready: bool,
}

impl Default for FluxOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(200),
            namespaces: Vec::new(),
            emulate_finalizer: true,
            deletion_delay: Duration::ZERO,
            auto_ready: false,
        }
    }
}

/// The running Flux test double; stops when dropped or via [`Self::stop`].
pub struct FluxSimulator {
    platform_kubeconfig: String,
    background: Background,
}

impl FluxSimulator {
    pub fn start(platform: &Cluster, options: FluxOptions) -> Self {
        Self::start_with(platform.kubeconfig_yaml(), options)
    }

    /// Like [`Self::start`], from kubeconfig text.
    pub fn start_with(platform_kubeconfig: &str, options: FluxOptions) -> Self {
        let kubeconfig = Arc::new(platform_kubeconfig.to_string());
        let options = Arc::new(options);
        let deleting_since = Arc::new(Mutex::new(HashMap::<String, Instant>::new()));
        let client = Arc::new(tokio::sync::OnceCell::<Client>::new());
        let interval = options.poll_interval;
        let wake = Arc::new(Notify::new());
        let watches = Arc::new(tokio::sync::OnceCell::<Watches>::new());
        let background = Background::spawn_woken("flux simulator", interval, wake.clone(), move || {
            let (kubeconfig, options) = (kubeconfig.clone(), options.clone());
            let (deleting_since, client) = (deleting_since.clone(), client.clone());
            let (watches, wake) = (watches.clone(), wake.clone());
            async move {
                let client = client.get_or_try_init(|| client_from_kubeconfig(&kubeconfig)).await?;
                if options.namespaces.is_empty() {
                    let watches = watches.get_or_init(|| async { Watches::start(client, wake) }).await;
                    return watched_round(client, &options, &deleting_since, watches).await;
                }
                round(client, &options, &deleting_since).await
            }
        });
        Self { platform_kubeconfig: platform_kubeconfig.to_string(), background }
    }

    /// Sets the `Ready` condition (and `status.observedGeneration`) of a
    /// Flux object, as source-/helm-controller would after a reconcile.
    pub async fn set_ready(
        &self,
        kind: FluxKind,
        namespace: &str,
        name: &str,
        ready: bool,
        message: &str,
    ) -> Result<()> {
        let client = client_from_kubeconfig(&self.platform_kubeconfig).await?;
        set_ready(&client, kind, namespace, name, ready, message).await
    }

    /// The error of the latest round, if any.
    pub fn last_error(&self) -> Option<String> {
        self.background.last_error()
    }

    pub async fn stop(self) {
        self.background.stop().await;
    }
}

/// [`FluxSimulator::set_ready`] with a given client (no simulator needed).
pub async fn set_ready(
    client: &Client,
    kind: FluxKind,
    namespace: &str,
    name: &str,
    ready: bool,
    message: &str,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind.api_resource());
    let object = api.get(name).await?;
    let patch = ready_patch(kind, &object, ready, message);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// A status merge patch replacing the Ready condition and keeping others.
fn ready_patch(kind: FluxKind, object: &DynamicObject, ready: bool, message: &str) -> serde_json::Value {
    let generation = object.metadata.generation.unwrap_or(0);
    let status_word = if ready { "True" } else { "False" };
    let mut conditions: Vec<serde_json::Value> =
        object.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let previous = conditions.iter().position(|c| c["type"] == "Ready");
    // Keep lastTransitionTime when the status does not change.
    let transition = previous
        .map(|i| &conditions[i])
        .filter(|c| c["status"] == status_word)
        .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
        .unwrap_or_else(now_rfc3339);
    let condition = json!({
        "type": "Ready",
        "status": status_word,
        "reason": kind.reason(ready),
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": transition,
    });
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    json!({ "status": { "observedGeneration": generation, "conditions": conditions } })
}

/// Current time as RFC 3339 with second precision (what metav1.Time emits).
pub fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second).unwrap_or(now).to_string()
}

fn is_ready_for_generation(object: &DynamicObject) -> bool {
    let generation = object.metadata.generation.unwrap_or(0);
    object.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True" && c["observedGeneration"] == generation)
    })
}

/// The watches used when the simulator acts in every namespace.
struct Watches {
    releases: Watched<DynamicObject>,
    repositories: Watched<DynamicObject>,
}

impl Watches {
    fn start(client: &Client, wake: Arc<Notify>) -> Self {
        let watch = |kind: FluxKind| {
            let resource = kind.api_resource();
            Watched::start(Api::all_with(client.clone(), &resource), resource, wake.clone())
        };
        Self { releases: watch(FluxKind::HelmRelease), repositories: watch(FluxKind::OciRepository) }
    }
}

/// One round over the watched objects of every namespace.
async fn watched_round(
    client: &Client,
    options: &FluxOptions,
    deleting_since: &Mutex<HashMap<String, Instant>>,
    watches: &Watches,
) -> Result<()> {
    let releases = watches.releases.snapshot().await?;
    let released = watches
        .releases
        .act_on_changed(releases, |release| async move {
            reconcile_release(client, options, deleting_since, &release).await
        })
        .await;
    if !options.auto_ready {
        return released;
    }
    let repositories = watches.repositories.snapshot().await?;
    let stored = watches
        .repositories
        .act_on_changed(repositories, |repo| async move { reconcile_repository(client, &repo).await })
        .await;
    released.and(stored)
}

/// One round over the listed objects of the configured namespaces.
async fn round(client: &Client, options: &FluxOptions, deleting_since: &Mutex<HashMap<String, Instant>>) -> Result<()> {
    let release_resource = FluxKind::HelmRelease.api_resource();
    for ns in &options.namespaces {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &release_resource);
        for release in api.list(&ListParams::default()).await? {
            reconcile_release(client, options, deleting_since, &release).await?;
        }
    }
    if options.auto_ready {
        let repository_resource = FluxKind::OciRepository.api_resource();
        for ns in &options.namespaces {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &repository_resource);
            for repo in api.list(&ListParams::default()).await? {
                reconcile_repository(client, &repo).await?;
            }
        }
    }
    Ok(())
}

/// Plays helm-controller on one HelmRelease.
async fn reconcile_release(
    client: &Client,
    options: &FluxOptions,
    deleting_since: &Mutex<HashMap<String, Instant>>,
    release: &DynamicObject,
) -> Result<Outcome> {
    let ns = release.namespace().unwrap_or_default();
    let scoped: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &FluxKind::HelmRelease.api_resource());
    let has_finalizer = release.finalizers().iter().any(|f| f == HELM_RELEASE_FINALIZER);
    if release.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Outcome::Settled);
        }
        let uid = release.uid().unwrap_or_default();
        let since = *lock_unpoisoned(deleting_since).entry(uid.clone()).or_insert_with(Instant::now);
        if since.elapsed() < options.deletion_delay {
            return Ok(Outcome::Retry);
        }
        let remaining: Vec<&String> = release.finalizers().iter().filter(|f| *f != HELM_RELEASE_FINALIZER).collect();
        let outcome = set_finalizers(&scoped, release, &remaining).await?;
        if outcome == Outcome::Settled {
            lock_unpoisoned(deleting_since).remove(&uid);
        }
        return Ok(outcome);
    }
    if options.emulate_finalizer && !has_finalizer {
        let ours = HELM_RELEASE_FINALIZER.to_string();
        let mut all: Vec<&String> = release.finalizers().iter().collect();
        all.push(&ours);
        if set_finalizers(&scoped, release, &all).await? == Outcome::Retry {
            return Ok(Outcome::Retry); // changed meanwhile: the next round sees how
        }
    }
    if options.auto_ready && !is_ready_for_generation(release) {
        let patch = ready_patch(FluxKind::HelmRelease, release, true, "Helm install succeeded (simulated)");
        scoped.patch_status(&release.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    Ok(Outcome::Settled)
}

/// Plays source-controller on one OCIRepository (only with
/// [`FluxOptions::auto_ready`]).
async fn reconcile_repository(client: &Client, repo: &DynamicObject) -> Result<Outcome> {
    if repo.metadata.deletion_timestamp.is_some() || is_ready_for_generation(repo) {
        return Ok(Outcome::Settled);
    }
    let ns = repo.namespace().unwrap_or_default();
    let scoped: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &FluxKind::OciRepository.api_resource());
    let patch = ready_patch(FluxKind::OciRepository, repo, true, "stored artifact (simulated)");
    scoped.patch_status(&repo.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Outcome::Settled)
}

/// Replaces `metadata.finalizers`, guarded by `resourceVersion`; a retry
/// when the object changed or went meanwhile (another round, or another
/// simulator acting on the same objects, got there first): not an error,
/// the next round looks again, as a controller requeues on a conflict.
async fn set_finalizers(api: &Api<DynamicObject>, object: &DynamicObject, finalizers: &[&String]) -> Result<Outcome> {
    let patch = json!({
        "metadata": { "resourceVersion": object.resource_version(), "finalizers": finalizers }
    });
    match api.patch(&object.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(Outcome::Settled),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(Outcome::Retry),
        Err(e) => Err(e.into()),
    }
}
