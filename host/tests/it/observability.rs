//! What openmcp's observability stack reads of a running host: its
//! controller-runtime alert rules over series scraped from the host
//! (`promtool test rules`), the host's own PrometheusRule and Grafana
//! dashboard (`deploy/monitoring`) against a scrape, and a reconcile's trace
//! read back from a real collector (`observability/traces.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use host_test_support::process::{Launcher, Replica, ReplicaOptions};
use host_test_support::*;
use serde_json::{Value, json};

mod traces;

fn binary() -> Launcher {
    Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into())
}

/// The rules openmcp's observability-stack applies to controller-runtime
/// operators, restated (see the file's header).
const OPENMCP_RULES: &str = include_str!("observability/openmcp-controller-runtime.rules.yaml");
/// The host's own alerts and dashboard.
const HOST_RULES: &str = include_str!("../../../deploy/monitoring/prometheusrule.yaml");
const DASHBOARD: &str = include_str!("../../../deploy/monitoring/grafana-dashboard.json");

/// Scrapes per phase; each stands for one 30 s evaluation of the rules, so
/// 24 cover 12 minutes of rule time: past a 5-minute window and a 5-minute
/// `for`.
const SCRAPES: usize = 24;

/// One scrape: each sample's series (`name{labels}`, as promtool reads it)
/// and value.
type Scrape = BTreeMap<String, String>;

fn parse(text: &str) -> Scrape {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(series, value)| (series.to_string(), value.to_string())))
        .collect()
}

/// promtool's input series: every series of every scrape, one value per
/// scrape (`_` where a scrape did not have it).
fn input_series(scrapes: &[Scrape]) -> Vec<Value> {
    let names: BTreeSet<&String> = scrapes.iter().flat_map(|s| s.keys()).collect();
    names
        .into_iter()
        .map(|series| {
            let values: Vec<&str> = scrapes.iter().map(|s| s.get(series).map_or("_", String::as_str)).collect();
            json!({"series": series, "values": values.join(" ")})
        })
        .collect()
}

/// The groups of a rule file, or of a PrometheusRule's spec.
fn groups(yaml: &str) -> Value {
    let doc: Value = serde_saphyr::from_str(yaml).expect("rules parse");
    doc.get("spec").cloned().unwrap_or(doc)
}

/// Every alert of some rule groups: name and expression.
fn alerts(groups: &Value) -> Vec<(String, String)> {
    groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| Some((r["alert"].as_str()?.to_string(), r["expr"].as_str()?.to_string())))
        .collect()
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(unique(name));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `promtool` with `args`; panics with its output unless it succeeds.
fn promtool(args: &[&str]) -> String {
    let bins = testbed::bins::ObservabilityBinaries::locate().expect("promtool");
    let out = std::process::Command::new(&bins.promtool).args(args).output().expect("promtool runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// Scrapes the replica [`SCRAPES`] times, a second apart, calling `between`
/// before each.
async fn scrape_phase(replica: &Replica, mut between: impl AsyncFnMut(usize)) -> Vec<Scrape> {
    let mut scrapes = Vec::new();
    for i in 0..SCRAPES {
        between(i).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        scrapes.push(parse(&replica.metrics()));
    }
    scrapes
}

/// openmcp's controller-runtime alerts, and the host's own, over a running
/// host: a healthy fleet fires none; an instance that keeps failing (a
/// tenant edits it, the plugin's answer is refused each time) fires the
/// reconcile-error alert and the host's refused-answers alert, and nothing
/// else. Then the host's rules pass `promtool check rules`, and every
/// series the rules and the dashboard read is one the host exports.
#[tokio::test]
async fn openmcp_alerts_fire_as_they_should_and_the_dashboard_resolves() {
    let names = ["healthy-1", "healthy-2", "healthy-3", "bad-labels"];
    let f = super::binary::hostile_fixture(&names).await;
    let grant = super::binary::grant_file("hostile");
    let log_path = std::env::temp_dir().join(unique("obs-log"));
    let options = ReplicaOptions {
        plugin: plugins::HOSTILE,
        // The same component plans along as a shadow: its series are the
        // shadow's, side by side with the plugin's.
        args: [
            "--plugin-grant",
            &grant.display().to_string(),
            "--ungranted-requests",
            "drop",
            "--shadow-plugin",
            &binary().plugin(plugins::HOSTILE).display().to_string(),
            "--shadow-plugin-grant",
            &grant.display().to_string(),
        ]
        .map(String::from)
        .into(),
        log: Some(log_path.clone()),
        ..ReplicaOptions::new("replica-0")
    };
    let replica = Replica::start(&binary(), &f, options);
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    for name in &names[..3] {
        f.create_kro(name, "v1").await;
    }
    for name in &names[..3] {
        f.wait_ready(name).await;
    }

    let healthy = scrape_phase(&replica, async |_| {}).await;
    f.create_kro("bad-labels", "v1").await;
    // A tenant keeps editing it; every edit is a reconcile that fails.
    let failing = scrape_phase(&replica, async |i| {
        f.patch_kro("bad-labels", json!({"spec": {"version": format!("v1.{i}")}})).await;
    })
    .await;
    let last = failing.last().unwrap();

    // What the failing instance did, seen in the series themselves; every
    // host series names the provider.
    let provider = format!("provider=\"{}\"", f.provider);
    let limit = format!("service_provider_host_plugin_limit{{{provider},plugin=\"hostile\",digest=\"");
    let digest = last
        .keys()
        .find_map(|s| s.strip_prefix(&limit))
        .and_then(|rest| rest.split('"').next())
        .expect("the plugin's limits are exported")
        .to_string();
    let refused = format!(
        "service_provider_host_plugin_answers_refused_total{{{provider},plugin=\"hostile\",digest=\"{digest}\",role=\"plugin\",call=\"plan\",kind=\"invalid-plan\"}}"
    );
    let unlabelled = last.keys().filter(|s| s.starts_with("service_provider_host_") && !s.contains(&provider));
    assert_eq!(unlabelled.collect::<Vec<_>>(), Vec::<&String>::new(), "host series without the provider");
    if !last.get(&refused).is_some_and(|v| v.parse::<f64>().unwrap() >= 10.0) {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("{refused} in {last:#?}\nthe instance: {:#?}\nthe host's log: {log}", f.kro("bad-labels").await);
    }
    let errors = "controller_runtime_reconcile_errors_total{controller=\"kro\"}";
    let count = |scrape: &Scrape| scrape.get(errors).map_or(0.0, |v| v.parse::<f64>().unwrap());
    assert!(count(last) > count(healthy.last().unwrap()), "{last:#?}");

    // promtool over the scraped series: each scrape one 30 s step.
    let (openmcp, host) = (groups(OPENMCP_RULES), groups(HOST_RULES));
    let rule_files = [
        write_temp("openmcp-rules.yaml", &serde_json::to_string(&openmcp).unwrap()),
        write_temp("host-rules.yaml", &serde_json::to_string(&host).unwrap()),
    ];
    let every_alert: Vec<String> = alerts(&openmcp).into_iter().chain(alerts(&host)).map(|(a, _)| a).collect();
    let expect = |firing: &BTreeMap<&str, Value>| -> Vec<Value> {
        every_alert
            .iter()
            .flat_map(|alert| {
                ["4m", "11m"].map(|at| {
                    let exp = match firing.get(alert.as_str()) {
                        Some(alerts) if at == "11m" => alerts.clone(),
                        // Pending at 4m, not firing: what fires must have
                        // held for 5 minutes.
                        Some(_) => json!([]),
                        None => json!([]),
                    };
                    json!({"eval_time": at, "alertname": alert, "exp_alerts": exp})
                })
            })
            .collect()
    };
    let firing = BTreeMap::from([
        (
            "ControllerReconcileErrors",
            json!([{
                "exp_labels": {"controller": "kro", "severity": "warning", "component": "deployment", "inhibit_alert": "true"},
                "exp_annotations": {"summary": "Controller kro fails reconciles"},
            }]),
        ),
        (
            "ServiceProviderPluginAnswersRefused",
            ["plugin", "shadow"]
                .map(|role| {
                    json!({
                        "exp_labels": {"provider": f.provider, "plugin": "hostile", "digest": digest, "role": role, "kind": "invalid-plan", "severity": "warning"},
                        "exp_annotations": {
                            "summary": format!("The host refuses what plugin hostile ({role} {digest}) answers: invalid-plan"),
                            "description": host["groups"][0]["rules"][1]["annotations"]["description"],
                        },
                    })
                })
                .into_iter()
                .collect(),
        ),
    ]);
    let tests = json!({
        "rule_files": rule_files,
        "evaluation_interval": "30s",
        "tests": [
            {"name": "a healthy fleet", "interval": "30s", "input_series": input_series(&healthy),
             "alert_rule_test": expect(&BTreeMap::new())},
            {"name": "an instance that keeps failing", "interval": "30s", "input_series": input_series(&failing),
             "alert_rule_test": expect(&firing)},
        ],
    });
    let test_file = write_temp("rule-tests.yaml", &serde_json::to_string(&tests).unwrap());
    promtool(&["test", "rules", &test_file.display().to_string()]);
    promtool(&["check", "rules", &rule_files[1].display().to_string()]);

    // Every series the rules and the dashboard read, against the scrape.
    let exported = Exported::of(&replica.metrics());
    let mut queries: Vec<(String, String)> = alerts(&host);
    queries.extend(dashboard_queries(DASHBOARD));
    assert!(queries.len() > 20, "{queries:?}");
    for (what, query) in &queries {
        let missing = exported.unresolved(query);
        assert!(missing.is_empty(), "{what}: {query}\nreads what the host does not export: {missing:?}");
    }
    assert!(replica.terminate().success());
    for path in rule_files.iter().chain([&test_file, &grant, &log_path]) {
        let _ = std::fs::remove_file(path);
    }
}

/// A tenant's mistake is a failed reconcile, as it is for the Go provider:
/// a Kro asking for a version the ProviderConfig does not offer (a tenant
/// trying one unknown version after another) counts controller-runtime's
/// reconcile errors and `reconcile_failures_total{category="user-input"}`,
/// and openmcp's own `ControllerReconcileErrors` alert fires for it.
#[tokio::test]
async fn a_tenants_unknown_version_fires_openmcps_reconcile_error_alert() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let replica = Replica::start(&binary(), &f, ReplicaOptions::new("replica-0"));
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    f.create_kro("mcp-01", "v9.9.0").await;
    let failing = scrape_phase(&replica, async |i| {
        f.patch_kro("mcp-01", json!({"spec": {"version": format!("v9.9.{}", i + 1)}})).await;
    })
    .await;
    let last = failing.last().unwrap();
    let value = |series: &str| last.get(series).map_or(0.0, |v| v.parse::<f64>().unwrap());
    let user_input = format!(
        "service_provider_host_reconcile_failures_total{{provider=\"{}\",category=\"user-input\"}}",
        f.provider
    );
    assert!(value(&user_input) >= 10.0, "{user_input} in {last:#?}");
    assert!(value("controller_runtime_reconcile_errors_total{controller=\"kro\"}") >= 10.0, "{last:#?}");
    let kro = f.kro("mcp-01").await.expect("the Kro");
    assert_eq!(ready(&kro)["reason"], "ReconcileError", "{kro:#}");

    let openmcp = groups(OPENMCP_RULES);
    let rules = write_temp("openmcp-rules.yaml", &serde_json::to_string(&openmcp).unwrap());
    let alert_tests: Vec<Value> = alerts(&openmcp)
        .into_iter()
        .map(|(alert, _)| {
            let exp = match alert.as_str() {
                "ControllerReconcileErrors" => json!([{
                    "exp_labels": {"controller": "kro", "severity": "warning", "component": "deployment", "inhibit_alert": "true"},
                    "exp_annotations": {"summary": "Controller kro fails reconciles"},
                }]),
                _ => json!([]),
            };
            json!({"eval_time": "11m", "alertname": alert, "exp_alerts": exp})
        })
        .collect();
    let tests = json!({
        "rule_files": [rules],
        "evaluation_interval": "30s",
        "tests": [{"name": "a tenant's unknown version", "interval": "30s",
                   "input_series": input_series(&failing), "alert_rule_test": alert_tests}],
    });
    let test_file = write_temp("rule-tests.yaml", &serde_json::to_string(&tests).unwrap());
    promtool(&["test", "rules", &test_file.display().to_string()]);
    assert!(replica.terminate().success());
    for path in [&rules, &test_file] {
        let _ = std::fs::remove_file(path);
    }
}

/// Every panel's queries: (panel title, expression), with Grafana's
/// `$__rate_interval` as a duration.
fn dashboard_queries(json: &str) -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is JSON");
    let mut found = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "5m");
            found.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["query"]["query"].as_str() {
            // label_values(<selector>, <label>): the selector must resolve.
            let selector = query.strip_prefix("label_values(").and_then(|q| q.rsplit_once(',')).map(|(s, _)| s);
            found.push((format!("variable {}", variable["name"]), selector.unwrap_or(query).to_string()));
        }
    }
    found
}

/// What one scrape exports: each family's samples (name and labels).
struct Exported {
    /// Sample name -> the label sets it has.
    samples: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// Names of families declared (`# TYPE`), with their sample names
    /// (`_total`, `_bucket`…), whether or not they have samples yet.
    declared: BTreeSet<String>,
}

/// Labels Prometheus adds when it scrapes (the pod's namespace, the job…).
const TARGET_LABELS: [&str; 4] = ["namespace", "pod", "job", "instance"];

impl Exported {
    fn of(text: &str) -> Exported {
        let mut samples: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        let mut declared = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    _ => &[""],
                };
                declared.extend(suffixes.iter().map(|s| format!("{name}{s}")));
                continue;
            }
            let Some((series, _)) = line.rsplit_once(' ') else { continue };
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels
                .trim_end_matches('}')
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| pair.split_once("=\""))
                .map(|(k, v)| (k.to_string(), v.trim_end_matches('"').to_string()))
                .collect();
            samples.entry(name.to_string()).or_default().push(labels);
        }
        Exported { samples, declared }
    }

    /// The selectors of `query` that name no series of the scrape: an
    /// unknown metric, or (where the metric has samples) a label it never
    /// has or a fixed value no sample has.
    fn unresolved(&self, query: &str) -> Vec<String> {
        use promql_parser::parser::{self, Expr};
        use promql_parser::util::visitor::{ExprVisitor, walk_expr};
        struct Selectors(Vec<parser::VectorSelector>);
        impl ExprVisitor for Selectors {
            type Error = ();
            fn pre_visit(&mut self, expr: &Expr) -> Result<bool, ()> {
                match expr {
                    Expr::VectorSelector(s) => self.0.push(s.clone()),
                    Expr::MatrixSelector(m) => self.0.push(m.vs.clone()),
                    _ => {}
                }
                Ok(true)
            }
        }
        let expr = parser::parse(query).unwrap_or_else(|e| panic!("{query}: {e}"));
        let mut selectors = Selectors(Vec::new());
        walk_expr(&mut selectors, &expr).unwrap();
        let mut missing = Vec::new();
        for selector in selectors.0 {
            let name = selector.name.clone().unwrap_or_default();
            if !self.declared.contains(&name) {
                missing.push(format!("{name}: not exported"));
                continue;
            }
            let Some(samples) = self.samples.get(&name) else { continue };
            for m in selector.matchers.matchers.iter().filter(|m| m.name != "__name__") {
                if TARGET_LABELS.contains(&m.name.as_str()) {
                    continue;
                }
                if !samples.iter().any(|labels| labels.contains_key(&m.name)) {
                    missing.push(format!("{name}: no label {}", m.name));
                } else if !m.value.contains('$') && !samples.iter().any(|l| m.is_match(l.get(&m.name).unwrap())) {
                    missing.push(format!("{name}: no sample with {}", m.name));
                }
            }
        }
        missing
    }
}

#[test]
fn a_query_of_something_the_host_does_not_export_is_found() {
    let scrape = "# TYPE service_provider_host_limited counter\n\
        # TYPE workqueue_depth gauge\nworkqueue_depth{name=\"kro\",controller=\"kro\"} 0\n";
    let exported = Exported::of(scrape);
    assert!(exported.unresolved("sum(rate(service_provider_host_limited_total[5m]))").is_empty());
    assert!(exported.unresolved(r#"workqueue_depth{controller="kro",namespace=~"$namespace"}"#).is_empty());
    assert_eq!(exported.unresolved("rate(workqueue_adds_total[5m])"), ["workqueue_adds_total: not exported"]);
    assert_eq!(exported.unresolved(r#"workqueue_depth{queue="x"}"#), ["workqueue_depth: no label queue"]);
    assert_eq!(exported.unresolved(r#"workqueue_depth{name="flux"}"#), ["workqueue_depth: no sample with name"]);
}
