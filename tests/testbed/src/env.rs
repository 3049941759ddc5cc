//! The standard three-cluster environment (platform, onboarding, ControlPlane)
//! and its per-test-binary sharing.
//!
//! Starting clusters costs seconds, so a test binary starts them once
//! ([`shared`]) and tests isolate themselves by namespace and name.
//!
//! Runtimes: every `#[tokio::test]` has its own tokio runtime, which ends
//! with the test. Anything that must outlive one test (the shared start-up,
//! simulators) runs on [`runtime()`], a process-wide runtime; tests only
//! hold kubeconfig text and build their own `Client`s.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterOptions};
use crate::crds::{self, Purpose};
use crate::error::{Error, Result};

/// The process-wide runtime for long-lived harness work.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("testbed-harness")
            .enable_all()
            .build()
            .expect("cannot build the test bed runtime")
    })
}

/// How long start-up phases took.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// All clusters started in parallel until the last `/readyz` OK.
    pub clusters_ready: Duration,
    /// CRD installation until all are Established and served.
    pub crds_ready: Duration,
}

/// Platform, onboarding and ControlPlane clusters with CRDs installed by
/// their `openmcp.cloud/cluster` label:
///
/// - platform: the project's `platform` CRDs (ProviderConfig), openmcp
///   AccessRequest/ClusterRequest/ServiceProvider, Flux OCIRepository/HelmRelease;
/// - onboarding: the project's `onboarding` CRDs (Kro);
/// - ControlPlane: kro's ResourceGraphDefinition, as if kro were installed.
#[derive(Debug)]
pub struct TestEnv {
    pub platform: Cluster,
    pub onboarding: Cluster,
    pub control_plane: Cluster,
    pub timings: Timings,
}

/// What a [`TestEnv`] installs besides the third-party CRDs.
#[derive(Debug, Clone, Copy)]
pub struct EnvOptions {
    /// The project's own CRDs (`crds/`), applied as if the host's `init`
    /// had run. Without them the clusters are as a landscape is before a
    /// provider is installed (openmcp's and Flux's CRDs only).
    pub project_crds: bool,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self { project_crds: true }
    }
}

impl TestEnv {
    /// Starts the three clusters in parallel and installs the CRDs.
    pub async fn start() -> Result<Self> {
        Self::start_with(EnvOptions::default()).await
    }

    /// Like [`Self::start`], installing what `options` say.
    pub async fn start_with(options: EnvOptions) -> Result<Self> {
        crate::bins::Binaries::locate()?; // fail fast with the build-script hint
        // Resolve all CRD files first (may download Go modules): fails fast,
        // before any server is started, when Go or a module is missing.
        let project = options.project_crds;
        let [platform_crds, onboarding_crds, control_plane_crds] =
            tokio::task::spawn_blocking(move || -> Result<[Vec<crds::Crd>; 3]> {
                Ok([
                    crds::crds_for_with(Purpose::Platform, project)?,
                    crds::crds_for_with(Purpose::Onboarding, project)?,
                    crds::crds_for_with(Purpose::ControlPlane, project)?,
                ])
            })
            .await
            .map_err(|e| Error::Other(format!("CRD resolution task failed: {e}")))??;

        let started = Instant::now();
        let (platform, onboarding, control_plane) = tokio::try_join!(
            Cluster::start(ClusterOptions::new("platform")),
            Cluster::start(ClusterOptions::new("onboarding")),
            Cluster::start(ClusterOptions::new("control-plane")),
        )?;
        let clusters_ready = started.elapsed();

        let started = Instant::now();
        let timeout = Duration::from_secs(60);
        let install = async |cluster: &Cluster, crds: &[crds::Crd]| -> Result<()> {
            crds::install(&cluster.client().await?, crds, timeout).await
        };
        tokio::try_join!(
            install(&platform, &platform_crds),
            install(&onboarding, &onboarding_crds),
            install(&control_plane, &control_plane_crds),
        )?;
        Ok(Self {
            platform,
            onboarding,
            control_plane,
            timings: Timings { clusters_ready, crds_ready: started.elapsed() },
        })
    }

    /// The cluster playing `purpose`.
    pub fn cluster(&self, purpose: Purpose) -> &Cluster {
        match purpose {
            Purpose::Platform => &self.platform,
            Purpose::Onboarding => &self.onboarding,
            Purpose::ControlPlane => &self.control_plane,
        }
    }
}

/// The [`TestEnv`] of this test binary, started on first use (on
/// [`runtime()`], so it does not depend on the calling test's runtime) and
/// torn down by the exit hook when the binary exits. A start-up failure is
/// remembered and reported to every caller instead of being retried.
pub async fn shared() -> Result<&'static TestEnv> {
    static SHARED: tokio::sync::OnceCell<std::result::Result<TestEnv, String>> = tokio::sync::OnceCell::const_new();
    let result = SHARED
        .get_or_init(|| async {
            match runtime().spawn(TestEnv::start()).await {
                Ok(Ok(env)) => Ok(env),
                Ok(Err(e)) => Err(e.to_string()),
                Err(join) => Err(format!("start-up task failed: {join}")),
            }
        })
        .await;
    result.as_ref().map_err(|e| Error::SharedStartFailed(e.clone()))
}
