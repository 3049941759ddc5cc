//! Prometheus metrics of the operator.
//!
//! Every Kubernetes client the host builds counts its requests by cluster and
//! HTTP method (a tower layer, see [`crate::clusters`]). That is what proves
//! the "a no-op reconcile writes nothing" property in tests, and what an
//! operator watches to see API load per cluster.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// platform, onboarding, control-plane, workload
    pub cluster: String,
    /// HTTP method: GET, POST, PUT, PATCH, DELETE
    pub method: String,
}

/// A label value from a closed set: the host's enums (how a reconcile
/// ended, an error's category, a plugin call) name their values, so no
/// label takes a value built at run time and the set of series is fixed by
/// the types.
pub trait LabelValue: Copy {
    fn label(self) -> &'static str;
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// How a reconcile ended (`reconcile::Ended`): applied, invalid-input,
    /// waiting, ignored, finalizer, deleting, deleted, error.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The error category (`error::Category`).
    pub category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin call (`plan::PluginCall`): plan, cleanup.
    pub call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The bound the host held an instance to (`budget::Limit`):
    /// status-size, plan-size, write-rate, message-interval, requeue-floor.
    pub limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// platform, onboarding, control-plane, workload
    pub cluster: &'static str,
}

/// A plugin component, by its digest (`sha256:<hex>`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DigestLabels {
    pub digest: String,
}

pub struct Metrics {
    registry: Registry,
    shadow_differences: Family<DigestLabels, Counter>,
    canary_halted: Family<DigestLabels, Gauge>,
    limited: Family<LimitLabels, Counter>,
    written_bytes: Family<ClusterLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    reconciles: Family<ReconcileLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    reconcile_seconds: Histogram,
    plugin_seconds: Family<PluginLabels, Histogram>,
    blocker_watches: Gauge,
    blocker_bytes: Gauge,
    adopted: Counter,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("service_provider_host");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("kube_requests", "Kubernetes API requests by cluster and method", requests.clone());
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("reconciles", "Reconciles by outcome", reconciles.clone());
        let failures = Family::<FailureLabels, Counter>::default();
        registry.register("reconcile_failures", "Failed reconciles by error category", failures.clone());
        let reconcile_seconds = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register("reconcile_duration_seconds", "Duration of one reconcile", reconcile_seconds.clone());
        let plugin_seconds = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.00005, 2.0, 16))
        });
        registry.register(
            "plugin_call_duration_seconds",
            "Duration of one plugin call, fresh instance included",
            plugin_seconds.clone(),
        );
        let blocker_watches = Gauge::default();
        registry.register(
            "blocker_watches",
            "Watches of what blocks a deletion, on tenant clusters (see stores::blockers)",
            blocker_watches.clone(),
        );
        let blocker_bytes = Gauge::default();
        registry.register("blocker_watch_bytes", "Bytes of JSON the blocker watches hold", blocker_bytes.clone());
        let limited = Family::<LimitLabels, Counter>::default();
        registry.register(
            "limited",
            "Times the host cut or held back what a plugin or tenant made it write, by bound (see budget)",
            limited.clone(),
        );
        let written_bytes = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "written_bytes",
            "Bytes of the objects the host wrote for instances (their size as stored), by cluster",
            written_bytes.clone(),
        );
        let adopted = Counter::default();
        registry.register(
            "adopted_objects",
            "Objects taken over from another field manager (--adopt-from)",
            adopted.clone(),
        );
        let shadow_differences = Family::<DigestLabels, Counter>::default();
        registry.register(
            "shadow_differences",
            "Times an instance's shadow plugin (--shadow-plugin) answered differently from the plugin, or anew differently, by the shadow's digest",
            shadow_differences.clone(),
        );
        let canary_halted = Family::<DigestLabels, Gauge>::default();
        registry.register(
            "canary_halted",
            "1 once the canary plugin (--plugin-canary) of this digest was halted: its cohort is reconciled with the plugin",
            canary_halted.clone(),
        );
        Arc::new(Metrics {
            registry,
            shadow_differences,
            canary_halted,
            limited,
            written_bytes,
            requests,
            reconciles,
            failures,
            reconcile_seconds,
            plugin_seconds,
            blocker_watches,
            blocker_bytes,
            adopted,
        })
    }

    pub fn count_request(&self, cluster: &str, method: &str) {
        self.requests.get_or_create(&RequestLabels { cluster: cluster.to_string(), method: method.to_string() }).inc();
    }

    /// Requests sent to `cluster` so far with one of `methods`.
    pub fn requests(&self, cluster: &str, methods: &[&str]) -> u64 {
        methods
            .iter()
            .map(|m| {
                self.requests
                    .get_or_create(&RequestLabels { cluster: cluster.to_string(), method: m.to_string() })
                    .get()
            })
            .sum()
    }

    /// Write requests (POST, PUT, PATCH, DELETE) sent to `cluster` so far.
    pub fn writes(&self, cluster: &str) -> u64 {
        self.requests(cluster, &["POST", "PUT", "PATCH", "DELETE"])
    }

    pub fn reconciled(&self, outcome: impl LabelValue, took: Duration) {
        self.reconciles.get_or_create(&ReconcileLabels { outcome: outcome.label() }).inc();
        self.reconcile_seconds.observe(took.as_secs_f64());
    }

    /// Counts a failed reconcile by its error category.
    pub fn failed(&self, category: impl LabelValue) {
        self.failures.get_or_create(&FailureLabels { category: category.label() }).inc();
    }

    /// Failed reconciles so far in `category`.
    pub fn failures(&self, category: impl LabelValue) -> u64 {
        self.failures.get_or_create(&FailureLabels { category: category.label() }).get()
    }

    /// Reconciles so far that ended with `outcome`.
    pub fn reconciles(&self, outcome: impl LabelValue) -> u64 {
        self.reconciles.get_or_create(&ReconcileLabels { outcome: outcome.label() }).get()
    }

    pub fn plugin_call(&self, call: impl LabelValue, took: Duration) {
        self.plugin_seconds.get_or_create(&PluginLabels { call: call.label() }).observe(took.as_secs_f64());
    }

    /// How many blocker watches run and the bytes they hold.
    pub fn blockers(&self, watches: usize, bytes: usize) {
        self.blocker_watches.set(i64::try_from(watches).unwrap_or(i64::MAX));
        self.blocker_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// One time an instance was held to a bound.
    pub fn limited(&self, limit: impl LabelValue) {
        self.limited.get_or_create(&LimitLabels { limit: limit.label() }).inc();
    }

    /// Times so far an instance was held to `limit`.
    pub fn limits(&self, limit: impl LabelValue) -> u64 {
        self.limited.get_or_create(&LimitLabels { limit: limit.label() }).get()
    }

    /// Bytes written for an instance to `cluster` (a cluster's label).
    pub fn written(&self, cluster: &'static str, bytes: usize) {
        self.written_bytes.get_or_create(&ClusterLabels { cluster }).inc_by(bytes as u64);
    }

    /// An instance's shadow answered differently (or anew differently).
    pub fn shadow_differed(&self, digest: &str) {
        self.shadow_differences.get_or_create(&DigestLabels { digest: digest.to_string() }).inc();
    }

    /// Times so far a shadow of `digest` answered differently.
    pub fn shadow_differences(&self, digest: &str) -> u64 {
        self.shadow_differences.get_or_create(&DigestLabels { digest: digest.to_string() }).get()
    }

    /// The canary of `digest` was halted.
    pub fn canary_halted(&self, digest: &str) {
        self.canary_halted.get_or_create(&DigestLabels { digest: digest.to_string() }).set(1);
    }

    /// One object taken over (`--adopt-from`).
    pub fn adopted(&self) {
        self.adopted.inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_cluster_and_method() {
        let m = Metrics::new();
        m.count_request("platform", "GET");
        m.count_request("platform", "PATCH");
        m.count_request("platform", "PATCH");
        m.count_request("onboarding", "DELETE");
        assert_eq!(m.writes("platform"), 2);
        assert_eq!(m.requests("platform", &["GET"]), 1);
        assert_eq!(m.writes("onboarding"), 1);
        assert_eq!(m.writes("control-plane"), 0);
        let text = m.encode();
        assert!(
            text.contains("service_provider_host_kube_requests_total{cluster=\"platform\",method=\"PATCH\"} 2"),
            "{text}"
        );
    }

    /// Stand-ins for the host's label enums (this module imports none).
    #[derive(Clone, Copy)]
    enum Label {
        Applied,
        Plan,
        PluginTimeout,
    }

    impl LabelValue for Label {
        fn label(self) -> &'static str {
            match self {
                Label::Applied => "applied",
                Label::Plan => "plan",
                Label::PluginTimeout => "plugin-timeout",
            }
        }
    }

    #[test]
    fn reconciles_and_plugin_calls_are_recorded() {
        let m = Metrics::new();
        m.reconciled(Label::Applied, Duration::from_millis(20));
        m.plugin_call(Label::Plan, Duration::from_micros(300));
        m.failed(Label::PluginTimeout);
        assert_eq!(m.reconciles(Label::Applied), 1);
        assert_eq!(m.failures(Label::PluginTimeout), 1);
        let text = m.encode();
        assert!(
            text.contains("service_provider_host_reconcile_failures_total{category=\"plugin-timeout\"} 1"),
            "{text}"
        );
        assert!(text.contains("service_provider_host_reconciles_total{outcome=\"applied\"} 1"), "{text}");
        assert!(text.contains("service_provider_host_plugin_call_duration_seconds_count{call=\"plan\"} 1"), "{text}");
    }
}
