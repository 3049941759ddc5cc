//! Locating the server binaries: kube-apiserver and etcd, and for the real
//! Flux chain source-controller, helm-controller and the OCI registry.
//!
//! The binaries are built by `tests/testbed/scripts/build-bins.sh` and
//! `tests/testbed/scripts/build-flux-bins.sh` into a per-user cache outside
//! git. Tests only *look them up*; they never build, because a cold build
//! takes many minutes and must be a visible CI step.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Kubernetes version the build script produces by default (matches
/// k8s-openapi's `latest` feature, v1_37).
pub const K8S_VERSION: &str = "v1.37.2";
/// etcd version the build script produces by default.
pub const ETCD_VERSION: &str = "v3.6.16";

/// Env var overriding the kube-apiserver binary path.
pub const ENV_KUBE_APISERVER: &str = "TESTBED_KUBE_APISERVER";
/// Env var overriding the etcd binary path.
pub const ENV_ETCD: &str = "TESTBED_ETCD";
/// Env var overriding the kubectl binary path.
pub const ENV_KUBECTL: &str = "TESTBED_KUBECTL";
/// Env var overriding the cache root the build script writes to.
pub const ENV_CACHE: &str = "TESTBED_CACHE";

include!("flux_versions.rs");

const BUILD_BINS: &str = "build-bins.sh";
const BUILD_FLUX_BINS: &str = "build-flux-bins.sh";

/// Paths of the two server binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

/// The cache root: `$TESTBED_CACHE` or `$HOME/.cache/service-provider-host/testbed`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_CACHE).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/service-provider-host/testbed")
}

fn locate(env: &'static str, default: PathBuf, what: &'static str, script: &'static str) -> Result<PathBuf> {
    let path = std::env::var_os(env).filter(|v| !v.is_empty()).map_or(default, PathBuf::from);
    if is_executable(&path) { Ok(path) } else { Err(Error::MissingBinary { what, env, path, script }) }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Binaries {
    /// Finds both binaries via the env vars, else the build script's cache.
    pub fn locate() -> Result<Self> {
        let root = cache_root();
        Ok(Self {
            kube_apiserver: locate(
                ENV_KUBE_APISERVER,
                root.join(format!("k8s-{K8S_VERSION}/kube-apiserver")),
                "kube-apiserver",
                BUILD_BINS,
            )?,
            etcd: locate(ENV_ETCD, root.join(format!("etcd-{ETCD_VERSION}/etcd")), "etcd", BUILD_BINS)?,
        })
    }
}

/// kubectl of [`K8S_VERSION`] (built beside kube-apiserver): the
/// documentation's commands run with it.
pub fn kubectl() -> Result<PathBuf> {
    locate(ENV_KUBECTL, cache_root().join(format!("k8s-{K8S_VERSION}/kubectl")), "kubectl", BUILD_BINS)
}

/// Paths of the real Flux chain's binaries.
#[derive(Debug, Clone)]
pub struct FluxBinaries {
    pub source_controller: PathBuf,
    pub helm_controller: PathBuf,
    pub kustomize_controller: PathBuf,
    pub registry: PathBuf,
    /// Signs plugin artifacts in the registry tests.
    pub cosign: PathBuf,
}

impl FluxBinaries {
    /// Finds all five via the env vars, else the build script's cache.
    pub fn locate() -> Result<Self> {
        let root = cache_root();
        Ok(Self {
            source_controller: locate(
                ENV_SOURCE_CONTROLLER,
                root.join(format!("source-controller-{FLUX_SOURCE_VERSION}/source-controller")),
                "source-controller",
                BUILD_FLUX_BINS,
            )?,
            helm_controller: locate(
                ENV_HELM_CONTROLLER,
                root.join(format!("helm-controller-{FLUX_HELM_VERSION}/helm-controller")),
                "helm-controller",
                BUILD_FLUX_BINS,
            )?,
            kustomize_controller: locate(
                ENV_KUSTOMIZE_CONTROLLER,
                root.join(format!("kustomize-controller-{FLUX_KUSTOMIZE_VERSION}/kustomize-controller")),
                "kustomize-controller",
                BUILD_FLUX_BINS,
            )?,
            registry: locate(
                ENV_REGISTRY,
                root.join(format!("registry-{REGISTRY_VERSION}/registry")),
                "OCI registry",
                BUILD_FLUX_BINS,
            )?,
            cosign: locate(
                ENV_COSIGN,
                root.join(format!("cosign-{COSIGN_VERSION}/cosign")),
                "cosign",
                BUILD_FLUX_BINS,
            )?,
        })
    }
}

/// The Prometheus module version (Prometheus 3.16.0) whose `promtool`
/// `build-observability-bins.sh` builds.
pub const PROMETHEUS_VERSION: &str = "v0.316.0";
/// The Jaeger version it builds (`cmd/jaeger`, OTLP in, query API out).
pub const JAEGER_VERSION: &str = "v1.75.0";
/// Env vars overriding those two binaries.
pub const ENV_PROMTOOL: &str = "TESTBED_PROMTOOL";
pub const ENV_JAEGER: &str = "TESTBED_JAEGER";
const BUILD_OBSERVABILITY_BINS: &str = "build-observability-bins.sh";

/// The tools that read what the host exports: Prometheus' rule checker and
/// tester, and a trace collector with a query API.
#[derive(Debug, Clone)]
pub struct ObservabilityBinaries {
    pub promtool: PathBuf,
    pub jaeger: PathBuf,
}

impl ObservabilityBinaries {
    /// Finds both via the env vars, else the build script's cache.
    pub fn locate() -> Result<Self> {
        let root = cache_root();
        Ok(Self {
            promtool: locate(
                ENV_PROMTOOL,
                root.join(format!("promtool-{PROMETHEUS_VERSION}/promtool")),
                "promtool",
                BUILD_OBSERVABILITY_BINS,
            )?,
            jaeger: locate(
                ENV_JAEGER,
                root.join(format!("jaeger-{JAEGER_VERSION}/jaeger")),
                "Jaeger",
                BUILD_OBSERVABILITY_BINS,
            )?,
        })
    }
}
