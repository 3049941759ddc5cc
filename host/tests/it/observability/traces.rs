//! A reconcile's trace, sent over OTLP by the host process configured with
//! the standard variables only, read back from Jaeger's query API.

use std::time::{Duration, Instant};

use host_test_support::process::{Replica, ReplicaOptions};
use host_test_support::*;
use serde_json::{Value, json};
use testbed::jaeger::Jaeger;

use super::binary;

/// A span's tag value (Jaeger keeps attributes as typed tags).
fn tag<'s>(span: &'s Value, key: &str) -> Option<&'s Value> {
    span["tags"].as_array()?.iter().find(|t| t["key"] == key).map(|t| &t["value"])
}

/// One reconcile that applies a plan is one trace: its root span names the
/// instance, the plugin's digest and the outcome; below it, gathering, the
/// plugin's plan call (with its digest and memory), each object applied and
/// the status write. Only the host's spans: nothing of kube-rs or hyper.
#[tokio::test]
async fn a_reconcile_is_one_trace_in_jaeger() {
    let jaeger = Jaeger::start().await.expect("Jaeger");
    let f = Fixture::new(Options { instances: vec!["traced".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let options = ReplicaOptions {
        env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), format!("http://127.0.0.1:{}", jaeger.otlp)),
            ("OTEL_SERVICE_NAME".into(), "sp-host-traced".into()),
            // Export within a fifth of a second instead of five.
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        ],
        ..ReplicaOptions::new("replica-0")
    };
    let replica = Replica::start(&binary(), &f, options);
    assert!(replica.wait_ready(WAIT).await, "readyz never turned 200");
    f.create_kro("traced", "v0.9.1").await;
    f.wait_ready("traced").await;

    let deadline = Instant::now() + WAIT;
    let trace = loop {
        let applied = jaeger.traces("sp-host-traced", "reconcile").into_iter().find(|trace| {
            trace["spans"].as_array().unwrap().iter().any(|s| {
                s["operationName"] == "reconcile"
                    && tag(s, "outcome") == Some(&json!("applied"))
                    && tag(s, "instance") == Some(&json!("traced"))
            })
        });
        if let Some(trace) = applied {
            break trace;
        }
        assert!(Instant::now() < deadline, "no applied reconcile in Jaeger: {}", jaeger.process.log_tail(20));
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let spans = trace["spans"].as_array().unwrap();
    let root: Vec<&Value> = spans.iter().filter(|s| s["references"].as_array().is_none_or(|r| r.is_empty())).collect();
    assert_eq!(root.len(), 1, "one root: {trace:#}");
    let root = root[0];
    assert_eq!(root["operationName"], "reconcile", "{trace:#}");
    let digest = tag(root, "plugin.digest").and_then(Value::as_str).expect("the plugin's digest");
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    assert!(tag(root, "namespace").is_some(), "{root:#}");

    let named = |name: &str| spans.iter().filter(|s| s["operationName"] == name).collect::<Vec<_>>();
    assert_eq!(named("gather").len(), 1, "{trace:#}");
    let calls = named("plugin");
    assert_eq!(calls.len(), 1, "{trace:#}");
    assert_eq!(tag(calls[0], "call"), Some(&json!("plan")));
    assert_eq!(tag(calls[0], "plugin.digest").and_then(Value::as_str), Some(digest));
    assert!(tag(calls[0], "plugin.memory_bytes").and_then(Value::as_i64).is_some_and(|m| m > 0), "{:#}", calls[0]);
    let applied = named("apply");
    assert!(applied.len() >= 2, "one span per object applied: {trace:#}");
    assert!(applied.iter().all(|s| tag(s, "kind").is_some() && tag(s, "name").is_some()), "{trace:#}");
    assert_eq!(named("status").len(), 1, "{trace:#}");
    for span in spans {
        let scope = tag(span, "otel.scope.name").and_then(Value::as_str).unwrap_or_default();
        assert_eq!(scope, "service-provider-host", "only the host's spans: {span:#}");
    }
    let process = &trace["processes"][root["processID"].as_str().unwrap()];
    assert_eq!(process["serviceName"], "sp-host-traced");
    assert!(replica.terminate().success());
}
