// The versions `scripts/build-flux-bins.sh` builds. Included by `bins.rs`
// and by `build.rs` (which decides whether the real-Flux tests run), so the
// two can never disagree.

/// source-controller version `build-flux-bins.sh` produces. One Flux release
/// together with [`FLUX_HELM_VERSION`]; the Flux CRDs are read from the same
/// module versions (see `crds`).
pub const FLUX_SOURCE_VERSION: &str = "v1.9.2";
/// helm-controller version `build-flux-bins.sh` produces.
pub const FLUX_HELM_VERSION: &str = "v1.6.2";
/// kustomize-controller version `build-flux-bins.sh` produces: that of Flux
/// v2.9.2, which keeps helm-controller v1.6.2 (the proxy does not serve
/// Flux v2.9.1's v1.9.2). It applies what openmcp's bootstrapper commits.
pub const FLUX_KUSTOMIZE_VERSION: &str = "v1.9.3";
/// Version of `github.com/distribution/distribution/v3` (the OCI registry).
pub const REGISTRY_VERSION: &str = "v3.1.2";
/// Version of `github.com/sigstore/cosign/v3` (signs plugin artifacts).
pub const COSIGN_VERSION: &str = "v3.1.3";

/// Env var overriding the source-controller binary path.
pub const ENV_SOURCE_CONTROLLER: &str = "TESTBED_SOURCE_CONTROLLER";
/// Env var overriding the helm-controller binary path.
pub const ENV_HELM_CONTROLLER: &str = "TESTBED_HELM_CONTROLLER";
/// Env var overriding the kustomize-controller binary path.
pub const ENV_KUSTOMIZE_CONTROLLER: &str = "TESTBED_KUSTOMIZE_CONTROLLER";
/// Env var overriding the OCI registry binary path.
pub const ENV_REGISTRY: &str = "TESTBED_REGISTRY";
/// Env var overriding the cosign binary path.
pub const ENV_COSIGN: &str = "TESTBED_COSIGN";
