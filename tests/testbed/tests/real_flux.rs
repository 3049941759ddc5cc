//! The real Flux chain end to end (issue #11): source-controller pulls the
//! kro chart from a local registry that requires credentials, helm-controller
//! installs it onto a ControlPlane cluster through a kubeconfig Secret, and
//! the Flux objects are exactly those the Kro plugin writes
//! (`guest_kro::desired`, applied with the host's field manager).
//!
//! The layout host tests will use: the shared platform cluster with one
//! shared chain ([`testbed::real_flux::shared`]) and, per test, a fresh
//! ControlPlane cluster (without kro's CRDs, so the install is what puts them
//! there) with a [`DeploymentSimulator`] in `kro-system`.
//!
//! A test binary of its own: the controllers reconcile every namespace of
//! the platform cluster, so no `FluxSimulator` may run next to them.
//! Skipped (`ignored`, with the reason) when the Flux binaries were not built
//! (`scripts/build-flux-bins.sh`); `TESTBED_REQUIRE_FLUX=1` turns that into
//! a failure.

use std::time::{Duration, Instant};

use guest_kro::api::KroVersion;
use guest_kro::desired;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::Value;
use service_provider_sdk::contract::KubeconfigRef;
use testbed::helm_chart::KRO_CHART_REPOSITORY;
use testbed::{Cluster, ClusterOptions, DeploymentSimulator, PushedChart, RealFlux};

/// Generous: a 2-core machine compiling in parallel is slow, and Helm's wait
/// and Flux's retries take seconds each.
const WAIT: Duration = Duration::from_secs(180);
/// The kubeconfig Secret, as an AccessRequest's status would name it.
const KUBECONFIG_SECRET: &str = "kro--mcp-01--mcp";
/// The source Secret name a ProviderConfig's `chartPullSecret` would give.
const CHART_PULL_SECRET: &str = "registry-credentials";
/// Field manager of the host (the plugin's objects are applied like this).
const FIELD_MANAGER: &str = "service-provider-host/kro";
/// What the kro chart names its Deployment for release `kro`.
const KRO_DEPLOYMENT: &str = "kro";
/// helm-controller's finalizer (source-controller uses the same on sources).
const FLUX_FINALIZER: &str = "finalizers.fluxcd.io";

fn oci_repository_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "OCIRepository"),
        "ocirepositories",
    )
}

fn helm_release_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"),
        "helmreleases",
    )
}

fn version(chart_version: &str, chart_url: &str, pull_secret: Option<&str>) -> KroVersion {
    KroVersion {
        version: format!("v{chart_version}"),
        chart_version: chart_version.into(),
        chart_url: Some(chart_url.into()),
        chart_pull_secret: pull_secret.map(str::to_string),
        helm_values: None,
    }
}

/// `(status, reason, message)` of the Ready condition, if it is about the
/// current generation.
fn ready(object: &DynamicObject) -> Option<(String, String, String)> {
    let generation = object.metadata.generation?;
    let conditions = object.data["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Ready")?;
    if c["observedGeneration"].as_i64() != Some(generation) {
        return None;
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Some((text(&c["status"]), text(&c["reason"]), text(&c["message"])))
}

/// Flux is done with the current generation and it succeeded: `Ready=True`
/// for it and `status.observedGeneration` caught up. (Ready=True shows up
/// one status write before the end of a reconcile, while
/// `status.observedGeneration` still has its old value, e.g. `-1`.)
fn is_ready(object: &DynamicObject) -> bool {
    ready(object).is_some_and(|(status, _, _)| status == "True")
        && object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation
}

fn is_not_ready(object: &DynamicObject) -> Option<(String, String, String)> {
    ready(object).filter(|(status, _, _)| status == "False")
}

/// What the Kro plugin makes of the object (`status.resources[].phase/message`).
fn plugin_view(object: &DynamicObject) -> String {
    let (phase, message) = guest_kro::status::flux_phase(Some(&serde_json::to_value(object).unwrap()));
    format!("{phase}: {}", message.unwrap_or_default())
}

/// The chart version helm-controller records for a chart from an
/// OCIRepository: the first 12 hex digits of the artifact digest are added
/// as SemVer build metadata (`0.9.1+88e263f95b0c`).
fn chart_version_of(pushed: &PushedChart) -> String {
    let hex = pushed.digest.trim_start_matches("sha256:");
    format!("{}+{}", pushed.tag, &hex[..12])
}

fn history_chart_version(release: &DynamicObject) -> Option<String> {
    release.data["status"]["history"][0]["chartVersion"].as_str().map(str::to_string)
}

/// One test's world: the shared platform and chain, its own ControlPlane
/// cluster and tenant namespace, and the kubeconfig Secret of that
/// ControlPlane in the tenant namespace.
struct Tenant {
    flux: &'static RealFlux,
    cp: Cluster,
    deployments: DeploymentSimulator,
    namespace: String,
    cp_client: Client,
    secrets: Api<Secret>,
    repos: Api<DynamicObject>,
    releases: Api<DynamicObject>,
}

impl Tenant {
    async fn new(name: &str) -> Tenant {
        let started = Instant::now();
        let env = testbed::shared().await.expect("test environment");
        let flux = testbed::real_flux::shared().await.expect("the real Flux chain");
        let cp = Cluster::start(ClusterOptions::new(name)).await.expect("ControlPlane cluster");
        eprintln!(
            "real-flux {name}: environment after {:?} (the chain started in {:?})",
            started.elapsed(),
            flux.startup_duration()
        );
        let deployments = DeploymentSimulator::start(&cp, &[desired::KRO_SYSTEM]);
        let platform = env.platform.client().await.unwrap();
        // The shape of a tenant namespace (`mcp--<uuid>`), unique per test.
        let namespace = format!("mcp--{name}-{}", std::process::id());
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(namespace.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(platform.clone()).create(&PostParams::default(), &ns).await.unwrap();
        let secrets: Api<Secret> = Api::namespaced(platform.clone(), &namespace);
        let kubeconfig = Secret {
            metadata: ObjectMeta { name: Some(KUBECONFIG_SECRET.into()), ..Default::default() },
            data: Some([("kubeconfig".to_string(), ByteString(cp.kubeconfig_yaml().as_bytes().to_vec()))].into()),
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &kubeconfig).await.unwrap();
        Tenant {
            flux,
            cp_client: cp.client().await.unwrap(),
            cp,
            deployments,
            secrets,
            repos: Api::namespaced_with(platform.clone(), &namespace, &oci_repository_resource()),
            releases: Api::namespaced_with(platform, &namespace, &helm_release_resource()),
            namespace,
        }
    }

    fn kubeconfig_ref(&self) -> KubeconfigRef {
        KubeconfigRef { namespace: self.namespace.clone(), name: KUBECONFIG_SECRET.into(), key: "kubeconfig".into() }
    }

    /// The plugin's OCIRepository for `version`, applied like the host does.
    async fn apply_oci_repository(&self, version: &KroVersion) {
        apply(&self.repos, &desired::oci_repository(version, &self.namespace)).await;
    }

    /// The plugin's HelmRelease for `version`, applied like the host does.
    async fn apply_helm_release(&self, version: &KroVersion) {
        apply(&self.releases, &desired::helm_release(version, &self.namespace, &self.kubeconfig_ref())).await;
    }

    /// Polls `check(object)` on a Flux object until it returns `Some`; on
    /// timeout the panic has the object's last status and the controllers'
    /// logs.
    async fn wait<T>(
        &self,
        what: &str,
        api: &Api<DynamicObject>,
        name: &str,
        mut check: impl FnMut(Option<&DynamicObject>) -> Option<T>,
    ) -> T {
        let started = Instant::now();
        loop {
            let (object, seen) = match api.get_opt(name).await {
                Ok(Some(o)) => {
                    let seen = format!("finalizers {:?}, status {}", o.finalizers(), o.data["status"]);
                    (Some(o), seen)
                }
                Ok(None) => (None, "not found".into()),
                Err(e) => (None, e.to_string()),
            };
            if let Some(v) = check(object.as_ref()) {
                eprintln!("real-flux {}: {what}: after {:.1?}", self.cp.name(), started.elapsed());
                return v;
            }
            if started.elapsed() > WAIT {
                panic!("timed out after {WAIT:?} waiting for {what}; last seen: {seen}\n{}", self.flux.log_tails(40));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn wait_repo<T>(&self, what: &str, check: impl FnMut(Option<&DynamicObject>) -> Option<T>) -> T {
        self.wait(what, &self.repos, desired::OCI_REPOSITORY, check).await
    }

    async fn wait_release<T>(&self, what: &str, check: impl FnMut(Option<&DynamicObject>) -> Option<T>) -> T {
        self.wait(what, &self.releases, desired::HELM_RELEASE, check).await
    }

    /// The kro Deployment's image on the ControlPlane, if it exists.
    async fn kro_image(&self) -> Option<String> {
        let deployment = Api::<Deployment>::namespaced(self.cp_client.clone(), desired::KRO_SYSTEM)
            .get_opt(KRO_DEPLOYMENT)
            .await
            .expect("read the kro Deployment");
        deployment
            .map(|d| d.spec.template.spec.and_then(|s| s.containers.into_iter().next()?.image).unwrap_or_default())
    }

    async fn cp_secret_exists(&self, name: &str) -> bool {
        let api: Api<Secret> = Api::namespaced(self.cp_client.clone(), desired::KRO_SYSTEM);
        api.get_opt(name).await.expect("read Secret").is_some()
    }

    /// OCIRepository with the pull Secret (created here) and HelmRelease of
    /// `chart`, both Ready; kro runs on the ControlPlane.
    async fn install(&self, chart: &str) -> KroVersion {
        let version = version(chart, &self.flux.kro_chart_url(), Some(CHART_PULL_SECRET));
        let copy = desired::chart_pull_secret_copy_name(CHART_PULL_SECRET);
        if self.secrets.get_opt(&copy).await.unwrap().is_none() {
            let secret = self.flux.registry().pull_secret(&copy, &self.namespace);
            self.secrets.create(&PostParams::default(), &secret).await.unwrap();
        }
        self.apply_oci_repository(&version).await;
        self.apply_helm_release(&version).await;
        self.wait_release(&format!("HelmRelease Ready at {chart}"), |o| o.filter(|o| is_ready(o)).map(drop)).await;
        let image = self.kro_image().await.expect("kro Deployment installed");
        assert!(image.ends_with(&format!(":{chart}")), "{image}");
        version
    }

    async fn stop(self) {
        assert_eq!(self.deployments.last_error(), None);
        self.deployments.stop().await;
    }
}

async fn apply(api: &Api<DynamicObject>, manifest: &Value) {
    let object: DynamicObject = serde_json::from_value(manifest.clone()).expect("a Kubernetes object");
    api.patch(&object.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&object))
        .await
        .unwrap_or_else(|e| panic!("apply {}: {e}", object.name_any()));
}

#[tokio::test]
#[cfg_attr(
    not(testbed_flux_bins),
    ignore = "Flux binaries not built: run `eval \"$(tests/testbed/scripts/build-flux-bins.sh)\"` \
              (TESTBED_REQUIRE_FLUX=1 makes this a failure)"
)]
async fn real_flux_pulls_with_credentials_installs_upgrades_and_uninstalls_kro() {
    let test_started = Instant::now();
    let t = Tenant::new("cp-lifecycle").await;
    let flux = t.flux;
    let (old, new) = (flux.chart("0.9.1").expect("0.9.1 pushed"), flux.chart("0.9.3").expect("0.9.3 pushed"));
    assert_ne!(old.digest, new.digest);
    let registry = flux.registry();
    assert_eq!(registry.manifest_status(KRO_CHART_REPOSITORY, "0.9.1", false).await.unwrap().as_u16(), 401);
    assert_eq!(registry.manifest_status(KRO_CHART_REPOSITORY, "0.9.1", true).await.unwrap().as_u16(), 200);
    let url = flux.kro_chart_url();

    // 1. No credentials: the pull fails and says why.
    t.apply_oci_repository(&version("0.9.1", &url, None)).await;
    let (_, reason, message) =
        t.wait_repo("OCIRepository Ready=False without credentials", |o| o.and_then(is_not_ready)).await;
    eprintln!("real-flux: without credentials: reason={reason} message={message}");
    assert_eq!(reason, "OCIArtifactPullFailed", "{message}");
    assert!(message.contains("UNAUTHORIZED: authentication required"), "{message}");
    let repo = t.repos.get(desired::OCI_REPOSITORY).await.unwrap();
    eprintln!("real-flux: status: {}", repo.data["status"]);
    eprintln!("real-flux: the plugin shows: {}", plugin_view(&repo));
    // A failed reconcile leaves status.observedGeneration alone (-1: never
    // succeeded); only the conditions carry the generation they are about.
    assert_eq!(repo.data["status"]["observedGeneration"], -1, "{}", repo.data["status"]);

    // 2. secretRef to the plugin's copy name before the copy exists.
    let with_secret = version("0.9.1", &url, Some(CHART_PULL_SECRET));
    t.apply_oci_repository(&with_secret).await;
    let copy = desired::chart_pull_secret_copy_name(CHART_PULL_SECRET);
    let (_, reason, message) =
        t.wait_repo("OCIRepository Ready=False, pull Secret missing", |o| o.and_then(is_not_ready)).await;
    eprintln!("real-flux: missing pull Secret: reason={reason} message={message}");
    assert_eq!(reason, "AuthenticationFailed", "{message}");
    assert!(message.contains(&format!("secrets \"{copy}\" not found")), "{message}");

    // 3. The copy appears (no spec change): Flux's retry picks it up.
    t.secrets.create(&PostParams::default(), &registry.pull_secret(&copy, &t.namespace)).await.unwrap();
    let repo =
        t.wait_repo("OCIRepository Ready=True with the pull Secret", |o| o.filter(|o| is_ready(o)).cloned()).await;
    assert_eq!(repo.data["status"]["artifact"]["revision"], old.revision(), "{}", repo.data["status"]);
    assert!(repo.finalizers().iter().any(|f| f == FLUX_FINALIZER), "source-controller's finalizer");
    assert_eq!(plugin_view(&repo), "Ready: ");

    // 4. The HelmRelease installs kro onto the ControlPlane.
    let install_started = Instant::now();
    t.apply_helm_release(&with_secret).await;
    let release = t.wait_release("HelmRelease Ready=True (install)", |o| o.filter(|o| is_ready(o)).cloned()).await;
    eprintln!("real-flux: install took {:?}: {:?}", install_started.elapsed(), ready(&release));
    eprintln!("real-flux: HelmRelease status: {}", release.data["status"]);
    assert_eq!(ready(&release).unwrap().1, "InstallSucceeded");
    assert_eq!(history_chart_version(&release), Some(chart_version_of(old)), "{}", release.data["status"]);
    assert_eq!(release.data["status"]["lastAttemptedRevisionDigest"], old.digest.as_str());
    assert!(release.finalizers().iter().any(|f| f == FLUX_FINALIZER), "helm-controller's finalizer");
    assert_eq!(plugin_view(&release), "Ready: ");
    let image = t.kro_image().await.expect("kro Deployment on the ControlPlane");
    assert_eq!(image, "registry.k8s.io/kro/kro:0.9.1");
    let crd = Api::<CustomResourceDefinition>::all(t.cp_client.clone())
        .get("resourcegraphdefinitions.kro.run")
        .await
        .expect("kro's CRD on the ControlPlane");
    assert!(testbed::crds::is_established(&crd));
    assert!(t.cp_secret_exists("sh.helm.release.v1.kro.v1").await, "Helm's release Secret");

    // 5. Upgrade: as with a new chartVersion, only the OCIRepository's tag changes.
    let upgrade_started = Instant::now();
    let upgraded = version("0.9.3", &url, Some(CHART_PULL_SECRET));
    t.apply_oci_repository(&upgraded).await;
    t.apply_helm_release(&upgraded).await;
    let repo = t
        .wait_repo("OCIRepository Ready=True at 0.9.3", |o| {
            o.filter(|o| is_ready(o) && o.data["status"]["artifact"]["revision"] == new.revision()).cloned()
        })
        .await;
    assert_eq!(repo.metadata.generation, Some(3));
    let release = t
        .wait_release("HelmRelease Ready=True at 0.9.3 (upgrade)", |o| {
            o.filter(|o| is_ready(o) && history_chart_version(o) == Some(chart_version_of(new))).cloned()
        })
        .await;
    eprintln!("real-flux: upgrade took {:?}: {:?}", upgrade_started.elapsed(), ready(&release));
    assert_eq!(ready(&release).unwrap().1, "UpgradeSucceeded");
    assert_eq!(release.metadata.generation, Some(1), "the HelmRelease itself did not change");
    assert_eq!(t.kro_image().await.as_deref(), Some("registry.k8s.io/kro/kro:0.9.3"));
    assert!(t.cp_secret_exists("sh.helm.release.v1.kro.v2").await, "Helm's second release Secret");

    // 6. Deleting the HelmRelease uninstalls kro while the kubeconfig Secret still exists.
    let uninstall_started = Instant::now();
    t.releases.delete(desired::HELM_RELEASE, &DeleteParams::default()).await.unwrap();
    t.wait_release("HelmRelease gone", |o| o.is_none().then_some(())).await;
    eprintln!("real-flux: uninstall took {:?}", uninstall_started.elapsed());
    assert_eq!(t.kro_image().await, None, "kro's Deployment is uninstalled");
    assert!(!t.cp_secret_exists("sh.helm.release.v1.kro.v2").await, "Helm's release history is removed");
    assert!(t.secrets.get_opt(KUBECONFIG_SECRET).await.unwrap().is_some(), "the kubeconfig Secret is left alone");
    let crd = Api::<CustomResourceDefinition>::all(t.cp_client.clone())
        .get_opt("resourcegraphdefinitions.kro.run")
        .await
        .unwrap();
    assert!(crd.is_some(), "Helm never deletes the CRDs of a chart's crds/ directory");

    // The OCIRepository's finalizer goes with its stored artifact.
    t.repos.delete(desired::OCI_REPOSITORY, &DeleteParams::default()).await.unwrap();
    t.wait_repo("OCIRepository gone", |o| o.is_none().then_some(())).await;

    if let (Some(flux_rss), Some(cp_rss)) = (flux.rss(), t.cp.rss()) {
        eprintln!(
            "real-flux: RSS source-controller {} MiB, helm-controller {} MiB, registry {} MiB; ControlPlane {} MiB",
            flux_rss.source_controller_bytes >> 20,
            flux_rss.helm_controller_bytes >> 20,
            flux_rss.registry_bytes >> 20,
            cp_rss.total_bytes() >> 20,
        );
    }
    t.stop().await;
    eprintln!("real-flux: lifecycle test took {:?}", test_started.elapsed());
}

/// Why the host must delete the HelmRelease, and wait until it is gone,
/// before it revokes ControlPlane access (deletes the AccessRequest and with
/// it the kubeconfig Secret).
#[tokio::test]
#[cfg_attr(
    not(testbed_flux_bins),
    ignore = "Flux binaries not built: run `eval \"$(tests/testbed/scripts/build-flux-bins.sh)\"` \
              (TESTBED_REQUIRE_FLUX=1 makes this a failure)"
)]
async fn helm_release_deletion_depends_on_the_kubeconfig_secret() {
    let test_started = Instant::now();

    // a) Secret gone first: the HelmRelease goes away, kro stays installed.
    let t = Tenant::new("cp-secret-first").await;
    t.install("0.9.1").await;
    t.secrets.delete(KUBECONFIG_SECRET, &DeleteParams::default()).await.unwrap();
    let deleted = Instant::now();
    t.releases.delete(desired::HELM_RELEASE, &DeleteParams::default()).await.unwrap();
    t.wait_release("HelmRelease gone without its kubeconfig Secret", |o| o.is_none().then_some(())).await;
    eprintln!("real-flux: HelmRelease without kubeconfig Secret gone after {:?}", deleted.elapsed());
    assert_eq!(
        t.kro_image().await.as_deref(),
        Some("registry.k8s.io/kro/kro:0.9.1"),
        "the uninstall was skipped: kro is orphaned on the ControlPlane"
    );
    assert!(t.cp_secret_exists("sh.helm.release.v1.kro.v1").await, "Helm's release Secret is orphaned too");
    t.stop().await;

    // b) ControlPlane unreachable, Secret still there: the deletion hangs on
    //    the finalizer until the Secret goes.
    let t = Tenant::new("cp-unreachable").await;
    t.install("0.9.1").await;
    t.cp.stop();
    t.releases.delete(desired::HELM_RELEASE, &DeleteParams::default()).await.unwrap();
    let (reason, message) = t
        .wait_release("HelmRelease reports the failed uninstall", |o| {
            let o = o?;
            let c = o.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?;
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (c["status"] == "False").then(|| (text(&c["reason"]), text(&c["message"])))
        })
        .await;
    eprintln!("real-flux: unreachable ControlPlane: Ready=False reason={reason} message={message}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let stuck = t.releases.get(desired::HELM_RELEASE).await.expect("still there after 10 s");
    assert!(stuck.metadata.deletion_timestamp.is_some());
    assert_eq!(stuck.finalizers(), [FLUX_FINALIZER]);
    eprintln!("real-flux: stuck HelmRelease status: {}", stuck.data["status"]);
    // Revoking access (the Secret goes) releases it.
    let revoked = Instant::now();
    t.secrets.delete(KUBECONFIG_SECRET, &DeleteParams::default()).await.unwrap();
    t.wait_release("HelmRelease gone once the kubeconfig Secret is deleted", |o| o.is_none().then_some(())).await;
    eprintln!("real-flux: stuck HelmRelease gone {:?} after the Secret was deleted", revoked.elapsed());
    t.repos.delete(desired::OCI_REPOSITORY, &DeleteParams::default()).await.unwrap();
    t.wait_repo("OCIRepository gone", |o| o.is_none().then_some(())).await;
    // The simulator lost its (stopped) cluster: its errors are expected here.
    t.deployments.stop().await;
    eprintln!("real-flux: deletion-order test took {:?}", test_started.elapsed());
}

fn alive(pid: u32) -> bool {
    // A reaped process has no /proc entry; a zombie would have state Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// A second chain on the same platform, narrowed by a label selector that
/// matches nothing (so it leaves the shared chain's objects alone); dropping
/// it stops all three processes and removes its directories.
#[tokio::test]
#[cfg_attr(
    not(testbed_flux_bins),
    ignore = "Flux binaries not built: run `eval \"$(tests/testbed/scripts/build-flux-bins.sh)\"` \
              (TESTBED_REQUIRE_FLUX=1 makes this a failure)"
)]
async fn a_dropped_chain_leaves_no_process_and_no_directory() {
    let env = testbed::shared().await.expect("test environment");
    let options = testbed::RealFluxOptions {
        watch_label_selector: Some("envtest.example/chain=none".into()),
        kro_chart_versions: vec!["0.9.3".into()],
        ..Default::default()
    };
    let flux = RealFlux::start(&env.platform, options).await.expect("a second chain");
    assert_eq!(flux.charts().len(), 1);
    let pids = flux.pids();
    let dir = flux.dir().to_path_buf();
    assert!(pids.iter().all(|&pid| alive(pid)), "{pids:?}");
    for pid in &pids[..2] {
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap().replace('\0', " ");
        assert!(cmdline.contains("--watch-label-selector=envtest.example/chain=none"), "{cmdline}");
    }
    drop(flux);
    for pid in pids {
        assert!(!alive(pid), "process {pid} still running");
    }
    if std::env::var_os(testbed::process::ENV_KEEP_DIRS).is_none() {
        assert!(!dir.exists(), "run directory {} removed", dir.display());
    }
}
