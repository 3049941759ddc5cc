//! What the host remembers about each instance between reconciles: one
//! entry per instance, and what it may still write. All of it can be lost
//! (a restart): it only saves work, makes watches precise and bounds
//! writes for a while.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use service_provider_sdk::contract::Cluster;

use crate::keys::InstanceKey;
use crate::plugin::plan::Inventory;
use crate::reconcile::budget::Budgets;

/// `(kind, name)` of a copy source in the pod namespace.
pub type Source = (String, String);

/// How long something checked on a cluster the host does not watch (an
/// object on a ControlPlane, a kubeconfig Secret, a namespace) is trusted
/// to be as it was, unless the instance fails or a `reconcile` operation
/// asks for a full look. Drift there is repaired within this time; what the
/// host watches is repaired at once.
pub const VERIFY_INTERVAL: Duration = Duration::from_secs(600);

/// What the host remembers about instances: one [`Entry`] per instance,
/// and the write budgets ([`crate::reconcile::budget`]) the status writer
/// shares. [`Memory::forget`] drops all of an instance's at once. `run`
/// keeps one for the whole process: new onboarding credentials start the
/// controller again, not its budgets and backoffs.
#[derive(Default)]
pub struct Memory {
    entries: Mutex<HashMap<InstanceKey, Entry>>,
    /// What each instance may still write.
    pub(crate) budgets: Arc<Budgets>,
}

/// What the host remembers about one instance.
#[derive(Default)]
struct Entry {
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
    /// A digest of how the shadow plugin's last answer differed (`None`:
    /// it agreed).
    shadow: Option<u64>,
}

/// What an instance's memo holds: what was found up to date outside the
/// watches, or when something first happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Memo {
    /// A client built from this kubeconfig Secret works.
    Kubeconfig { namespace: String, name: String },
    /// A cluster serves the kinds of this API version as the component of
    /// this digest describes them (a canary's or a candidate's kinds are
    /// checked on their own).
    Kinds { cluster: Cluster, api_version: String, component: String },
    /// An object applied, or a copy made, on a cluster the host does not
    /// watch is as wanted (its digest says what was wanted).
    Step { cluster: Cluster, what: String },
    /// A teardown object is gone.
    Gone { cluster: Cluster, what: String },
    /// A cluster answered (while deleting).
    Answers(Cluster),
    /// This process requested the instance's access.
    AccessRequested,
    /// Its tenant was told that the service object, at this generation, is
    /// too large for the host to read.
    ToldTooLarge { generation: i64 },
}

/// Per instance: memo → (digest of what was wanted, if anything; when).
type Verified = HashMap<Memo, (Option<u64>, Instant)>;

/// The most memos one instance keeps. A plan has at most 256 objects and
/// copies, each with a step and a teardown memo; a plugin that names new
/// objects every round would otherwise grow its memo, and the host's heap,
/// without end. Past it, the oldest steps are forgotten first (costing
/// only a look at the cluster), down to three quarters of it.
pub const MEMOS_PER_INSTANCE: usize = 1024;

/// Holds `verified` to [`MEMOS_PER_INSTANCE`].
fn bound(verified: &mut Verified) {
    if verified.len() <= MEMOS_PER_INSTANCE {
        return;
    }
    let keep = MEMOS_PER_INSTANCE - MEMOS_PER_INSTANCE / 4;
    // Steps and teardowns first (oldest first), then anything oldest.
    let mut order: Vec<(bool, Instant, Memo)> = verified
        .iter()
        .map(|(memo, (_, at))| (!matches!(memo, Memo::Step { .. } | Memo::Gone { .. }), *at, memo.clone()))
        .collect();
    order.sort_by_key(|(lasting, at, _)| (*lasting, *at));
    let excess = verified.len() - keep;
    for (_, _, memo) in order.into_iter().take(excess) {
        verified.remove(&memo);
    }
}

impl Memory {
    /// A memory whose host-wide write budget refills at `host`.
    pub fn new(host: super::budget::Rate) -> Self {
        Memory { entries: Mutex::default(), budgets: Arc::new(Budgets::new(host)) }
    }

    /// Changes what is remembered of `key`.
    fn change<R>(&self, key: &InstanceKey, f: impl FnOnce(&mut Entry) -> R) -> R {
        f(self.entries.lock().expect("not poisoned").entry(key.clone()).or_default())
    }

    /// Reads what is remembered of `key` (nothing yet reads as a new
    /// instance's memory).
    fn read<R>(&self, key: &InstanceKey, f: impl FnOnce(&Entry) -> R) -> R {
        match self.entries.lock().expect("not poisoned").get(key) {
            Some(memory) => f(memory),
            None => f(&Entry::default()),
        }
    }

    /// Records which sources an instance's plan copies.
    pub fn set_sources(&self, key: &InstanceKey, sources: BTreeSet<Source>) {
        self.change(key, |m| m.sources = sources);
    }

    /// Instances whose last plan copies the object `kind`/`name` from the
    /// pod namespace.
    pub fn users_of_source(&self, kind: &str, name: &str) -> Vec<InstanceKey> {
        let entries = self.entries.lock().expect("not poisoned");
        let source = (kind.to_string(), name.to_string());
        entries.iter().filter(|(_, m)| m.sources.contains(&source)).map(|(k, _)| k.clone()).collect()
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
            bound(&mut m.verified);
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
        self.change(key, |m| {
            m.verified.insert(memo, (digest, Instant::now()));
            bound(&mut m.verified);
        });
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

    /// Records how the shadow's answer differs now (a digest of the
    /// differences, `None` when it agrees); whether that is a difference
    /// not recorded just before (one Event and count per change, not per
    /// reconcile).
    pub fn shadow_differs_anew(&self, key: &InstanceKey, differences: Option<u64>) -> bool {
        self.change(key, |m| {
            let anew = differences.is_some() && m.shadow != differences;
            m.shadow = differences;
            anew
        })
    }

    /// Forgets an instance (it is gone): all it remembered and its write
    /// budgets, at once.
    pub fn forget(&self, key: &InstanceKey) {
        self.entries.lock().expect("not poisoned").remove(key);
        self.budgets.forget(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::plan::ObjectKey;

    fn key(name: &str) -> InstanceKey {
        InstanceKey::new("ns", name)
    }

    #[test]
    fn an_instances_memo_is_bounded_and_forgets_old_steps_first() {
        let memory = Memory::default();
        let k = key("a");
        memory.record_first(&k, Memo::AccessRequested);
        let step = |i: usize| Memo::Step { cluster: Cluster::ControlPlane, what: format!("Namespace ns-{i}") };
        for i in 0..5_000 {
            memory.set_verified_as(&k, step(i), Some(i as u64));
        }
        let held = memory.read(&k, |m| m.verified.len());
        assert!(held <= MEMOS_PER_INSTANCE, "{held} memos held");
        assert!(memory.is_verified_as(&k, &step(4_999), Some(4_999)), "the newest step is kept");
        assert!(!memory.is_verified_as(&k, &step(0), Some(0)), "the oldest step is forgotten");
        assert!(memory.recorded_within(&k, &Memo::AccessRequested, VERIFY_INTERVAL), "a lasting memo is kept");
    }

    #[test]
    fn source_users_are_exactly_the_instances_that_copy_it() {
        let state = Memory::default();
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
    fn forgetting_an_instance_forgets_its_write_budgets_too() {
        let memory = Memory::default();
        memory.budgets.spend(&key("a"), Cluster::Platform, 4 << 20);
        memory.budgets.spend(&key("b"), Cluster::Platform, 4 << 20);
        assert!(memory.budgets.wait(&key("a"), Cluster::Platform).is_some(), "in debt");
        memory.forget(&key("a"));
        assert_eq!(memory.budgets.wait(&key("a"), Cluster::Platform), None, "a new instance of that name starts full");
        assert!(memory.budgets.wait(&key("b"), Cluster::Platform).is_some(), "per instance");
    }

    #[test]
    fn failures_count_up_until_a_success() {
        let state = Memory::default();
        assert_eq!(state.failed(&key("a")), 1);
        assert_eq!(state.failed(&key("a")), 2);
        state.succeeded(&key("a"));
        assert_eq!(state.failed(&key("a")), 1);
    }

    #[test]
    fn unreachable_since_the_first_unanswered_call_until_an_answer() {
        let state = Memory::default();
        let first = state.unanswered(&key("a"), Cluster::ControlPlane);
        assert_eq!(state.unanswered(&key("a"), Cluster::ControlPlane), first);
        assert!(state.unanswered(&key("a"), Cluster::Workload) >= first, "per cluster");
        state.answered(&key("a"), Cluster::ControlPlane);
        assert!(state.unanswered(&key("a"), Cluster::ControlPlane) >= first);
        state.forget(&key("a"));
        assert!(state.entries.lock().unwrap().is_empty());
    }

    #[test]
    fn verified_things_are_trusted_until_they_change_or_the_instance_fails() {
        let state = Memory::default();
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
        let state = Memory::default();
        let hour = Duration::from_secs(3600);
        assert!(!state.recorded_within(&key("a"), &Memo::AccessRequested, hour));
        state.record_first(&key("a"), Memo::AccessRequested);
        let first = state.entries.lock().unwrap()[&key("a")].verified[&Memo::AccessRequested].1;
        std::thread::sleep(Duration::from_millis(5));
        state.record_first(&key("a"), Memo::AccessRequested);
        assert_eq!(
            state.entries.lock().unwrap()[&key("a")].verified[&Memo::AccessRequested].1,
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
        let state = Memory::default();
        let one = Inventory::from([ObjectKey {
            cluster: Cluster::Platform,
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
