//! One reconcile of one service instance.
//!
//! ```text
//! operation annotations ─▶ finalizer ─┬─▶ live:     access ─▶ gather ─▶ plan ─▶ apply ─▶ prune ─▶ status
//!                                     └─▶ deletion: access ─▶ gather ─▶ cleanup plan ─▶ ordered delete ─▶ prune ─▶ revoke access
//! preview (no writes):  granted access ─▶ gather ─▶ plan (current, candidate) ─▶ dry-run apply ─▶ compare
//! ```
//!
//! [`reconcile`] is the controller's entry point; the two paths read as
//! their steps in [`live`] and [`deletion`], and a third that writes
//! nothing, what a candidate component would change, in [`preview`]; which
//! component reconciles an instance during an upgrade (the plugin, or a
//! canary), and what a shadow says, in [`rollout`]; how an instance reaches its
//! clusters (for both) in [`reach`], what every reconcile shares in
//! [`shared`] and what it remembers of each instance in [`memory`].
//!
//! The steps are the folders beside them, each one job, none reaching back
//! into the paths that call them (checked by `tests/architecture.rs`):
//! [`access`] (openmcp ClusterRequests and AccessRequests), [`gather`] (the
//! plugin's inputs), [`apply`] (server-side apply, copies, pruning and the
//! CRD installer), [`status`] (the status and Events), with [`budget`]
//! (what the host may write for one instance) beside them. Whose objects
//! may be taken over is [`crate::adopt`]'s, on the ground floor: the
//! host's error wraps its refusals.

pub mod access;
pub mod apply;
pub mod budget;
mod deletion;
pub(crate) mod gather;
mod live;
pub mod loaded;
pub mod memory;
pub mod preview;
mod reach;
pub mod rollout;
pub mod shared;
pub(crate) mod status;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{debug, info, instrument, warn};

pub use shared::Shared;

use crate::Error;
use crate::error::report;
use crate::keys::InstanceKey;
use crate::metrics::LabelValue;
use crate::stores::Lookup;

/// The openmcp operation annotation and its values.
pub const OPERATION: &str = "openmcp.cloud/operation";
pub const OPERATION_IGNORE: &str = "ignore";
pub const OPERATION_RECONCILE: &str = "reconcile";

/// How often to look again while waiting for something that will trigger a
/// watch event anyway (an AccessRequest grant, an object going away).
const WAIT: Duration = Duration::from_secs(5);
/// Poll interval used when no plan says otherwise.
const DEFAULT_POLL: Duration = Duration::from_secs(60);

/// How a reconcile that did not fail ended (the metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An `ignore` operation annotation (on the object or the ProviderConfig).
    Ignored,
    /// Only the finalizer was added; the next reconcile does the work.
    FinalizerAdded,
    /// Waiting for cluster access to be granted.
    Waiting,
    /// The plan was applied.
    Applied,
    /// The plan's writes wait for the instance's write budget
    /// ([`crate::reconcile::budget`]); the status says so.
    Limited,
    /// Deletion finished; the finalizer is gone.
    Deleted,
}

/// When to reconcile an instance again if no watch does first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    After(Duration),
    OnChange,
}

impl Again {
    pub fn action(self) -> Action {
        match self {
            Again::After(after) => Action::requeue(after),
            Again::OnChange => Action::await_change(),
        }
    }
}

/// How a reconcile ended, as the `reconciles` metric counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Done(Outcome),
    /// A deletion step that must wait (not a failure).
    Deleting,
    Failed,
}

impl LabelValue for Ended {
    fn label(self) -> &'static str {
        match self {
            Ended::Done(Outcome::Ignored) => "ignored",
            Ended::Done(Outcome::FinalizerAdded) => "finalizer",
            Ended::Done(Outcome::Waiting) => "waiting",
            Ended::Done(Outcome::Applied) => "applied",
            Ended::Done(Outcome::Limited) => "limited",
            Ended::Done(Outcome::Deleted) => "deleted",
            Ended::Deleting => "deleting",
            Ended::Failed => "error",
        }
    }
}

/// Entry point for the controller: one span per reconcile, so every log
/// line of it names the instance, and the root of its trace
/// ([`crate::telemetry`]) with the plugin's digest and the outcome.
#[instrument(skip_all, fields(
    namespace = %object.namespace().unwrap_or_default(),
    instance = %object.name_any(),
    plugin.digest = tracing::field::Empty,
    outcome = tracing::field::Empty,
))]
pub async fn reconcile(object: Arc<DynamicObject>, ctx: Arc<Shared>) -> Result<Action, Error> {
    let started = Instant::now();
    let key = InstanceKey::of(object.as_ref());
    ctx.metrics.workqueue.started(key.clone());
    // The plugin, or a canary for an instance of its cohort.
    let plugin = ctx.rollout.plugin_for(&ctx.plugin, &object);
    tracing::Span::current().record("plugin.digest", plugin.planner.plugin.digest());
    // A panic must stay with its instance: the controller, and with it
    // every other instance, goes on.
    let result = match AssertUnwindSafe(reconcile_instance(object.clone(), &ctx, plugin)).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(Error::Panic {
            message: crate::error::panic_message(panic.as_ref()).unwrap_or("a panic without a message").to_string(),
        }),
    };
    let ended = match &result {
        Ok((outcome, _)) => Ended::Done(*outcome),
        Err(e) if e.not_yet().is_some() => Ended::Deleting,
        Err(e) => {
            ctx.metrics.failed(e.category());
            Ended::Failed
        }
    };
    ctx.metrics.reconciled(ended, started.elapsed());
    record_in_the_queue(&ctx, key.clone(), &result);
    tracing::Span::current().record("outcome", ended.label());
    let recorders = rollout::Recorders { status: &ctx.status, memory: &ctx.memory, metrics: &ctx.metrics };
    ctx.rollout.ended(plugin, &recorders, &object, &result).await;
    // A failure only a person can fix is not the instance's to back off from.
    if result.as_ref().err().is_none_or(|e| e.needs_a_person().is_some()) {
        ctx.memory.succeeded(&key);
    }
    result.map(|(_, again)| again.action())
}

/// How the reconcile of `key` ended, in controller-runtime's words, and
/// when it comes back.
fn record_in_the_queue(ctx: &Shared, key: InstanceKey, result: &Result<(Outcome, Again), Error>) {
    use crate::metrics::workqueue::Ended as Queue;
    let queue = &ctx.metrics.workqueue;
    let ended = match result {
        Ok((_, Again::After(_))) => Queue::RequeueAfter,
        Ok((_, Again::OnChange)) => Queue::Success,
        // A deletion step that waits, as asked: not an error.
        Err(e) if e.not_yet().is_some() => Queue::RequeueAfter,
        Err(_) => Queue::Error,
    };
    queue.finished(&key, ended, matches!(result, Err(Error::Panic { .. })));
    if let Ok((_, Again::After(after))) = result {
        queue.requeued(key, *after, false);
    }
}

/// Requeue policy on errors: "not yet" (deletion in progress) waits as asked;
/// a failure only a person can fix comes back as it says (every minute);
/// the others back off exponentially per instance, 1 s up to 256 s.
pub fn error_policy<K: Resource>(object: Arc<K>, error: &Error, ctx: Arc<Shared>) -> Action {
    let key = InstanceKey::of(object.as_ref());
    let (after, retry) = retry_after(&key, error, &ctx);
    ctx.metrics.workqueue.requeued(key, after, retry);
    Action::requeue(after)
}

/// When a reconcile that returned `error` runs again, and whether that is
/// a retry of a failure.
fn retry_after(key: &InstanceKey, error: &Error, ctx: &Shared) -> (Duration, bool) {
    if let Some(after) = error.not_yet() {
        return (after, false);
    }
    let instance = key.to_string();
    if let Some(after) = error.needs_a_person() {
        info!(%instance, category = error.category().label(), error = %report(error), retry_in = ?after, "reconcile waits for a person");
        return (after, true);
    }
    if stale_finalizer_view(error) {
        // Another trigger ran on a cached copy from before our own finalizer
        // patch; the guarded patch refused it. Not a failure: look again.
        debug!(%instance, "finalizer already being added; retrying");
        return (Duration::from_millis(200), true);
    }
    let n = ctx.memory.failed(key);
    let delay = Duration::from_secs(1u64 << (n - 1).min(8));
    warn!(%instance, category = error.category().label(), error = %report(error), retry_in = ?delay, "reconcile failed");
    (delay, true)
}

/// The finalizer helper's guarded JSON patch failed its `test` (422) or
/// conflicted (409): the cached object predates a concurrent change.
fn stale_finalizer_view(error: &Error) -> bool {
    matches!(error, Error::Finalizer(inner) if matches!(
        inner.as_ref(),
        finalizer::Error::AddFinalizer(kube::Error::Api(s)) | finalizer::Error::RemoveFinalizer(kube::Error::Api(s))
            if s.code == 422 || s.is_conflict()
    ))
}

fn operation(object: &DynamicObject) -> Option<&str> {
    object.annotations().get(OPERATION).map(String::as_str)
}

/// Removes the `reconcile` operation annotation: it is a one-shot trigger.
pub async fn consume_reconcile_annotation(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject, Error> {
    let patch = json!({"metadata": {"annotations": {OPERATION: null}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("removing the {OPERATION} annotation of {name}"), e))
}

async fn reconcile_instance(
    object: Arc<DynamicObject>,
    ctx: &Shared,
    plugin: &shared::Loaded,
) -> Result<(Outcome, Again), Error> {
    let name = object.name_any();
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.clusters.onboarding.clone(),
        &object.namespace().unwrap_or_default(),
        &ctx.plugin.service,
    );

    if operation(&object) == Some(OPERATION_IGNORE) {
        debug!("ignored (operation annotation)");
        return Ok((Outcome::Ignored, Again::OnChange));
    }
    let provider_config = read_provider_config(ctx).await?;
    if provider_config.as_ref().and_then(|pc| pc.pointer("/metadata/annotations").and_then(|a| a.get(OPERATION)))
        == Some(&json!(OPERATION_IGNORE))
    {
        debug!("ignored (operation annotation on the ProviderConfig)");
        return Ok((Outcome::Ignored, Again::OnChange));
    }
    let object = if operation(&object) == Some(OPERATION_RECONCILE) {
        info!("reconcile requested by annotation");
        // A full look: nothing verified earlier is trusted.
        ctx.memory.unverify(&InstanceKey::of(object.as_ref()));
        Arc::new(consume_reconcile_annotation(&api, &name).await?)
    } else {
        object
    };

    let finalizer_name = ctx.plugin.descriptor().finalizer.clone();
    // Stays as is when the helper only added the finalizer: it waits for
    // the change that made.
    let mut ended = (Outcome::FinalizerAdded, Again::OnChange);
    let ended_ref = &mut ended;
    finalizer(&api, &finalizer_name, object, |event| async move {
        *ended_ref = match event {
            finalizer::Event::Apply(o) => live::run(&o, provider_config.as_ref(), ctx, plugin).await?,
            finalizer::Event::Cleanup(o) => {
                deletion::run(&o, provider_config.as_ref(), ctx).await?;
                (Outcome::Deleted, Again::OnChange)
            }
        };
        Ok(ended_ref.1.action())
    })
    .await
    .map_err(Error::from_finalizer)?;
    Ok(ended)
}

/// The ProviderConfig named `--provider-name`, unless it is missing or being
/// deleted.
pub async fn read_provider_config(ctx: &Shared) -> Result<Option<Value>, Error> {
    let what = || format!("reading {} {}", ctx.plugin.provider_config.kind, ctx.identity.provider_name);
    let pc = match ctx.watches.stores().provider_config(&ctx.identity.provider_name) {
        Lookup::Found(pc) => Some(DynamicObject::clone(&pc)),
        Lookup::Absent => None,
        Lookup::Unknown => {
            let api: Api<DynamicObject> = Api::all_with(ctx.clusters.platform.clone(), &ctx.plugin.provider_config);
            api.get_opt(&ctx.identity.provider_name).await.map_err(|e| Error::kube(what(), e))?
        }
    };
    pc.filter(|pc| pc.metadata.deletion_timestamp.is_none())
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| Error::json(what(), e))
}

fn not_yet(reason: String, retry_after: Duration) -> Error {
    Error::NotYet { reason, retry_after }
}
