//! `task bench-adopt`: switching N live instances from the Go
//! service-provider-kro to the host (`--adopt-from`), measured from outside
//! on the test harness.
//!
//! Three real API servers, the openmcp simulator (cluster-wide) and Flux
//! simulated Ready, as `task bench-scale` has them. For each of N
//! instances (half on v0.9.1, half on v0.9.3 with pull secrets) the
//! objects the Go provider leaves are written as it writes them
//! ([`host_test_support::go_provider`]) and left to settle (granted,
//! Ready). Then the host binary starts with `ADOPT_FROM=service-provider-kro`
//! and the bench prints the time from its start to every instance Ready
//! with its Flux objects carrying the host's labels, how many instances
//! were ever seen not Ready meanwhile (by a watch from before the start;
//! the harness counts from it and the host's metrics, not by listing),
//! and the host's requests and `adopted_objects_total`.
//!
//! `task bench-adopt -- [N]` (N defaults to 500; the binary is the one
//! `task bench-scale` uses).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream};
use host_test_support::go_provider::{self, DOCKER, GO_PROVIDER, Instance, PULL, PULL_CONFIG};
use host_test_support::process::{bench_host, free_port, http_get};
use host_test_support::{GROUP, flux_resource};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use service_provider_host::resource;
use testbed::{FluxOptions, FluxSimulator, OpenMcpSimulator, SimulatorOptions, TestEnv};

const POD_NAMESPACE: &str = "openmcp-system";
const PROVIDER: &str = "kro";
const ONBOARDING_NAMESPACE: &str = "default";
const INSTANCE_LABEL: &str = "service-provider.open-control-plane.io/instance-name";
/// The adopted-objects counter of the provider the bench runs.
const ADOPTED: &str = "service_provider_host_adopted_objects_total{provider=\"kro\"}";

/// `service_provider_host_*` samples of the host's metrics endpoint.
fn metrics(port: u16) -> anyhow::Result<BTreeMap<String, f64>> {
    let (_, text) = http_get(port, "/metrics").context("the metrics endpoint")?;
    let samples = text.lines().filter(|l| l.starts_with("service_provider_host_")).filter_map(|l| l.rsplit_once(' '));
    Ok(samples.filter_map(|(name, value)| Some((name.to_string(), value.trim().parse().ok()?))).collect())
}

/// The Kro objects' phases as a watch sees them (counting from it costs
/// the API servers nothing), and those ever seen not Ready.
#[derive(Default)]
struct Phases {
    now: BTreeMap<String, String>,
    ever_not_ready: BTreeSet<String>,
}

fn watch_phases(kroes: Api<DynamicObject>) -> (Arc<Mutex<Phases>>, tokio::task::JoinHandle<()>) {
    let phases = Arc::new(Mutex::new(Phases::default()));
    let record = phases.clone();
    let task = tokio::spawn(async move {
        let events = watcher(kroes, watcher::Config::default()).applied_objects();
        let _ = events
            .try_for_each(|kro| {
                let name = kro.metadata.name.clone().unwrap_or_default();
                let phase = kro.data["status"]["phase"].as_str().unwrap_or_default().to_string();
                let mut phases = record.lock().expect("not poisoned");
                if phase != "Ready" {
                    phases.ever_not_ready.insert(name.clone());
                }
                phases.now.insert(name, phase);
                futures::future::ready(Ok(()))
            })
            .await;
    });
    (phases, task)
}

/// How many instances have both Flux objects labelled as theirs (listed
/// once the metrics say all may be).
async fn labelled(platform: &Client) -> anyhow::Result<usize> {
    let mut labelled = usize::MAX;
    for (kind, _) in go_provider::FLUX {
        let all = Api::<DynamicObject>::all_with(platform.clone(), &flux_resource(kind));
        labelled = labelled.min(all.list(&ListParams::default().labels(INSTANCE_LABEL)).await?.items.len());
    }
    Ok(labelled)
}

async fn run(n: usize, host_binary: &Path) -> anyhow::Result<()> {
    let env = TestEnv::start().await.context("starting the clusters (run `task testbed-bins`)")?;
    let (platform, onboarding, cp) =
        (env.platform.client().await?, env.onboarding.client().await?, env.control_plane.client().await?);
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(POD_NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(platform.clone()).create(&PostParams::default(), &ns).await?;
    let source = Secret {
        metadata: ObjectMeta { name: Some(PULL.into()), ..Default::default() },
        type_: Some(DOCKER.into()),
        data: Some([(".dockerconfigjson".to_string(), ByteString(PULL_CONFIG.as_bytes().to_vec()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(platform.clone(), POD_NAMESPACE).create(&PostParams::default(), &source).await?;
    let pc_resource = resource::api_resource(&format!("{GROUP}/v1alpha1"), "ProviderConfig", "providerconfigs");
    let pc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ProviderConfig", "metadata": {"name": PROVIDER},
        "spec": {"pollInterval": "1m", "versions": go_provider::versions()},
    }))?;
    Api::<DynamicObject>::all_with(platform.clone(), &pc_resource).create(&PostParams::default(), &pc).await?;

    let options =
        SimulatorOptions { cluster_wide: true, poll_interval: Duration::from_millis(500), ..Default::default() };
    let openmcp = OpenMcpSimulator::start(&env.platform, &env.onboarding, options);
    let flux_options =
        FluxOptions { auto_ready: true, poll_interval: Duration::from_millis(500), ..Default::default() };
    let flux = FluxSimulator::start(&env.platform, flux_options);
    let mut tenants = Vec::new();
    for i in 0..n {
        tenants
            .push(openmcp.register_control_plane(&format!("mcp-{i}"), ONBOARDING_NAMESPACE, &env.control_plane).await?);
    }
    go_provider::control_plane(&cp).await?;
    let kroes: Api<DynamicObject> = Api::namespaced_with(
        onboarding.clone(),
        ONBOARDING_NAMESPACE,
        &resource::api_resource(&format!("{GROUP}/v1alpha1"), "Kro", "kroes"),
    );
    let names: Vec<String> = (0..n).map(|i| format!("mcp-{i}")).collect();
    let instance = |i: usize| Instance {
        name: &names[i],
        onboarding_namespace: ONBOARDING_NAMESPACE,
        tenant: &tenants[i],
        version: if i.is_multiple_of(2) { "v0.9.1" } else { "v0.9.3" },
    };
    let written = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let (platform, kroes, instance) = (&platform, &kroes, instance(i));
            async move {
                go_provider::platform(platform, &instance, GO_PROVIDER).await?;
                go_provider::kro(kroes, &instance).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    for i in 0..n {
        while !go_provider::settled(&platform, &instance(i)).await? {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    eprintln!("bench-adopt: {n} instances as the Go provider leaves them, settled in {:?}", written.elapsed());

    let (phases, watch) = watch_phases(kroes.clone());
    while phases.lock().expect("not poisoned").now.len() < n {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let port = free_port();
    let started = Instant::now();
    let plugin = host_test_support::plugins::plugin_path(host_test_support::plugins::KRO);
    let args = ["--plugin".into(), plugin.into_os_string()];
    let _host = bench_host(host_binary, &env, (PROVIDER, POD_NAMESPACE), port, &args, &[("ADOPT_FROM", GO_PROVIDER)]);
    let adopted_total = |port| metrics(port).map(|m| m.get(ADOPTED).copied().unwrap_or_default());
    let took = loop {
        let ready = phases.lock().expect("not poisoned").now.values().filter(|p| *p == "Ready").count();
        // Each instance's AccessRequest, OCIRepository and HelmRelease.
        let adopted = adopted_total(port).unwrap_or_default();
        if ready == n && adopted >= (3 * n) as f64 && labelled(&platform).await? == n {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("after 900 s: {ready} of {n} Ready, {adopted} objects adopted");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let samples = metrics(port)?;
    let adopted = samples.get(ADOPTED).copied().unwrap_or_default();
    let requests: f64 = samples
        .iter()
        .filter(|(k, _)| k.starts_with("service_provider_host_kube_requests_total{"))
        .map(|(_, v)| v)
        .sum();
    watch.abort();
    let flapped = phases.lock().expect("not poisoned").ever_not_ready.len();
    println!(
        "bench-adopt: N = {n}: all taken over and Ready {:.1} s after the host started; {adopted} objects adopted; \
         {flapped} instance(s) seen not Ready meanwhile; {requests} requests by the host",
        took.as_secs_f64()
    );
    openmcp.stop().await;
    flux.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(500);
    let root = host_test_support::plugins::root();
    let host_binary = std::env::var_os("SERVICE_PROVIDER_HOST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/x86_64-unknown-linux-musl/production/service-provider-host"));
    if !host_binary.is_file() {
        bail!("{} not found: `task bench-adopt` builds it (scripts/build-host-binary.sh)", host_binary.display());
    }
    run(n, &host_binary).await
}
