//! The onboarding cluster client of `run`, following its kubeconfig Secret.
//!
//! openmcp puts the onboarding credentials into the Secret of the provider's
//! AccessRequest and renews them there. A client built once keeps the old
//! token, and once that expires or is revoked every request and every watch
//! fails with `401 Unauthorized` for good. So [`Onboarding`] remembers the
//! kubeconfig it was built from, and [`Onboarding::changed`] resolves with
//! the new one as soon as the Secret holds another; a 401 from the cluster
//! makes it look at the Secret at once and report the rejection.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use service_provider_sdk::contract::{Cluster, KubeconfigRef};
use tokio::sync::Notify;
use tracing::warn;

use super::{from_kubeconfig, read_kubeconfig, sanitized};
use crate::Error;
use crate::metrics::Metrics;

/// The onboarding client and where its credentials come from.
pub struct Onboarding {
    pub client: Client,
    /// The Secret and the kubeconfig text last seen in it; `None` for the
    /// operator's own kubeconfig file (development), which is not followed.
    source: Option<(KubeconfigRef, String)>,
    /// Notified on every 401 answer to `client`.
    rejected: Arc<Notify>,
}

impl Onboarding {
    /// A client from the kubeconfig in the Secret `at` (read from `platform`).
    pub async fn from_secret(platform: &Client, at: KubeconfigRef, metrics: &Arc<Metrics>) -> Result<Self, Error> {
        let (text, _) = read_kubeconfig(platform, &at).await?;
        let rejected = Arc::new(Notify::new());
        let client = build(&text, metrics, &rejected).await?;
        Ok(Onboarding { client, source: Some((at, text)), rejected })
    }

    /// A fixed client (the development override); never changes.
    pub fn fixed(client: Client) -> Self {
        Onboarding { client, source: None, rejected: Arc::new(Notify::new()) }
    }

    /// The kubeconfig Secret followed, if any.
    pub fn secret(&self) -> Option<&KubeconfigRef> {
        self.source.as_ref().map(|(at, _)| at)
    }

    /// Waits until the Secret holds another kubeconfig than the one last
    /// seen and returns it. When the cluster rejects the current credentials
    /// meanwhile, `rejected` is told why (every time it happens).
    pub async fn changed(&self, platform: &Client, rejected: impl Fn(&str)) -> String {
        let Some((at, seen)) = &self.source else {
            return std::future::pending().await;
        };
        let api: Api<Secret> = Api::namespaced(platform.clone(), &at.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", at.name));
        let mut secrets = watcher(api, config).default_backoff().applied_objects().boxed();
        loop {
            tokio::select! {
                event = secrets.next() => match event {
                    Some(Ok(secret)) => match kubeconfig_in(&secret, &at.key) {
                        Some(text) if text != *seen => return text,
                        _ => {}
                    },
                    Some(Err(e)) => warn!(error = %e, secret = %at.name, "watching the onboarding kubeconfig Secret"),
                    None => return std::future::pending().await,
                },
                () = self.rejected.notified() => {
                    rejected(&format!(
                        "the onboarding cluster rejects the credentials of Secret {}/{} (401 Unauthorized); waiting for them to be renewed",
                        at.namespace, at.name
                    ));
                    if let Ok((text, _)) = read_kubeconfig(platform, at).await && text != *seen {
                        return text;
                    }
                }
            }
        }
    }

    /// Switches to the kubeconfig `text` (from [`Self::changed`]). On error
    /// the current client stays, and `text` counts as seen, so only a
    /// further change is reported.
    pub async fn rebuild(&mut self, text: String, metrics: &Arc<Metrics>) -> Result<(), Error> {
        if let Some((_, seen)) = &mut self.source {
            seen.clone_from(&text);
        }
        // A fresh signal: 401s of the old client must not count against the new one.
        let rejected = Arc::new(Notify::new());
        self.client = build(&text, metrics, &rejected).await?;
        self.rejected = rejected;
        Ok(())
    }
}

async fn build(text: &str, metrics: &Arc<Metrics>, rejected: &Arc<Notify>) -> Result<Client, Error> {
    let kubeconfig = sanitized(text, Cluster::Onboarding)?;
    from_kubeconfig(kubeconfig, Cluster::Onboarding, metrics, Some(rejected.clone()), super::Writes::Allowed).await
}

/// The kubeconfig text under `key` of a Secret.
fn kubeconfig_in(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn the_kubeconfig_is_read_from_its_key() {
        let secret = Secret {
            data: Some([("kubeconfig".to_string(), ByteString(b"text".to_vec()))].into()),
            ..Default::default()
        };
        assert_eq!(kubeconfig_in(&secret, "kubeconfig").as_deref(), Some("text"));
        assert_eq!(kubeconfig_in(&secret, "other"), None);
        assert_eq!(kubeconfig_in(&Secret::default(), "kubeconfig"), None);
    }
}
