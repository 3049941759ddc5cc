//! Kubernetes clients for the clusters the host talks to.
//!
//! Every client counts its requests (see [`crate::metrics`]). ControlPlane
//! clients are built from the kubeconfig Secret an AccessRequest names, and
//! the kubeconfig is kept per Secret (the token in it rotates: it is read
//! again when an instance re-verifies its access); the onboarding client of
//! `run` follows its Secret ([`onboarding`]). Kubeconfigs read from a
//! cluster are data only ([`kubeconfig`]): no `exec`, no files. Clients are
//! built per reconcile and share connections per server ([`pools`]), which
//! are dropped when unused for [`POOL_IDLE`].

pub mod kinds;
pub mod kubeconfig;
pub mod onboarding;
pub mod pools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use k8s_openapi::api::core::v1::Secret;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use service_provider_sdk::contract::{Cluster, KubeconfigRef};
use tokio::sync::Notify;
use tower::filter::FilterLayer;
use tower::util::{MapRequestLayer, MapResponseLayer};

use crate::error::{AccessFailure, Cause, Error};
use crate::metrics::Metrics;

/// Counts one request under `cluster`.
fn count(metrics: &Metrics, cluster: &str, request: &Request<Body>) {
    metrics.count_request(cluster, request.method().as_str());
    // `RUST_LOG=service_provider_host::clusters=trace` lists every request:
    // where the counters say "too many", this says which.
    tracing::trace!(cluster, method = %request.method(), uri = %request.uri(), "request");
}

/// Whether a client may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Writes {
    #[default]
    Allowed,
    /// Every request but a read (`GET`, `HEAD`) or a server-side dry run
    /// (`dryRun=All`) fails before it is sent: what a preview uses, whatever
    /// its credentials would allow.
    Refused,
}

/// Passes reads and dry runs; fails every other request before it is sent.
fn read_only(request: Request<Body>) -> Result<Request<Body>, tower::BoxError> {
    let read = matches!(*request.method(), http::Method::GET | http::Method::HEAD);
    let dry_run = request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "dryRun=All"));
    match read || dry_run {
        true => Ok(request),
        false => Err(format!("{} {} refused: this client only reads", request.method(), request.uri().path()).into()),
    }
}

/// A client whose requests are counted under `cluster`.
pub fn client(config: Config, cluster: Cluster, metrics: &Arc<Metrics>) -> Result<Client, Error> {
    client_with(config, cluster, metrics, None, Writes::Allowed)
}

/// Like [`client`]; when `rejected` is given, every `401 Unauthorized`
/// answer notifies it (the credentials expired or were revoked).
pub fn client_with(
    config: Config,
    cluster: Cluster,
    metrics: &Arc<Metrics>,
    rejected: Option<Arc<Notify>>,
    writes: Writes,
) -> Result<Client, Error> {
    let metrics = metrics.clone();
    let label = cluster.as_str();
    let count = MapRequestLayer::new(move |request: Request<Body>| {
        count(&metrics, label, &request);
        request
    });
    let guard = tower::util::option_layer((writes == Writes::Refused).then(|| FilterLayer::new(read_only)));
    let builder = ClientBuilder::try_from(config)
        .map_err(|e| Error::kube(format!("building a {cluster} client"), e))?
        .with_layer(&guard)
        .with_layer(&count);
    Ok(match rejected {
        None => builder.build(),
        Some(rejected) => builder
            .with_layer(&MapResponseLayer::new(move |response: Response<Box<DynBody>>| {
                if response.status() == http::StatusCode::UNAUTHORIZED {
                    rejected.notify_one();
                }
                response
            }))
            .build(),
    })
}

/// A client from kubeconfig text read from a cluster (its current context,
/// inline connection data only; see [`kubeconfig::sanitize`]).
pub async fn client_from_kubeconfig(yaml: &str, cluster: Cluster, metrics: &Arc<Metrics>) -> Result<Client, Error> {
    client_from_kubeconfig_with(yaml, cluster, metrics, Writes::Allowed).await
}

/// Like [`client_from_kubeconfig`], writing or not as `writes` says.
pub async fn client_from_kubeconfig_with(
    yaml: &str,
    cluster: Cluster,
    metrics: &Arc<Metrics>,
    writes: Writes,
) -> Result<Client, Error> {
    let kubeconfig = sanitized(yaml, cluster)?;
    from_kubeconfig(kubeconfig, cluster, metrics, None, writes).await
}

fn sanitized(yaml: &str, cluster: Cluster) -> Result<Kubeconfig, Error> {
    let kubeconfig = Kubeconfig::from_yaml(yaml)
        .map_err(|source| AccessFailure::InvalidKubeconfig { cluster: cluster.to_string(), source })?;
    kubeconfig::sanitize(&kubeconfig).map_err(|reason| {
        AccessFailure::RefusedKubeconfig { cluster: cluster.to_string(), reason: reason.to_string() }.into()
    })
}

/// A client from a kubeconfig file the operator gave (the development
/// override of the onboarding cluster): trusted like `KUBECONFIG`.
pub async fn client_from_operator_kubeconfig(
    yaml: &str,
    cluster: Cluster,
    metrics: &Arc<Metrics>,
    writes: Writes,
) -> Result<Client, Error> {
    let kubeconfig = Kubeconfig::from_yaml(yaml)
        .map_err(|source| AccessFailure::InvalidKubeconfig { cluster: cluster.to_string(), source })?;
    from_kubeconfig(kubeconfig, cluster, metrics, None, writes).await
}

async fn from_kubeconfig(
    kubeconfig: Kubeconfig,
    cluster: Cluster,
    metrics: &Arc<Metrics>,
    rejected: Option<Arc<Notify>>,
    writes: Writes,
) -> Result<Client, Error> {
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| unusable(cluster, e))?;
    client_with(config, cluster, metrics, rejected, writes)
}

/// A kubeconfig that parsed but cannot make a client.
fn unusable(cluster: Cluster, error: impl Into<Cause>) -> Error {
    AccessFailure::Unusable { cluster: cluster.to_string(), source: error.into() }.into()
}

/// The platform cluster: in-cluster config, or `KUBECONFIG` / `~/.kube/config`.
pub async fn platform_client(metrics: &Arc<Metrics>) -> Result<Client, Error> {
    platform_client_with(metrics, Writes::Allowed).await
}

/// Like [`platform_client`], writing or not as `writes` says.
pub async fn platform_client_with(metrics: &Arc<Metrics>, writes: Writes) -> Result<Client, Error> {
    let config = Config::infer().await.map_err(AccessFailure::NoPlatform)?;
    client_with(config, Cluster::Platform, metrics, None, writes)
}

fn secret_key(at: &KubeconfigRef, problem: &'static str) -> AccessFailure {
    AccessFailure::SecretKey { namespace: at.namespace.clone(), name: at.name.clone(), key: at.key.clone(), problem }
}

/// Reads the kubeconfig text out of a Secret.
pub async fn read_kubeconfig(platform: &Client, at: &KubeconfigRef) -> Result<(String, Option<String>), Error> {
    let secret = Api::<Secret>::namespaced(platform.clone(), &at.namespace)
        .get(&at.name)
        .await
        .map_err(|e| Error::kube(format!("reading kubeconfig Secret {}/{}", at.namespace, at.name), e))?;
    let version = secret.metadata.resource_version.clone();
    let bytes = secret.data.and_then(|mut d| d.remove(&at.key)).ok_or_else(|| secret_key(at, "is missing"))?;
    let text = String::from_utf8(bytes.0).map_err(|_| secret_key(at, "is not UTF-8"))?;
    Ok((text, version))
}

/// The largest response body the host reads from a tenant's cluster (a
/// ControlPlane or workload cluster, whose objects the tenant controls): a
/// LIST page of objects with the largest annotations the API server allows
/// would otherwise be read whole into memory. A larger answer is an error
/// of its request; a watch stream is restarted (and relisted) after this
/// much. Requests are paged well below it: an observation reads a quarter
/// of it per page, asking for fewer objects when a page is larger, and
/// parses only what the plugin sees (`gather::list`); a blocker watch lists
/// few enough objects a page that even the largest fit
/// (`stores::blockers::WATCH_PAGE`).
pub const MAX_TENANT_RESPONSE_BYTES: usize = 32 << 20;

/// A Secret's `(namespace, name)`.
type SecretKey = (String, String);

/// How long a connection pool is kept when no client asks for it (see
/// [`pools`]).
pub const POOL_IDLE: Duration = pools::IDLE_CONNECTION;

/// A kubeconfig as last read, and for which cluster. Kept instead of a client: a kube `Client` carries a request
/// queue of its own (about 10 KiB), and one per instance was memory per
/// idle instance. The text is a few KiB; a client is built from it per
/// reconcile on the shared connections of its server.
struct Cached {
    text: Arc<str>,
    cluster: Cluster,
}

/// Kubeconfigs read from Secrets (keyed by the Secret), and the connection
/// pools their clients share; each client's requests are counted in
/// `metrics`.
pub struct ClientCache {
    kubeconfigs: Mutex<HashMap<SecretKey, Cached>>,
    pools: pools::Pools,
    metrics: Arc<Metrics>,
    writes: Writes,
}

impl ClientCache {
    pub fn new(metrics: Arc<Metrics>, writes: Writes) -> Self {
        ClientCache { kubeconfigs: Mutex::default(), pools: pools::Pools::default(), metrics, writes }
    }

    /// A client for the kubeconfig in `at`, read again (one Secret read per
    /// call, to notice rotation).
    pub async fn get(&self, platform: &Client, at: &KubeconfigRef, cluster: Cluster) -> Result<Client, Error> {
        let key = (at.namespace.clone(), at.name.clone());
        let (text, _) = read_kubeconfig(platform, at).await?;
        let client = self.build(&text, cluster).await?;
        self.kubeconfigs.lock().expect("not poisoned").insert(key, Cached { text: text.into(), cluster });
        Ok(client)
    }

    /// A client for the Secret in `at` as last read, without reading it
    /// again; `None` if it was never read.
    pub async fn cached(&self, at: &KubeconfigRef) -> Result<Option<Client>, Error> {
        let key = (at.namespace.clone(), at.name.clone());
        let (text, cluster) = {
            let kubeconfigs = self.kubeconfigs.lock().expect("not poisoned");
            let Some(cached) = kubeconfigs.get(&key) else { return Ok(None) };
            (cached.text.clone(), cached.cluster)
        };
        Ok(Some(self.build(&text, cluster).await?))
    }

    /// A client from kubeconfig text read from a cluster, on the shared
    /// connections of its server.
    async fn build(&self, yaml: &str, cluster: Cluster) -> Result<Client, Error> {
        let config = Config::from_custom_kubeconfig(sanitized(yaml, cluster)?, &KubeConfigOptions::default())
            .await
            .map_err(|e| unusable(cluster, e))?;
        let refused = |e: kube::Error| unusable(cluster, e);
        let pool = self.pools.pool(&config).map_err(refused)?;
        let metrics = self.metrics.clone();
        let label = cluster.as_str();
        let guard = (self.writes == Writes::Refused).then(|| FilterLayer::new(read_only));
        let service = tower::ServiceBuilder::new()
            .option_layer(guard)
            .layer(config.base_uri_layer())
            .option_layer(config.auth_layer().map_err(refused)?)
            .layer(config.extra_headers_layer().map_err(refused)?)
            .layer(MapRequestLayer::new(move |request: Request<Body>| {
                count(&metrics, label, &request);
                request
            }))
            .map_err(tower::BoxError::from)
            .map_response(|response: Response<hyper::body::Incoming>| {
                response.map(|body| http_body_util::Limited::new(body, MAX_TENANT_RESPONSE_BYTES))
            })
            .service(pools::service(pool));
        Ok(Client::new(service, config.default_namespace))
    }

    /// Forgets the kubeconfig of a Secret (e.g. after its AccessRequest is
    /// gone).
    pub fn forget(&self, at: &KubeconfigRef) {
        self.kubeconfigs.lock().expect("not poisoned").remove(&(at.namespace.clone(), at.name.clone()));
    }

    /// Drops the connection pools not used for `idle`; returns how many are
    /// left.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        self.pools.evict_idle(idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, uri: &str) -> Request<Body> {
        Request::builder().method(method).uri(uri).body(Body::empty()).unwrap()
    }

    #[test]
    fn a_read_only_client_sends_reads_and_dry_runs_only() {
        for (method, uri) in [
            ("GET", "/api/v1/namespaces/x/secrets/y"),
            ("GET", "/apis/a/v1/things?watch=true"),
            ("PATCH", "/apis/a/v1/namespaces/x/things/y?fieldManager=m&force=true&dryRun=All"),
        ] {
            assert!(read_only(request(method, uri)).is_ok(), "{method} {uri}");
        }
        for (method, uri) in [
            ("PATCH", "/apis/a/v1/namespaces/x/things/y?fieldManager=m&force=true"),
            ("PATCH", "/apis/a/v1/namespaces/x/things/y?dryRun=Allx"),
            ("POST", "/api/v1/namespaces"),
            ("PUT", "/api/v1/namespaces/x"),
            ("DELETE", "/api/v1/namespaces/x?dryRun=None"),
        ] {
            let refused = read_only(request(method, uri)).unwrap_err().to_string();
            assert!(refused.contains("this client only reads"), "{method} {uri}: {refused}");
        }
    }
}
