//! What every reconcile shares: the plugin, the clients, the status writer,
//! and the little state the host keeps per instance between reconciles.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::ApiResource;
use kube::runtime::events::Reporter;
use service_provider_sdk::contract::{Cluster, Descriptor};

use super::gather;
use crate::adopt::Adoption;
use crate::clusters::ClientCache;
use crate::instance::Reach;
use crate::metrics::Metrics;
use crate::plugin::grant::Effective;
use crate::plugin::plan::{Inventory, Planner};
use crate::reconcile::budget::Budgets;
use crate::reconcile::status::StatusWriter;
use crate::resource;
use crate::stores::Stores;
use crate::stores::blockers::Blockers;

pub use crate::instance::InstanceKey;

/// `(kind, name)` of a copy source in the pod namespace.
pub type Source = (String, String);

/// Everything a reconcile needs; shared by all reconciles.
pub struct Context {
    /// The plugin and what it was granted.
    pub(crate) planner: Planner,
    /// `--provider-name`: the ProviderConfig to use and the owner label value.
    pub(crate) provider_name: String,
    pub(crate) pod_namespace: String,
    pub(crate) field_manager: String,
    pub(crate) platform: Client,
    pub(crate) onboarding: Client,
    pub(crate) status: StatusWriter,
    /// What each instance may still write ([`crate::reconcile::budget`]); the status
    /// writer holds the same.
    pub(crate) budgets: Arc<Budgets>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) service: ApiResource,
    pub(crate) provider_config: ApiResource,
    pub(crate) clients: ClientCache,
    /// Only service objects in this onboarding namespace (all when `None`).
    pub(crate) watch_namespace: Option<String>,
    /// Secrets in the pod namespace that are the host's own credentials
    /// (its onboarding kubeconfigs): never copied, whatever is allowed.
    pub(crate) reserved_secrets: Vec<String>,
    /// Per-instance memory of the last reconciles.
    pub(crate) instances: InstanceState,
    /// During deletion, how long a granted cluster that does not answer is
    /// waited for before the instance is cleaned up without it.
    pub(crate) unreachable_grace: Duration,
    /// Watches of what blocks a deletion, on the tenant's clusters.
    pub(crate) blockers: Blockers,
    /// What may be taken over from another provider (`--adopt-from`).
    pub(crate) adoption: Adoption,
    /// The group versions whose kinds were checked against the platform's
    /// discovery at start ([`crate::clusters::kinds::check`]); the others are
    /// checked on each tenant cluster.
    pub(crate) platform_versions: BTreeSet<String>,
    /// The watch's stores while the controller runs ([`crate::controller::watch::run`]).
    stores: RwLock<Arc<Stores>>,
}

/// Default of [`Context::unreachable_grace`].
pub const UNREACHABLE_GRACE: Duration = Duration::from_secs(300);

/// How long something checked on a cluster the host does not watch (an
/// object on a ControlPlane, a kubeconfig Secret, a namespace) is trusted
/// to be as it was, unless the instance fails or a `reconcile` operation
/// asks for a full look. Drift there is repaired within this time; what the
/// host watches is repaired at once.
pub const VERIFY_INTERVAL: Duration = Duration::from_secs(600);

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
        let blockers = Blockers::new(planner.plugin.input_limit());
        let budgets = Arc::new(Budgets::default());
        Context {
            field_manager: crate::owner::field_manager(&provider_name),
            status: StatusWriter {
                onboarding: onboarding.clone(),
                service: service.clone(),
                reporter,
                budgets: budgets.clone(),
                metrics: metrics.clone(),
            },
            budgets,
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
            blockers,
            platform_versions: BTreeSet::new(),
            adoption: Adoption::default(),
            stores: RwLock::default(),
        }
    }

    /// The blocker watches, for tests to count (the metrics report them
    /// from outside).
    #[cfg(feature = "test-support")]
    pub fn blockers(&self) -> &Blockers {
        &self.blockers
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

/// What the host remembers about instances between reconciles, one entry
/// per instance. All of it can be lost (a restart): it only saves work and
/// makes watches precise.
#[derive(Default)]
pub struct InstanceState {
    memory: Mutex<HashMap<InstanceKey, Memory>>,
}

/// What the host remembers about one instance.
#[derive(Default)]
struct Memory {
    /// The sources `(kind, name)` its last plan copies.
    sources: BTreeSet<Source>,
    /// Consecutive failures, for exponential backoff.
    failures: u32,
    /// The inventory it was last pruned against.
    inventory: Option<Inventory>,
    /// Whether its clusters have the plugin's CRDs (since this start).
    crds: bool,
    /// Since when each of its clusters has not answered (while deleting).
    unanswered: HashMap<Cluster, Instant>,
    /// What was last found up to date outside the watches.
    verified: Verified,
}

/// What an instance's memo holds: what was found up to date outside the
/// watches, or when something first happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Memo {
    /// A client built from this kubeconfig Secret works.
    Kubeconfig { namespace: String, name: String },
    /// A cluster serves the plugin's kinds of this API version.
    Kinds { cluster: Cluster, api_version: String },
    /// An object applied, or a copy made, on a cluster the host does not
    /// watch is as wanted (its digest says what was wanted).
    Step { cluster: Cluster, what: String },
    /// A teardown object is gone.
    Gone { cluster: Cluster, what: String },
    /// A cluster answered (while deleting).
    Answers(Cluster),
    /// This process requested the instance's access.
    AccessRequested,
}

/// Per instance: memo → (digest of what was wanted, if anything; when).
type Verified = HashMap<Memo, (Option<u64>, Instant)>;

impl InstanceState {
    /// Changes what is remembered of `key`.
    fn change<R>(&self, key: &InstanceKey, f: impl FnOnce(&mut Memory) -> R) -> R {
        f(self.memory.lock().expect("not poisoned").entry(key.clone()).or_default())
    }

    /// Reads what is remembered of `key` (nothing yet reads as a new
    /// instance's memory).
    fn read<R>(&self, key: &InstanceKey, f: impl FnOnce(&Memory) -> R) -> R {
        match self.memory.lock().expect("not poisoned").get(key) {
            Some(memory) => f(memory),
            None => f(&Memory::default()),
        }
    }

    /// Records which sources an instance's plan copies.
    pub fn set_sources(&self, key: &InstanceKey, sources: BTreeSet<Source>) {
        self.change(key, |m| m.sources = sources);
    }

    /// Instances whose last plan copies the object `kind`/`name` from the
    /// pod namespace.
    pub fn users_of_source(&self, kind: &str, name: &str) -> Vec<InstanceKey> {
        let memory = self.memory.lock().expect("not poisoned");
        let source = (kind.to_string(), name.to_string());
        memory.iter().filter(|(_, m)| m.sources.contains(&source)).map(|(k, _)| k.clone()).collect()
    }

    /// Whether `memo` was found true within [`VERIFY_INTERVAL`].
    pub fn is_verified(&self, key: &InstanceKey, memo: &Memo) -> bool {
        self.is_verified_as(key, memo, None)
    }

    /// Whether `memo`, wanted as `digest`, was found up to date within
    /// [`VERIFY_INTERVAL`].
    pub fn is_verified_as(&self, key: &InstanceKey, memo: &Memo, digest: Option<u64>) -> bool {
        self.read(key, |m| m.verified.get(memo).is_some_and(|(d, at)| *d == digest && at.elapsed() < VERIFY_INTERVAL))
    }

    /// Records `memo` unless it is recorded already: the time of its first
    /// occurrence, kept until the instance fails or is forgotten.
    pub fn record_first(&self, key: &InstanceKey, memo: Memo) {
        self.change(key, |m| {
            m.verified.entry(memo).or_insert((None, Instant::now()));
        });
    }

    /// Whether `memo` was recorded less than `within` ago.
    pub fn recorded_within(&self, key: &InstanceKey, memo: &Memo, within: Duration) -> bool {
        self.read(key, |m| m.verified.get(memo).is_some_and(|(_, at)| at.elapsed() < within))
    }

    /// Records that `memo` is true.
    pub fn set_verified(&self, key: &InstanceKey, memo: Memo) {
        self.set_verified_as(key, memo, None);
    }

    /// Records that `memo` is up to date as `digest`.
    pub fn set_verified_as(&self, key: &InstanceKey, memo: Memo, digest: Option<u64>) {
        self.change(key, |m| m.verified.insert(memo, (digest, Instant::now())));
    }

    /// Forgets what was verified: the next reconcile looks at everything.
    pub fn unverify(&self, key: &InstanceKey) {
        self.change(key, |m| m.verified.clear());
    }

    /// One more failure; returns how many in a row. What was verified is
    /// no longer trusted.
    pub fn failed(&self, key: &InstanceKey) -> u32 {
        self.change(key, |m| {
            m.verified.clear();
            m.failures = m.failures.saturating_add(1);
            m.failures
        })
    }

    pub fn succeeded(&self, key: &InstanceKey) {
        self.change(key, |m| m.failures = 0);
    }

    /// Whether `inventory` differs from the one last pruned against.
    pub fn inventory_changed(&self, key: &InstanceKey, inventory: &Inventory) -> bool {
        self.read(key, |m| m.inventory.as_ref() != Some(inventory))
    }

    pub fn pruned(&self, key: &InstanceKey, inventory: Inventory) {
        self.change(key, |m| m.inventory = Some(inventory));
    }

    pub fn crds_installed(&self, key: &InstanceKey) -> bool {
        self.read(key, |m| m.crds)
    }

    pub fn set_crds_installed(&self, key: &InstanceKey) {
        self.change(key, |m| m.crds = true);
    }

    /// Records that a cluster of an instance did not answer; returns since
    /// when it has not (the first such record since it last answered).
    pub fn unanswered(&self, key: &InstanceKey, cluster: Cluster) -> Instant {
        self.change(key, |m| *m.unanswered.entry(cluster).or_insert_with(Instant::now))
    }

    /// Records that a cluster of an instance answered.
    pub fn answered(&self, key: &InstanceKey, cluster: Cluster) {
        self.change(key, |m| m.unanswered.remove(&cluster));
    }

    /// Forgets an instance (it is gone): all it remembered, at once.
    pub fn forget(&self, key: &InstanceKey) {
        self.memory.lock().expect("not poisoned").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::plan::ObjectKey;

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
        assert!(state.memory.lock().unwrap().is_empty());
    }

    #[test]
    fn verified_things_are_trusted_until_they_change_or_the_instance_fails() {
        let state = InstanceState::default();
        let x = Memo::Answers(Cluster::ControlPlane);
        assert!(!state.is_verified_as(&key("a"), &x, Some(1)));
        state.set_verified_as(&key("a"), x.clone(), Some(1));
        assert!(state.is_verified_as(&key("a"), &x, Some(1)));
        assert!(!state.is_verified_as(&key("a"), &x, Some(2)), "something else is wanted now");
        assert!(!state.is_verified(&key("a"), &x), "wanted as something, not as nothing");
        assert!(!state.is_verified_as(&key("b"), &x, Some(1)), "per instance");
        state.failed(&key("a"));
        assert!(!state.is_verified_as(&key("a"), &x, Some(1)), "a failure distrusts everything");
        state.set_verified_as(&key("a"), x.clone(), Some(1));
        state.forget(&key("a"));
        assert!(!state.is_verified_as(&key("a"), &x, Some(1)));
    }

    #[test]
    fn a_first_occurrence_keeps_its_time_until_the_instance_fails() {
        let state = InstanceState::default();
        let hour = Duration::from_secs(3600);
        assert!(!state.recorded_within(&key("a"), &Memo::AccessRequested, hour));
        state.record_first(&key("a"), Memo::AccessRequested);
        let first = state.memory.lock().unwrap()[&key("a")].verified[&Memo::AccessRequested].1;
        std::thread::sleep(Duration::from_millis(5));
        state.record_first(&key("a"), Memo::AccessRequested);
        assert_eq!(
            state.memory.lock().unwrap()[&key("a")].verified[&Memo::AccessRequested].1,
            first,
            "the first time is kept"
        );
        assert!(state.recorded_within(&key("a"), &Memo::AccessRequested, hour));
        assert!(!state.recorded_within(&key("a"), &Memo::AccessRequested, Duration::ZERO));
        state.failed(&key("a"));
        assert!(!state.recorded_within(&key("a"), &Memo::AccessRequested, hour));
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
