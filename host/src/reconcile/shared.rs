//! What every reconcile shares, in parts: each step takes the parts it
//! needs; the whole is held only by the paths ([`super::live`],
//! [`super::deletion`], and [`super::reach`], which both use) and the
//! controller.
//!
//! | part | what it is |
//! |---|---|
//! | [`Shared::plugin`] | the plugin, its grant and the kinds it serves ([`Loaded`]) |
//! | [`Shared::identity`] | who this provider is and what is its own |
//! | [`Shared::clusters`] | the platform and onboarding clients, the tenants' |
//! | [`Shared::memory`] | what the host remembers of each instance |
//! | [`Shared::watches`] | the watches' stores, what blocks deletions |
//! | [`Shared::status`] | the status and Events writer |
//! | [`Shared::rollout`] | the components beside the plugin during an upgrade (a canary, a shadow) |
//! | [`Shared::metrics`] | the host's metrics |
//!
//! `controller::shared` builds it, once per controller start.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;

pub use super::loaded::Loaded;
use super::memory::Memory;
use super::rollout::Rollout;
use super::status::StatusWriter;
use crate::adopt::Adoption;
use crate::clusters::ClientCache;
use crate::metrics::Metrics;
use crate::stores::Stores;
use crate::stores::blockers::Blockers;

/// Everything a reconcile needs; shared by all reconciles.
pub struct Shared {
    pub(crate) plugin: Loaded,
    pub(crate) identity: Identity,
    pub(crate) clusters: Clusters,
    pub(crate) memory: Arc<Memory>,
    pub(crate) watches: Watches,
    pub(crate) status: StatusWriter,
    pub(crate) rollout: Rollout,
    pub(crate) metrics: Arc<Metrics>,
}

/// Who this provider is, and what is its own.
pub struct Identity {
    /// `--provider-name`: the ProviderConfig to use and the owner label value.
    pub(crate) provider_name: String,
    /// Where the provider runs: copy sources and onboarding requests.
    pub(crate) pod_namespace: String,
    /// The field manager of everything the host writes.
    pub(crate) field_manager: String,
    /// Secrets in the pod namespace that are the host's own credentials
    /// (its onboarding kubeconfigs): never copied, whatever is allowed.
    pub(crate) reserved_secrets: Vec<String>,
    /// What may be taken over from another provider (`--adopt-from`).
    pub(crate) adoption: Adoption,
}

/// The clusters a reconcile talks to.
pub struct Clusters {
    pub(crate) platform: Client,
    pub(crate) onboarding: Client,
    /// Clients of the tenants' clusters, from their kubeconfig Secrets.
    pub(crate) tenants: ClientCache,
    /// During deletion, how long a granted cluster that does not answer is
    /// waited for before the instance is cleaned up without it.
    pub(crate) unreachable_grace: Duration,
}

/// Default of [`Clusters::unreachable_grace`].
pub const UNREACHABLE_GRACE: Duration = Duration::from_secs(300);

/// What the host watches: the controller's stores while it runs, and what
/// blocks deletions on the tenants' clusters.
pub struct Watches {
    /// Only service objects in this onboarding namespace (all when `None`).
    pub(crate) namespace: Option<String>,
    pub(crate) blockers: Blockers,
    stores: RwLock<Arc<Stores>>,
}

impl Watches {
    /// No stores yet (every lookup unknown); `blockers` bounded as the
    /// plugin's input is.
    pub fn new(namespace: Option<String>, blockers: Blockers) -> Self {
        Watches { namespace, blockers, stores: RwLock::default() }
    }

    /// The stores to read from; empty (every lookup unknown) while no
    /// controller runs.
    pub fn stores(&self) -> Arc<Stores> {
        self.stores.read().expect("not poisoned").clone()
    }

    /// Replaces the stores (a controller starts or stops).
    pub fn set_stores(&self, stores: Stores) {
        *self.stores.write().expect("not poisoned") = Arc::new(stores);
    }
}

impl Shared {
    /// The blocker watches, for tests to count (the metrics report them
    /// from outside).
    #[cfg(feature = "test-support")]
    pub fn blockers(&self) -> &Blockers {
        &self.watches.blockers
    }
}
