//! The real Flux chain on a test platform cluster: source-controller and
//! helm-controller as processes (and kustomize-controller where a test
//! applies what openmcp's bootstrapper commits,
//! [`RealFluxOptions::kustomize_controller`]), plus a local [`Registry`]
//! (authentication required) holding the kro chart in the versions of
//! [`KRO_CHART_VERSIONS`].
//!
//! ```text
//!  platform cluster                     registry (127.0.0.1:<p>, htpasswd)
//!  OCIRepository --source-controller--> kro/charts/kro:0.9.1, :0.9.3
//!       | artifact (http://127.0.0.1:<storage>)
//!  HelmRelease ---helm-controller--kubeConfig.secretRef--> ControlPlane cluster
//! ```
//!
//! What this needs that the simulators did not:
//!
//! - every CRD the controllers start informers for (all source kinds and
//!   HelmRelease, [`crds::FLUX_CONTROLLER_CRDS`]), from the module versions
//!   of the binaries; [`RealFlux::start`] installs them on the platform;
//! - Deployments that become Available: helm-controller waits for the
//!   release's workloads. Run a [`crate::DeploymentSimulator`] on each
//!   ControlPlane (namespace `kro-system`); the HelmRelease stays as
//!   production writes it.
//!
//! The controllers watch all namespaces of the platform cluster (unless
//! [`RealFluxOptions::watch_label_selector`] narrows them down), so do not
//! let a [`crate::FluxSimulator`] act on the same objects.
//!
//! Processes are managed like the API servers (see [`crate::process`]):
//! own process group, `PR_SET_PDEATHSIG`, stopped on drop and at exit.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::bins::FluxBinaries;
use crate::cluster::{Cluster, client_from_kubeconfig};
use crate::crds;
use crate::error::{Error, Result};
use crate::helm_chart::{KRO_CHART_REPOSITORY, KRO_CHART_VERSIONS, kro_chart};
use crate::process::{RunDir, ServerProcess, free_port, lock_unpoisoned};
use crate::registry::{PushedChart, Registry};

/// How the chain is started.
#[derive(Debug, Clone)]
pub struct RealFluxOptions {
    /// `RUNTIME_NAMESPACE` of both controllers (created on the platform).
    pub runtime_namespace: String,
    /// `--watch-label-selector` of both controllers: only Flux objects with
    /// matching labels are reconciled (e.g. the host's provider label), so
    /// several chains, or a chain and simulators, can share one platform.
    pub watch_label_selector: Option<String>,
    /// kro chart versions pushed to the registry as
    /// `kro/charts/kro:<version>` before the controllers start.
    pub kro_chart_versions: Vec<String>,
    /// `--log-level` of both controllers (`info` or `debug`).
    pub log_level: String,
    /// Extra flags for source-controller (later flags win).
    pub extra_source_controller_args: Vec<String>,
    /// Extra flags for helm-controller (later flags win).
    pub extra_helm_controller_args: Vec<String>,
    /// Also run kustomize-controller (it applies Kustomizations from the
    /// sources source-controller fetches).
    pub kustomize_controller: bool,
    /// Time allowed for the registry, the chart pushes and both controllers
    /// to start their workers.
    pub start_timeout: Duration,
}

/// Env var setting the default [`RealFluxOptions::log_level`]: `debug` puts
/// Helm's own steps into helm-controller's log.
pub const ENV_FLUX_LOG_LEVEL: &str = "TESTBED_FLUX_LOG_LEVEL";

impl Default for RealFluxOptions {
    fn default() -> Self {
        Self {
            runtime_namespace: "flux-system".into(),
            watch_label_selector: None,
            kro_chart_versions: KRO_CHART_VERSIONS.iter().map(|v| v.to_string()).collect(),
            log_level: std::env::var(ENV_FLUX_LOG_LEVEL)
                .ok()
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| "info".into()),
            extra_source_controller_args: Vec::new(),
            extra_helm_controller_args: Vec::new(),
            kustomize_controller: false,
            start_timeout: Duration::from_secs(120),
        }
    }
}

/// Resident memory of the chain's processes.
#[derive(Debug, Clone, Copy)]
pub struct FluxRss {
    pub source_controller_bytes: u64,
    pub helm_controller_bytes: u64,
    pub registry_bytes: u64,
}

impl FluxRss {
    pub fn total_bytes(&self) -> u64 {
        self.source_controller_bytes + self.helm_controller_bytes + self.registry_bytes
    }
}

/// The running chain. Dropping it stops helm-controller, source-controller
/// and the registry (in that order) and removes their run directories.
pub struct RealFlux {
    storage_addr: String,
    charts: Vec<PushedChart>,
    startup: Duration,
    // Field order = drop order: the controllers may still pull artifacts
    // from source-controller; the directory goes last.
    kustomize_controller: Option<Mutex<ServerProcess>>,
    helm_controller: Mutex<ServerProcess>,
    source_controller: Mutex<ServerProcess>,
    registry: Registry,
    dir: RunDir,
}

impl std::fmt::Debug for RealFlux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealFlux")
            .field("registry", &self.registry.host())
            .field("storage", &self.storage_addr)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl RealFlux {
    /// Starts the chain against `platform`: installs the Flux CRDs, creates
    /// the runtime namespace, starts the registry and pushes the kro charts,
    /// then starts both controllers and waits until their OCIRepository and
    /// HelmRelease workers run.
    pub async fn start(platform: &Cluster, options: RealFluxOptions) -> Result<Self> {
        Self::start_with(platform.kubeconfig_yaml(), options).await
    }

    /// Like [`Self::start`], from the platform's kubeconfig text (admin, all
    /// data inline).
    pub async fn start_with(platform_kubeconfig: &str, options: RealFluxOptions) -> Result<Self> {
        let started = Instant::now();
        let binaries = FluxBinaries::locate()?; // fail fast with the build-script hint
        // Go module downloads (CRDs, charts) block: off the async threads.
        let versions = options.kro_chart_versions.clone();
        let inputs = tokio::task::spawn_blocking(move || -> Result<_> {
            let crds = crds::flux_controller_crds()?;
            let charts = versions.iter().map(|v| kro_chart(v)).collect::<Result<Vec<_>>>()?;
            Ok((crds, charts))
        });
        let (registry, inputs) = tokio::join!(Registry::start(), inputs);
        let registry = registry?;
        let (flux_crds, charts) = inputs.map_err(|e| Error::Other(format!("CRD/chart task failed: {e}")))??;

        let client = client_from_kubeconfig(platform_kubeconfig).await?;
        crds::install(&client, &flux_crds, options.start_timeout).await?;
        create_namespace(&client, &options.runtime_namespace).await?;
        let mut pushed = Vec::with_capacity(charts.len());
        for chart in &charts {
            pushed.push(registry.push_helm_chart(KRO_CHART_REPOSITORY, chart).await?);
        }

        let deadline = started + options.start_timeout;
        let mut attempt = 1;
        loop {
            match Self::start_controllers(&binaries, platform_kubeconfig, &options, deadline).await {
                Ok(Controllers { dir, storage_addr, source, helm, kustomize }) => {
                    return Ok(Self {
                        storage_addr,
                        charts: pushed,
                        startup: started.elapsed(),
                        kustomize_controller: kustomize.map(Mutex::new),
                        helm_controller: Mutex::new(helm),
                        source_controller: Mutex::new(source),
                        registry,
                        dir,
                    });
                }
                Err(e) if attempt < 3 && e.to_string().contains("address already in use") => {
                    eprintln!("testbed: flux controllers: port clash, retrying: {e}");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn start_controllers(
        binaries: &FluxBinaries,
        platform_kubeconfig: &str,
        options: &RealFluxOptions,
        deadline: Instant,
    ) -> Result<Controllers> {
        let dir = RunDir::create("flux")?;
        let kubeconfig = dir.path().join("platform-kubeconfig.yaml");
        std::fs::write(&kubeconfig, platform_kubeconfig).map_err(|e| Error::io(&kubeconfig, e))?;
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).map_err(|e| Error::io(&home, e))?;
        // Neither controller has a --kubeconfig flag. HOME keeps Helm's and
        // docker's per-user files inside the run directory.
        let env: [(&str, &OsStr); 3] = [
            ("KUBECONFIG", kubeconfig.as_os_str()),
            ("RUNTIME_NAMESPACE", options.runtime_namespace.as_ref()),
            ("HOME", home.as_os_str()),
        ];
        let mut common = vec![
            // Both default to :8080 and :9440, which would collide.
            "--metrics-addr=0".to_string(),
            "--health-addr=0".to_string(),
            format!("--log-level={}", options.log_level),
        ];
        if let Some(selector) = &options.watch_label_selector {
            common.push(format!("--watch-label-selector={selector}"));
        }

        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).map_err(|e| Error::io(&storage, e))?; // must exist
        let storage_addr = format!("127.0.0.1:{}", free_port()?);
        let mut source_args = vec![
            format!("--storage-path={}", storage.display()),
            format!("--storage-addr={storage_addr}"),
            // helm-controller downloads artifacts from this address.
            format!("--storage-adv-addr={storage_addr}"),
        ];
        source_args.extend(common.iter().cloned());
        source_args.extend(options.extra_source_controller_args.iter().cloned());
        let mut source = ServerProcess::spawn_with_env(
            "source-controller",
            &binaries.source_controller,
            &source_args,
            &env,
            &dir.path().join("source-controller.log"),
        )?;

        // The default graceful shutdown waits up to 600 s for running
        // reconciles; a test teardown must not.
        let mut helm_args = vec!["--graceful-shutdown-timeout=5s".to_string()];
        helm_args.extend(common.iter().cloned());
        helm_args.extend(options.extra_helm_controller_args.iter().cloned());
        let mut helm = ServerProcess::spawn_with_env(
            "helm-controller",
            &binaries.helm_controller,
            &helm_args,
            &env,
            &dir.path().join("helm-controller.log"),
        )?;

        let mut kustomize = match options.kustomize_controller {
            true => Some(ServerProcess::spawn_with_env(
                "kustomize-controller",
                &binaries.kustomize_controller,
                &common,
                &env,
                &dir.path().join("kustomize-controller.log"),
            )?),
            false => None,
        };

        let timeout = options.start_timeout;
        wait_for_workers(&mut source, "ocirepository", Some(&storage_addr), deadline, timeout).await?;
        wait_for_workers(&mut helm, "helmrelease", None, deadline, timeout).await?;
        if let Some(kustomize) = &mut kustomize {
            wait_for_workers(kustomize, "kustomization", None, deadline, timeout).await?;
        }
        Ok(Controllers { dir, storage_addr, source, helm, kustomize })
    }

    /// The registry holding the charts.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The charts pushed at start, in [`RealFluxOptions::kro_chart_versions`] order.
    pub fn charts(&self) -> &[PushedChart] {
        &self.charts
    }

    /// The pushed kro chart of `version` (e.g. `0.9.3`).
    pub fn chart(&self, version: &str) -> Option<&PushedChart> {
        self.charts.iter().find(|c| c.tag == version)
    }

    /// `oci://127.0.0.1:<port>/kro/charts/kro`: the kro chart's URL as an
    /// OCIRepository `url` or a ProviderConfig `chartURL`.
    pub fn kro_chart_url(&self) -> String {
        self.registry.oci_url(KRO_CHART_REPOSITORY)
    }

    /// `127.0.0.1:<port>` of source-controller's artifact server.
    pub fn storage_addr(&self) -> &str {
        &self.storage_addr
    }

    /// Wall time from [`Self::start`] to both controllers running.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn source_controller_log(&self) -> PathBuf {
        lock_unpoisoned(&self.source_controller).log_path().to_path_buf()
    }

    pub fn helm_controller_log(&self) -> PathBuf {
        lock_unpoisoned(&self.helm_controller).log_path().to_path_buf()
    }

    /// The last `lines` lines of each controller's log, for assertion
    /// messages.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut tails = format!(
            "--- source-controller ({}):\n{}\n--- helm-controller ({}):\n{}",
            self.source_controller_log().display(),
            lock_unpoisoned(&self.source_controller).log_tail(lines),
            self.helm_controller_log().display(),
            lock_unpoisoned(&self.helm_controller).log_tail(lines),
        );
        if let Some(kustomize) = &self.kustomize_controller {
            let kustomize = lock_unpoisoned(kustomize);
            let path = kustomize.log_path().display().to_string();
            tails.push_str(&format!("\n--- kustomize-controller ({path}):\n{}", kustomize.log_tail(lines)));
        }
        tails
    }

    /// Resident memory of the three processes.
    pub fn rss(&self) -> Option<FluxRss> {
        Some(FluxRss {
            source_controller_bytes: lock_unpoisoned(&self.source_controller).rss_bytes()?,
            helm_controller_bytes: lock_unpoisoned(&self.helm_controller).rss_bytes()?,
            registry_bytes: self.registry.rss_bytes()?,
        })
    }

    /// Pids of source-controller, helm-controller and the registry.
    pub fn pids(&self) -> [u32; 3] {
        [
            lock_unpoisoned(&self.source_controller).pid(),
            lock_unpoisoned(&self.helm_controller).pid(),
            self.registry.pid(),
        ]
    }

    /// Stops helm-controller, source-controller and the registry. Also done
    /// on drop.
    pub fn stop(&self) {
        if let Some(kustomize) = &self.kustomize_controller {
            lock_unpoisoned(kustomize).stop(Duration::from_secs(10));
        }
        lock_unpoisoned(&self.helm_controller).stop(Duration::from_secs(10));
        lock_unpoisoned(&self.source_controller).stop(Duration::from_secs(10));
        self.registry.stop();
    }
}

impl Drop for RealFlux {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What [`RealFlux::start_controllers`] started.
struct Controllers {
    dir: RunDir,
    storage_addr: String,
    source: ServerProcess,
    helm: ServerProcess,
    kustomize: Option<ServerProcess>,
}

/// The chain of this test binary, on the platform cluster of
/// [`crate::shared()`], started once (on [`crate::runtime()`]) with default
/// options and torn down by the exit hook. A start-up failure is remembered
/// and reported to every caller.
///
/// It reconciles Flux objects in *every* namespace of that platform: keep
/// tests that use it apart from tests that drive the same objects with a
/// [`crate::FluxSimulator`] (another test binary, or a simulator restricted
/// to other namespaces).
pub async fn shared() -> Result<&'static RealFlux> {
    static SHARED: tokio::sync::OnceCell<std::result::Result<RealFlux, String>> = tokio::sync::OnceCell::const_new();
    let result = SHARED
        .get_or_init(|| async {
            // Fail fast, before three clusters start, when nothing was built.
            FluxBinaries::locate().map_err(|e| e.to_string())?;
            let env = crate::shared().await.map_err(|e| e.to_string())?;
            match crate::runtime().spawn(RealFlux::start(&env.platform, RealFluxOptions::default())).await {
                Ok(Ok(flux)) => Ok(flux),
                Ok(Err(e)) => Err(e.to_string()),
                Err(join) => Err(format!("start-up task failed: {join}")),
            }
        })
        .await;
    result.as_ref().map_err(|e| Error::SharedStartFailed(format!("real Flux chain: {e}")))
}

async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Waits until the controller logged that the workers of `controller` run
/// (its caches are synced, so every CRD it needs is served) and, for
/// source-controller, until the artifact server accepts connections.
async fn wait_for_workers(
    process: &mut ServerProcess,
    controller: &str,
    storage_addr: Option<&str>,
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    let needle = format!("\"controller\":\"{controller}\"");
    loop {
        if let Some(e) = process.exited_error() {
            return Err(e);
        }
        let log = std::fs::read_to_string(process.log_path()).unwrap_or_default();
        let workers = log.lines().any(|l| l.contains("Starting workers") && l.contains(&needle));
        let storage = match storage_addr {
            Some(addr) => tokio::net::TcpStream::connect(addr).await.is_ok(),
            None => true,
        };
        if workers && storage {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{controller} workers (log {})", process.log_path().display()),
                seconds: timeout.as_secs(),
                detail: format!(
                    ": workers started: {workers}, artifact server up: {storage}; log:\n{}",
                    process.log_tail(30)
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
