//! `task bench-scale`: how the host behaves with many instances, measured
//! from outside on the test harness, as a reproducible command.
//!
//! Three real API servers; N ControlPlanes registered in the openmcp
//! simulator (watching cluster-wide, so the simulator is not what is
//! measured), all backed by one ControlPlane API server; Flux simulated
//! Ready; the seed's ProviderConfig with a chart pull secret and
//! imagePullSecrets. The host runs as its own process (the static musl
//! `production` build the image ships, the Kro component, a precompiled
//! cache), started with its binary evicted from the page cache. N `Kro`
//! objects are created at once; then: time to all Ready, the host's API
//! requests per cluster and method (its own counters) while converging, over
//! a steady-state window longer than the poll interval, and while deleting;
//! the host's peak RSS, peak anonymous memory and CPU seconds; the CPU
//! seconds of each cluster's API server and etcd, of the host and of the
//! harness while converging and deleting, and what all of those but the
//! host's come to over the machine's cores (the floor this machine's speed
//! sets, whatever the host costs). Prints a table and appends it to
//! `target/bench-scale.md` (see `docs/performance.md`).
//!
//! `task bench-scale -- [N ...]` (builds that binary, or takes it from the
//! cache `scripts/build-host-binary.sh` shares with the image, then runs
//! `cargo run --release -p service-provider-host --example bench_scale -- [N ...]`
//! with `SERVICE_PROVIDER_HOST` set to it).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use host_test_support::process::{bench_host, free_port, http_get};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, PostParams};
use kube::runtime::{reflector, watcher};
use serde_json::json;
use service_provider_host::resource;
use testbed::{FluxOptions, FluxSimulator, OpenMcpSimulator, SimulatorOptions, TestEnv};

/// Where a `cargo build --profile production --target
/// x86_64-unknown-linux-musl` puts the binary the image ships, when
/// `SERVICE_PROVIDER_HOST` names none: static musl, `production` profile.
/// Its allocator and code layout are part of what is measured.
const SHIPPED: &str = "x86_64-unknown-linux-musl/production";
const POD_NAMESPACE: &str = "openmcp-system";
const PROVIDER: &str = "kro";
const GROUP: &str = "kro.services.open-control-plane.io";
/// Longer than the poll interval (1m), so every instance is polled once.
const STEADY_WINDOW: Duration = Duration::from_secs(75);

/// The host's request counters: `(cluster, method)` → count.
fn requests(port: u16) -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let (_, text) = http_get(port, "/metrics").context("the metrics endpoint")?;
    let mut counts = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("service_provider_host_kube_requests_total{")) {
        let (labels, value) = line.rsplit_once(' ').context("metric line")?;
        let field = |name: &str| {
            labels.split(&format!("{name}=\"")).nth(1).and_then(|r| r.split('"').next()).unwrap_or_default().to_string()
        };
        counts.insert((field("cluster"), field("method")), value.trim().parse()?);
    }
    Ok(counts)
}

fn delta(
    after: &BTreeMap<(String, String), u64>,
    before: &BTreeMap<(String, String), u64>,
) -> BTreeMap<(String, String), u64> {
    after.iter().map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0))).filter(|(_, v)| *v > 0).collect()
}

fn sum(counts: &BTreeMap<(String, String), u64>, cluster: Option<&str>, reads: bool) -> u64 {
    counts
        .iter()
        .filter(|((c, m), _)| cluster.is_none_or(|want| c == want) && (m == "GET") == reads)
        .map(|(_, v)| v)
        .sum()
}

fn describe(counts: &BTreeMap<(String, String), u64>) -> String {
    counts.iter().map(|((c, m), v)| format!("{c} {m} {v}")).collect::<Vec<_>>().join(", ")
}

/// A `kB` field of `/proc/PID/status` (e.g. `VmHWM`), in KiB.
fn status_kib(status: &str, field: &str) -> Option<u64> {
    let value = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    value.split_whitespace().next()?.parse().ok()
}

/// Peak RSS (KiB) and CPU seconds of a process.
fn usage(pid: u32) -> anyhow::Result<(u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let peak = status_kib(&status, "VmHWM").context("VmHWM")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat.rsplit_once(')').context("stat")?.1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((peak, ticks / per_second))
}

/// Stops a background task when dropped, also when a run ends early with an
/// error.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Peak anonymous memory (KiB) of a process, sampled every 100 ms while the
/// returned guard lives: the heap and stacks, without the mapped code that
/// `VmHWM` also counts.
fn sample_peak_anon(pid: u32) -> (Arc<AtomicU64>, AbortOnDrop) {
    let peak = Arc::new(AtomicU64::new(0));
    let seen = peak.clone();
    let task = tokio::spawn(async move {
        loop {
            if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                && let Some(anon) = status_kib(&status, "RssAnon")
            {
                seen.fetch_max(anon, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (peak, AbortOnDrop(task))
}

/// Drops the host binary's pages from the page cache before it runs.
///
/// `VmHWM` counts the binary's code as far as it is mapped in, and how far
/// that is depends on how the page cache holds the file: after something read
/// it sequentially (copying it into the image does), Linux 6.x keeps it in
/// large folios and maps each one whole on a fault, and the same binary in the
/// same run peaked 6.5 MiB higher (35.9 instead of 29.4 MiB at N = 500, all
/// of it mapped code). Evicting the file first makes every run start from the
/// same state: the code read in as it is executed.
fn evict_from_page_cache(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // Dirty pages cannot be dropped: write them out first.
    file.sync_all()?;
    // SAFETY: `file` stays open for the call; the advice only concerns the
    // page cache of this file.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        bail!("posix_fadvise on {}: {}", path.display(), std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// CPU seconds of each process a run measures: each cluster's API server
/// and etcd, the host, and this process (the simulators and the
/// benchmark's own watches). On a small machine they all share the cores,
/// so a busy harness slows everything it measures.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    platform: f64,
    onboarding: f64,
    control_plane: f64,
    host: f64,
    harness: f64,
}

impl Cpu {
    /// Each process's seconds as `(name, seconds)`.
    fn by_process(self) -> [(&'static str, f64); 5] {
        [
            ("platform", self.platform),
            ("onboarding", self.onboarding),
            ("control plane", self.control_plane),
            ("host", self.host),
            ("harness", self.harness),
        ]
    }

    /// What each process used since `before`.
    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            platform: self.platform - before.platform,
            onboarding: self.onboarding - before.onboarding,
            control_plane: self.control_plane - before.control_plane,
            host: self.host - before.host,
            harness: self.harness - before.harness,
        }
    }

    fn describe(self) -> String {
        self.by_process().iter().map(|(c, s)| format!("{c} {s:.1}")).collect::<Vec<_>>().join(", ")
    }

    /// The CPU seconds of every process but the host, over the machine's
    /// cores: the least a phase can take for the API servers and the
    /// harness to do their part of it, however little CPU the host itself
    /// used. It follows the machine's speed of the hour, not the host's
    /// cost, so it tells a slow hour from a slower host.
    fn without_host(self) -> f64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        (self.platform + self.onboarding + self.control_plane + self.harness) / cores
    }
}

/// CPU seconds so far of each process of a run.
fn cpu_seconds(env: &TestEnv, host: u32) -> anyhow::Result<Cpu> {
    let cluster = |c: &testbed::Cluster| -> anyhow::Result<f64> {
        let (apiserver, etcd) = c.pids();
        Ok(usage(apiserver)?.1 + usage(etcd)?.1)
    };
    Ok(Cpu {
        platform: cluster(&env.platform)?,
        onboarding: cluster(&env.onboarding)?,
        control_plane: cluster(&env.control_plane)?,
        host: usage(host)?.1,
        harness: usage(std::process::id())?.1,
    })
}

/// The service objects as a watch sees them: counting from it costs the
/// API server nothing, where listing hundreds of objects every 250 ms would
/// be a load of its own on the servers being measured.
struct Watched {
    store: reflector::Store<DynamicObject>,
    task: tokio::task::JoinHandle<()>,
}

impl Watched {
    fn start(kroes: Api<DynamicObject>, resource: ApiResource) -> Self {
        let writer = reflector::store::Writer::new(resource);
        let store = writer.as_reader();
        let stream = reflector::reflector(writer, watcher(kroes, watcher::Config::default()));
        let task = tokio::spawn(stream.for_each(|_| async {}));
        Watched { store, task }
    }

    /// `(objects, of which Ready)`.
    async fn count(&self) -> anyhow::Result<(usize, usize)> {
        self.store.wait_until_ready().await?;
        let all = self.store.state();
        let ready = all.iter().filter(|k| k.data["status"]["phase"] == "Ready").count();
        Ok((all.len(), ready))
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Result {
    instances: usize,
    ready: Duration,
    gone: Duration,
    converge: BTreeMap<(String, String), u64>,
    steady: BTreeMap<(String, String), u64>,
    deletion: BTreeMap<(String, String), u64>,
    cpu_converge: Cpu,
    cpu_deletion: Cpu,
    peak_rss_kib: u64,
    peak_anon_kib: u64,
    cpu_seconds: f64,
    /// `diff` of the next Kro version over the converged fleet: first with
    /// the candidate compiled by it, then precompiled (its cache filled by
    /// the first).
    previews: [Preview; 2],
    /// The converged host's `/metrics`: bytes and samples.
    scrape: (usize, usize),
    /// Reconciles until all were Ready (controller_runtime_reconcile_total).
    reconciles: f64,
    /// With traces sent over OTLP to a Jaeger: the reconcile traces it held
    /// once all were Ready.
    traces: Option<usize>,
}

/// What `service-provider-host diff` took over the converged fleet.
#[derive(Debug, Clone, Copy)]
struct Preview {
    took: Duration,
    peak_rss_kib: u64,
    cpu_seconds: f64,
    /// Its exit code (2: something would change).
    code: Option<i32>,
}

/// Runs `diff` of the next Kro version (`tests/plugins/kro-next`) against
/// the plugin the host runs, as a process of its own under the platform
/// kubeconfig, reaching the onboarding cluster through the access `run`
/// was granted; its wall time, peak RSS (its own `VmHWM`) and CPU (from
/// `wait4`).
fn preview(host_binary: &Path, env: &TestEnv, plugin: &Path, cache: &Path) -> anyhow::Result<Preview> {
    let next = host_test_support::plugins::plugin_path(host_test_support::plugins::KRO_NEXT);
    // The shipped binary's built-in grant gives the kro identity to the
    // shipped component only; the same grant by name serves both here.
    let grant = cache.join("grant.yaml");
    std::fs::write(&grant, service_provider_host::plugin::grant::DEFAULT)?;
    let started = Instant::now();
    let child = Command::new(host_binary)
        .env("KUBECONFIG", env.platform.kubeconfig_path())
        .env("POD_NAMESPACE", POD_NAMESPACE)
        .env_remove("ONBOARDING_KUBECONFIG")
        .args(["diff", "--provider-name", PROVIDER, "--exit-code", "-o", "json", "--verbosity", "ERROR"])
        .arg("--onboarding-kubeconfig")
        .arg(env.onboarding.kubeconfig_path())
        .arg("--plugin-cache-dir")
        .arg(cache)
        .arg("--plugin-grant")
        .arg(&grant)
        .arg("--plugin")
        .arg(&next)
        .arg("--current-plugin")
        .arg(plugin)
        .stdout(Stdio::null())
        .spawn()
        .context("starting diff")?;
    let pid = child.id() as libc::pid_t;
    // The peak RSS of the process itself: `VmHWM` of its own address space,
    // read until it exits. (`wait4`'s `ru_maxrss` also counts the address
    // space it was started from, this harness's.)
    let mut peak_kib = 0;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value; `wait4` fills it for
    // the child just spawned, which nothing else waits for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            peak_kib = peak_kib.max(status_kib(&text, "VmHWM").unwrap_or(0));
        }
        match unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) } {
            0 => std::thread::sleep(Duration::from_millis(10)),
            done if done == pid => break,
            _ => bail!("waiting for diff: {}", std::io::Error::last_os_error()),
        }
    }
    let took = started.elapsed();
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Preview {
        took,
        peak_rss_kib: peak_kib,
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
    })
}

async fn run_once(n: usize, host_binary: &PathBuf, plugin: &PathBuf, traced: bool) -> anyhow::Result<Result> {
    let env = TestEnv::start().await.context("starting the clusters (run `task testbed-bins`)")?;
    let jaeger = match traced {
        true => Some(testbed::jaeger::Jaeger::start().await.context("Jaeger (run `task observability-bins`)")?),
        false => None,
    };
    let endpoint = jaeger.as_ref().map(|j| format!("http://127.0.0.1:{}", j.otlp));
    let otel: Vec<(&str, &str)> = match &endpoint {
        Some(endpoint) => vec![("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint), ("OTEL_SERVICE_NAME", "bench")],
        None => Vec::new(),
    };
    let platform = env.platform.client().await?;
    let onboarding = env.onboarding.client().await?;
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(POD_NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(platform.clone()).create(&PostParams::default(), &ns).await?;
    for name in ["registry", "pull"] {
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some([(".dockerconfigjson".to_string(), ByteString(br#"{"auths":{}}"#.to_vec()))].into()),
            ..Default::default()
        };
        Api::<Secret>::namespaced(platform.clone(), POD_NAMESPACE).create(&PostParams::default(), &secret).await?;
    }
    let pcs: Api<DynamicObject> = Api::all_with(
        platform.clone(),
        &resource::api_resource(&format!("{GROUP}/v1alpha1"), "ProviderConfig", "providerconfigs"),
    );
    let pc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ProviderConfig", "metadata": {"name": PROVIDER},
        "spec": {"pollInterval": "1m", "versions": [{
            "version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry",
            "helmValues": {"imagePullSecrets": [{"name": "pull"}]}
        }]}
    }))?;
    pcs.create(&PostParams::default(), &pc).await?;

    let openmcp = OpenMcpSimulator::start(
        &env.platform,
        &env.onboarding,
        SimulatorOptions { cluster_wide: true, poll_interval: Duration::from_millis(500), ..Default::default() },
    );
    let registered = Instant::now();
    for i in 0..n {
        openmcp.register_control_plane(&format!("mcp-{i}"), "default", &env.control_plane).await?;
    }
    eprintln!("bench-scale: {n} ControlPlanes registered in {:?}", registered.elapsed());
    let flux = FluxSimulator::start(
        &env.platform,
        FluxOptions { auto_ready: true, poll_interval: Duration::from_millis(500), ..Default::default() },
    );

    let metrics_port = free_port();
    let cache = std::env::temp_dir().join(format!("sp-host-bench-scale-{}", std::process::id()));
    // As in the container image: the plugin is compiled ahead of time, so
    // the host process only loads the artifact (compiling would add its
    // transient memory to the measured peak).
    evict_from_page_cache(host_binary)?;
    let precompiled = Command::new(host_binary)
        .arg("precompile")
        .arg("--plugin-cache-dir")
        .arg(&cache)
        .arg(plugin)
        .stdout(Stdio::null())
        .output()
        .context("precompiling the plugin")?;
    let said = String::from_utf8_lossy(&precompiled.stderr);
    if said.contains("unrecognized subcommand 'precompile'") {
        // A binary from before `precompile` existed: it compiles the
        // plugin in the measured process.
        eprintln!("bench-scale: this binary cannot precompile: its peak RSS includes compiling the plugin");
    } else if !precompiled.status.success() {
        bail!("precompiling the plugin failed ({}): {said}", precompiled.status);
    }
    let args = ["--plugin".into(), plugin.into(), "--plugin-cache-dir".into(), cache.clone().into_os_string()];
    let host = bench_host(host_binary, &env, (PROVIDER, POD_NAMESPACE), metrics_port, &args, &otel);
    let pid = host.child.id();
    let (peak_anon, sampler) = sample_peak_anon(pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        if let Ok(counts) = requests(metrics_port) {
            break counts;
        }
        if Instant::now() > deadline {
            bail!("the host's metrics endpoint never answered");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let kroes: Api<DynamicObject> = Api::namespaced_with(
        onboarding.clone(),
        "default",
        &resource::api_resource(&format!("{GROUP}/v1alpha1"), "Kro", "kroes"),
    );
    let watched = Watched::start(kroes.clone(), resource::api_resource(&format!("{GROUP}/v1alpha1"), "Kro", "kroes"));
    watched.count().await?;
    let cpu_before = cpu_seconds(&env, pid)?;
    let started = Instant::now();
    let creators: Vec<_> = (0..n)
        .map(|i| {
            let kroes = kroes.clone();
            tokio::spawn(async move {
                let kro: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Kro",
                    "metadata": {"name": format!("mcp-{i}"), "namespace": "default"}, "spec": {"version": "v0.9.3"}
                }))
                .expect("object");
                kroes.create(&PostParams::default(), &kro).await.map(drop)
            })
        })
        .collect();
    for creator in creators {
        creator.await??;
    }
    let ready = loop {
        let (_, ready) = watched.count().await?;
        if ready == n {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("only {ready} of {n} Ready after 900 s");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let converged = requests(metrics_port)?;
    let cpu_converged = cpu_seconds(&env, pid)?;
    let (_, scraped) = http_get(metrics_port, "/metrics").context("the metrics endpoint")?;
    let scrape = (scraped.len(), scraped.lines().filter(|l| !l.starts_with('#')).count());
    let reconciles: f64 = scraped
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    // The batch processor sends within 5 s.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let traces = jaeger.as_ref().map(|j| j.traces("bench", "reconcile").len());
    eprintln!("bench-scale: {n} Ready in {ready:?}; steady-state window of {STEADY_WINDOW:?}");
    tokio::time::sleep(STEADY_WINDOW).await;
    let steady_end = requests(metrics_port)?;
    let previews = [preview(host_binary, &env, plugin, &cache)?, preview(host_binary, &env, plugin, &cache)?];
    eprintln!("bench-scale: diff of the next version over {n} instances in {:?}", previews.map(|p| p.took));

    // One request deletes them all, as creation starts them all at once:
    // 500 DELETEs one after another would time the benchmark's own client.
    let cpu_steady = cpu_seconds(&env, pid)?;
    let deleting = Instant::now();
    eprintln!("bench-scale: deleting all {n}");
    kroes.delete_collection(&Default::default(), &Default::default()).await?;
    let gone = loop {
        let (left, _) = watched.count().await?;
        if left == 0 {
            break deleting.elapsed();
        }
        if deleting.elapsed() > Duration::from_secs(900) {
            bail!("{left} of {n} left after 900 s");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let after = requests(metrics_port)?;
    let cpu_after = cpu_seconds(&env, pid)?;
    let (peak_rss_kib, cpu_seconds) = usage(pid)?;
    drop(sampler);
    let peak_anon_kib = peak_anon.load(Ordering::Relaxed);
    drop(host);
    openmcp.stop().await;
    flux.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
    Ok(Result {
        instances: n,
        ready,
        gone,
        converge: delta(&converged, &before),
        steady: delta(&steady_end, &converged),
        deletion: delta(&after, &steady_end),
        cpu_converge: cpu_converged.since(cpu_before),
        cpu_deletion: cpu_after.since(cpu_steady),
        peak_rss_kib,
        peak_anon_kib,
        cpu_seconds,
        previews,
        scrape,
        reconciles,
        traces,
    })
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
        .map_or("?".into(), |kib| format!("{} GiB", kib >> 20));
    format!("{cores} cores ({cpu}), {memory}")
}

/// A fixed piece of work, timed: sorting 4 million pseudo-random numbers
/// on one core, the median of five runs, in milliseconds. This machine's
/// speed varies by the hour (in a slow hour every process takes 20–30 %
/// more CPU seconds for the same requests, and no steal time shows it), so
/// each section carries this figure, taken before and after the runs, to
/// tell a slower host from a slower hour.
fn reference_ms() -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|round| {
            let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ round;
            let mut numbers: Vec<u64> = (0..4_000_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                })
                .collect();
            let started = Instant::now();
            numbers.sort_unstable();
            std::hint::black_box(&numbers);
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

fn table(results: &[Result]) -> String {
    let mut out = String::from(
        "| N | create → all Ready | delete all → all gone | peak RSS (of it anonymous) | CPU s | reads to converge (per instance) | steady state per 75 s: writes / reads (per instance) | requests while converging |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in results {
        let n = r.instances as f64;
        let converge_reads = sum(&r.converge, None, true);
        let steady_reads = sum(&r.steady, None, true);
        out.push_str(&format!(
            "| {} | {:.1} s | {:.1} s | {:.1} MiB ({:.1}) | {:.1} | {} ({:.1}) | {} / {} ({:.2}) | {} |\n",
            r.instances,
            r.ready.as_secs_f64(),
            r.gone.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0,
            r.peak_anon_kib as f64 / 1024.0,
            r.cpu_seconds,
            converge_reads,
            converge_reads as f64 / n,
            sum(&r.steady, None, false),
            steady_reads,
            steady_reads as f64 / n,
            describe(&r.converge),
        ));
    }
    for r in results {
        let [cold, warm] = &r.previews;
        let said = |p: &Preview| {
            format!(
                "{:.1} s, peak RSS {:.1} MiB, {:.1} CPU s, exit code {:?}",
                p.took.as_secs_f64(),
                p.peak_rss_kib as f64 / 1024.0,
                p.cpu_seconds,
                p.code
            )
        };
        out.push_str(&format!(
            "\nN = {}: `diff` of the next Kro version over the converged fleet (read-only, a process of its own): {} compiling the candidate, {} with it precompiled; beside create → all Ready in {:.1} s and the host's peak RSS of {:.1} MiB\n",
            r.instances,
            said(cold),
            said(warm),
            r.ready.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0,
        ));
    }
    for r in results {
        out.push_str(&format!(
            "\nN = {}, traces over OTLP {}: the converged host's /metrics {:.1} KiB, {} samples; {} reconciles to converge, host CPU {:.2} s ({:.2} ms per reconcile){}\n",
            r.instances,
            if r.traces.is_some() { "on" } else { "off" },
            r.scrape.0 as f64 / 1024.0,
            r.scrape.1,
            r.reconciles,
            r.cpu_converge.host,
            r.cpu_converge.host * 1000.0 / r.reconciles.max(1.0),
            r.traces.map(|t| format!("; {t} reconcile traces in Jaeger")).unwrap_or_default(),
        ));
    }
    for r in results {
        out.push_str(&format!(
            "\nN = {}: steady state: {}; deletion: {}. CPU s (API server + etcd per cluster, host, harness) while converging: {}; while deleting: {}. Those of all but the host over the machine's cores (the least each phase can take whatever the host costs): {:.1} s converging, {:.1} s deleting\n",
            r.instances,
            if r.steady.is_empty() { "no requests".to_string() } else { describe(&r.steady) },
            describe(&r.deletion),
            r.cpu_converge.describe(),
            r.cpu_deletion.describe(),
            r.cpu_converge.without_host(),
            r.cpu_deletion.without_host(),
        ));
    }
    out
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<std::result::Result<_, _>>()?;
    let sizes = if sizes.is_empty() { vec![100, 500] } else { sizes };
    let root = host_test_support::plugins::root();
    let host_binary = std::env::var_os("SERVICE_PROVIDER_HOST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(format!("target/{SHIPPED}/service-provider-host")));
    if !host_binary.is_file() {
        bail!("{} not found: `task bench-scale` builds it (scripts/build-host-binary.sh)", host_binary.display());
    }
    let plugin = host_test_support::plugins::plugin_path(host_test_support::plugins::KRO);
    let reference_before = reference_ms();
    eprintln!("bench-scale: reference work (sorting 4 M numbers) {reference_before:.0} ms");
    let mut results = Vec::new();
    // BENCH_TRACES=1: each size twice, side by side in one run: without
    // and with traces sent to a collector (Jaeger, `task observability-bins`).
    let traces: &[bool] = match std::env::var("BENCH_TRACES").is_ok_and(|v| v == "1") {
        true => &[false, true],
        false => &[false],
    };
    for n in sizes {
        for &traced in traces {
            eprintln!("bench-scale: N = {n}{}", if traced { ", traces over OTLP" } else { "" });
            results.push(run_once(n, &host_binary, &plugin, traced).await?);
        }
    }
    let reference_after = reference_ms();
    let table = table(&results);
    println!("{table}");
    let speed = format!(
        "reference work (sorting 4 M numbers on one core, `reference_ms`) {reference_before:.0} ms before the runs, {reference_after:.0} ms after"
    );
    println!("{speed}");
    let commit = Command::new("git").args(["rev-parse", "--short", "HEAD"]).current_dir(&root).output().ok();
    let commit = commit.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let date = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string();
    // `BENCH_LABEL` names what was measured when it is not this checkout's
    // own build (e.g. an older binary given in `SERVICE_PROVIDER_HOST`).
    let label = std::env::var("BENCH_LABEL").unwrap_or_else(|_| format!("commit {commit}"));
    let section = format!("\n## {date}, {label}\n\nMachine: {}; {speed}.\n\n{table}", machine());
    // Results are output, not a tracked file: docs/performance.md says how
    // to read them.
    let path = root.join("target/bench-scale.md");
    std::fs::create_dir_all(root.join("target"))?;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
    file.write_all(section.as_bytes())?;
    eprintln!("bench-scale: appended to {}", path.display());
    Ok(())
}
