//! Helpers shared by the host's integration tests, benches and examples, so
//! each is written once:
//!
//! - [`plugins`]: where the plugin components are, compiled once per process;
//! - [`parity`]: the native-vs-component comparison for any plugin;
//! - [`unique`]: names that never collide within a run;
//! - [`fixture`]: the host's controller on real API servers (`testbed`),
//!   with the openmcp simulator and the Flux simulator or the real chain;
//! - [`real_flux`]: helpers for tests on the real Flux chain;
//! - [`go_provider`]: what the Go service-provider-kro leaves behind, for
//!   the take-over (`--adopt-from`) test and bench;
//! - [`identity`]: ServiceAccount tokens and an audited platform cluster;
//! - [`registries`]: a cargo registry and a Go module proxy holding the
//!   SDKs as published, for builds outside this clone;
//! - [`process`]: the host as a process (this build's binary or the
//!   container image), its probes and metrics;
//! - [`docs`]: the documentation's command blocks, run as written;
//! - [`kubelet`]: the pods of Jobs and Deployments run from their image.

pub mod docs;
pub mod fixture;
pub mod go_provider;
pub mod identity;
pub mod kubelet;
pub mod oci;
pub mod parity;
pub mod plugins;
pub mod process;
pub mod real_flux;
pub mod registries;

use std::sync::atomic::{AtomicU32, Ordering};

pub use fixture::*;
pub use plugins::{plugin, plugin_path, workload_echo_plugin};
pub use testbed::eventually;

/// Unique within this process (namespaces are never deleted in the test
/// clusters: no namespace controller runs).
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed))
}

/// The field managers that wrote the CRD `name`'s content (not its
/// status), sorted, each once.
pub async fn crd_writers(client: &kube::Client, name: &str) -> Vec<String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = kube::Api::<CustomResourceDefinition>::all(client.clone()).get(name).await.expect("the CRD");
    let mut writers: Vec<String> = crd
        .metadata
        .managed_fields
        .into_iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|m| m.manager)
        .collect();
    writers.sort();
    writers.dedup();
    writers
}
