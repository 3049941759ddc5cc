//! What each plugin component costs and how its calls end, labelled with
//! the plugin's name, its component digest and its role (the plugin, a
//! canary or a shadow), so that two versions running side by side in a
//! rollout show side by side on a dashboard.
//!
//! The sandbox reports each call through the [`PluginMeter`] its plugin was
//! given (see `controller::shared`); plugins loaded elsewhere (the authoring
//! commands, a fleet preview) have none and report nothing.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::{LabelValue, registered};

/// One component in one role.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The name its descriptor gives.
    pub plugin: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// `plugin`, `canary` or `shadow` ([`Role`]).
    pub role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    #[prometheus(flatten)]
    pub plugin: PluginLabels,
    /// describe, plan, cleanup
    pub call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndLabels {
    #[prometheus(flatten)]
    pub plugin: PluginLabels,
    pub call: &'static str,
    /// Which bound stopped the call, or why the host refused its answer.
    pub kind: &'static str,
}

/// The bound a limit gauge reports.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    #[prometheus(flatten)]
    pub plugin: PluginLabels,
    /// memory-bytes, output-bytes, timeout-seconds
    pub limit: &'static str,
}

/// What a plugin component is in a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `--plugin`: reconciles every instance not in a canary's cohort.
    Plugin,
    /// `--plugin-canary`: reconciles its cohort.
    Canary,
    /// `--shadow-plugin`: plans along; nothing of its plans is applied.
    Shadow,
}

impl LabelValue for Role {
    fn label(self) -> &'static str {
        match self {
            Role::Plugin => "plugin",
            Role::Canary => "canary",
            Role::Shadow => "shadow",
        }
    }
}

/// What one call used, each against a limit the operator set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Wall-clock time, a fresh instance included.
    pub took: Duration,
    /// Linear memory of all its memories at the end of the call (memories
    /// only grow, so this is the peak).
    pub memory_bytes: usize,
    /// Bytes of what the call answered, as JSON (what the output limit
    /// holds a plan to).
    pub output_bytes: usize,
}

/// The limits a component runs under, reported next to what it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub timeout: Duration,
    pub memory_bytes: usize,
    pub output_bytes: usize,
}

/// The per-plugin series, registered once.
pub(super) struct Series {
    seconds: Family<CallLabels, Histogram>,
    memory: Family<CallLabels, Histogram>,
    output: Family<CallLabels, Histogram>,
    stopped: Family<EndLabels, Counter>,
    refused: Family<EndLabels, Counter>,
    limits: Family<LimitLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    halted: Family<PluginLabels, Gauge>,
}

impl Series {
    pub(super) fn register(registry: &mut Registry) -> Self {
        // 50 µs to 6.5 s: a warm call of a small plugin up to past the
        // default time budget (2 s).
        let seconds = registered(
            registry,
            "plugin_call_duration_seconds",
            "Duration of one plugin call, a fresh instance included",
            Family::<CallLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.00005, 2.0, 18))
            }),
        );
        // 64 KiB to 2 GiB, by doubling.
        let bytes = || Histogram::new(exponential_buckets(65536.0, 2.0, 16));
        let memory = registered(
            registry,
            "plugin_call_memory_bytes",
            "Linear memory a plugin call ended with (its peak), against plugin_limit{limit=\"memory-bytes\"}",
            Family::<CallLabels, Histogram>::new_with_constructor(bytes),
        );
        let output = registered(
            registry,
            "plugin_call_output_bytes",
            "Bytes a plugin call handed out of the sandbox, against plugin_limit{limit=\"output-bytes\"}",
            Family::<CallLabels, Histogram>::new_with_constructor(bytes),
        );
        let stopped = registered(
            registry,
            "plugin_calls_stopped",
            "Plugin calls stopped by a bound or a trap, by kind: timeout, memory, table, output, objects, input-size, output-size, trap",
            Family::<EndLabels, Counter>::default(),
        );
        let refused = registered(
            registry,
            "plugin_answers_refused",
            "Plugin answers the host refused, by kind: denied (outside the grant), invalid-plan",
            Family::<EndLabels, Counter>::default(),
        );
        let limits = registered(
            registry,
            "plugin_limit",
            "A limit every call of the plugin runs under: memory-bytes, output-bytes, timeout-seconds",
            Family::<LimitLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default(),
        );
        let halted = registered(
            registry,
            "plugin_halted",
            "1 once the component was halted (a canary, --plugin-canary): its cohort is reconciled with the plugin",
            Family::<PluginLabels, Gauge>::default(),
        );
        Series { seconds, memory, output, stopped, refused, limits, halted }
    }
}

/// What one plugin component in one role reports its calls to.
#[derive(Clone)]
pub struct PluginMeter {
    series: Arc<Series>,
    labels: PluginLabels,
}

impl PluginMeter {
    pub(super) fn new(series: Arc<Series>, labels: PluginLabels, bounds: Bounds) -> Self {
        let limit = |limit: &'static str, value: f64| {
            series.limits.get_or_create(&LimitLabels { plugin: labels.clone(), limit }).set(value);
        };
        limit("memory-bytes", bounds.memory_bytes as f64);
        limit("output-bytes", bounds.output_bytes as f64);
        limit("timeout-seconds", bounds.timeout.as_secs_f64());
        series.halted.get_or_create(&labels).set(0);
        PluginMeter { series, labels }
    }

    /// Starts the counters of every way `calls` can end at zero, so that
    /// the first stop or refusal is an increase a rule sees (a counter
    /// that appears at 1 has none).
    pub fn from_zero<C: LabelValue, S: LabelValue, R: LabelValue>(&self, calls: &[C], stopped: &[S], refused: &[R]) {
        for call in calls {
            let end = |kind| EndLabels { plugin: self.labels.clone(), call: call.label(), kind };
            for kind in stopped {
                self.series.stopped.get_or_create(&end(kind.label())).inc_by(0);
            }
            for kind in refused {
                self.series.refused.get_or_create(&end(kind.label())).inc_by(0);
            }
        }
    }

    /// The component was halted.
    pub fn halted(&self) {
        self.series.halted.get_or_create(&self.labels).set(1);
    }

    fn call(&self, call: impl LabelValue) -> CallLabels {
        CallLabels { plugin: self.labels.clone(), call: call.label() }
    }

    /// A call ran (whatever it answered).
    pub fn called(&self, call: impl LabelValue, usage: &Usage) {
        let labels = self.call(call);
        self.series.seconds.get_or_create(&labels).observe(usage.took.as_secs_f64());
        self.series.memory.get_or_create(&labels).observe(usage.memory_bytes as f64);
        self.series.output.get_or_create(&labels).observe(usage.output_bytes as f64);
    }

    /// A call was stopped: a bound, or a trap.
    pub fn stopped(&self, call: impl LabelValue, kind: impl LabelValue) {
        let labels = EndLabels { plugin: self.labels.clone(), call: call.label(), kind: kind.label() };
        self.series.stopped.get_or_create(&labels).inc();
    }

    /// The host refused what a call answered.
    pub fn refused(&self, call: impl LabelValue, kind: impl LabelValue) {
        let labels = EndLabels { plugin: self.labels.clone(), call: call.label(), kind: kind.label() };
        self.series.refused.get_or_create(&labels).inc();
    }
}
