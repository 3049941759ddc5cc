//! One reconcile of one service instance: operation annotations, the
//! finalizer, then either the apply path
//! (access → gather → plan → apply → status) or the cleanup path.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use service_provider_sdk::contract::{CleanupPlan, Cluster, Descriptor, KubeconfigRef, PlanError, ServiceStatus};
use tracing::{debug, info, warn};

use crate::access::{self, Grant, InstanceAccess, Target};
use crate::apply::{self, Change, Owner};
use crate::clusters::ClientCache;
use crate::gather::{self, Instance, Reach};
use crate::metrics::Metrics;
use crate::plan;
use crate::sandbox::Plugin;
use crate::{Error, status};

/// The openmcp operation annotation and its values.
pub const OPERATION: &str = "openmcp.cloud/operation";
pub const OPERATION_IGNORE: &str = "ignore";
pub const OPERATION_RECONCILE: &str = "reconcile";

/// How often to look again while waiting for something that will trigger a
/// watch event anyway (an AccessRequest grant, an object going away).
const WAIT: Duration = Duration::from_secs(5);
/// Poll interval used when no ProviderConfig says otherwise.
const DEFAULT_POLL: Duration = Duration::from_secs(60);

/// Everything a reconcile needs; shared by all reconciles.
pub struct Context {
    pub plugin: Plugin,
    /// `--provider-name`: the ProviderConfig to use and the owner label value.
    pub provider_name: String,
    pub pod_namespace: String,
    pub field_manager: String,
    pub platform: Client,
    pub onboarding: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub service: ApiResource,
    pub provider_config: ApiResource,
    pub clients: ClientCache,
    /// Only service objects in this onboarding namespace (all when `None`).
    pub watch_namespace: Option<String>,
    /// Source Secrets each instance's last plan copies: `(ns, name)` → names.
    pub secret_users: Mutex<HashMap<(String, String), BTreeSet<String>>>,
    /// Consecutive failures per instance, for exponential backoff.
    failures: Mutex<HashMap<(String, String), u32>>,
}

impl Context {
    pub fn new(
        plugin: Plugin,
        provider_name: String,
        pod_namespace: String,
        platform: Client,
        onboarding: Client,
        recorder: Recorder,
        metrics: Arc<Metrics>,
    ) -> Self {
        let d = plugin.descriptor();
        let service = apply::api_resource(&d.service.api_version(), &d.service.kind, &d.service.plural);
        let provider_config =
            apply::api_resource(&d.provider_config.api_version(), &d.provider_config.kind, &d.provider_config.plural);
        Context {
            field_manager: format!("service-provider-host/{provider_name}"),
            plugin,
            provider_name,
            pod_namespace,
            platform,
            onboarding,
            recorder,
            metrics,
            service,
            provider_config,
            clients: ClientCache::default(),
            watch_namespace: None,
            secret_users: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    pub fn descriptor(&self) -> &Descriptor {
        self.plugin.descriptor()
    }

    /// Instances whose last plan copies the Secret `name` from the pod namespace.
    pub fn users_of_secret(&self, name: &str) -> Vec<(String, String)> {
        let users = self.secret_users.lock().expect("not poisoned");
        users.iter().filter(|(_, secrets)| secrets.contains(name)).map(|(k, _)| k.clone()).collect()
    }
}

fn operation(object: &DynamicObject) -> Option<&str> {
    object.metadata.annotations.as_ref()?.get(OPERATION).map(String::as_str)
}

/// Removes the `reconcile` operation annotation: it is a one-shot trigger.
pub async fn consume_reconcile_annotation(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject, Error> {
    let patch = json!({"metadata": {"annotations": {OPERATION: null}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("removing the {OPERATION} annotation of {name}"), e))
}

/// Entry point for the controller.
pub async fn reconcile(object: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let key = (object.namespace().unwrap_or_default(), object.name_any());
    let result = reconcile_instance(object, &ctx).await;
    let outcome = match &result {
        Ok((outcome, _)) => *outcome,
        Err(e) if not_yet(e).is_some() => "deleting",
        Err(_) => "error",
    };
    ctx.metrics.reconciled(outcome, started.elapsed());
    if result.is_ok() {
        ctx.failures.lock().expect("not poisoned").remove(&key);
    }
    result.map(|(_, action)| action)
}

/// Requeue policy on errors: "not yet" (deletion in progress) waits as asked;
/// real failures back off exponentially per instance, 1 s up to 5 min.
pub fn error_policy(object: Arc<DynamicObject>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Some(after) = not_yet(error) {
        return Action::requeue(after);
    }
    if stale_finalizer_view(error) {
        // Another trigger ran on a cached copy from before our own finalizer
        // patch; the guarded patch refused it. Not a failure: look again.
        debug!(instance = %object.name_any(), "finalizer already being added; retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    let key = (object.namespace().unwrap_or_default(), object.name_any());
    let mut failures = ctx.failures.lock().expect("not poisoned");
    let n = failures.entry(key.clone()).or_insert(0);
    *n = n.saturating_add(1);
    let delay = Duration::from_secs(1u64 << (*n - 1).min(8)).min(Duration::from_secs(300));
    warn!(instance = %format!("{}/{}", key.0, key.1), error = %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
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

fn not_yet(error: &Error) -> Option<Duration> {
    match error {
        Error::NotYet { retry_after, .. } => Some(*retry_after),
        Error::Finalizer(inner) => match inner.as_ref() {
            finalizer::Error::CleanupFailed(e) | finalizer::Error::ApplyFailed(e) => not_yet(e),
            _ => None,
        },
        _ => None,
    }
}

async fn reconcile_instance(object: Arc<DynamicObject>, ctx: &Context) -> Result<(&'static str, Action), Error> {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.onboarding.clone(), &namespace, &ctx.service);

    if operation(&object) == Some(OPERATION_IGNORE) {
        debug!(%namespace, %name, "ignored (operation annotation)");
        return Ok(("ignored", Action::await_change()));
    }
    let provider_config = read_provider_config(ctx).await?;
    if provider_config.as_ref().and_then(|pc| pc["metadata"]["annotations"][OPERATION].as_str())
        == Some(OPERATION_IGNORE)
    {
        debug!(%namespace, %name, "ignored (operation annotation on the ProviderConfig)");
        return Ok(("ignored", Action::await_change()));
    }
    let object = if operation(&object) == Some(OPERATION_RECONCILE) {
        info!(%namespace, %name, "reconcile requested by annotation");
        Arc::new(consume_reconcile_annotation(&api, &name).await?)
    } else {
        object
    };

    let finalizer_name = ctx.descriptor().finalizer.clone();
    // Stays as is when the helper only added the finalizer.
    let mut outcome = "finalizer";
    let outcome_ref = &mut outcome;
    let action = finalizer(&api, &finalizer_name, object, |event| async move {
        match event {
            finalizer::Event::Apply(o) => {
                let (label, action) = apply_instance(&o, provider_config.as_ref(), ctx).await?;
                *outcome_ref = label;
                Ok(action)
            }
            finalizer::Event::Cleanup(o) => {
                cleanup_instance(&o, provider_config.as_ref(), ctx).await?;
                *outcome_ref = "deleted";
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))?;
    Ok((outcome, action))
}

/// The ProviderConfig named `--provider-name`, unless it is missing or being
/// deleted.
pub async fn read_provider_config(ctx: &Context) -> Result<Option<Value>, Error> {
    let api: Api<DynamicObject> = Api::all_with(ctx.platform.clone(), &ctx.provider_config);
    let pc = api
        .get_opt(&ctx.provider_name)
        .await
        .map_err(|e| Error::kube(format!("reading {} {}", ctx.provider_config.kind, ctx.provider_name), e))?;
    Ok(pc.filter(|pc| pc.metadata.deletion_timestamp.is_none()).map(serde_json::to_value).transpose()?)
}

/// Writes the status if it changed, and records an Event when the phase or
/// the `Ready` message changed. Unchanged status: no request at all.
async fn write_status(
    ctx: &Context,
    object: &DynamicObject,
    desired: &ServiceStatus,
    warning: bool,
) -> Result<(), Error> {
    let raw = serde_json::to_value(object)?;
    let current = raw.get("status").filter(|s| !s.is_null());
    let generation = object.metadata.generation.unwrap_or(0);
    let next = status::next(current, generation, desired, &status::now());
    if current == Some(&next) {
        return Ok(());
    }
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.onboarding.clone(), &namespace, &ctx.service);
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": next}))).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(()),
        Err(e) => return Err(Error::kube(format!("writing the status of {namespace}/{name}"), e)),
    }
    let ready = |s: Option<&Value>| {
        s.and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == status::CONDITION_READY))
            .map(|c| (c["reason"].clone(), c["message"].clone()))
    };
    let phase_changed = current.and_then(|c| c.get("phase")) != next.get("phase");
    if phase_changed || ready(current) != ready(Some(&next)) {
        let message = ready(Some(&next)).and_then(|(_, m)| m.as_str().map(str::to_string)).unwrap_or_default();
        let (type_, reason) = if warning {
            let reason = ready(Some(&next)).and_then(|(r, _)| r.as_str().map(str::to_string)).unwrap_or_default();
            (EventType::Warning, reason)
        } else {
            (EventType::Normal, desired.phase.clone())
        };
        let event =
            Event { type_, reason, note: Some(truncate(&message, 1000)), action: "Reconcile".into(), secondary: None };
        if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&ctx.service)).await {
            // Events are best effort; the status carries the same message.
            warn!(%namespace, %name, error = %e, "could not record an Event");
        }
    }
    Ok(())
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

fn owner(ctx: &Context, instance: &Instance) -> Owner {
    Owner { provider: ctx.provider_name.clone(), name: instance.name.clone(), namespace: instance.namespace.clone() }
}

fn instance_access<'a>(
    ctx: &'a Context,
    instance: &'a Instance,
    tenant: &'a str,
    target: Target,
) -> InstanceAccess<'a> {
    let access = &ctx.descriptor().access;
    InstanceAccess {
        controller: &ctx.descriptor().service.group,
        instance_name: &instance.name,
        instance_namespace: &instance.namespace,
        tenant_namespace: tenant,
        rules: match target {
            Target::ControlPlane => &access.control_plane_rules,
            Target::Workload => &access.workload_rules,
        },
        target,
    }
}

/// What obtaining one cluster's access came to.
enum Obtained {
    Granted(KubeconfigRef),
    /// Not yet: the status says what we wait for.
    Waiting(String),
}

/// Requests access (creating the workload ClusterRequest first when needed)
/// and reads the grant.
async fn obtain(ctx: &Context, request: &InstanceAccess<'_>) -> Result<Obtained, Error> {
    if request.target == Target::Workload {
        let cluster_request = access::ensure_cluster_request(&ctx.platform, request, &ctx.field_manager).await?;
        if access::grant(&cluster_request) == Grant::Denied {
            return Err(Error::Invalid(format!(
                "the workload cluster was denied: ClusterRequest {}/{}",
                request.tenant_namespace,
                request.name()
            )));
        }
    }
    let live = access::ensure_access_request(&ctx.platform, request, &ctx.field_manager).await?;
    let what = match request.target {
        Target::ControlPlane => "ControlPlane",
        Target::Workload => "workload cluster",
    };
    match access::grant(&live) {
        Grant::Granted(at) => Ok(Obtained::Granted(at)),
        Grant::Denied => Err(Error::Invalid(format!(
            "{what} access was denied: AccessRequest {}/{}",
            request.tenant_namespace,
            request.name()
        ))),
        Grant::Pending => Ok(Obtained::Waiting(format!(
            "Waiting for {what} access (AccessRequest {}/{})",
            request.tenant_namespace,
            request.name()
        ))),
    }
}

/// During deletion: access only while the AccessRequest is alive and
/// granted, and a client for it if the cluster answers.
async fn remaining_access(
    ctx: &Context,
    request: &InstanceAccess<'_>,
    cluster: Cluster,
) -> Result<Option<(KubeconfigRef, Client)>, Error> {
    let live = access::get_access_request(&ctx.platform, request).await?;
    let granted =
        live.filter(|ar| ar.pointer("/metadata/deletionTimestamp").is_none()).and_then(|ar| match access::grant(&ar) {
            Grant::Granted(at) => Some(at),
            _ => None,
        });
    let Some(at) = granted else { return Ok(None) };
    match ctx.clients.get(&ctx.platform, &at, cluster, &ctx.metrics).await {
        Ok(client) => Ok(Some((at, client))),
        Err(e) => {
            warn!(request = %request.name(), error = %e, "cluster unreachable during cleanup");
            Ok(None)
        }
    }
}

/// Calls the plugin off the async threads (a call may run up to its deadline).
async fn call_plugin<R: Send + 'static>(
    ctx: &Context,
    call: &'static str,
    f: impl FnOnce(&Plugin) -> Result<R, Error> + Send + 'static,
) -> Result<R, Error> {
    let plugin = ctx.plugin.clone();
    let started = Instant::now();
    let result = tokio::task::spawn_blocking(move || f(&plugin))
        .await
        .map_err(|e| Error::Plugin(format!("plugin call panicked: {e}")))?;
    ctx.metrics.plugin_call(call, started.elapsed());
    result
}

/// Records a failure in the status, then hands it on (for backoff) or
/// requeues at the poll interval (for what only a person can fix).
async fn fail(
    ctx: &Context,
    object: &DynamicObject,
    error: Error,
    deleting: bool,
    poll: Duration,
) -> Result<(&'static str, Action), Error> {
    let message = error.to_string();
    let desired = if deleting { status::terminating_error(&message) } else { status::reconcile_error(&message) };
    write_status(ctx, object, &desired, true).await?;
    match error {
        Error::Invalid(_) | Error::Contract { .. } => Ok(("invalid-input", Action::requeue(poll))),
        other => Err(other),
    }
}

async fn apply_instance(
    object: &DynamicObject,
    provider_config: Option<&Value>,
    ctx: &Context,
) -> Result<(&'static str, Action), Error> {
    let raw = serde_json::to_value(object)?;
    let instance = Instance::from_object(&raw)?;
    let Some(provider_config) = provider_config else {
        let message = status::missing_provider_config(ctx.descriptor(), &ctx.provider_name);
        write_status(ctx, object, &status::reconcile_error(message), true).await?;
        return Ok(("invalid-input", Action::requeue(DEFAULT_POLL)));
    };
    match apply_with_config(object, &raw, &instance, provider_config, ctx).await {
        Ok(done) => Ok(done),
        Err(e) => fail(ctx, object, e, false, DEFAULT_POLL).await,
    }
}

async fn apply_with_config(
    object: &DynamicObject,
    raw: &Value,
    instance: &Instance,
    provider_config: &Value,
    ctx: &Context,
) -> Result<(&'static str, Action), Error> {
    let tenant = instance.tenant_namespace();
    access::ensure_namespace(&ctx.platform, &tenant).await?;
    let mut targets = vec![Target::ControlPlane];
    if ctx.descriptor().access.workload_cluster {
        targets.push(Target::Workload);
    }
    let mut granted = Vec::new();
    for target in targets {
        match obtain(ctx, &instance_access(ctx, instance, &tenant, target)).await? {
            Obtained::Granted(at) => granted.push(at),
            Obtained::Waiting(message) => {
                write_status(ctx, object, &status::reconciling(message), false).await?;
                return Ok(("waiting", Action::requeue(WAIT)));
            }
        }
    }
    let control_plane = granted.remove(0);
    let workload = granted.pop();
    let cp = ctx.clients.get(&ctx.platform, &control_plane, Cluster::ControlPlane, &ctx.metrics).await?;
    let wl = match &workload {
        Some(at) => Some(ctx.clients.get(&ctx.platform, at, Cluster::Workload, &ctx.metrics).await?),
        None => None,
    };
    let context = gather::context(instance, &ctx.provider_name, &ctx.pod_namespace, Some(control_plane), workload);
    let reach =
        Reach { platform: &ctx.platform, onboarding: &ctx.onboarding, control_plane: Some(&cp), workload: wl.as_ref() };
    let observed = gather::observe(&reach, ctx.descriptor(), &context, false).await?;
    let input = gather::input(raw, Some(provider_config), context, observed);

    let planned = call_plugin(ctx, "plan", move |p| plan::reconcile(p, &input)).await?;
    let plan = match planned {
        Ok(plan) => plan,
        Err(PlanError::InvalidInput(i)) => {
            write_status(ctx, object, &status::reconcile_error(&i.message), true).await?;
            return Ok(("invalid-input", requeue(i.requeue_after_seconds)));
        }
        Err(PlanError::Transient(message)) => return Err(Error::Plugin(message)),
    };

    // Record the sources first: if a copy fails because its source is
    // missing, creating that Secret must re-trigger this instance.
    ctx.secret_users.lock().expect("not poisoned").insert(
        (instance.namespace.clone(), instance.name.clone()),
        plan.secret_copies.iter().map(|c| c.source_name.clone()).collect(),
    );
    let owner = owner(ctx, instance);
    let (namespaces, others): (Vec<_>, Vec<_>) =
        plan.manifests.iter().partition(|m| m.kind == "Namespace" && m.api_version == "v1");
    let mut writes = 0;
    for m in &namespaces {
        let client = reach.client(m.cluster).expect("checked by plan::check_plan");
        writes += (apply::apply(client, m, &owner, &ctx.field_manager).await? == Change::Written) as usize;
    }
    for copy in &plan.secret_copies {
        let target = reach.client(copy.target_cluster).expect("checked by plan::check_plan");
        writes += (apply::copy_secret(&ctx.platform, &ctx.pod_namespace, target, copy, &owner, &ctx.field_manager)
            .await?
            == Change::Written) as usize;
    }
    for m in &others {
        let client = reach.client(m.cluster).expect("checked by plan::check_plan");
        writes += (apply::apply(client, m, &owner, &ctx.field_manager).await? == Change::Written) as usize;
    }
    for cluster in [Cluster::Platform, Cluster::ControlPlane, Cluster::Workload] {
        let Some(client) = reach.client(cluster) else { continue };
        let keep: Vec<(String, String)> = plan
            .secret_copies
            .iter()
            .filter(|c| c.target_cluster == cluster)
            .map(|c| (c.target_namespace.clone(), c.target_name.clone()))
            .collect();
        writes += apply::remove_copies(client, &owner, &keep).await?;
    }
    if writes > 0 {
        info!(namespace = %instance.namespace, name = %instance.name, writes, "applied");
    }
    write_status(ctx, object, &plan.status, false).await?;
    Ok(("applied", requeue(plan.requeue_after_seconds)))
}

fn requeue(seconds: u32) -> Action {
    if seconds == 0 { Action::await_change() } else { Action::requeue(Duration::from_secs(u64::from(seconds))) }
}

fn not_yet_error(reason: String, retry_after: Duration) -> Error {
    Error::NotYet { reason, retry_after }
}

/// Deletion. Returns `Ok` only when everything is gone, so the finalizer
/// helper removes the finalizer only then; `Error::NotYet` keeps it.
async fn cleanup_instance(object: &DynamicObject, provider_config: Option<&Value>, ctx: &Context) -> Result<(), Error> {
    let raw = serde_json::to_value(object)?;
    let instance = Instance::from_object(&raw)?;
    match cleanup_steps(object, &raw, &instance, provider_config, ctx).await {
        Ok(()) => Ok(()),
        Err(e @ Error::NotYet { .. }) => Err(e),
        Err(e) => {
            let message = e.to_string();
            write_status(ctx, object, &status::terminating_error(message), true).await?;
            Err(e)
        }
    }
}

async fn cleanup_steps(
    object: &DynamicObject,
    raw: &Value,
    instance: &Instance,
    provider_config: Option<&Value>,
    ctx: &Context,
) -> Result<(), Error> {
    let tenant = instance.tenant_namespace();
    let control_plane_request = instance_access(ctx, instance, &tenant, Target::ControlPlane);
    let workload_request = instance_access(ctx, instance, &tenant, Target::Workload);
    // Access only while an AccessRequest is alive and granted: if it is
    // gone, the platform side is still cleaned up.
    let cp = remaining_access(ctx, &control_plane_request, Cluster::ControlPlane).await?;
    let wl = match ctx.descriptor().access.workload_cluster {
        true => remaining_access(ctx, &workload_request, Cluster::Workload).await?,
        false => None,
    };
    let context = gather::context(
        instance,
        &ctx.provider_name,
        &ctx.pod_namespace,
        cp.as_ref().map(|(at, _)| at.clone()),
        wl.as_ref().map(|(at, _)| at.clone()),
    );
    let reach = Reach {
        platform: &ctx.platform,
        onboarding: &ctx.onboarding,
        control_plane: cp.as_ref().map(|(_, c)| c),
        workload: wl.as_ref().map(|(_, c)| c),
    };
    let observed = gather::observe(&reach, ctx.descriptor(), &context, true).await?;
    let input = gather::input(raw, provider_config, context, observed);
    let planned = call_plugin(ctx, "cleanup", move |p| plan::cleanup(p, &input)).await?;
    let owner = owner(ctx, instance);

    let teardown = match planned {
        Err(e) => return Err(Error::Plugin(e.to_string())),
        Ok(CleanupPlan::Blocked(blocked)) => {
            let desired = ServiceStatus { resources: blocked.resources, ..status::terminating(&blocked.message) };
            write_status(ctx, object, &desired, false).await?;
            return Err(not_yet_error(
                blocked.message,
                Duration::from_secs(u64::from(blocked.requeue_after_seconds.max(1))),
            ));
        }
        Ok(CleanupPlan::Teardown(teardown)) => teardown,
    };
    let in_progress =
        ServiceStatus { resources: teardown.resources.clone(), ..status::terminating("Cleanup in progress") };
    write_status(ctx, object, &in_progress, false).await?;

    for target in &teardown.objects {
        let Some(client) = reach.client(target.cluster) else { continue };
        if !apply::delete(client, target, &owner).await? {
            return Err(not_yet_error(format!("waiting for {} {} to be deleted", target.kind, target.name), WAIT));
        }
    }
    for target in &teardown.secret_copies {
        if let Some(client) = reach.client(target.cluster) {
            apply::delete(client, target, &owner).await?;
        }
    }
    for cluster in [Cluster::Platform, Cluster::ControlPlane, Cluster::Workload] {
        if let Some(client) = reach.client(cluster) {
            apply::remove_copies(client, &owner, &[]).await?;
        }
    }
    let mut requests = vec![&control_plane_request];
    if ctx.descriptor().access.workload_cluster {
        requests.push(&workload_request);
    }
    for request in requests {
        if !access::delete_access_request(&ctx.platform, request).await? {
            let reason = format!("waiting for AccessRequest {tenant}/{} to be deleted", request.name());
            return Err(not_yet_error(reason, WAIT));
        }
        if request.target == Target::Workload && !access::delete_cluster_request(&ctx.platform, request).await? {
            let reason = format!("waiting for ClusterRequest {tenant}/{} to be deleted", request.name());
            return Err(not_yet_error(reason, WAIT));
        }
    }
    for (at, _) in cp.iter().chain(wl.iter()) {
        ctx.clients.forget(at);
    }
    ctx.secret_users.lock().expect("not poisoned").remove(&(instance.namespace.clone(), instance.name.clone()));
    info!(namespace = %instance.namespace, name = %instance.name, "cleanup complete");
    Ok(())
}
