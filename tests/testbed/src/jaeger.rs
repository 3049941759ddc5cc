//! A trace collector to send OTLP to and read traces back from: Jaeger's
//! all-in-one (`cmd/jaeger`, built by `build-observability-bins.sh`) with
//! in-memory storage, every endpoint on a loopback port of its own, and no
//! traces of its own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::bins::ObservabilityBinaries;
use crate::error::{Error, Result};
use crate::process::{RunDir, ServerProcess, free_port};

pub struct Jaeger {
    pub process: ServerProcess,
    /// OTLP over HTTP: `http://127.0.0.1:{otlp}` is an
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub otlp: u16,
    /// The query API (`/api/traces`).
    pub query: u16,
    _dir: RunDir,
}

impl Jaeger {
    /// Starts one and waits until it is healthy (its OTLP receiver too).
    pub async fn start() -> Result<Jaeger> {
        let bins = ObservabilityBinaries::locate()?;
        let dir = RunDir::create("jaeger")?;
        let (otlp, query, grpc, health) = (free_port()?, free_port()?, free_port()?, free_port()?);
        let config = format!(
            "service:\n  extensions: [jaeger_storage, jaeger_query, healthcheckv2]\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [jaeger_storage_exporter]\n  telemetry:\n    metrics:\n      level: none\n\
             extensions:\n  jaeger_storage:\n    backends:\n      memory:\n        memory:\n          max_traces: 10000\n  jaeger_query:\n    storage:\n      traces: memory\n    enable_tracing: false\n    http:\n      endpoint: 127.0.0.1:{query}\n    grpc:\n      endpoint: 127.0.0.1:{grpc}\n  healthcheckv2:\n    use_v2: true\n    http:\n      endpoint: 127.0.0.1:{health}\n\
             receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{otlp}\n\
             exporters:\n  jaeger_storage_exporter:\n    trace_storage: memory\n"
        );
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).map_err(|e| Error::io(&config_path, e))?;
        let args = ["--config".to_string(), config_path.display().to_string()];
        let mut process = ServerProcess::spawn("jaeger", &bins.jaeger, &args, &dir.path().join("jaeger.log"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while get(health, "/status").is_none_or(|(code, _)| code != 200) {
            if let Some(e) = process.exited_error() {
                return Err(e);
            }
            if Instant::now() > deadline {
                let detail = format!(": {}", process.log_tail(20));
                return Err(Error::Timeout { what: "Jaeger to be healthy".into(), seconds: 60, detail });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Jaeger { process, otlp, query, _dir: dir })
    }

    /// The traces of `service` with a span named `operation`, as the query
    /// API gives them (none while it does not answer).
    pub fn traces(&self, service: &str, operation: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/traces?service={service}&operation={operation}&limit=10000");
        let Some((200, body)) = get(self.query, &path) else { return Vec::new() };
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        answer["data"].as_array().cloned().unwrap_or_default()
    }
}

/// GET over HTTP/1.0: the answer is the body as it is, never chunked.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, response.split_once("\r\n\r\n")?.1.to_string()))
}
