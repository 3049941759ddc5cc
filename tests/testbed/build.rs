//! Decides whether the real-Flux tests can run: sets `cfg(testbed_flux_bins)`
//! when the binaries of `scripts/build-flux-bins.sh` exist (where
//! `src/bins.rs` will look for them at run time).
//!
//! Why at build time: libtest can only report a test as *skipped* through
//! `#[ignore = "reason"]`, which is decided at compile time. Without the
//! binaries the test shows up as `ignored, <reason>` instead of passing
//! silently or failing on a machine that never built them.
//! `TESTBED_REQUIRE_FLUX=1` (CI) never ignores it: missing binaries then
//! fail the test with the build-script hint.

use std::path::PathBuf;

include!("src/flux_versions.rs");

fn main() {
    println!("cargo::rustc-check-cfg=cfg(testbed_flux_bins)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/flux_versions.rs");
    println!("cargo::rerun-if-env-changed=TESTBED_REQUIRE_FLUX");
    // Required (CI): the tests run whatever the cache holds now, so nothing
    // about it is looked at. The test binaries can then be compiled while
    // the binaries are still being built, and are not rebuilt when they land.
    if std::env::var("TESTBED_REQUIRE_FLUX").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=testbed_flux_bins");
        return;
    }
    for var in ["TESTBED_CACHE", "HOME"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let cache = match std::env::var_os("TESTBED_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/service-provider-host/testbed"),
    };
    let mut all_present = true;
    for (env, default) in [
        (ENV_SOURCE_CONTROLLER, format!("source-controller-{FLUX_SOURCE_VERSION}/source-controller")),
        (ENV_HELM_CONTROLLER, format!("helm-controller-{FLUX_HELM_VERSION}/helm-controller")),
        (ENV_KUSTOMIZE_CONTROLLER, format!("kustomize-controller-{FLUX_KUSTOMIZE_VERSION}/kustomize-controller")),
        (ENV_REGISTRY, format!("registry-{REGISTRY_VERSION}/registry")),
        (ENV_COSIGN, format!("cosign-{COSIGN_VERSION}/cosign")),
    ] {
        println!("cargo::rerun-if-env-changed={env}");
        let path = std::env::var_os(env).filter(|v| !v.is_empty()).map_or_else(|| cache.join(default), PathBuf::from);
        if path.is_file() {
            println!("cargo::rerun-if-changed={}", path.display());
        } else {
            all_present = false;
        }
    }
    // Binaries built later land in the cache directory, which Cargo then
    // sees change. (Not the missing files themselves: a missing path would
    // rerun this script, and rebuild the crate and its dependents, on every
    // build.) Without a cache directory nothing can run anyway; exporting
    // the scripts' variables (`eval "$(…)"`) also reruns this.
    if cache.is_dir() {
        println!("cargo::rerun-if-changed={}", cache.display());
    }
    if all_present {
        println!("cargo::rustc-cfg=testbed_flux_bins");
    }
}
