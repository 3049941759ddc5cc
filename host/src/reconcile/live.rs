//! The apply path of a live instance:
//! access → gather → plan → apply (in [`Step`] order) → prune → status.

use std::hash::{DefaultHasher, Hash, Hasher};

use kube::Client;
use kube::api::DynamicObject;
use serde_json::Value;
use service_provider_sdk::contract::{Cluster, Input, KubeconfigRef, ObjectCopy, PlanError};
use tracing::info;

use super::access::Target;
use super::apply::crds;
use super::apply::{self, Change, CopyJob, Sources};
use super::budget::{self, Budgets};
use super::gather;
use super::memory::Memo;
use super::reach::{Obtained, check_kinds, client_for, instance_access, obtain};
use super::rollout;
use super::shared::Loaded;
use super::status::{self, StatusWriter};
use super::{Again, DEFAULT_POLL, Outcome, Shared, WAIT};
use crate::Error;
use crate::adopt::Predecessor;
use crate::error::{UserInput, report};
use crate::instance::{Instance, Reach};
use crate::keys::InstanceKey;
use crate::metrics::Metrics;
use crate::plugin::plan::{self, CheckedPlan, Manifest, Step};
use crate::stores::{Lookup, Stores};

/// Reconciles a live instance. Failures are recorded in its status and go
/// on to the error policy: those only a person can fix as
/// [`Error::NeedsAPerson`] (looked at again every minute), the others with
/// backoff.
pub(super) async fn run(
    object: &DynamicObject,
    provider_config: Option<&Value>,
    ctx: &Shared,
    plugin: &Loaded,
) -> Result<(Outcome, Again), Error> {
    let raw = serde_json::to_value(object).map_err(|e| Error::json("reading the service object", e))?;
    let instance = Instance::from_object(&raw)?;
    if let Some(too_large) = oversized(object) {
        return told_too_large(ctx, object, too_large).await;
    }
    let result = match provider_config {
        Some(provider_config) => apply_with_config(object, &raw, &instance, provider_config, ctx, plugin).await,
        None => Err(status::missing_provider_config(plugin.descriptor(), &ctx.identity.provider_name).into()),
    };
    match result {
        Ok(done) => Ok(done),
        Err(error) => {
            let shown = status::failed(error.category().reason(), report(&error));
            let wrote = ctx.status.write(object, &shown, status::Severity::Warning).await?;
            match error.category().needs_a_person() {
                true => {
                    let retry_after = again_for_a_person(&ctx.metrics, &error, wrote);
                    Err(Error::NeedsAPerson { error: Box::new(error), retry_after })
                }
                false => Err(error),
            }
        }
    }
}

/// Why the service object is not reconciled, if the store kept it
/// trimmed for its size ([`crate::stores::Packed::seed`]): the plugin is
/// not asked.
fn oversized(object: &DynamicObject) -> Option<UserInput> {
    let bytes = object.metadata.annotations.as_ref()?.get(crate::stores::OVERSIZED)?.parse().ok()?;
    Some(UserInput::ServiceObjectTooLarge { bytes, limit: crate::stores::MAX_SEED_BYTES })
}

/// Step, for a service object kept trimmed: its tenant is told with a
/// Warning Event (once per generation and
/// [`VERIFY_INTERVAL`](super::memory::VERIFY_INTERVAL)), not in the
/// status, whose every write stores the whole object again (a megabyte in
/// etcd) and would spend the host-wide budget every tenant's status
/// shares. It fails as `user-input`, for the alerts, and is looked at
/// again as a failure only a person can fix.
async fn told_too_large(ctx: &Shared, object: &DynamicObject, too_large: UserInput) -> Result<(Outcome, Again), Error> {
    let key = InstanceKey::of(object);
    let error: Error = too_large.into();
    let told = Memo::ToldTooLarge { generation: object.metadata.generation.unwrap_or_default() };
    if !ctx.memory.is_verified(&key, &told) {
        ctx.status.warning(object, "ServiceObjectTooLarge", &report(&error)).await;
        ctx.memory.set_verified(&key, told);
    }
    Err(Error::NeedsAPerson { error: Box::new(error), retry_after: DEFAULT_POLL })
}

/// How soon an instance whose ControlPlane does not exist (yet) is looked
/// at again: a failed create and a namespace read, per instance.
const NO_CONTROL_PLANE_AGAIN_SECONDS: u32 = 15;

/// When a failure only a person can fix is looked at again: every minute,
/// sooner where the plugin asks (never below the requeue floor) or where
/// the status could not be written yet; never later, so that an alert on
/// the controller's error rate (openmcp's, over five minutes) goes on
/// seeing it while it lasts.
fn again_for_a_person(metrics: &Metrics, error: &Error, wrote: status::Wrote) -> std::time::Duration {
    let asked = match error {
        Error::UserInput(UserInput::Plan { requeue_after_seconds, .. }) => *requeue_after_seconds,
        // A tenant may order the service as it creates the ControlPlane,
        // whose namespace openmcp makes moments later.
        Error::UserInput(UserInput::NoControlPlane { .. }) => NO_CONTROL_PLANE_AGAIN_SECONDS,
        _ => 0,
    };
    match next_look(metrics, asked, wrote) {
        Again::After(after) => after.min(DEFAULT_POLL),
        Again::OnChange => DEFAULT_POLL,
    }
}

/// The apply path as a list of steps, with `plugin` (the plugin, or a
/// canary for an instance of its cohort).
async fn apply_with_config(
    object: &DynamicObject,
    raw: &Value,
    instance: &Instance,
    provider_config: &Value,
    ctx: &Shared,
    plugin: &Loaded,
) -> Result<(Outcome, Again), Error> {
    let key = InstanceKey::of(object);
    let Some(kubeconfigs) = obtain_access(ctx, plugin, object, &key, instance).await? else {
        return Ok((Outcome::Waiting, Again::After(WAIT)));
    };
    let clients = connect(ctx, plugin, &key, &kubeconfigs).await?;
    let reach = Reach {
        platform: &ctx.clusters.platform,
        onboarding: &ctx.clusters.onboarding,
        control_plane: Some(&clients.control_plane),
        workload: clients.workload.as_ref(),
    };
    let (input, fetched) = observe(ctx, plugin, raw, instance, provider_config, kubeconfigs, &reach).await?;
    let planned = plan::reconcile(&plugin.planner, &input).await;
    let recorders = rollout::Recorders { status: &ctx.status, memory: &ctx.memory, metrics: &ctx.metrics };
    rollout::shadow(&ctx.rollout, &recorders, object, &key, &input, &planned).await;
    let plan = match planned? {
        Ok(plan) => plan,
        Err(PlanError::InvalidInput(i)) => {
            let (message, requeue_after_seconds) = (i.message, i.requeue_after_seconds);
            return Err(UserInput::plan(&message, requeue_after_seconds).into());
        }
        Err(PlanError::Transient(message)) => {
            return Err(Error::plugin_transient(&plugin.descriptor().name, &message));
        }
    };
    // Record the sources first: if a copy fails because its source is
    // missing, creating that Secret must re-trigger this instance.
    ctx.memory.set_sources(&key, plan.copies.iter().map(|c| (c.kind().to_string(), c.source_name.clone())).collect());
    let sources = copy_sources(&ctx.watches.stores(), &ctx.identity.pod_namespace, plugin, &plan)?;
    if let Some(held) = budget_spent(&ctx.memory.budgets, &ctx.metrics, &key, &plan, &sources) {
        return hold(ctx, object, &plan, held).await;
    }
    let Written { writes, adopted, retired } =
        write(ctx, plugin, instance, &reach, &plan, provider_config, &fetched).await?;
    report_adopted(&ctx.status, object, &adopted).await;
    report_retired(&ctx.status, object, &retired).await;
    let pruned = prune(ctx, instance, &reach, &input.context, &plan).await?;
    if writes + pruned > 0 {
        info!(writes, pruned, "applied");
    }
    let wrote = ctx.status.write(object, &plan.status, status::Severity::Normal).await?;
    Ok((Outcome::Applied, next_look(&ctx.metrics, plan.requeue_after_seconds, wrote)))
}

/// Step, when the instance's writes wait for a budget: the plan's status,
/// with what was held and why, and a look again once the budget refills.
async fn hold(
    ctx: &Shared,
    object: &DynamicObject,
    plan: &CheckedPlan,
    held: status::Held,
) -> Result<(Outcome, Again), Error> {
    let wrote = ctx.status.write_held(object, &plan.status, status::Severity::Normal, Some(held)).await?;
    let status::Held::Writes { wait, .. } = held;
    let wait = match wrote {
        status::Wrote::Held(status_wait) => wait.min(status_wait),
        _ => wait,
    };
    Ok((Outcome::Limited, Again::After(wait)))
}

/// Step: the bytes of each source the plan copies (in the order of its
/// copies), all together within [`MAX_PLAN_COPY_BYTES`]: each copy is a
/// write of its whole source. The sizes are those of the watch of sources
/// (synced before the controller starts); a source it has not seen yet
/// counts nothing.
fn copy_sources(
    stores: &Stores,
    pod_namespace: &str,
    plugin: &Loaded,
    plan: &CheckedPlan,
) -> Result<Vec<usize>, Error> {
    let sizes: Vec<usize> = plan
        .copies
        .iter()
        .map(|copy| {
            let source = stores.source(copy.kind(), pod_namespace, &copy.source_name).found();
            source.map_or(0, |source| crate::resource::stored_size(source.as_ref()))
        })
        .collect();
    let bytes: usize = sizes.iter().sum();
    if bytes <= MAX_PLAN_COPY_BYTES {
        return Ok(sizes);
    }
    let reason = format!(
        "its {} copies come to {bytes} bytes, more than the limit of {MAX_PLAN_COPY_BYTES} bytes per plan",
        plan.copies.len()
    );
    Err(Error::InvalidPlan { plugin: plugin.descriptor().name.clone(), reason })
}

/// The most bytes of copy sources one plan may copy, all together: two
/// copies of a source near Kubernetes' limit for one object (a CA bundle
/// on the platform and on a ControlPlane, say).
pub const MAX_PLAN_COPY_BYTES: usize = 2 << 20;

/// When to look again: the plugin's requeue (at least the floor), or
/// sooner where the status could not be written yet.
fn next_look(metrics: &Metrics, requeue_after_seconds: u32, wrote: status::Wrote) -> Again {
    let (asked, raised) = budget::requeue(requeue_after_seconds);
    if raised {
        metrics.limited(budget::Limit::RequeueFloor);
    }
    match (asked, wrote) {
        (Some(asked), status::Wrote::Held(wait)) => Again::After(asked.min(wait)),
        (None, status::Wrote::Held(wait)) => Again::After(wait),
        (Some(asked), _) => Again::After(asked),
        (None, _) => Again::OnChange,
    }
}

/// Whether the instance's writes must wait: a budget of a cluster its plan
/// writes to ([`crate::reconcile::budget`]) does not hold what the round
/// may write there (its objects, and the sources it copies there). Then
/// nothing of the plan is written this round, and the status says why;
/// else the round is written whole, and pruned.
fn budget_spent(
    budgets: &Budgets,
    metrics: &Metrics,
    key: &InstanceKey,
    plan: &CheckedPlan,
    sources: &[usize],
) -> Option<status::Held> {
    let objects = plan.manifests.iter().map(|m| (m.cluster, crate::resource::stored_size(&m.object)));
    let copies = plan.copies.iter().zip(sources).map(|(c, bytes)| (c.target_cluster, *bytes));
    let mut need: Vec<(Cluster, usize)> = Vec::new();
    for (cluster, bytes) in objects.chain(copies) {
        match need.iter_mut().find(|(c, _)| *c == cluster) {
            Some((_, total)) => *total += bytes,
            None => need.push((cluster, bytes)),
        }
    }
    for (cluster, bytes) in need {
        if let Some(held) = status::Held::writes(budgets, key, cluster, bytes) {
            metrics.limited(budget::Limit::WriteRate);
            return Some(held);
        }
    }
    None
}

/// The kubeconfigs granted for the instance's tenant clusters.
pub(super) struct Kubeconfigs {
    pub(super) control_plane: KubeconfigRef,
    pub(super) workload: Option<KubeconfigRef>,
}

/// A client for each of the instance's tenant clusters.
pub(super) struct TenantClients {
    pub(super) control_plane: Client,
    pub(super) workload: Option<Client>,
}

/// Step: cluster access to every tenant cluster of the instance, or `None`
/// while a grant is pending.
async fn obtain_access(
    ctx: &Shared,
    plugin: &Loaded,
    object: &DynamicObject,
    key: &InstanceKey,
    instance: &Instance,
) -> Result<Option<Kubeconfigs>, Error> {
    let Some(control_plane) = obtain_one(ctx, plugin, object, key, instance, Target::ControlPlane).await? else {
        return Ok(None);
    };
    let workload = match plugin.granted().workload_cluster {
        false => None,
        true => match obtain_one(ctx, plugin, object, key, instance, Target::Workload).await? {
            Some(at) => Some(at),
            None => return Ok(None),
        },
    };
    Ok(Some(Kubeconfigs { control_plane, workload }))
}

/// Access to one tenant cluster, or `None` while its grant is pending (the
/// status says so).
async fn obtain_one(
    ctx: &Shared,
    plugin: &Loaded,
    object: &DynamicObject,
    key: &InstanceKey,
    instance: &Instance,
    target: Target,
) -> Result<Option<KubeconfigRef>, Error> {
    let tenant = instance.tenant_namespace();
    let mut adopted = Vec::new();
    let obtained = obtain(ctx, &instance_access(plugin, instance, &tenant, target), &mut adopted).await;
    report_adopted(&ctx.status, object, &adopted).await;
    match obtained? {
        Obtained::Granted(at) => Ok(Some(at)),
        Obtained::Waiting { message, just_requested } => {
            // On a healthy platform a grant follows its request within a
            // second or so, and the next status replaces this one. So a new
            // object shows the wait only once it has lasted [`WAIT`] (the
            // requeue then finds it still pending): one status write and
            // one Event less per instance created. (From the first request:
            // one recreated again and again must not keep the status empty.)
            if just_requested {
                ctx.memory.record_first(key, Memo::AccessRequested);
            }
            let fresh = status::ObjectStatus::of(object).is_none()
                && ctx.memory.recorded_within(key, &Memo::AccessRequested, WAIT);
            if !fresh {
                ctx.status.write(object, &status::reconciling(message), status::Severity::Normal).await?;
            }
            Ok(None)
        }
    }
}

/// Step: a client for each granted cluster, the plugin's kinds checked on it.
pub(super) async fn connect(
    ctx: &Shared,
    plugin: &Loaded,
    key: &InstanceKey,
    kubeconfigs: &Kubeconfigs,
) -> Result<TenantClients, Error> {
    let (clusters, memory) = (&ctx.clusters, &ctx.memory);
    let control_plane = client_for(clusters, memory, key, &kubeconfigs.control_plane, Cluster::ControlPlane).await?;
    check_kinds(plugin, memory, key, Cluster::ControlPlane, &control_plane).await?;
    let workload = match &kubeconfigs.workload {
        Some(at) => Some(client_for(clusters, memory, key, at, Cluster::Workload).await?),
        None => None,
    };
    if let Some(workload) = &workload {
        check_kinds(plugin, memory, key, Cluster::Workload, workload).await?;
    }
    Ok(TenantClients { control_plane, workload })
}

/// Step: `plugin`'s input (and what was read for it, which the copies
/// reuse).
pub(super) async fn observe(
    ctx: &Shared,
    plugin: &Loaded,
    raw: &Value,
    instance: &Instance,
    provider_config: &Value,
    kubeconfigs: Kubeconfigs,
    reach: &Reach<'_>,
) -> Result<(Input, gather::Fetched), Error> {
    let context = gather::context(
        instance,
        &ctx.identity.provider_name,
        &ctx.identity.pod_namespace,
        Some(kubeconfigs.control_plane),
        kubeconfigs.workload,
    );
    let stores = ctx.watches.stores();
    let observer = plugin.observer(reach, &stores);
    let mut fetched = gather::Fetched::default();
    let observed = gather::observe(&observer, &context, gather::Purpose::Plan, &mut fetched).await?;
    Ok((gather::input(raw, Some(provider_config), context, observed), fetched))
}

/// Says what was taken over (`--adopt-from`): a log line, the metric and
/// an `Adopted` Event each.
async fn report_adopted(status: &StatusWriter, object: &DynamicObject, adopted: &[Predecessor]) {
    for Predecessor { place: what, by } in adopted {
        info!(object = %what, field_manager = %by, "adopted");
        status.metrics.adopted();
        let note = format!("took over {what}, written by field manager {by:?}");
        status.took_over(object, "Adopted", &note).await;
    }
}

/// Says which predecessor's copies were deleted: a log line and a
/// `Retired` Event each.
async fn report_retired(status: &StatusWriter, object: &DynamicObject, retired: &[Predecessor]) {
    for Predecessor { place: what, by } in retired {
        info!(object = %what, field_manager = %by, "retired a predecessor's copy");
        let note = format!("deleted {what}, a copy field manager {by:?} made that nothing here uses any more");
        status.took_over(object, "Retired", &note).await;
    }
}

/// What the steps of a plan wrote.
struct Written {
    /// How many steps wrote something.
    writes: usize,
    /// What was taken over (`--adopt-from`), and from which field manager.
    adopted: Vec<Predecessor>,
    /// A predecessor's copies deleted, and whose they were.
    retired: Vec<Predecessor>,
}

/// Applies every step of the plan.
async fn write(
    ctx: &Shared,
    plugin: &Loaded,
    instance: &Instance,
    reach: &Reach<'_>,
    plan: &CheckedPlan,
    provider_config: &Value,
    fetched: &gather::Fetched,
) -> Result<Written, Error> {
    let owner = instance.owner(&ctx.identity.provider_name);
    let sources = Sources {
        granted: plugin.granted(),
        provider_config: Some(provider_config),
        reserved: &ctx.identity.reserved_secrets,
    };
    let key = instance.key();
    let mut writes = install_crds(ctx, plugin, &key, reach).await?;
    let mut adopted = Vec::new();
    let stores = ctx.watches.stores();
    let job = |copy: &ObjectCopy| CopyJob {
        platform: &ctx.clusters.platform,
        pod_namespace: &ctx.identity.pod_namespace,
        target: reach.client(copy.target_cluster).expect("checked by plan::check_plan"),
        sources: &sources,
        stores: &stores,
        owner: &owner,
        field_manager: &ctx.identity.field_manager,
        adoption: &ctx.identity.adoption,
    };
    for step in plan.steps() {
        let unwatched = unwatched(&ctx.watches.stores(), &ctx.identity.pod_namespace, &step);
        if let Some((memo, digest)) = &unwatched
            && ctx.memory.is_verified_as(&key, memo, Some(*digest))
        {
            continue;
        }
        let change = match step {
            Step::Apply(m) => {
                let client = reach.client(m.cluster).expect("checked by plan::check_plan");
                let cached = cached(&stores, fetched, m);
                let change =
                    apply::apply(client, m, cached, &owner, &ctx.identity.field_manager, &ctx.identity.adoption)
                        .await?;
                spent(&ctx.memory.budgets, &ctx.metrics, &key, m.cluster, &change);
                change
            }
            Step::Copy(copy) => {
                let change = job(copy).copy(copy).await?;
                spent(&ctx.memory.budgets, &ctx.metrics, &key, copy.target_cluster, &change);
                change
            }
        };
        if let Change::Adopted { place, by, .. } = &change {
            adopted.push(Predecessor { place: place.clone(), by: by.clone() });
        }
        if let Some((memo, digest)) = unwatched {
            ctx.memory.set_verified_as(&key, memo, Some(digest));
        }
        writes += usize::from(change != Change::Unchanged);
    }
    // A predecessor's copies, now that nothing applied refers to them.
    let mut retired = Vec::new();
    for copy in &plan.copies {
        retired.extend(job(copy).retire_predecessor(copy).await?);
    }
    Ok(Written { writes, adopted, retired })
}

/// The plugin's CRDs for the instance's own clusters (ControlPlane,
/// workload), once per process; how many were written.
async fn install_crds(ctx: &Shared, plugin: &Loaded, key: &InstanceKey, reach: &Reach<'_>) -> Result<usize, Error> {
    if ctx.memory.crds_installed(key) {
        return Ok(0);
    }
    let (descriptor, own) = (plugin.descriptor(), &plugin.granted().own);
    let (field_manager, adoption) = (&ctx.identity.field_manager, &ctx.identity.adoption);
    let mut writes = 0;
    for (cluster, client) in reach.targets().filter(|(c, _)| matches!(c, Cluster::ControlPlane | Cluster::Workload)) {
        writes += usize::from(crds::ensure(client, cluster, descriptor, own, field_manager, adoption).await?);
    }
    ctx.memory.set_crds_installed(key);
    Ok(writes)
}

/// What is known of the object a manifest writes. None of ours in a store:
/// a create-only apply (see `apply::apply`) finds anything else there.
/// Unless a store has it: read moments ago by this reconcile's
/// observations (which also see what is not ours)?
fn cached(stores: &Stores, fetched: &gather::Fetched, m: &Manifest) -> Lookup {
    let namespace = m.namespace.as_deref();
    let stored = match m.cluster {
        Cluster::Platform => stores.ours(&m.api_version, &m.kind, namespace, &m.name),
        _ => Lookup::Unknown,
    };
    match stored {
        Lookup::Found(live) => Lookup::Found(live),
        miss => match fetched.lookup(m.cluster, &m.api_version, &m.kind, namespace, &m.name) {
            Lookup::Unknown => miss,
            read => read,
        },
    }
}

/// Counts what a step wrote against the instance's budget for its cluster.
fn spent(budgets: &Budgets, metrics: &Metrics, key: &InstanceKey, cluster: Cluster, change: &Change) {
    let bytes = change.bytes();
    budgets.spend(key, cluster, bytes);
    if bytes > 0 {
        metrics.written(cluster.as_str(), bytes);
    }
}

/// For a step on a cluster the host does not watch (a ControlPlane, a
/// workload cluster): what it is and a digest of what it wants, so that an
/// unchanged step verified recently is not read again. A copy's digest
/// includes its source's `resourceVersion` (a rotated source is copied at
/// once); without the source in a store there is no digest.
fn unwatched(stores: &Stores, pod_namespace: &str, step: &Step<'_>) -> Option<(Memo, u64)> {
    let digest = |text: &str| {
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        hasher.finish()
    };
    match step {
        Step::Apply(m) if m.cluster != Cluster::Platform => {
            let place = m.namespace.as_ref().map_or(m.name.clone(), |ns| format!("{ns}/{}", m.name));
            let memo = Memo::Step { cluster: m.cluster, what: format!("{} {} {place}", m.api_version, m.kind) };
            Some((memo, digest(&m.object.to_string())))
        }
        Step::Copy(copy) if copy.target_cluster != Cluster::Platform => {
            let source = stores.source(copy.kind(), pod_namespace, &copy.source_name).found()?;
            let version = source.metadata.resource_version.clone()?;
            let what = format!("copy {}/{}", copy.target_namespace, copy.target_name);
            Some((Memo::Step { cluster: copy.target_cluster, what }, digest(&format!("{copy:?} {version}"))))
        }
        _ => None,
    }
}

/// Deletes what the instance owns but the plan no longer asks for, when
/// the plan's inventory changed since the last prune.
async fn prune(
    ctx: &Shared,
    instance: &Instance,
    reach: &Reach<'_>,
    context: &service_provider_sdk::contract::Context,
    plan: &CheckedPlan,
) -> Result<usize, Error> {
    let key = instance.key();
    let inventory = plan.inventory();
    if !ctx.memory.inventory_changed(&key, &inventory) {
        return Ok(0);
    }
    let owner = instance.owner(&ctx.identity.provider_name);
    let stores = ctx.watches.stores();
    let mut deleted = 0;
    for (cluster, client) in reach.targets() {
        let scopes = ctx.rollout.writable(&ctx.plugin, context, cluster);
        deleted += apply::prune(client, cluster, &scopes, &owner, &inventory, Some(&stores)).await?;
    }
    ctx.memory.pruned(&key, inventory);
    Ok(deleted)
}
