//! What every reconcile shares: the plugin, the clients, the status writer,
//! and the little state the host keeps per instance between reconciles.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::ApiResource;
use kube::runtime::events::Reporter;
use service_provider_sdk::contract::{Cluster, Descriptor};

use crate::clusters::ClientCache;
use crate::grant::Effective;
use crate::metrics::Metrics;
use crate::plan::{Inventory, Planner};
use crate::resource;
use crate::status::StatusWriter;

/// `(namespace, name)` of a service object.
pub type InstanceKey = (String, String);

/// `(kind, name)` of a copy source in the pod namespace.
pub type Source = (String, String);

/// Everything a reconcile needs; shared by all reconciles.
pub struct Context {
    /// The plugin and what it was granted.
    pub planner: Planner,
    /// `--provider-name`: the ProviderConfig to use and the owner label value.
    pub provider_name: String,
    pub pod_namespace: String,
    pub field_manager: String,
    pub platform: Client,
    pub onboarding: Client,
    pub status: StatusWriter,
    pub metrics: Arc<Metrics>,
    pub service: ApiResource,
    pub provider_config: ApiResource,
    pub clients: ClientCache,
    /// Only service objects in this onboarding namespace (all when `None`).
    pub watch_namespace: Option<String>,
    /// Secrets in the pod namespace that are the host's own credentials
    /// (its onboarding kubeconfigs): never copied, whatever is allowed.
    pub reserved_secrets: Vec<String>,
    /// Per-instance memory of the last reconciles.
    pub instances: InstanceState,
    /// During deletion, how long a granted cluster that does not answer is
    /// waited for before the instance is cleaned up without it.
    pub unreachable_grace: Duration,
}

/// Default of [`Context::unreachable_grace`].
pub const UNREACHABLE_GRACE: Duration = Duration::from_secs(300);

impl Context {
    pub fn new(
        planner: Planner,
        provider_name: String,
        pod_namespace: String,
        platform: Client,
        onboarding: Client,
        reporter: Reporter,
        metrics: Arc<Metrics>,
    ) -> Self {
        let d = planner.descriptor();
        let service = resource::of_kind(&d.service);
        let provider_config = resource::of_kind(&d.provider_config);
        Context {
            field_manager: format!("service-provider-host/{provider_name}"),
            status: StatusWriter { onboarding: onboarding.clone(), service: service.clone(), reporter },
            planner,
            provider_name,
            pod_namespace,
            platform,
            onboarding,
            metrics,
            service,
            provider_config,
            clients: ClientCache::default(),
            watch_namespace: None,
            reserved_secrets: Vec::new(),
            instances: InstanceState::default(),
            unreachable_grace: UNREACHABLE_GRACE,
        }
    }

    pub fn descriptor(&self) -> &Descriptor {
        self.planner.descriptor()
    }

    pub fn granted(&self) -> &Effective {
        &self.planner.granted
    }
}

/// What the host remembers about instances between reconciles. All of it
/// can be lost (a restart): it only saves work and makes watches precise.
#[derive(Default)]
pub struct InstanceState {
    /// The sources `(kind, name)` each instance's last plan copies.
    source_users: Mutex<HashMap<InstanceKey, BTreeSet<Source>>>,
    /// Consecutive failures per instance, for exponential backoff.
    failures: Mutex<HashMap<InstanceKey, u32>>,
    /// The inventory each instance was last pruned against.
    inventories: Mutex<HashMap<InstanceKey, Inventory>>,
    /// Instances whose clusters have the plugin's CRDs (since this start).
    crds: Mutex<BTreeSet<InstanceKey>>,
    /// Since when a cluster of an instance has not answered (while deleting).
    unreachable: Mutex<HashMap<(InstanceKey, Cluster), Instant>>,
}

impl InstanceState {
    /// Records which sources an instance's plan copies.
    pub fn set_sources(&self, key: &InstanceKey, sources: BTreeSet<Source>) {
        self.source_users.lock().expect("not poisoned").insert(key.clone(), sources);
    }

    /// Instances whose last plan copies the object `kind`/`name` from the
    /// pod namespace.
    pub fn users_of_source(&self, kind: &str, name: &str) -> Vec<InstanceKey> {
        let users = self.source_users.lock().expect("not poisoned");
        let source = (kind.to_string(), name.to_string());
        users.iter().filter(|(_, sources)| sources.contains(&source)).map(|(k, _)| k.clone()).collect()
    }

    /// One more failure; returns how many in a row.
    pub fn failed(&self, key: &InstanceKey) -> u32 {
        let mut failures = self.failures.lock().expect("not poisoned");
        let n = failures.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    pub fn succeeded(&self, key: &InstanceKey) {
        self.failures.lock().expect("not poisoned").remove(key);
    }

    /// Whether `inventory` differs from the one last pruned against.
    pub fn inventory_changed(&self, key: &InstanceKey, inventory: &Inventory) -> bool {
        self.inventories.lock().expect("not poisoned").get(key) != Some(inventory)
    }

    pub fn pruned(&self, key: &InstanceKey, inventory: Inventory) {
        self.inventories.lock().expect("not poisoned").insert(key.clone(), inventory);
    }

    pub fn crds_installed(&self, key: &InstanceKey) -> bool {
        self.crds.lock().expect("not poisoned").contains(key)
    }

    pub fn set_crds_installed(&self, key: &InstanceKey) {
        self.crds.lock().expect("not poisoned").insert(key.clone());
    }

    /// Records that a cluster of an instance did not answer; returns since
    /// when it has not (the first such record since it last answered).
    pub fn unanswered(&self, key: &InstanceKey, cluster: Cluster) -> Instant {
        *self.unreachable.lock().expect("not poisoned").entry((key.clone(), cluster)).or_insert_with(Instant::now)
    }

    /// Records that a cluster of an instance answered.
    pub fn answered(&self, key: &InstanceKey, cluster: Cluster) {
        self.unreachable.lock().expect("not poisoned").remove(&(key.clone(), cluster));
    }

    /// Forgets an instance (it is gone).
    pub fn forget(&self, key: &InstanceKey) {
        self.source_users.lock().expect("not poisoned").remove(key);
        self.failures.lock().expect("not poisoned").remove(key);
        self.inventories.lock().expect("not poisoned").remove(key);
        self.crds.lock().expect("not poisoned").remove(key);
        self.unreachable.lock().expect("not poisoned").retain(|(k, _), _| k != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ObjectKey;

    fn key(name: &str) -> InstanceKey {
        ("ns".into(), name.into())
    }

    #[test]
    fn source_users_are_exactly_the_instances_that_copy_it() {
        let state = InstanceState::default();
        let source = |kind: &str, name: &str| (kind.to_string(), name.to_string());
        state.set_sources(&key("a"), BTreeSet::from([source("Secret", "pull"), source("ConfigMap", "ca")]));
        state.set_sources(&key("b"), BTreeSet::from([source("Secret", "other")]));
        assert_eq!(state.users_of_source("Secret", "pull"), [key("a")]);
        assert_eq!(state.users_of_source("ConfigMap", "ca"), [key("a")]);
        assert!(state.users_of_source("ConfigMap", "pull").is_empty(), "kinds are told apart");
        state.forget(&key("a"));
        assert!(state.users_of_source("Secret", "pull").is_empty());
    }

    #[test]
    fn failures_count_up_until_a_success() {
        let state = InstanceState::default();
        assert_eq!(state.failed(&key("a")), 1);
        assert_eq!(state.failed(&key("a")), 2);
        state.succeeded(&key("a"));
        assert_eq!(state.failed(&key("a")), 1);
    }

    #[test]
    fn unreachable_since_the_first_unanswered_call_until_an_answer() {
        let state = InstanceState::default();
        let first = state.unanswered(&key("a"), Cluster::ControlPlane);
        assert_eq!(state.unanswered(&key("a"), Cluster::ControlPlane), first);
        assert!(state.unanswered(&key("a"), Cluster::Workload) >= first, "per cluster");
        state.answered(&key("a"), Cluster::ControlPlane);
        assert!(state.unanswered(&key("a"), Cluster::ControlPlane) >= first);
        state.forget(&key("a"));
        assert!(state.unreachable.lock().unwrap().is_empty());
    }

    #[test]
    fn an_unknown_inventory_counts_as_changed() {
        let state = InstanceState::default();
        let one = Inventory::from([ObjectKey {
            cluster: service_provider_sdk::contract::Cluster::Platform,
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("x".into()),
            name: "y".into(),
        }]);
        assert!(state.inventory_changed(&key("a"), &one));
        state.pruned(&key("a"), one.clone());
        assert!(!state.inventory_changed(&key("a"), &one));
        assert!(state.inventory_changed(&key("a"), &Inventory::new()));
    }
}
