//! The operator's HTTP endpoints: `/metrics` (OpenMetrics text) and the
//! probes `/healthz` (the process serves) and `/readyz` (this replica can
//! serve: see [`Health`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

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
    .map_err(|e: std::net::AddrParseError| Error::config(format!("invalid bind address {flag:?}"), Some(e.into())))
}

/// Whether this replica can serve, and in which state it is (the body of
/// `/readyz`).
///
/// Ready means: the plugin is loaded, both clusters answer, and either the
/// controller's caches are synced or the replica stands by for the leader
/// lease. Holding the lease is not required, so that every replica of a
/// Deployment becomes Ready and rolling updates complete.
#[derive(Debug)]
pub struct Health {
    state: Mutex<(bool, String)>,
}

impl Health {
    /// Not ready, `starting`.
    pub fn new() -> Arc<Health> {
        Arc::new(Health { state: Mutex::new((false, "starting".into())) })
    }

    /// Ready, in the state `what`.
    pub fn ready(&self, what: &str) {
        self.set(true, what);
    }

    /// Not ready, because of `why`.
    pub fn not_ready(&self, why: &str) {
        self.set(false, why);
    }

    fn set(&self, ready: bool, what: &str) {
        let mut state = self.state.lock().expect("not poisoned");
        if *state != (ready, what.to_string()) {
            tracing::info!(ready, state = what, "readiness");
            *state = (ready, what.to_string());
        }
    }

    /// `(ready, state)`.
    pub fn get(&self) -> (bool, String) {
        self.state.lock().expect("not poisoned").clone()
    }
}

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

async fn metrics(State(s): State<Shared>) -> ([(&'static str, &'static str); 1], String) {
    ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], s.metrics.encode())
}

async fn ready(State(s): State<Shared>) -> (StatusCode, String) {
    let (ready, what) = s.health.get();
    let code = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, format!("{what}\n"))
}

/// Serves the given endpoints on `addr` until the process ends.
pub async fn serve(
    addr: SocketAddr,
    metrics_endpoint: bool,
    probes: bool,
    state_metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> Result<(), Error> {
    let mut router = Router::new();
    if metrics_endpoint {
        router = router.route("/metrics", get(metrics));
    }
    if probes {
        router = router.route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready));
    }
    let router = router.with_state(Shared { metrics: state_metrics, health });
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::config(format!("cannot listen on {addr}"), Some(e.into())))?;
    axum::serve(listener, router).await.map_err(|e| Error::config(format!("serving on {addr}"), Some(e.into())))
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

    #[test]
    fn health_reports_its_state() {
        let health = Health::new();
        assert_eq!(health.get(), (false, "starting".to_string()));
        health.ready("standing by for the leader lease");
        assert_eq!(health.get(), (true, "standing by for the leader lease".to_string()));
        health.not_ready("onboarding credentials rejected");
        assert!(!health.get().0);
    }
}
