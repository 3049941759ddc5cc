//! Connection pools shared by the clients of one API server.
//!
//! Every instance reaches its ControlPlane with its own kubeconfig (its own
//! token), so the host builds one client per instance. A kube `Client` built
//! the usual way carries its own TLS configuration and its own connection
//! pool, tens of KiB each, and new connections (a TLS handshake) for every
//! client: memory that grew with every instance, busy or not (the
//! heap profile at 500 instances put more than half of the host's peak heap
//! there).
//!
//! Here the clients of one server with the same TLS parameters (server URL,
//! CA, server name, client certificate) share one pool: credentials are
//! added per request by each client's own auth layer, a connection is only
//! transport. A client certificate is part of the key, so a TLS identity is
//! never shared. Idle connections close after [`IDLE_CONNECTION`]; a pool
//! nobody asked for during [`IDLE_CONNECTION`] is dropped
//! ([`Pools::evict_idle`]), so memory follows the servers in use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper_rustls::HttpsConnector;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::Config;
use kube::client::{Body, ConfigExt};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

/// How long an unused connection stays open.
pub const IDLE_CONNECTION: Duration = Duration::from_secs(30);

type Connector = TimeoutConnector<HttpsConnector<HttpConnector>>;

/// One server's connections.
pub type Pool = hyper_util::client::legacy::Client<Connector, Body>;

/// What decides whether two configurations may share connections.
type Key = [u8; 32];

fn key(config: &Config) -> Key {
    let mut hasher = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(config.cluster_url.to_string().as_bytes());
    for cert in config.root_cert.iter().flatten() {
        part(cert);
    }
    part(config.tls_server_name.as_deref().unwrap_or_default().as_bytes());
    part(&[u8::from(config.accept_invalid_certs)]);
    let auth = &config.auth_info;
    part(auth.client_certificate_data.as_deref().unwrap_or_default().as_bytes());
    part(auth.client_key_data.as_ref().map(|k| k.expose_secret().as_bytes()).unwrap_or_default());
    hasher.finalize().into()
}

/// A pool and when a client last asked for it.
struct Kept {
    pool: Arc<Pool>,
    used: Instant,
}

/// The pools, by TLS parameters. Clients are built for one reconcile and
/// dropped with it; the pools (and their open connections) outlive them.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<HashMap<Key, Kept>>,
}

impl Pools {
    /// The pool for `config`'s server, shared with every client that
    /// connects the same way.
    pub fn pool(&self, config: &Config) -> Result<Arc<Pool>, kube::Error> {
        let key = key(config);
        let mut pools = self.pools.lock().expect("not poisoned");
        if let Some(kept) = pools.get_mut(&key) {
            kept.used = Instant::now();
            return Ok(kept.pool.clone());
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(config.connect_timeout);
        let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
        connector.set_read_timeout(config.read_timeout);
        connector.set_write_timeout(config.write_timeout);
        let pool = Arc::new(
            hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .pool_idle_timeout(IDLE_CONNECTION)
                // Without a timer, idle connections are only noticed when
                // the pool is next used.
                .pool_timer(TokioTimer::new())
                .build(connector),
        );
        pools.insert(key, Kept { pool: pool.clone(), used: Instant::now() });
        Ok(pool)
    }

    /// Drops the pools no client asked for during `idle` and none holds;
    /// returns how many are left.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        let mut pools = self.pools.lock().expect("not poisoned");
        pools.retain(|_, kept| kept.used.elapsed() < idle || Arc::strong_count(&kept.pool) > 1);
        pools.len()
    }
}

/// The innermost service of a client: its share of a pool.
pub fn service(
    pool: Arc<Pool>,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<hyper::body::Incoming>,
    Error = hyper_util::client::legacy::Error,
    Future = hyper_util::client::legacy::ResponseFuture,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<Body>| pool.request(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server: &str) -> Config {
        Config::new(server.parse().expect("a URL"))
    }

    #[tokio::test]
    async fn one_pool_per_server_dropped_only_when_idle_and_unheld() {
        let pools = Pools::default();
        let a = pools.pool(&config("https://a.example:6443")).expect("pool");
        let again = pools.pool(&config("https://a.example:6443")).expect("pool");
        assert!(Arc::ptr_eq(&a, &again), "the same server shares one pool");
        let b = pools.pool(&config("https://b.example:6443")).expect("pool");
        assert!(!Arc::ptr_eq(&a, &b), "another server has its own");
        assert_eq!(pools.evict_idle(Duration::from_secs(60)), 2, "recently used pools stay");
        drop((again, b));
        // `a` is still held by a client: it stays however idle it is.
        assert_eq!(pools.evict_idle(Duration::ZERO), 1);
        drop(a);
        assert_eq!(pools.evict_idle(Duration::ZERO), 0);
    }
}
