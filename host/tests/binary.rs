//! `service-provider-host run` as a process, the way openmcp deploys it:
//! platform cluster from KUBECONFIG, onboarding access through openmcp,
//! probes and metrics on their ports, SIGTERM to stop, and leader election
//! between two replicas.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use host_test_support::*;
use serde_json::json;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP GET on loopback: (status code, body), or None if nothing listens.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, response.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()))
}

struct Replica {
    child: Child,
    health: u16,
    metrics: u16,
}

impl Replica {
    fn start(f: &Fixture, leader_elect: bool, pod: &str) -> Replica {
        Replica::start_with(f, leader_elect, pod, plugins::KRO)
    }

    fn start_with(f: &Fixture, leader_elect: bool, pod: &str, plugin: plugins::Component) -> Replica {
        let (health, metrics) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
            .args(["run", "--environment", "test", "--provider-name", &f.provider, "--verbosity", "INFO"])
            .arg(format!("--leader-elect={leader_elect}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
            .arg("--metrics-secure=false")
            .args(["--watch-namespace", &f.ns])
            .arg("--plugin")
            .arg(plugin_path(plugin))
            .env("KUBECONFIG", f.env.platform.kubeconfig_path())
            .env("POD_NAMESPACE", &f.pod_ns)
            .env("POD_NAME", pod)
            .env_remove("ONBOARDING_KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run starts");
        Replica { child, health, metrics }
    }

    async fn wait_ready(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if matches!(http_get(self.health, "/readyz"), Some((200, _))) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        false
    }

    /// SIGTERM, then the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "run did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn run_serves_probes_and_metrics_reconciles_and_stops_on_sigterm() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let replica = Replica::start(&f, false, "replica-0");
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    assert_eq!(http_get(replica.health, "/healthz").map(|r| r.0), Some(200));

    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    let (code, metrics) = http_get(replica.metrics, "/metrics").expect("metrics endpoint");
    assert_eq!(code, 200);
    assert!(metrics.contains("service_provider_host_reconciles_total{outcome=\"applied\"}"), "{metrics}");
    assert!(
        metrics.contains("service_provider_host_kube_requests_total{cluster=\"platform\",method=\"PATCH\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("service_provider_host_plugin_call_duration_seconds_count{call=\"plan\"}"), "{metrics}");

    let status = replica.terminate();
    assert!(status.success(), "run exits cleanly on SIGTERM: {status:?}");
}

#[tokio::test]
async fn with_leader_election_only_one_replica_runs() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let first = Replica::start(&f, true, "replica-a");
    assert!(first.wait_ready(WAIT).await, "the first replica becomes leader");
    let second = Replica::start(&f, true, "replica-b");
    assert!(!second.wait_ready(Duration::from_secs(8)).await, "the second replica must wait for the lease");

    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    // The leader goes away: the standby takes over and keeps reconciling.
    assert!(first.terminate().success());
    assert!(second.wait_ready(Duration::from_secs(45)).await, "the standby takes the lease");
    f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.0"}})).await;
    f.wait_kro("mcp-01", "the new leader reconciles", |k| ready(k)["reason"] == "ReconcileError").await;
    assert!(second.terminate().success());
}

/// A hostile plugin cannot end the host process: malformed output, a
/// sleeping call and a memory bomb each fail their own instance, and a
/// healthy instance of the same process gets Ready.
#[tokio::test]
async fn a_hostile_plugin_cannot_end_the_process() {
    let names = ["bad-labels", "sleep-1", "hoard", "healthy-1"];
    let f = Fixture::new(Options {
        instances: names.iter().map(|n| n.to_string()).collect(),
        flux_ready: false,
        workload: false,
    })
    .await;
    f.source_secret("registry", "kubernetes.io/dockerconfigjson", "{}").await;
    f.provider_config(json!([{"version": "v1", "chartVersion": "1", "chartPullSecret": "registry"}])).await;
    let mut replica = Replica::start_with(&f, false, "replica-0", plugins::HOSTILE);
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    for name in names {
        f.create_kro(name, "v1").await;
    }
    f.wait_ready("healthy-1").await;
    for (name, reason) in [("bad-labels", "PluginError"), ("sleep-1", "PluginTimeout"), ("hoard", "PluginError")] {
        f.wait_kro(name, reason, |k| ready(k)["reason"] == reason).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(replica.child.try_wait().unwrap().is_none(), "the process is still running");
    let (_, metrics) = http_get(replica.metrics, "/metrics").expect("metrics endpoint");
    assert!(
        metrics.contains("service_provider_host_reconcile_failures_total{category=\"plugin-timeout\"}"),
        "{metrics}"
    );
    assert!(replica.terminate().success());
}
