//! Step: the components beside the plugin while an upgrade of it is
//! rolled out in steps (see docs/operations.md, "Upgrading a plugin").
//!
//! A shadow (`run --shadow-plugin`) plans along on every reconcile, with
//! the very input the plugin got; nothing of its answer is applied, and a
//! failure of it (a trap, a deadline, a refused plan) is only a
//! difference, never the instance's. When its answer differs from the
//! plugin's, anew for an instance, the host counts it
//! (`service_provider_host_shadow_differences_total` by the shadow's
//! digest), logs the differences' summary and records a `ShadowDiffers`
//! Event on the service object.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

use kube::api::DynamicObject;
use service_provider_sdk::contract::{Input, PlanError};
use tracing::info;

use super::memory::Memory;
use super::status::StatusWriter;
use crate::instance::InstanceKey;
use crate::metrics::Metrics;
use crate::plugin::plan::compare::{self, Answer};
use crate::plugin::plan::{self, CheckedPlan, Planner, PluginCall};

/// The components beside the plugin.
#[derive(Clone, Default)]
pub struct Rollout {
    /// Plans along on every reconcile; never applied.
    pub shadow: Option<Planner>,
}

/// What the shadow step needs of the reconcile's parts.
pub(crate) struct Recorders<'a> {
    pub status: &'a StatusWriter,
    pub memory: &'a Memory,
    pub metrics: &'a Metrics,
}

/// Step: the shadow's answer to `input`, compared with the plugin's
/// (`planned`), and recorded when it differs anew.
pub(crate) async fn shadow(
    rollout: &Rollout,
    to: &Recorders<'_>,
    object: &DynamicObject,
    key: &InstanceKey,
    input: &Input,
    planned: &Result<Result<CheckedPlan, PlanError>, crate::plugin::Error>,
) {
    let Some(shadow) = &rollout.shadow else { return };
    let started = Instant::now();
    let theirs = Answer::of(plan::reconcile(shadow, input).await);
    to.metrics.plugin_call(PluginCall::ShadowPlan, started.elapsed());
    let differences = compare::compare(&Answer::of_ref(planned), &theirs);
    let digest = (!differences.is_empty()).then(|| {
        let mut hasher = DefaultHasher::new();
        serde_json::to_string(&differences).unwrap_or_default().hash(&mut hasher);
        hasher.finish()
    });
    if !to.memory.shadow_differs_anew(key, digest) {
        return;
    }
    let component = shadow.plugin.digest();
    let summary = differences.summary();
    to.metrics.shadow_differed(component);
    info!(shadow = component, differences = %summary, "the shadow plugin answers differently");
    let note = format!("shadow plugin {component} would answer differently: {summary}");
    to.status.rollout(object, "ShadowDiffers", &note).await;
}
