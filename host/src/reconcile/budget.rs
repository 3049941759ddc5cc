//! How much the host writes for one instance, whatever its plugin asks.
//!
//! Every object the host writes is a revision in the etcd of a cluster that
//! every tenant and provider shares (the onboarding cluster's service
//! objects, the platform's Flux objects), kept until the next compaction. A
//! plan that changes a megabyte of status or `values` on every call, with a
//! requeue of a second, would otherwise make the host rewrite it every
//! second for as long as the instance exists, and a handful of such
//! instances fill an etcd quota: the cluster then refuses writes for
//! everyone. So:
//!
//! - each instance has a **write budget per cluster** ([`Budgets`]): a
//!   bucket of bytes that refills at [`Rate::per_minute`] up to
//!   [`Rate::burst`], spent by what the API server stored for each write
//!   (its answer's size). A round goes only when the bucket holds what
//!   the round may write (its objects and the sources of its copies), or
//!   is full; otherwise the instance's writes to that cluster wait (the
//!   status says so, a metric counts it). A round is written whole, and
//!   pruned, so the debt is at most one round (1 MiB of objects and 2 MiB
//!   of copies);
//! - the host as a whole has a budget for each cluster every tenant
//!   shares (onboarding, platform) on top ([`Budgets::new`],
//!   `--cluster-write-mib-per-minute`, [`HOST`] by default): however many
//!   instances a plugin has, what they write together there is held to
//!   it, with the same rule;
//! - a status whose only change is text the plugin reports (messages) is
//!   written at most every [`MESSAGE_INTERVAL`] ([`crate::reconcile::status`]);
//! - a plugin's requeue is at least [`REQUEUE_FLOOR`];
//! - a status is at most [`crate::reconcile::status::MAX_STATUS_BYTES`] and a plan's
//!   objects at most [`crate::plugin::plan::MAX_PLAN_OBJECT_BYTES`].
//!
//! A healthy instance never meets these: the Kro plugin writes a few KiB
//! when an instance is created and nothing while it is unchanged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use service_provider_sdk::contract::Cluster;

use crate::keys::InstanceKey;
use crate::metrics::LabelValue;

/// A bound the host holds an instance to (the `limited` metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A status cut to [`crate::reconcile::status::MAX_STATUS_BYTES`].
    StatusSize,
    /// A plan refused for more than [`crate::plugin::plan::MAX_PLAN_OBJECT_BYTES`].
    PlanSize,
    /// Writes held back for an empty budget.
    WriteRate,
    /// A status write of changed messages only, held for [`MESSAGE_INTERVAL`].
    MessageInterval,
    /// A requeue raised to [`REQUEUE_FLOOR`].
    RequeueFloor,
}

impl Limit {
    pub const ALL: [Limit; 5] =
        [Limit::StatusSize, Limit::PlanSize, Limit::WriteRate, Limit::MessageInterval, Limit::RequeueFloor];
}

impl LabelValue for Limit {
    fn label(self) -> &'static str {
        match self {
            Limit::StatusSize => "status-size",
            Limit::PlanSize => "plan-size",
            Limit::WriteRate => "write-rate",
            Limit::MessageInterval => "message-interval",
            Limit::RequeueFloor => "requeue-floor",
        }
    }
}

/// Whose write budget is spent: the instance's own, or the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Spent {
    Instance,
    Host,
}

/// How fast an instance may write to a cluster: on average
/// `per_minute` bytes, and at most `burst` at once after a quiet time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_minute: usize,
    pub burst: usize,
}

/// The onboarding cluster holds every tenant's service objects: a status
/// and its Events (the status is at most 64 KiB).
pub const ONBOARDING: Rate = Rate { per_minute: 1 << 20, burst: 512 << 10 };
/// The platform cluster (Flux objects, copies) and the tenant's own
/// clusters: a plan is at most 1 MiB of objects.
pub const ELSEWHERE: Rate = Rate { per_minute: 3 << 19, burst: 1 << 20 };

/// What the host as a whole may write to one cluster by default: 32 MiB a
/// minute. The API server compacts etcd every 5 minutes by default, so at
/// most about 200 MiB of the host's revisions wait for a compaction: a
/// tenth of etcd's default 2 GiB quota.
pub const HOST: Rate = Rate { per_minute: 32 << 20, burst: 32 << 20 };

/// The shortest time between two status writes of one instance that change
/// only the text the plugin reports.
pub const MESSAGE_INTERVAL: Duration = Duration::from_secs(10);

/// The shortest requeue a plugin may ask for (0, "on changes only", stays).
pub const REQUEUE_FLOOR: Duration = Duration::from_secs(10);

/// The bytes an Event costs, counted against the onboarding budget (its
/// note is at most 1 KB; the object around it is about as much again).
pub const EVENT_BYTES: usize = 2 << 10;

/// A bucket of bytes: full at `burst`, refilled continuously.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// May fall below zero by the size of the last write.
    bytes: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Bucket {
        Bucket { bytes: rate.burst as f64, at: now }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let per_second = rate.per_minute as f64 / 60.0;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.bytes = (self.bytes + elapsed * per_second).min(rate.burst as f64);
        self.at = now;
    }

    /// How long until the bucket holds `need` bytes, if it does not now.
    fn wait(&self, rate: Rate, need: usize) -> Option<Duration> {
        let per_second = rate.per_minute as f64 / 60.0;
        let need = need as f64;
        (self.bytes < need).then(|| Duration::from_secs_f64((need - self.bytes) / per_second))
    }
}

/// The write budgets of every instance and of the host, and when each
/// instance last had a status written. Kept across the controller's
/// restarts in one process; a new process starts with full budgets: they
/// bound rates, they are not a record.
pub struct Budgets {
    buckets: Mutex<HashMap<(InstanceKey, Cluster), Bucket>>,
    statuses: Mutex<HashMap<InstanceKey, Instant>>,
    /// The host's own bucket per cluster, and its rate.
    host: Mutex<HashMap<Cluster, Bucket>>,
    host_rate: Rate,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets::new(HOST)
    }
}

/// The rate an instance may write to `cluster` at.
pub fn rate(cluster: Cluster) -> Rate {
    match cluster {
        Cluster::Onboarding => ONBOARDING,
        _ => ELSEWHERE,
    }
}

impl Budgets {
    /// Budgets whose host-wide bucket per cluster refills at `host`.
    pub fn new(host: Rate) -> Self {
        Budgets { buckets: Mutex::default(), statuses: Mutex::default(), host: Mutex::default(), host_rate: host }
    }

    /// `None` when the instance may write to `cluster` now; else how long
    /// until it may (its own budget or the host's is spent).
    pub fn wait(&self, key: &InstanceKey, cluster: Cluster) -> Option<Duration> {
        self.held(key, cluster, 1).map(|(wait, _)| wait)
    }

    /// `None` when the instance may write a round of `need` bytes to
    /// `cluster` now: each budget it draws on holds that much, or is full
    /// (a round larger than a budget's burst goes when it is full, and
    /// leaves it in debt by the rest). Else how long until it may, and
    /// whose budget holds it back (the longer wait's).
    pub fn held(&self, key: &InstanceKey, cluster: Cluster, need: usize) -> Option<(Duration, Spent)> {
        self.held_at(key, cluster, need, Instant::now())
    }

    #[cfg(test)]
    fn wait_at(&self, key: &InstanceKey, cluster: Cluster, now: Instant) -> Option<Duration> {
        self.held_at(key, cluster, 1, now).map(|(wait, _)| wait)
    }

    fn held_at(&self, key: &InstanceKey, cluster: Cluster, need: usize, now: Instant) -> Option<(Duration, Spent)> {
        let own =
            wait_of(&self.buckets, (key.clone(), cluster), rate(cluster), need, now).map(|w| (w, Spent::Instance));
        let host = match shared(cluster) {
            true => wait_of(&self.host, cluster, self.host_rate, need, now).map(|w| (w, Spent::Host)),
            false => None,
        };
        own.max(host)
    }

    /// What the host as a whole may write to each cluster.
    pub fn host_rate(&self) -> Rate {
        self.host_rate
    }

    /// Counts `bytes` written for the instance to `cluster`.
    pub fn spend(&self, key: &InstanceKey, cluster: Cluster, bytes: usize) {
        self.spend_at(key, cluster, bytes, Instant::now());
    }

    fn spend_at(&self, key: &InstanceKey, cluster: Cluster, bytes: usize, now: Instant) {
        if bytes == 0 {
            return;
        }
        spend_of(&self.buckets, (key.clone(), cluster), rate(cluster), bytes, now);
        if shared(cluster) {
            spend_of(&self.host, cluster, self.host_rate, bytes, now);
        }
    }

    /// How long ago the instance's status was last written, if this
    /// process wrote it.
    pub fn since_status(&self, key: &InstanceKey) -> Option<Duration> {
        self.statuses.lock().expect("not poisoned").get(key).map(Instant::elapsed)
    }

    /// Records a status write of the instance.
    pub fn status_written(&self, key: &InstanceKey) {
        self.statuses.lock().expect("not poisoned").insert(key.clone(), Instant::now());
    }

    /// Forgets an instance (it is gone).
    pub fn forget(&self, key: &InstanceKey) {
        self.buckets.lock().expect("not poisoned").retain(|(k, _), _| k != key);
        self.statuses.lock().expect("not poisoned").remove(key);
    }
}

/// Whether every tenant writes to `cluster` (the onboarding and platform
/// clusters, whose etcd the host's budget protects), rather than to a
/// cluster of one tenant's own.
fn shared(cluster: Cluster) -> bool {
    matches!(cluster, Cluster::Onboarding | Cluster::Platform)
}

/// How long until the bucket of `entry` holds `need` bytes (or is full, if
/// `need` is more than it holds when full), if it does not now. A full
/// bucket is what no entry means: instances that write nothing for a while
/// cost no memory.
fn wait_of<K: Eq + std::hash::Hash>(
    buckets: &Mutex<HashMap<K, Bucket>>,
    entry: K,
    rate: Rate,
    need: usize,
    now: Instant,
) -> Option<Duration> {
    let mut buckets = buckets.lock().expect("not poisoned");
    let bucket = buckets.get_mut(&entry)?;
    bucket.refill(rate, now);
    let wait = bucket.wait(rate, need.clamp(1, rate.burst));
    if bucket.bytes >= rate.burst as f64 {
        buckets.remove(&entry);
    }
    wait
}

/// Takes `bytes` from the bucket of `entry`.
fn spend_of<K: Eq + std::hash::Hash>(
    buckets: &Mutex<HashMap<K, Bucket>>,
    entry: K,
    rate: Rate,
    bytes: usize,
    now: Instant,
) {
    let mut buckets = buckets.lock().expect("not poisoned");
    let bucket = buckets.entry(entry).or_insert_with(|| Bucket::full(rate, now));
    bucket.refill(rate, now);
    bucket.bytes -= bytes as f64;
}

/// The requeue a plugin asked for, held to [`REQUEUE_FLOOR`]; `None` (only
/// on changes) for 0. The flag says whether the floor raised it.
pub fn requeue(seconds: u32) -> (Option<Duration>, bool) {
    match seconds {
        0 => (None, false),
        s => {
            let asked = Duration::from_secs(u64::from(s));
            (Some(asked.max(REQUEUE_FLOOR)), asked < REQUEUE_FLOOR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> InstanceKey {
        InstanceKey::new("ns", "a")
    }

    #[test]
    fn a_burst_is_allowed_then_writes_wait_for_the_rate() {
        let budgets = Budgets::default();
        let t0 = Instant::now();
        assert_eq!(budgets.wait_at(&key(), Cluster::Platform, t0), None, "a full budget");
        budgets.spend_at(&key(), Cluster::Platform, 900 << 10, t0);
        assert_eq!(budgets.wait_at(&key(), Cluster::Platform, t0), None, "124 KiB left");
        budgets.spend_at(&key(), Cluster::Platform, 900 << 10, t0);
        let wait = budgets.wait_at(&key(), Cluster::Platform, t0).expect("in debt");
        // 776 KiB of debt at 1.5 MiB per minute: about 30 s.
        assert!((29..=31).contains(&wait.as_secs()), "{wait:?}");
        assert_eq!(budgets.wait_at(&key(), Cluster::Platform, t0 + wait + Duration::from_millis(10)), None);
        assert_eq!(budgets.wait_at(&key(), Cluster::Onboarding, t0), None, "per cluster");
        assert_eq!(budgets.wait_at(&InstanceKey::new("ns", "b"), Cluster::Platform, t0), None, "per instance");
    }

    #[test]
    fn no_window_of_a_minute_writes_more_than_burst_rate_and_one_write() {
        // A plugin that writes 900 KB whenever it may, checked every 100 ms.
        let budgets = Budgets::default();
        let t0 = Instant::now();
        let mut writes = Vec::new();
        for tick in 0..3000u64 {
            let now = t0 + Duration::from_millis(100 * tick);
            if budgets.wait_at(&key(), Cluster::Platform, now).is_none() {
                budgets.spend_at(&key(), Cluster::Platform, 900_000, now);
                writes.push(now);
            }
        }
        let bound = ELSEWHERE.burst + ELSEWHERE.per_minute + 900_000;
        for start in &writes {
            let in_window = writes.iter().filter(|w| **w >= *start && **w < *start + Duration::from_secs(60)).count();
            assert!(in_window * 900_000 <= bound, "{in_window} writes in a minute");
        }
        let last_four_minutes = writes.iter().filter(|w| **w >= t0 + Duration::from_secs(60)).count();
        assert!(last_four_minutes * 900_000 <= 4 * ELSEWHERE.per_minute + 900_000, "{last_four_minutes}");
    }

    #[test]
    fn the_host_budget_holds_every_instance_once_their_writes_add_up_to_it() {
        let host = Rate { per_minute: 2 << 20, burst: 2 << 20 };
        let budgets = Budgets::new(host);
        let t0 = Instant::now();
        let instance = |i: usize| -> InstanceKey { InstanceKey::new("ns", format!("i{i}")) };
        // Three instances of 900 KB each: each within its own budget,
        // together over the host's.
        for i in 0..3 {
            assert_eq!(budgets.wait_at(&instance(i), Cluster::Platform, t0), None, "instance {i}");
            budgets.spend_at(&instance(i), Cluster::Platform, 900 << 10, t0);
        }
        for i in [0, 9] {
            let (wait, spent) = budgets.held_at(&instance(i), Cluster::Platform, 1, t0).expect("the host's is spent");
            assert_eq!(spent, Spent::Host, "instance {i}");
            // 652 KiB over at 2 MiB a minute: about 19 s.
            assert!((18..=20).contains(&wait.as_secs()), "{wait:?}");
        }
        assert_eq!(budgets.wait_at(&instance(0), Cluster::Onboarding, t0), None, "per cluster");
        assert_eq!(
            budgets.wait_at(&instance(9), Cluster::ControlPlane, t0),
            None,
            "a tenant's own cluster: no host budget"
        );
        let later = t0 + Duration::from_secs(20);
        assert_eq!(budgets.wait_at(&instance(9), Cluster::Platform, later), None, "refilled");
    }

    #[test]
    fn a_round_goes_when_the_budget_holds_it_or_is_full() {
        let budgets = Budgets::new(Rate { per_minute: 64 << 20, burst: 64 << 20 });
        let t0 = Instant::now();
        let big = 3 << 20;
        assert_eq!(budgets.held_at(&key(), Cluster::Platform, big, t0), None, "a full budget: more than it holds goes");
        budgets.spend_at(&key(), Cluster::Platform, 600 << 10, t0);
        assert_eq!(budgets.held_at(&key(), Cluster::Platform, 400 << 10, t0), None, "424 KiB left: 400 KiB go");
        let (wait, spent) = budgets.held_at(&key(), Cluster::Platform, 900 << 10, t0).expect("not 900 KiB");
        assert_eq!(spent, Spent::Instance);
        // 476 KiB short at 1.5 MiB a minute: about 19 s.
        assert!((18..=20).contains(&wait.as_secs()), "{wait:?}");
        let (wait, _) = budgets.held_at(&key(), Cluster::Platform, big, t0).expect("not full");
        assert!((23..=25).contains(&wait.as_secs()), "until full, 600 KiB at 1.5 MiB a minute: {wait:?}");
    }

    #[test]
    fn full_budgets_are_forgotten() {
        let budgets = Budgets::default();
        let t0 = Instant::now();
        budgets.spend_at(&key(), Cluster::Onboarding, 1000, t0);
        assert_eq!(budgets.buckets.lock().unwrap().len(), 1);
        assert_eq!(budgets.wait_at(&key(), Cluster::Onboarding, t0 + Duration::from_secs(1)), None);
        assert!(budgets.buckets.lock().unwrap().is_empty(), "refilled: nothing to keep");
        budgets.spend_at(&key(), Cluster::Onboarding, 1000, t0);
        budgets.status_written(&key());
        budgets.forget(&key());
        assert!(budgets.buckets.lock().unwrap().is_empty() && budgets.since_status(&key()).is_none());
    }

    #[test]
    fn a_requeue_is_at_least_the_floor() {
        assert_eq!(requeue(0), (None, false));
        assert_eq!(requeue(1), (Some(REQUEUE_FLOOR), true));
        assert_eq!(requeue(300), (Some(Duration::from_secs(300)), false));
    }
}
