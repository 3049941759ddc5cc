//! What every reconcile shares, in parts: each step takes the parts it
//! needs; the whole is held only by the paths ([`super::live`],
//! [`super::deletion`], and [`super::reach`], which both use) and the
//! controller.
//!
//! | part | what it is |
//! |---|---|
//! | [`Shared::plugin`] | the plugin, its grant and the kinds it serves |
//! | [`Shared::identity`] | who this provider is and what is its own |
//! | [`Shared::clusters`] | the platform and onboarding clients, the tenants' |
//! | [`Shared::memory`] | what the host remembers of each instance |
//! | [`Shared::watches`] | the watches' stores, what blocks deletions |
//! | [`Shared::status`] | the status and Events writer |
//! | [`Shared::rollout`] | the components beside the plugin during an upgrade (a shadow) |
//! | [`Shared::metrics`] | the host's metrics |
//!
//! `controller::shared` builds it, once per controller start.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use kube::api::ApiResource;
use service_provider_sdk::contract::Descriptor;

use super::gather;
use super::memory::Memory;
use super::rollout::Rollout;
use super::status::StatusWriter;
use crate::adopt::Adoption;
use crate::clusters::ClientCache;
use crate::instance::Reach;
use crate::metrics::Metrics;
use crate::plugin::grant::Effective;
use crate::plugin::plan::Planner;
use crate::stores::Stores;
use crate::stores::blockers::Blockers;

/// Everything a reconcile needs; shared by all reconciles.
pub struct Shared {
    pub(crate) plugin: Loaded,
    pub(crate) identity: Identity,
    pub(crate) clusters: Clusters,
    pub(crate) memory: Memory,
    pub(crate) watches: Watches,
    pub(crate) status: StatusWriter,
    pub(crate) rollout: Rollout,
    pub(crate) metrics: Arc<Metrics>,
}

/// The plugin as loaded: the component with its grant, and the kinds it
/// serves.
pub struct Loaded {
    pub(crate) planner: Planner,
    /// The service kind, on the onboarding cluster.
    pub(crate) service: ApiResource,
    /// The ProviderConfig kind, on the platform cluster.
    pub(crate) provider_config: ApiResource,
    /// The group versions whose kinds were checked against the platform's
    /// discovery at start ([`crate::clusters::kinds::check`]); the others are
    /// checked on each tenant cluster.
    pub(crate) platform_versions: BTreeSet<String>,
}

impl Loaded {
    /// The plugin, with the kinds of its descriptor; `platform_versions`
    /// as the platform's discovery checked them.
    pub fn new(planner: Planner, platform_versions: BTreeSet<String>) -> Self {
        let descriptor = planner.descriptor();
        let service = crate::resource::of_kind(&descriptor.service);
        let provider_config = crate::resource::of_kind(&descriptor.provider_config);
        Loaded { planner, service, provider_config, platform_versions }
    }

    pub fn descriptor(&self) -> &Descriptor {
        self.planner.descriptor()
    }

    pub fn granted(&self) -> &Effective {
        &self.planner.granted
    }

    /// Where a gather for this plugin may look (`reach`, then `stores`), and
    /// how much it may bring back.
    pub(crate) fn observer<'a>(&'a self, reach: &'a Reach<'a>, stores: &'a Stores) -> gather::Observer<'a> {
        gather::Observer { reach, stores, granted: self.granted(), input_limit: self.planner.plugin.input_limit() }
    }
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
