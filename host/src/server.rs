//! The operator's HTTP endpoints: `/metrics` (OpenMetrics text) and the
//! probes `/healthz` (the process serves) and `/readyz` (the controller runs).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::Error;
use crate::metrics::Metrics;

/// Parses a bind address the way controller-runtime's flags do: `0` (or
/// empty) disables the endpoint, `:8081` listens on every interface.
pub fn bind_address(flag: &str) -> Result<Option<SocketAddr>, Error> {
    match flag.trim() {
        "" | "0" => Ok(None),
        port if port.starts_with(':') => format!("0.0.0.0{port}").parse().map(Some),
        addr => addr.parse().map(Some),
    }
    .map_err(|e| Error::Config(format!("invalid bind address {flag:?}: {e}")))
}

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
}

async fn metrics(State(s): State<Shared>) -> ([(&'static str, &'static str); 1], String) {
    ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], s.metrics.encode())
}

async fn ready(State(s): State<Shared>) -> StatusCode {
    if s.ready.load(Ordering::Relaxed) { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }
}

/// Serves the given endpoints on `addr` until the process ends.
pub async fn serve(
    addr: SocketAddr,
    metrics_endpoint: bool,
    probes: bool,
    state_metrics: Arc<Metrics>,
    is_ready: Arc<AtomicBool>,
) -> Result<(), Error> {
    let mut router = Router::new();
    if metrics_endpoint {
        router = router.route("/metrics", get(metrics));
    }
    if probes {
        router = router.route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready));
    }
    let router = router.with_state(Shared { metrics: state_metrics, ready: is_ready });
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {addr}: {e}")))?;
    axum::serve(listener, router).await.map_err(|e| Error::Config(format!("serving on {addr}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_follow_controller_runtime_conventions() {
        assert_eq!(bind_address("0").unwrap(), None);
        assert_eq!(bind_address("").unwrap(), None);
        assert_eq!(bind_address(":8081").unwrap(), Some("0.0.0.0:8081".parse().unwrap()));
        assert_eq!(bind_address("127.0.0.1:9090").unwrap(), Some("127.0.0.1:9090".parse().unwrap()));
        assert!(bind_address("nonsense").is_err());
    }
}
