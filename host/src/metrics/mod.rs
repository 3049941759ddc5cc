//! Prometheus metrics of the operator: the host's own
//! (`service_provider_host_*`), controller-runtime's for its controller
//! ([`workqueue`]), and each plugin component's ([`plugin`]).
//!
//! Every Kubernetes client the host builds counts its requests by cluster and
//! HTTP method (a tower layer, see [`crate::clusters`]). That is what proves
//! the "a no-op reconcile writes nothing" property in tests, and what an
//! operator watches to see API load per cluster.

pub mod instances;
pub mod plugin;
pub mod workqueue;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use plugin::{Bounds, PluginMeter, Role, Usage};
pub use workqueue::Workqueue;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// platform, onboarding, control-plane, workload
    pub cluster: String,
    /// HTTP method: GET, POST, PUT, PATCH, DELETE
    pub method: String,
}

/// Registers `metric` and returns it (metrics are handles: the registry
/// and the returned value share the series).
fn registered<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
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
    /// How a reconcile ended (`reconcile::Ended`): applied, limited,
    /// waiting, ignored, finalizer, deleting, deleted, error.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The error category (`error::Category`).
    pub category: &'static str,
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
    /// controller-runtime's series of the controller.
    pub workqueue: Arc<Workqueue>,
    /// The instances by phase, read from the controller's store.
    pub instances: Arc<instances::Instances>,
    plugins: Arc<plugin::Series>,
    shadow_differences: Family<DigestLabels, Counter>,
    limited: Family<LimitLabels, Counter>,
    written_bytes: Family<ClusterLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    reconciles: Family<ReconcileLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    reconcile_seconds: Histogram,
    blocker_watches: Gauge,
    blocker_bytes: Gauge,
    adopted: Counter,
}

impl Metrics {
    /// The metrics of the host serving `provider` (`--provider-name`, an
    /// RFC 1123 label checked at start): every `service_provider_host_*`
    /// series carries it as `provider`, so that two providers' hosts in one
    /// namespace (openmcp runs kro's and flux's in `openmcp-system`) stay
    /// apart on a dashboard; controller-runtime's carry `controller`.
    pub fn new(provider: &str) -> Arc<Self> {
        let mut root = Registry::default();
        let workqueue = Workqueue::register(&mut root);
        let registry = root
            .sub_registry_with_prefix("service_provider_host")
            .sub_registry_with_label((Cow::Borrowed("provider"), Cow::Owned(provider.to_string())));
        let plugins = Arc::new(plugin::Series::register(registry));
        let instances = Arc::new(instances::Instances::default());
        registry.register_collector(Box::new(instances.clone()));
        let requests = registered(
            registry,
            "kube_requests",
            "Kubernetes API requests by cluster and method",
            Family::<RequestLabels, Counter>::default(),
        );
        let reconciles =
            registered(registry, "reconciles", "Reconciles by outcome", Family::<ReconcileLabels, Counter>::default());
        let failures = registered(
            registry,
            "reconcile_failures",
            "Failed reconciles by error category",
            Family::<FailureLabels, Counter>::default(),
        );
        let reconcile_seconds = registered(
            registry,
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            Histogram::new(exponential_buckets(0.005, 2.0, 14)),
        );
        let blocker_watches = registered(
            registry,
            "blocker_watches",
            "Watches of what blocks a deletion, on tenant clusters (see stores::blockers)",
            Gauge::default(),
        );
        let blocker_bytes =
            registered(registry, "blocker_watch_bytes", "Bytes of JSON the blocker watches hold", Gauge::default());
        let limited = registered(
            registry,
            "limited",
            "Times the host cut or held back what a plugin or tenant made it write, by bound (see budget)",
            Family::<LimitLabels, Counter>::default(),
        );
        let written_bytes = registered(
            registry,
            "written_bytes",
            "Bytes of the objects the host wrote for instances (their size as stored), by cluster",
            Family::<ClusterLabels, Counter>::default(),
        );
        let adopted = registered(
            registry,
            "adopted_objects",
            "Objects taken over from another field manager (--adopt-from)",
            Counter::default(),
        );
        let shadow_differences = registered(
            registry,
            "shadow_differences",
            "Times an instance's shadow plugin (--shadow-plugin) answered differently from the plugin, or anew differently, by the shadow's digest",
            Family::<DigestLabels, Counter>::default(),
        );
        Arc::new(Metrics {
            registry: root,
            workqueue,
            instances,
            plugins,
            shadow_differences,
            limited,
            written_bytes,
            requests,
            reconciles,
            failures,
            reconcile_seconds,
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

    /// What a plugin component in `role` reports its calls to.
    pub fn plugin_meter(&self, plugin: &str, digest: &str, role: Role, bounds: Bounds) -> PluginMeter {
        let labels =
            plugin::PluginLabels { plugin: plugin.to_string(), digest: digest.to_string(), role: role.label() };
        PluginMeter::new(self.plugins.clone(), labels, bounds)
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

    /// Starts the failure and limit counters of every category and bound
    /// at zero (see [`PluginMeter::from_zero`]).
    pub fn from_zero<C: LabelValue, L: LabelValue>(&self, categories: &[C], limits: &[L]) {
        for category in categories {
            self.failures.get_or_create(&FailureLabels { category: category.label() }).inc_by(0);
        }
        for limit in limits {
            self.limited.get_or_create(&LimitLabels { limit: limit.label() }).inc_by(0);
        }
    }

    /// A shadow of `digest` plans along: its differences count from zero.
    pub fn shadowed_by(&self, digest: &str) {
        self.shadow_differences.get_or_create(&DigestLabels { digest: digest.to_string() }).inc_by(0);
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
        let m = Metrics::new("kro-eu");
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
            text.contains(
                "service_provider_host_kube_requests_total{provider=\"kro-eu\",cluster=\"platform\",method=\"PATCH\"} 2"
            ),
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
        let m = Metrics::new("kro-eu");
        m.reconciled(Label::Applied, Duration::from_millis(20));
        let bounds = Bounds { timeout: Duration::from_secs(2), memory_bytes: 64 << 20, output_bytes: 4 << 20 };
        let meter = m.plugin_meter("kro", "sha256:ab", Role::Canary, bounds);
        let usage = Usage { took: Duration::from_micros(300), memory_bytes: 3 << 20, output_bytes: 900 };
        meter.called(Label::Plan, &usage);
        meter.stopped(Label::Plan, Label::PluginTimeout);
        m.failed(Label::PluginTimeout);
        assert_eq!(m.reconciles(Label::Applied), 1);
        assert_eq!(m.failures(Label::PluginTimeout), 1);
        let text = m.encode();
        assert!(
            text.contains(
                "service_provider_host_reconcile_failures_total{provider=\"kro-eu\",category=\"plugin-timeout\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("service_provider_host_reconciles_total{provider=\"kro-eu\",outcome=\"applied\"} 1"),
            "{text}"
        );
        let plan = r#"provider="kro-eu",plugin="kro",digest="sha256:ab",role="canary",call="plan""#;
        for series in
            ["plugin_call_duration_seconds_count", "plugin_call_memory_bytes_count", "plugin_call_output_bytes_count"]
        {
            assert!(text.contains(&format!("service_provider_host_{series}{{{plan}}} 1")), "{series}: {text}");
        }
        assert!(
            text.contains(&format!("service_provider_host_plugin_call_memory_bytes_sum{{{plan}}} 3145728")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                r#"service_provider_host_plugin_calls_stopped_total{{{plan},kind="plugin-timeout"}} 1"#
            )),
            "{text}"
        );
        assert!(
            text.contains(r#"service_provider_host_plugin_limit{provider="kro-eu",plugin="kro",digest="sha256:ab",role="canary",limit="memory-bytes"} 67108864"#),
            "{text}"
        );
    }
}
