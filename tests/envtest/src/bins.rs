//! Locating the kube-apiserver and etcd binaries.
//!
//! The binaries are built by `tests/envtest/scripts/build-bins.sh` into a
//! per-user cache outside git. Tests only *look them up*; they never build,
//! because a cold build takes many minutes and must be a visible CI step.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Kubernetes version the build script produces by default (matches
/// k8s-openapi's `latest` feature, v1_37).
pub const K8S_VERSION: &str = "v1.37.2";
/// etcd version the build script produces by default.
pub const ETCD_VERSION: &str = "v3.6.16";

/// Env var overriding the kube-apiserver binary path.
pub const ENV_KUBE_APISERVER: &str = "ENVTEST_KUBE_APISERVER";
/// Env var overriding the etcd binary path.
pub const ENV_ETCD: &str = "ENVTEST_ETCD";
/// Env var overriding the cache root the build script writes to.
pub const ENV_CACHE: &str = "ENVTEST_CACHE";

/// Paths of the two server binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

/// The cache root: `$ENVTEST_CACHE` or `$HOME/.cache/service-provider-host/envtest`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_CACHE).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/service-provider-host/envtest")
}

fn locate(env: &'static str, default: PathBuf, what: &'static str) -> Result<PathBuf> {
    let path = std::env::var_os(env).filter(|v| !v.is_empty()).map_or(default, PathBuf::from);
    if is_executable(&path) { Ok(path) } else { Err(Error::MissingBinary { what, env, path }) }
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
            )?,
            etcd: locate(ENV_ETCD, root.join(format!("etcd-{ETCD_VERSION}/etcd")), "etcd")?,
        })
    }
}
