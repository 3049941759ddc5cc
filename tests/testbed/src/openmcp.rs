//! openmcp-operator for real: v1.3.0 (built by
//! `scripts/build-openmcp-bins.sh`) runs `run` (scheduler, AccessRequest
//! and ServiceProvider controllers) on a test environment of its own,
//! with the [`crate::cluster_provider`] granting AccessRequests with
//! RBAC-scoped tokens. A test plays only what openmcp's `mcp run` and the
//! kubelet would do: [`OpenMcp::register_control_plane`] creates the tenant
//! namespace and the MCP ClusterRequest as `mcp run` does.
//!
//! Its own clusters, not [`crate::shared()`]'s: the operator's
//! AccessRequest controller acts on every AccessRequest of its platform, so
//! it must not run where the [`crate::OpenMcpSimulator`] grants them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::cluster::Cluster;
use crate::cluster_provider::{ClusterProvider, PROFILE, Targets};
use crate::crds::{self, ModuleCrd, Purpose};
use crate::env::{EnvOptions, TestEnv};
use crate::error::{Error, Result};
use crate::openmcp_sim::api::{ClusterRequest, ClusterRequestSpec};
use crate::process::{RunDir, ServerProcess, lock_unpoisoned};

/// The openmcp-operator version `build-openmcp-bins.sh` builds; its CRDs
/// come from the `api` module of the same version.
pub const OPENMCP_OPERATOR_VERSION: &str = "v1.3.0";
/// Env var with the operator binary (`eval "$(build-openmcp-bins.sh)"`).
pub const ENV_OPENMCP_OPERATOR: &str = "TESTBED_OPENMCP_OPERATOR";
/// The operator's `POD_NAMESPACE`.
pub const SYSTEM_NAMESPACE: &str = "openmcp-system";
/// Where the scheduler creates `Cluster` objects.
pub const CLUSTER_NAMESPACE: &str = "openmcp-clusters";

const OPENMCP_API: &str = "github.com/openmcp-project/openmcp-operator/api";

const fn operator_crd(path: &'static str) -> ModuleCrd {
    ModuleCrd { module: OPENMCP_API, version: OPENMCP_OPERATOR_VERSION, path, purpose: Purpose::Platform }
}

/// What the operator's controllers watch besides what every environment
/// has ([`crds::THIRD_PARTY`]: AccessRequests, ClusterRequests,
/// ServiceProviders): without them its caches never sync.
pub const OPERATOR_CRDS: &[ModuleCrd] = &[
    operator_crd("crds/manifests/clusters.openmcp.cloud_clusters.yaml"),
    operator_crd("crds/manifests/clusters.openmcp.cloud_clusterprofiles.yaml"),
    operator_crd("crds/manifests/openmcp.cloud_clusterproviders.yaml"),
    operator_crd("crds/manifests/openmcp.cloud_platformservices.yaml"),
];

/// The scheduler's configuration: onboarding is one shared cluster; each
/// tenant's ControlPlane and workload cluster is a cluster of its own.
fn operator_config() -> String {
    format!(
        "scheduler:\n  purposeMappings:\n    onboarding:\n      template:\n        metadata:\n          name: onboarding\n          namespace: {CLUSTER_NAMESPACE}\n        spec:\n          profile: {PROFILE}\n          tenancy: Shared\n\
         \x20   mcp:\n      template:\n        metadata:\n          namespace: {CLUSTER_NAMESPACE}\n        spec:\n          profile: {PROFILE}\n          tenancy: Exclusive\n\
         \x20   workload:\n      template:\n        metadata:\n          namespace: {CLUSTER_NAMESPACE}\n        spec:\n          profile: {PROFILE}\n          tenancy: Exclusive\n"
    )
}

/// The operator binary, or why it cannot be found.
pub fn operator_binary() -> Result<PathBuf> {
    let default =
        crate::bins::cache_root().join(format!("openmcp-operator-{OPENMCP_OPERATOR_VERSION}")).join("openmcp-operator");
    let path = std::env::var_os(ENV_OPENMCP_OPERATOR).filter(|v| !v.is_empty()).map_or(default, PathBuf::from);
    match path.is_file() {
        true => Ok(path),
        false => Err(Error::MissingBinary {
            what: "openmcp-operator",
            env: ENV_OPENMCP_OPERATOR,
            path,
            script: "build-openmcp-bins.sh",
        }),
    }
}

/// openmcp-operator and the test cluster provider on clusters of their own.
pub struct OpenMcp {
    pub env: TestEnv,
    /// Which test cluster backs which tenant's cluster.
    pub targets: Targets,
    operator: Mutex<ServerProcess>,
    provider: ClusterProvider,
    dir: RunDir,
}

impl OpenMcp {
    /// Starts the clusters, installs the operator's CRDs, then the cluster
    /// provider and the operator; returns once its workers run.
    pub async fn start() -> Result<Self> {
        Self::start_with(EnvOptions::default()).await
    }

    /// Like [`Self::start`], on clusters set up as `options` say (a
    /// landscape before any provider is installed, say).
    pub async fn start_with(options: EnvOptions) -> Result<Self> {
        let binary = operator_binary()?;
        let operator_crds = tokio::task::spawn_blocking(|| crds::module_crds(OPERATOR_CRDS))
            .await
            .map_err(|e| Error::Other(format!("CRD resolution task failed: {e}")))??;
        let env = TestEnv::start_with(options).await?;
        let platform = env.platform.client().await?;
        crds::install(&platform, &operator_crds, Duration::from_secs(60)).await?;
        for namespace in [SYSTEM_NAMESPACE, CLUSTER_NAMESPACE] {
            ensure_namespace(&platform, namespace, BTreeMap::new()).await?;
        }
        let targets = Targets::new((&env.onboarding).into());
        let provider = ClusterProvider::start(platform, targets.clone(), Duration::from_millis(200)).await?;

        let dir = RunDir::create("openmcp")?;
        let kubeconfig = dir.path().join("platform-kubeconfig.yaml");
        std::fs::write(&kubeconfig, env.platform.kubeconfig_yaml()).map_err(|e| Error::io(&kubeconfig, e))?;
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, operator_config()).map_err(|e| Error::io(&config, e))?;
        let args = [
            "run".to_string(),
            "--environment=test".into(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--config={}", config.display()),
            "--controllers=scheduler,accessrequest,deploymentcontroller".into(),
            "--health-probe-bind-address=0".into(),
            "--metrics-bind-address=0".into(),
        ];
        let env_vars = [("POD_NAMESPACE", std::ffi::OsStr::new(SYSTEM_NAMESPACE))];
        let log = dir.path().join("openmcp-operator.log");
        let mut operator = ServerProcess::spawn_with_env("openmcp-operator", &binary, &args, &env_vars, &log)?;
        wait_for_workers(&mut operator, 3, Duration::from_secs(60)).await?;
        Ok(Self { env, targets, operator: Mutex::new(operator), provider, dir })
    }

    /// Plays openmcp's `mcp run` for a ControlPlane `name` in onboarding
    /// namespace `namespace` whose cluster is `cluster`: the tenant
    /// namespace with its labels and the MCP ClusterRequest, which the
    /// scheduler then assigns a `Cluster`. Returns the tenant namespace.
    pub async fn register_control_plane(&self, name: &str, namespace: &str, cluster: &Cluster) -> Result<String> {
        let tenant =
            service_provider_sdk::names::tenant_namespace(name, namespace).map_err(|e| Error::Other(e.to_string()))?;
        self.targets.register(&tenant, "mcp", cluster.into());
        let labels = BTreeMap::from([
            ("core.openmcp.cloud/mcp-name".to_string(), name.to_string()),
            ("core.openmcp.cloud/mcp-namespace".to_string(), namespace.to_string()),
            ("openmcp.cloud/managed-by".to_string(), "ManagedControlPlane".to_string()),
        ]);
        let platform = self.env.platform.client().await?;
        ensure_namespace(&platform, &tenant, labels.clone()).await?;
        let mut request_labels = labels;
        request_labels.insert("metadata.open-control-plane.io/cp-name".into(), name.into());
        request_labels.insert("metadata.open-control-plane.io/cp-namespace".into(), namespace.into());
        let mut request = ClusterRequest::new(
            name,
            ClusterRequestSpec { purpose: "mcp".into(), wait_for_cluster_deletion: Some(true) },
        );
        request.metadata.labels = Some(request_labels);
        match Api::<ClusterRequest>::namespaced(platform, &tenant).create(&PostParams::default(), &request).await {
            Ok(_) => Ok(tenant),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(tenant),
            Err(e) => Err(e.into()),
        }
    }

    /// Says which test cluster serves the workload ClusterRequests of a
    /// tenant namespace.
    pub fn register_workload(&self, tenant: &str, cluster: &Cluster) {
        self.targets.register(tenant, "workload", cluster.into());
    }

    /// The last lines of the operator's log, and the provider's last error.
    pub fn diagnostics(&self, lines: usize) -> String {
        let operator = lock_unpoisoned(&self.operator).log_tail(lines);
        let provider = self.provider.last_error().unwrap_or_else(|| "none".into());
        format!(
            "openmcp-operator log ({}):\n{operator}\ncluster provider's last error: {provider}",
            self.dir.path().display()
        )
    }
}

async fn ensure_namespace(client: &kube::Client, name: &str, labels: BTreeMap<String, String>) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Until the operator logged that the workers of `controllers` run.
async fn wait_for_workers(process: &mut ServerProcess, controllers: usize, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(e) = process.exited_error() {
            return Err(e);
        }
        let log = std::fs::read_to_string(process.log_path()).unwrap_or_default();
        let started = log.lines().filter(|l| l.contains("Starting workers")).count();
        if started >= controllers {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("openmcp-operator workers (log {})", process.log_path().display()),
                seconds: timeout.as_secs(),
                detail: format!(": {started} controllers started; log:\n{}", process.log_tail(30)),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ControlPlane CRD `mcp run` reconciles, on the onboarding cluster.
pub const CONTROL_PLANE_CRD: &[ModuleCrd] = &[ModuleCrd {
    module: OPENMCP_API,
    version: OPENMCP_OPERATOR_VERSION,
    path: "crds/manifests/core.open-control-plane.io_controlplanes.yaml",
    purpose: Purpose::Onboarding,
}];

/// `ControlPlane` (`core.open-control-plane.io/v2alpha1`) on the onboarding
/// cluster.
pub fn control_plane_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "core.open-control-plane.io".into(),
        version: "v2alpha1".into(),
        api_version: "core.open-control-plane.io/v2alpha1".into(),
        kind: "ControlPlane".into(),
        plural: "controlplanes".into(),
    }
}

impl OpenMcp {
    /// openmcp-operator's `mcp run` (the ControlPlane controller) on this
    /// environment, started once: it gets its onboarding access through
    /// openmcp like any provider (the test cluster provider grants it),
    /// then reconciles ControlPlanes; deleting one deletes the service
    /// objects named like it first, then its requests.
    pub async fn control_planes(&'static self) -> Result<()> {
        static STARTED: tokio::sync::OnceCell<std::result::Result<Mutex<ServerProcess>, String>> =
            tokio::sync::OnceCell::const_new();
        let started = STARTED
            .get_or_init(|| async {
                let start = async {
                    let crds = tokio::task::spawn_blocking(|| crds::module_crds(CONTROL_PLANE_CRD))
                        .await
                        .map_err(|e| Error::Other(format!("CRD resolution task failed: {e}")))??;
                    crds::install(&self.env.onboarding.client().await?, &crds, Duration::from_secs(60)).await?;
                    let args = [
                        "mcp".to_string(),
                        "run".into(),
                        "--environment=test".into(),
                        "--provider-name=mcp".into(),
                        format!("--kubeconfig={}", self.dir.path().join("platform-kubeconfig.yaml").display()),
                        format!("--config={}", self.dir.path().join("config.yaml").display()),
                        "--health-probe-bind-address=0".into(),
                        "--metrics-bind-address=0".into(),
                    ];
                    let env_vars = [("POD_NAMESPACE", std::ffi::OsStr::new(SYSTEM_NAMESPACE))];
                    let log = self.dir.path().join("openmcp-mcp.log");
                    let mut process = ServerProcess::spawn_with_env(
                        "openmcp-operator mcp",
                        &operator_binary()?,
                        &args,
                        &env_vars,
                        &log,
                    )?;
                    // Onboarding access first (polled every 10 s), then one controller.
                    wait_for_workers(&mut process, 1, Duration::from_secs(120)).await?;
                    Ok::<_, Error>(Mutex::new(process))
                };
                crate::runtime().spawn(start).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
            })
            .await;
        started.as_ref().map(|_| ()).map_err(|e| Error::SharedStartFailed(format!("openmcp-operator mcp run: {e}")))
    }

    /// The real Flux chain on this environment's platform cluster, started
    /// once (it acts on every namespace there: tests that use it run on
    /// openmcp-operator with the real chain only).
    pub async fn real_flux(&'static self) -> Result<&'static crate::RealFlux> {
        static SHARED: tokio::sync::OnceCell<std::result::Result<crate::RealFlux, String>> =
            tokio::sync::OnceCell::const_new();
        let result = SHARED
            .get_or_init(|| async {
                crate::bins::FluxBinaries::locate().map_err(|e| e.to_string())?;
                let start = crate::RealFlux::start(&self.env.platform, crate::RealFluxOptions::default());
                match crate::runtime().spawn(start).await {
                    Ok(Ok(flux)) => Ok(flux),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(join) => Err(format!("start-up task failed: {join}")),
                }
            })
            .await;
        result.as_ref().map_err(|e| Error::SharedStartFailed(format!("real Flux chain on openmcp: {e}")))
    }
}

/// The [`OpenMcp`] of this test binary, started once on
/// [`crate::runtime()`] and torn down with the binary; a start-up failure
/// is remembered and reported to every caller.
pub async fn shared() -> Result<&'static OpenMcp> {
    static SHARED: tokio::sync::OnceCell<std::result::Result<OpenMcp, String>> = tokio::sync::OnceCell::const_new();
    let result = SHARED
        .get_or_init(|| async {
            operator_binary().map_err(|e| e.to_string())?;
            match crate::runtime().spawn(OpenMcp::start()).await {
                Ok(Ok(openmcp)) => Ok(openmcp),
                Ok(Err(e)) => Err(e.to_string()),
                Err(join) => Err(format!("start-up task failed: {join}")),
            }
        })
        .await;
    result.as_ref().map_err(|e| Error::SharedStartFailed(format!("openmcp-operator: {e}")))
}
