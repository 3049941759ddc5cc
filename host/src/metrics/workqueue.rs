//! controller-runtime's series for the host's controller: its reconciles
//! (`controller_runtime_*`) and its work queue (`workqueue_*`), with
//! controller-runtime's names, types, labels and buckets, so that the alert
//! rules and dashboards written for Go operators read the host as one of
//! them.
//!
//! kube-rs's `Controller` keeps its queue to itself (a scheduler and a
//! runner that export nothing), so the host reports every way into and out
//! of it, and this module keeps the queue as the scheduler does:
//!
//! - [`Workqueue::requested`]: a watch asked for an object (each request
//!   the controller's trigger streams carry), or a reconcile or the error
//!   policy asked for it again later ([`Workqueue::requeued`]);
//! - [`Workqueue::started`] and [`Workqueue::finished`]: the runner called
//!   the reconciler for an object, and the call returned;
//! - [`Workqueue::dropped`]: the object was gone from the store when its
//!   turn came.
//!
//! The scheduler's rules: one entry per object; a request due earlier than
//! an object's entry replaces it, one due later is dropped; every entry
//! waits the debounce on top; an object being reconciled is not started
//! again before it finishes. The gauges (depth, unfinished work, the
//! longest running reconcile, active workers) are read at scrape time.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::registered;
use crate::keys::InstanceKey;

/// controller-runtime's reconcile-time buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    /// success, error, requeue_after (controller-runtime's `requeue` is a
    /// rate-limited retry without an error, which the host never asks for).
    result: &'static str,
}

/// controller-runtime labels a queue with its controller's name twice.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
    controller: String,
}

/// How one reconcile ended, in controller-runtime's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Done; nothing asked for another look but the watches.
    Success,
    /// Done, and asked to be looked at again after a while.
    RequeueAfter,
    /// Failed (the error policy decides when to retry).
    Error,
}

impl Ended {
    fn label(self) -> &'static str {
        match self {
            Ended::Success => "success",
            Ended::RequeueAfter => "requeue_after",
            Ended::Error => "error",
        }
    }
}

/// The controller's settings the queue follows.
#[derive(Debug, Clone)]
struct Config {
    name: String,
    concurrency: usize,
    debounce: Duration,
}

#[derive(Default)]
struct Queue {
    /// Objects with a request, and when it is due (debounce included).
    due: HashMap<InstanceKey, Instant>,
    /// Objects being reconciled, and since when.
    running: HashMap<InstanceKey, Instant>,
}

pub struct Workqueue {
    config: OnceLock<Config>,
    queue: Mutex<Queue>,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    reconcile_seconds: Family<ControllerLabels, Histogram>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_seconds: Family<QueueLabels, Histogram>,
    work_seconds: Family<QueueLabels, Histogram>,
}

impl Workqueue {
    /// Registers the series (unprefixed, as controller-runtime names them).
    pub(super) fn register(registry: &mut Registry) -> std::sync::Arc<Self> {
        let reconciles = registered(
            registry,
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            Family::<ResultLabels, Counter>::default(),
        );
        let errors = registered(
            registry,
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            Family::<ControllerLabels, Counter>::default(),
        );
        let panics = registered(
            registry,
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            Family::<ControllerLabels, Counter>::default(),
        );
        let reconcile_seconds = registered(
            registry,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(RECONCILE_BUCKETS.iter().copied())
            }),
        );
        let adds = registered(
            registry,
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            Family::<QueueLabels, Counter>::default(),
        );
        let retries = registered(
            registry,
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            Family::<QueueLabels, Counter>::default(),
        );
        // controller-runtime's: 10 ns to 1000 s, by tens.
        let latency = || Histogram::new(exponential_buckets(1e-8, 10.0, 12));
        let queue_seconds = registered(
            registry,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            Family::<QueueLabels, Histogram>::new_with_constructor(latency),
        );
        let work_seconds = registered(
            registry,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            Family::<QueueLabels, Histogram>::new_with_constructor(latency),
        );
        let queue = std::sync::Arc::new(Workqueue {
            config: OnceLock::new(),
            queue: Mutex::default(),
            reconciles,
            errors,
            panics,
            reconcile_seconds,
            adds,
            retries,
            queue_seconds,
            work_seconds,
        });
        registry.register_collector(Box::new(Gauges(queue.clone())));
        queue
    }

    /// The controller starts: its name (the `controller` and `name`
    /// labels), how many reconciles it runs at once and its debounce.
    /// Until then (and in processes without a controller) nothing is
    /// recorded; the first call wins.
    pub fn start(&self, name: &str, concurrency: usize, debounce: Duration) {
        // A controller started again (a new leader term, rotated onboarding
        // access) starts with an empty queue: what the last one left
        // waiting is asked for again by the new one's watches, and an
        // object deleted meanwhile must not stay in the depth.
        *self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Queue::default();
        if self.config.set(Config { name: name.to_string(), concurrency, debounce }).is_err() {
            return;
        }
        // From zero, as controller-runtime starts them: a rule's first
        // increase is then one it sees.
        let controller = ControllerLabels { controller: name.to_string() };
        for ended in [Ended::Success, Ended::RequeueAfter, Ended::Error] {
            self.reconciles
                .get_or_create(&ResultLabels { controller: name.to_string(), result: ended.label() })
                .inc_by(0);
        }
        self.errors.get_or_create(&controller).inc_by(0);
        self.panics.get_or_create(&controller).inc_by(0);
        let queue = QueueLabels { name: name.to_string(), controller: name.to_string() };
        self.adds.get_or_create(&queue).inc_by(0);
        self.retries.get_or_create(&queue).inc_by(0);
    }

    fn with_queue<R>(&self, f: impl FnOnce(&Config, &mut Queue) -> R) -> Option<R> {
        let config = self.config.get()?;
        let mut queue = self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Some(f(config, &mut queue))
    }

    fn queue_labels(config: &Config) -> QueueLabels {
        QueueLabels { name: config.name.clone(), controller: config.name.clone() }
    }

    /// A watch asked for `key` now.
    pub fn requested(&self, key: InstanceKey) {
        self.request(key, Instant::now());
    }

    /// A reconcile (or, with `retry`, the error policy after a failure)
    /// asked for `key` again after `after`.
    pub fn requeued(&self, key: InstanceKey, after: Duration, retry: bool) {
        if retry && let Some(config) = self.config.get() {
            self.retries.get_or_create(&Self::queue_labels(config)).inc();
        }
        self.request(key, Instant::now() + after);
    }

    fn request(&self, key: InstanceKey, at: Instant) {
        let added = self.with_queue(|config, queue| {
            let next = at + config.debounce;
            match queue.due.get_mut(&key) {
                // An earlier request replaces a later one.
                Some(due) if *due >= at => {
                    *due = next;
                    false
                }
                Some(_) => false,
                None => {
                    queue.due.insert(key, next);
                    true
                }
            }
        });
        if added == Some(true) {
            let config = self.config.get().expect("set when added");
            self.adds.get_or_create(&Self::queue_labels(config)).inc();
        }
    }

    /// The runner started reconciling `key`.
    pub fn started(&self, key: InstanceKey) {
        let now = Instant::now();
        let waited = self.with_queue(|_, queue| {
            let due = queue.due.remove(&key);
            queue.running.insert(key, now);
            due.map(|due| now.saturating_duration_since(due))
        });
        if let (Some(config), Some(Some(waited))) = (self.config.get(), waited) {
            self.queue_seconds.get_or_create(&Self::queue_labels(config)).observe(waited.as_secs_f64());
        }
    }

    /// The reconcile of `key` returned; `panicked` if it panicked (an
    /// error too).
    pub fn finished(&self, key: &InstanceKey, ended: Ended, panicked: bool) {
        let now = Instant::now();
        let Some(Some(since)) = self.with_queue(|_, queue| queue.running.remove(key)) else { return };
        let config = self.config.get().expect("set when started");
        let took = now.saturating_duration_since(since).as_secs_f64();
        self.work_seconds.get_or_create(&Self::queue_labels(config)).observe(took);
        let controller = ControllerLabels { controller: config.name.clone() };
        self.reconcile_seconds.get_or_create(&controller).observe(took);
        self.reconciles.get_or_create(&ResultLabels { controller: config.name.clone(), result: ended.label() }).inc();
        if ended == Ended::Error {
            self.errors.get_or_create(&controller).inc();
        }
        if panicked {
            self.panics.get_or_create(&controller).inc();
        }
    }

    /// `key` was gone from the store when its turn came: the controller
    /// dropped its request.
    pub fn dropped(&self, key: &InstanceKey) {
        self.with_queue(|_, queue| queue.due.remove(key));
    }

    /// The gauges as of now: depth, active workers, seconds of unfinished
    /// work and of the longest running reconcile.
    fn gauges(&self) -> Option<(&Config, Now)> {
        let now = Instant::now();
        self.with_queue(|_, queue| {
            let depth = queue.due.iter().filter(|(key, due)| **due <= now && !queue.running.contains_key(*key)).count();
            let running = queue.running.values().map(|since| now.saturating_duration_since(*since).as_secs_f64());
            let (unfinished, longest) = running.fold((0.0, 0.0f64), |(sum, max), s| (sum + s, max.max(s)));
            (depth, queue.running.len(), unfinished, longest)
        })
        .map(|(depth, active, unfinished, longest)| {
            (self.config.get().expect("set"), Now { depth, active, unfinished, longest })
        })
    }
}

/// The queue's gauges at one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Now {
    depth: usize,
    active: usize,
    unfinished: f64,
    longest: f64,
}

/// Writes the gauges at scrape time.
#[derive(Clone)]
struct Gauges(std::sync::Arc<Workqueue>);

impl std::fmt::Debug for Gauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gauges")
    }
}

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((config, now)) = self.0.gauges() else { return Ok(()) };
        let queue = Workqueue::queue_labels(config);
        let controller = ControllerLabels { controller: config.name.clone() };
        write(
            &mut encoder,
            "workqueue_depth",
            "Current depth of workqueue",
            &queue,
            ConstGauge::new(now.depth as i64),
        )?;
        write(
            &mut encoder,
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            &queue,
            ConstGauge::new(now.unfinished),
        )?;
        write(
            &mut encoder,
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            &queue,
            ConstGauge::new(now.longest),
        )?;
        write(
            &mut encoder,
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            &controller,
            ConstGauge::new(now.active as i64),
        )?;
        write(
            &mut encoder,
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            &controller,
            ConstGauge::new(config.concurrency as i64),
        )
    }
}

/// One gauge with one label set.
fn write(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    labels: &impl EncodeLabelSet,
    gauge: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(family.encode_family(labels)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> InstanceKey {
        InstanceKey::new("ns", name)
    }

    fn queue() -> (Registry, std::sync::Arc<Workqueue>) {
        let mut registry = Registry::default();
        let queue = Workqueue::register(&mut registry);
        queue.start("kro", 2, Duration::ZERO);
        (registry, queue)
    }

    fn scrape(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn nothing_is_recorded_before_the_controller_starts() {
        let mut registry = Registry::default();
        let queue = Workqueue::register(&mut registry);
        queue.requested(key("a"));
        queue.started(key("a"));
        queue.finished(&key("a"), Ended::Success, false);
        let text = scrape(&registry);
        assert!(!text.contains("workqueue_depth"), "{text}");
        assert!(!text.contains("controller=\""), "{text}");
    }

    #[test]
    fn requests_for_a_queued_object_are_one_add() {
        let (registry, queue) = queue();
        queue.requested(key("a"));
        queue.requested(key("a"));
        queue.requested(key("b"));
        let text = scrape(&registry);
        assert!(text.contains("workqueue_adds_total{name=\"kro\",controller=\"kro\"} 2"), "{text}");
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 2"), "{text}");
        queue.started(key("a"));
        let text = scrape(&registry);
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("controller_runtime_active_workers{controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("workqueue_queue_duration_seconds_count{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("controller_runtime_max_concurrent_reconciles{controller=\"kro\"} 2"), "{text}");
    }

    #[test]
    fn a_request_while_running_waits_and_is_not_in_the_depth() {
        let (registry, queue) = queue();
        queue.requested(key("a"));
        queue.started(key("a"));
        queue.requested(key("a"));
        assert!(scrape(&registry).contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 0"));
        queue.finished(&key("a"), Ended::Success, false);
        let text = scrape(&registry);
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("workqueue_adds_total{name=\"kro\",controller=\"kro\"} 2"), "{text}");
        assert!(text.contains("controller_runtime_reconcile_total{controller=\"kro\",result=\"success\"} 1"), "{text}");
    }

    #[test]
    fn a_requeue_is_not_due_until_its_time_and_an_earlier_request_replaces_it() {
        let (registry, queue) = queue();
        queue.requeued(key("a"), Duration::from_secs(60), true);
        let text = scrape(&registry);
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 0"), "{text}");
        assert!(text.contains("workqueue_retries_total{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        queue.requested(key("a"));
        let text = scrape(&registry);
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("workqueue_adds_total{name=\"kro\",controller=\"kro\"} 1"), "{text}");
        // A later request does not push it back.
        queue.requeued(key("a"), Duration::from_secs(60), false);
        assert!(scrape(&registry).contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 1"));
    }

    #[test]
    fn errors_and_panics_are_counted_and_time_is_observed() {
        let (registry, queue) = queue();
        queue.requested(key("a"));
        queue.started(key("a"));
        std::thread::sleep(Duration::from_millis(20));
        let text = scrape(&registry);
        let unfinished = text
            .lines()
            .find_map(|l| l.strip_prefix("workqueue_unfinished_work_seconds{name=\"kro\",controller=\"kro\"} "))
            .map(|v| v.parse::<f64>().unwrap())
            .expect(&text);
        assert!(unfinished >= 0.02, "{text}");
        queue.finished(&key("a"), Ended::Error, true);
        let text = scrape(&registry);
        assert!(text.contains("controller_runtime_reconcile_errors_total{controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("controller_runtime_reconcile_panics_total{controller=\"kro\"} 1"), "{text}");
        assert!(text.contains("controller_runtime_reconcile_total{controller=\"kro\",result=\"error\"} 1"), "{text}");
        assert!(
            text.contains("controller_runtime_reconcile_time_seconds_bucket{le=\"0.025\",controller=\"kro\"} 0")
                || text.contains("controller_runtime_reconcile_time_seconds_bucket{le=\"0.05\",controller=\"kro\"} 1"),
            "{text}"
        );
        assert!(text.contains("workqueue_unfinished_work_seconds{name=\"kro\",controller=\"kro\"} 0"), "{text}");
    }

    #[test]
    fn a_controller_started_again_starts_with_an_empty_queue() {
        let (registry, queue) = queue();
        queue.requested(key("deleted-while-stopped"));
        queue.started(key("stopped-mid-reconcile"));
        queue.start("kro", 2, Duration::ZERO);
        let text = scrape(&registry);
        assert!(text.contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 0"), "{text}");
        assert!(text.contains("controller_runtime_active_workers{controller=\"kro\"} 0"), "{text}");
        assert!(text.contains("workqueue_adds_total{name=\"kro\",controller=\"kro\"} 1"), "counters go on: {text}");
    }

    #[test]
    fn a_dropped_request_leaves_the_queue() {
        let (registry, queue) = queue();
        queue.requested(key("gone"));
        queue.dropped(&key("gone"));
        assert!(scrape(&registry).contains("workqueue_depth{name=\"kro\",controller=\"kro\"} 0"));
    }
}
