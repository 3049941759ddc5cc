//! A test environment on real Kubernetes API servers.
//!
//! Each [`Cluster`] is an etcd plus a kube-apiserver process on free
//! loopback ports, with its own run directory, PKI and an admin kubeconfig
//! (inline data, `CN=admin, O=system:masters`). [`TestEnv`] starts the three
//! clusters of an openmcp landscape (platform, onboarding, ControlPlane) and
//! installs the project's and third-party CRDs by their
//! `openmcp.cloud/cluster` label; [`shared()`] does that once per test binary.
//!
//! Test doubles for what is not running: [`OpenMcpSimulator`]
//! (openmcp-operator + cluster provider: ClusterRequests, AccessRequests,
//! kubeconfig Secrets) and [`FluxSimulator`] (Ready conditions, the
//! HelmRelease finalizer).
//!
//! Binaries come from `tests/envtest/scripts/build-bins.sh` (see [`bins`]);
//! no process outlives the test binary (see [`process`]).

mod background;
pub mod bins;
pub mod cluster;
pub mod crds;
pub mod env;
mod error;
pub mod flux_sim;
pub mod openmcp_sim;
pub mod pki;
pub mod process;

pub use cluster::{Cluster, ClusterOptions, MARKER_CONFIGMAP, Rss, client_from_kubeconfig};
pub use crds::Purpose;
pub use env::{TestEnv, runtime, shared};
pub use error::{Error, Result};
pub use flux_sim::{FluxKind, FluxOptions, FluxSimulator};
pub use openmcp_sim::{OpenMcpSimulator, SimulatorOptions, TargetCluster};

/// Polls `check` every 100 ms until it returns `Some`, or panics after
/// `timeout` naming `what`: the one way tests wait for a cluster to converge.
pub async fn eventually<T, F, Fut>(what: &str, timeout: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
