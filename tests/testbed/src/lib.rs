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
//! The real Flux chain instead of the simulator: [`RealFlux`]
//! (source-controller, helm-controller and an authenticating OCI
//! [`Registry`] with the kro chart), plus a [`DeploymentSimulator`] that makes
//! Deployments Available on a ControlPlane without kubelet, so that Helm's
//! wait succeeds.
//!
//! Binaries come from `tests/testbed/scripts/build-bins.sh` and
//! `build-flux-bins.sh` (see [`bins`]); no process outlives the test binary
//! (see [`process`]).

mod background;
pub mod bins;
pub mod cluster;
pub mod cluster_provider;
pub mod crds;
pub mod deployment_sim;
pub mod env;
mod error;
pub mod flux_sim;
pub mod helm_chart;
pub mod jaeger;
pub mod openmcp;
pub mod openmcp_sim;
pub mod pki;
pub mod process;
pub mod real_flux;
pub mod registry;
mod watched;

pub use cluster::{Cluster, ClusterOptions, MARKER_CONFIGMAP, Rss, client_from_kubeconfig};
pub use crds::Purpose;
pub use deployment_sim::{DeploymentOptions, DeploymentSimulator};
pub use env::{EnvOptions, TestEnv, runtime, shared};
pub use error::{Error, Result};
pub use flux_sim::{FluxKind, FluxOptions, FluxSimulator};
pub use helm_chart::HelmChart;
pub use openmcp_sim::{OpenMcpSimulator, SimulatorOptions, TargetCluster};
pub use real_flux::{RealFlux, RealFluxOptions};
pub use registry::{PushedChart, Registry};

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

/// Declares a `#[tokio::test]` that needs the real Flux chain, for the test
/// binaries of other crates (the host's): like this crate's own real-Flux
/// tests it is `ignored`, with the reason, when the Flux binaries were not
/// built, and never with `TESTBED_REQUIRE_FLUX=1` (decided when this crate is
/// compiled, see `build.rs`).
///
/// ```ignore
/// testbed::real_flux_test! {
///     /// What it shows.
///     async fn kro_is_installed() { /* ... */ }
/// }
/// ```
#[cfg(testbed_flux_bins)]
#[macro_export]
macro_rules! real_flux_test {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[tokio::test]
        async fn $name() $body
    };
}

#[cfg(not(testbed_flux_bins))]
#[macro_export]
macro_rules! real_flux_test {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[tokio::test]
        #[ignore = "Flux binaries not built: run `eval \"$(tests/testbed/scripts/build-flux-bins.sh)\"` \
                    (TESTBED_REQUIRE_FLUX=1 makes this a failure)"]
        async fn $name() $body
    };
}
