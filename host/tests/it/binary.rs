//! `service-provider-host run` as a process, the way openmcp deploys it:
//! platform cluster from KUBECONFIG, onboarding access through openmcp,
//! probes and metrics on their ports, SIGTERM to stop, two replicas with
//! leader election, JSON logs, errors for people, the workload plugin with
//! an operator's grant file, and plugins pulled from a registry (`binary/registry.rs`).

use std::process::Command;
use std::time::Duration;

use host_test_support::process::{Launcher, Replica, ReplicaOptions, counter};
use host_test_support::*;
use serde_json::{Value, json};

mod registry;
mod registry_bounds;

fn binary() -> Launcher {
    Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into())
}

#[tokio::test]
async fn run_serves_probes_and_metrics_reconciles_and_stops_on_sigterm() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let replica = Replica::start(&binary(), &f, ReplicaOptions::new("replica-0"));
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    assert_eq!(process::http_get(replica.health, "/healthz").map(|r| r.0), Some(200));

    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    let metrics = replica.metrics();
    // Every host series names the provider.
    let provider = format!("provider=\"{}\"", f.provider);
    assert!(
        metrics.contains(&format!("service_provider_host_reconciles_total{{{provider},outcome=\"applied\"}}")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "service_provider_host_kube_requests_total{{{provider},cluster=\"platform\",method=\"PATCH\"}}"
        )),
        "{metrics}"
    );
    // Per plugin component, and controller-runtime's series for the controller.
    let plan = format!(r#"{{{provider},plugin="kro",digest="sha256:"#);
    assert!(metrics.contains(&format!("service_provider_host_plugin_call_duration_seconds_count{plan}")), "{metrics}");
    assert!(metrics.contains(r#"role="plugin",call="plan"} "#), "{metrics}");
    // The describe the plugin was loaded with, once.
    let described = metrics
        .lines()
        .filter(|l| l.starts_with("service_provider_host_plugin_call_duration_seconds_count{"))
        .filter(|l| l.contains(r#"role="plugin",call="describe"}"#))
        .collect::<Vec<_>>();
    assert!(described.len() == 1 && described[0].ends_with("} 1"), "{metrics}");
    for series in [
        r#"controller_runtime_reconcile_total{controller="kro",result="success"} "#,
        r#"controller_runtime_max_concurrent_reconciles{controller="kro"} 8"#,
        r#"workqueue_adds_total{name="kro",controller="kro"} "#,
        r#"workqueue_depth{name="kro",controller="kro"} "#,
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }

    let status = replica.terminate();
    assert!(status.success(), "run exits cleanly on SIGTERM: {status:?}");
}

/// What a replica wrote to the onboarding cluster and how often it
/// reconciled, from its own metrics.
fn writes(replica: &Replica, provider: &str) -> (f64, f64) {
    let metrics = replica.metrics();
    let onboarding_writes = ["PATCH", "PUT", "POST", "DELETE"]
        .iter()
        .map(|m| {
            counter(
                &metrics,
                &format!(
                    "service_provider_host_kube_requests_total{{provider=\"{provider}\",cluster=\"onboarding\",method=\"{m}\""
                ),
            )
        })
        .sum();
    (onboarding_writes, counter(&metrics, "service_provider_host_reconciles_total"))
}

/// A rolling update needs every replica Ready: the standby is Ready while it
/// waits for the lease, but never writes; when the leader dies (SIGKILL, no
/// lease release), the standby takes over once the lease expires.
#[tokio::test]
async fn with_leader_election_every_replica_is_ready_and_only_the_leader_writes() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let leader_options = ReplicaOptions { leader_elect: true, ..ReplicaOptions::new("replica-a") };
    let mut first = Replica::start(&binary(), &f, leader_options);
    assert!(
        first.wait_readyz(WAIT, |code, body| code == 200 && body.contains("caches synced")).await,
        "the first replica leads and syncs: {:?}",
        first.readyz()
    );
    let second =
        Replica::start(&binary(), &f, ReplicaOptions { leader_elect: true, ..ReplicaOptions::new("replica-b") });
    assert!(second.wait_ready(WAIT).await, "the standby is Ready too: {:?}", second.readyz());
    assert!(second.readyz().unwrap().1.contains("standing by"), "{:?}", second.readyz());

    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    let (leader_writes, leader_reconciles) = writes(&first, &f.provider);
    assert!(leader_writes > 0.0 && leader_reconciles > 0.0, "the leader did the work");
    assert_eq!(writes(&second, &f.provider), (0.0, 0.0), "the standby neither reconciles nor writes");

    // The leader dies without releasing the lease.
    assert!(!first.process.kill().success());
    assert!(
        second.wait_readyz(Duration::from_secs(60), |code, body| code == 200 && body.contains("caches synced")).await,
        "the standby takes the lease once it expires: {:?}",
        second.readyz()
    );
    f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.0"}})).await;
    f.wait_kro("mcp-01", "the new leader reconciles", |k| ready(k)["reason"] == "ReconcileError").await;
    assert!(writes(&second, &f.provider).0 > 0.0, "the new leader writes");
    assert!(second.terminate().success());
}

/// `--log-format json`: every line a reconcile logs names its instance.
/// (A span field called `name` would collide with the key under which the
/// JSON format writes the span's own name, and the instance would be lost:
/// seen failing that way before the field became `instance`.)
#[tokio::test]
async fn json_logs_name_the_instance_on_every_reconcile_line() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let log = std::env::temp_dir().join(format!("{}.log", unique("json-log")));
    let options = ReplicaOptions {
        args: vec!["--log-format".into(), "json".into()],
        verbosity: "DEBUG",
        log: Some(log.clone()),
        env: vec![("RUST_LOG".into(), "info,service_provider_host=debug".into())],
        ..ReplicaOptions::new("replica-0")
    };
    let replica = Replica::start(&binary(), &f, options);
    assert!(replica.wait_ready(WAIT).await);
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(replica.terminate().success());

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}")))
        .collect();
    let in_reconcile: Vec<&Value> = lines
        .iter()
        .filter(|l| l["spans"].as_array().is_some_and(|s| s.iter().any(|s| s["name"] == "reconcile")))
        .collect();
    assert!(in_reconcile.len() >= 2, "reconciles log (applied, cleanup complete):\n{text}");
    for line in &in_reconcile {
        // The reconcile span, whichever of its steps' spans is current.
        let spans = line["spans"].as_array().expect("the span list");
        let span = spans.iter().find(|s| s["name"] == "reconcile").expect("the reconcile span");
        assert_eq!(span["namespace"], f.ns.as_str(), "{line}");
        assert_eq!(span["instance"], "mcp-01", "the instance's name is in the span: {line}");
    }
    // Where the time goes: the steps' spans close with their timings.
    let closed = |name: &str| lines.iter().any(|l| l["fields"]["message"] == "close" && l["span"]["name"] == name);
    for step in ["plugin", "gather", "apply", "status"] {
        assert!(closed(step), "a closed {step} span in:\n{text}");
    }
    let _ = std::fs::remove_file(log);
}

/// The binary run with `args` (and a pod namespace): it must fail; what it
/// said on stderr.
fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(args)
        .env("POD_NAMESPACE", "provider")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    stderr
}

/// A failing command prints one line with the cause chain, never a
/// backtrace, whatever `RUST_BACKTRACE` says; and a reader of `render` that
/// goes away is not an error.
#[test]
fn failures_are_one_line_for_people() {
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(["init", "--provider-name", "kro", "--plugin", "/nonexistent/plugins/kro.wasm"])
        .env("POD_NAMESPACE", "provider")
        .env("RUST_BACKTRACE", "full")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: plugin /nonexistent/plugins/kro.wasm does not exist"), "{stderr}");
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");

    // The cause chain of a deeper failure, in one line.
    let dir = std::env::temp_dir().join(unique("not-a-plugin"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("broken.wasm"), b"\0asm garbage").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(["render", "--object", "examples/kro.yaml", "--plugin"])
        .arg(dir.join("broken.wasm"))
        .current_dir(plugins::root())
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: loading plugin ") && stderr.contains(": compiling the component: "), "{stderr}");

    // A preview's instances each hold up to a plugin's memory limit: 16
    // at once at most (64 would be 4 GiB of guest memory).
    let stderr = refused(&["diff", "--provider-name", "kro", "--plugin", "a.wasm", "--concurrency", "17"]);
    assert!(stderr.contains("17 is not in 1..=16"), "{stderr}");

    // Metrics over plain HTTP are not called secure: the flag is refused,
    // not ignored.
    let stderr = refused(&["run", "--provider-name", "kro", "--plugin", "a.wasm", "--metrics-secure"]);
    assert!(stderr.starts_with("error: --metrics-secure=true: "), "{stderr}");

    // A canary's cohort by labels its tenants write is taken only when
    // the platform says it trusts them.
    let canary = ["--plugin-canary", "b.wasm", "--canary-selector", "rollout=canary"];
    let stderr = refused(&[&["run", "--provider-name", "kro", "--plugin", "a.wasm"][..], &canary].concat());
    assert!(stderr.contains("which their tenants write"), "{stderr}");

    // `render | head -c1`: the pipe closes early; no panic, no error.
    let mut child = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(["render", "--object", "examples/kro.yaml", "--provider-config", "examples/providerconfig.yaml"])
        .arg("--plugin")
        .arg(plugin_path(plugins::KRO))
        .current_dir(plugins::root())
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The precompiled cache holds native code: an artifact whose bytes were
/// damaged on disk (64 bytes flipped in one made the next start die of
/// SIGSEGV) is compiled again, not run, and a cache others may write is
/// refused.
#[test]
fn a_damaged_precompiled_plugin_is_compiled_again_and_a_shared_cache_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(unique("plugin-cache"));
    let precompile = || {
        let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
            .arg("precompile")
            .arg("--plugin-cache-dir")
            .arg(&dir)
            .arg(plugin_path(plugins::KRO))
            .output()
            .expect("runs");
        (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (status, stderr) = precompile();
    assert!(status.success(), "{stderr}");
    let precompiled = dir.join("precompiled");
    let artifacts: Vec<_> = std::fs::read_dir(&precompiled)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let artifact = &artifacts[0];

    let mut damaged = std::fs::read(artifact).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle..middle + 64].iter_mut().for_each(|b| *b ^= 0xff);
    std::fs::write(artifact, &damaged).unwrap();
    let (status, stderr) = precompile();
    assert!(status.success(), "a damaged artifact ended the process: {status:?} {stderr}");
    assert!(stderr.contains("does not match the digest recorded when it was compiled"), "{stderr}");
    assert_ne!(std::fs::read(artifact).unwrap(), damaged, "the damaged artifact was not replaced");
    let (status, stderr) = precompile();
    assert!(status.success() && !stderr.contains("compiling it again"), "the replacement is sound: {stderr}");

    // Writable by others: refused, the directory and then the artifact.
    std::fs::set_permissions(&precompiled, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (status, stderr) = precompile();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("refused, others than its owner may write it (mode 777)"), "{stderr}");
    std::fs::set_permissions(&precompiled, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(artifact, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (status, stderr) = precompile();
    assert!(!status.success() && stderr.contains("(mode 666)"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `service-provider-host <command> --help`, with no inherited environment
/// (clap prints an env variable's value).
fn help(command: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(command)
        .arg("--help")
        .env_clear()
        .output()
        .expect("runs");
    assert!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// `docs/reference/cli.md` is the binary's own `--help` for every command,
/// found by walking the commands each help lists, so the reference cannot
/// disagree with clap nor leave a command out. `UPDATE_CLI_REFERENCE=1`
/// (`task generate`) rewrites it.
#[test]
fn the_cli_reference_is_the_help_of_every_command() {
    let mut reference = String::from(
        "# Command-line reference\n\nGenerated from `service-provider-host <command> --help` by `task generate`\n\
         (`host/tests/it/binary.rs` fails when it is stale). Environment the host reads besides its flags:\n\
         `POD_NAMESPACE` (required for `init`, `run` and `diff`), `POD_NAME`, `KUBECONFIG`, `DOCKER_CONFIG`,\n\
         `RUST_LOG`, `NO_COLOR`, `HTTPS_PROXY`/`NO_PROXY`, and `OTEL_EXPORTER_OTLP_ENDPOINT` with the other\n\
         `OTEL_*` variables (see [operations](../operations.md#environment)).\n",
    );
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut documented = Vec::new();
    while let Some(command) = pending.pop() {
        let text = help(&command);
        let title = ["service-provider-host".to_string()].iter().chain(&command).cloned().collect::<Vec<_>>().join(" ");
        reference.push_str(&format!("\n## `{title}`\n\n```text\n{}\n```\n", text.trim_end()));
        documented.push(title);
        // Depth first, in the order the help lists them.
        for sub in subcommands(&text).into_iter().rev() {
            pending.push(command.iter().cloned().chain([sub]).collect());
        }
    }
    assert!(documented.contains(&"service-provider-host diff".to_string()), "{documented:?}");
    assert!(documented.contains(&"service-provider-host plugin test".to_string()), "{documented:?}");
    let path = plugins::root().join("docs/reference/cli.md");
    if std::env::var_os("UPDATE_CLI_REFERENCE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &reference).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == reference, "{} is stale: run `task generate` and commit it", path.display());
}

/// The workload-echo plugin through the binary: the operator's grant file
/// gives it a workload cluster, where it writes a ConfigMap, and removes it
/// with the instance.
#[tokio::test]
async fn the_workload_plugin_runs_through_the_binary_with_a_grant_file() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true }).await;
    f.provider_config(json!([version("v1", "1")])).await;
    let grant = grant_file("echo");
    let options = ReplicaOptions {
        plugin: plugins::WORKLOAD_ECHO,
        args: vec!["--plugin-grant".into(), grant.display().to_string()],
        ..ReplicaOptions::new("replica-0")
    };
    let replica = Replica::start(&binary(), &f, options);
    assert!(replica.wait_ready(WAIT).await);
    f.create_kro("mcp-01", "v7").await;
    f.wait_ready("mcp-01").await;

    let workload = f.workload.as_ref().unwrap().client().await.unwrap();
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(workload, "default");
    let echo = config_maps.get("echo").await.expect("ConfigMap on the workload cluster");
    assert_eq!(echo.data.unwrap()["version"], "v7");

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(config_maps.get_opt("echo").await.unwrap().is_none(), "removed from the workload cluster");
    assert!(replica.terminate().success());

    let _ = std::fs::remove_file(grant);
}

/// A fixture for the hostile plugin's instances `names`: a ProviderConfig
/// with a chart URL and a pull Secret, as its attacks expect.
pub(crate) async fn hostile_fixture(names: &[&str]) -> Fixture {
    let f = Fixture::new(Options {
        instances: names.iter().map(|n| n.to_string()).collect(),
        flux_ready: false,
        workload: false,
    })
    .await;
    f.source_secret("registry", "kubernetes.io/dockerconfigjson", "{}").await;
    f.provider_config(json!([{"version": "v1", "chartVersion": "1", "chartPullSecret": "registry",
        "chartURL": "oci://registry.example/charts/x"}]))
        .await;
    f
}

/// A `--plugin-grant` file with the test grant for the plugin named `plugin`.
pub(crate) fn grant_file(plugin: &str) -> std::path::PathBuf {
    let grant = std::env::temp_dir().join(format!("{}.yaml", unique("grant")));
    std::fs::write(&grant, plugins::grant_text_for(plugin)).unwrap();
    grant
}

/// A hostile plugin cannot end the host process: malformed output, a
/// sleeping call, a memory bomb and a plan whose allowed fields would cost
/// gigabytes to walk path by path each fail (or are applied for) their own
/// instance, and a healthy instance of the same process gets Ready. What
/// the plugin says forges no line of the text log.
#[tokio::test]
async fn a_hostile_plugin_cannot_end_the_process() {
    let names = ["bad-labels", "sleep-1", "hoard", "fields-bomb", "forge-transient", "healthy-1"];
    let f = hostile_fixture(&names).await;
    let grant = grant_file("hostile");
    let log = std::env::temp_dir().join(format!("{}.log", unique("hostile-host")));
    let options = ReplicaOptions {
        plugin: plugins::HOSTILE,
        args: vec![
            "--plugin-grant".into(),
            grant.display().to_string(),
            "--ungranted-requests".into(),
            "drop".into(),
            "--log-format".into(),
            "text".into(),
        ],
        log: Some(log.clone()),
        ..ReplicaOptions::new("replica-0")
    };
    let mut replica = Replica::start(&binary(), &f, options);
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    for name in names {
        f.create_kro(name, "v1").await;
    }
    f.wait_ready("healthy-1").await;
    for (name, reason) in [
        ("bad-labels", "PluginError"),
        ("sleep-1", "PluginTimeout"),
        ("hoard", "PluginError"),
        ("forge-transient", "PluginError"),
    ] {
        f.wait_kro(name, reason, |k| ready(k)["reason"] == reason).await;
    }
    // The bomb's plan is checked (and applied, or refused by the API
    // server) like any other: what matters is that the process lives on.
    f.wait_kro("fields-bomb", "a status", |k| !ready(k).is_null()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(replica.process.is_running(), "the process is still running");
    let metrics = replica.metrics();
    assert!(
        metrics.contains(&format!(
            "service_provider_host_reconcile_failures_total{{provider=\"{}\",category=\"plugin-timeout\"}}",
            f.provider
        )),
        "{metrics}"
    );
    // Each bound that stopped a call, by the component's digest.
    for kind in ["timeout", "memory"] {
        let stopped = format!(r#"role="plugin",call="plan",kind="{kind}"}} "#);
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("service_provider_host_plugin_calls_stopped_total") && l.contains(&stopped)),
            "{kind}: {metrics}"
        );
    }
    assert!(replica.terminate().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let forged: Vec<&str> = text.lines().filter(|l| l.starts_with("ERROR service_provider_host: forged")).collect();
    assert!(forged.is_empty(), "the plugin forged log lines: {forged:?}");
    assert!(!text.contains('\u{1b}'), "a terminal escape reached the log");
    assert!(text.contains("upstream failed"), "the plugin's error is logged: {text}");
    let _ = std::fs::remove_file(log);
}
