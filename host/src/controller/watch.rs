//! What triggers a reconcile: the kube-rs `Controller` over the plugin's
//! service kind, plus everything that maps back to an instance.
//!
//! - service objects on the onboarding cluster (the primary watch);
//! - the ProviderConfig named `--provider-name` (every instance; its
//!   `reconcile` operation annotation is consumed here);
//! - on the platform cluster, every kind the plugin observes or may write,
//!   filtered by the host's provider label and mapped back through the owner
//!   labels (a user's edit of a HelmRelease is reverted at once);
//! - the instances' ControlPlane AccessRequests (a grant continues a waiting
//!   reconcile);
//! - source Secrets in the pod namespace (exactly the instances whose last
//!   plan copies them) and the copies themselves.
//!
//! Every one of these watches also fills a reflector store
//! ([`crate::stores`]) that the reconciles read from, so one watch both
//! wakes an instance and answers its reads. Stored objects lose their
//! `managedFields` (nobody reads them; often the largest part) and are kept
//! as JSON text ([`Packed`]); the controller hands a reconcile the service
//! object parsed.

use std::collections::BTreeSet;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use service_provider_sdk::contract::Cluster;
use service_provider_sdk::names;
use tracing::{debug, info, warn};

use crate::Error;
use crate::clusters;
use crate::keys::InstanceKey;
use crate::owner::{LABEL_COPY_OF, Owner};
use crate::reconcile::access;
use crate::reconcile::shared::Loaded;
use crate::reconcile::{self, OPERATION, OPERATION_RECONCILE, Shared};
use crate::resource;
use crate::stores::{Packed, Stores, Watched, blockers, pack_event};

/// How long a reconcile request waits for more events of the same instance.
/// Events of one instance come in bursts (its objects on several watches
/// change together, e.g. the simulated Flux marks both Ready in one round),
/// and each was a reconcile and a status write of its own; 250 ms folds a
/// burst into one: at 500 instances one status write fewer per instance
/// (three, not four) and a fifth less host CPU (`task bench-scale`). A real
/// Flux is seconds apart between its objects, where this folds less. The
/// delay also applies to requeues, and events less than 250 ms apart keep
/// pushing the reconcile back (a steady stream waits until it pauses).
const DEBOUNCE: Duration = Duration::from_millis(250);

/// How many instances are reconciled at once.
const CONCURRENCY: u16 = 8;

/// Service objects listed at once: at most [`crate::stores::MAX_SEED_BYTES`]
/// of each is kept, but a page is read and parsed whole, and a tenant can
/// make its object 1.5 MiB (etcd's limit). With 100 objects of 820 KB
/// present, a start with pages of 10 raised the host's peak RSS by 59 MiB,
/// with pages of 4 by 27 MiB (`flood.rs`).
const SERVICE_PAGE: u32 = 4;

/// The kinds the plugin may copy: Secrets always, ConfigMaps when it asks
/// for them anywhere (copies and objects share capabilities).
fn copied_kinds(plugin: &Loaded) -> Vec<kube::api::ApiResource> {
    let mut kinds = vec![resource::api_resource("v1", "Secret", "secrets")];
    if plugin.descriptor().capabilities.iter().any(|c| c.api.group.is_empty() && c.api.kind == "ConfigMap") {
        kinds.push(resource::api_resource("v1", "ConfigMap", "configmaps"));
    }
    kinds
}

/// The platform kinds to watch: what the plugin observes or writes there
/// (Secrets and ConfigMaps have their own watches).
fn platform_kinds(plugin: &Loaded) -> Vec<kube::api::ApiResource> {
    let d = plugin.descriptor();
    let mut seen = BTreeSet::new();
    let observed = d.observations.iter().filter(|o| o.cluster == Cluster::Platform).map(|o| &o.api);
    let written = d.capabilities.iter().filter(|c| c.cluster == Cluster::Platform).map(|c| &c.api);
    observed
        .chain(written)
        .filter(|api| !(api.group.is_empty() && matches!(api.kind.as_str(), "Secret" | "ConfigMap" | "Namespace")))
        .filter(|api| seen.insert((api.api_version(), api.kind.clone())))
        .map(resource::of_kind)
        .collect()
}

/// What makes a service object worth another look (see the primary watch):
/// its generation, annotations, labels, finalizers and deletion. `None`
/// (always a look) when the stored object does not parse.
fn service_object_changed(object: &Packed) -> Option<u64> {
    let meta = object.full_metadata().ok()?;
    let mut hasher = DefaultHasher::new();
    (meta.generation, meta.annotations, meta.labels, meta.finalizers, meta.deletion_timestamp.map(|t| t.0))
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// `mapper`, with each request it makes seen going into the work queue
/// (its metrics, see [`crate::metrics::workqueue`]).
fn requesting<I: IntoIterator<Item = ObjectRef<Packed>>>(
    ctx: &Arc<Shared>,
    mapper: impl Fn(Packed) -> I + Send + Sync + 'static,
) -> impl Fn(Packed) -> Vec<ObjectRef<Packed>> + Send + Sync + 'static {
    let queue = ctx.metrics.workqueue.clone();
    move |object| {
        let requests: Vec<_> = mapper(object).into_iter().collect();
        requests.iter().for_each(|r| queue.requested(key_of(r)));
        requests
    }
}

/// The work queue's key of an instance the controller asks for.
fn key_of<K: reflector::Lookup>(r: &ObjectRef<K>) -> InstanceKey {
    InstanceKey::new(r.namespace.clone().unwrap_or_default(), r.name.clone())
}

fn instance_ref(plugin: &Loaded, key: &InstanceKey) -> ObjectRef<Packed> {
    ObjectRef::new_with(&key.name, plugin.service.clone()).within(&key.namespace)
}

/// The instance an object of the provider's belongs to, by its owner labels.
fn owner_of(plugin: &Loaded, provider_name: &str, object: &Packed) -> Option<ObjectRef<Packed>> {
    let meta = object.full_metadata().ok()?;
    Owner::of(&meta, provider_name).map(|key| instance_ref(plugin, &key))
}

/// The stream of objects a watch sees.
type Objects = BoxStream<'static, Result<Packed, watcher::Error>>;

/// A watch that fills a store on its way: the store, and the stream that
/// must be polled (by the controller, as a trigger) for it to fill.
fn reflect(
    api: Api<DynamicObject>,
    resource: ApiResource,
    config: watcher::Config,
    complete: bool,
    pack: fn(&DynamicObject) -> Packed,
) -> (Watched, Objects) {
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let listed = Arc::new(AtomicBool::new(false));
    let flag = listed.clone();
    let objects = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut DynamicObject| object.managed_fields_mut().clear())
        .map_ok(move |event| pack_event(&event, pack))
        .reflect(writer)
        // After `reflect`: the store has the list when the flag is set.
        .inspect_ok(move |event| {
            if matches!(event, watcher::Event::InitDone) {
                flag.store(true, Ordering::Release);
            }
        })
        .touched_objects()
        .boxed();
    (Watched { resource, store, complete, listed }, objects)
}

/// Hands a reconcile the service object parsed from its store.
async fn reconcile(object: Arc<Packed>, ctx: Arc<Shared>) -> Result<kube::runtime::controller::Action, Error> {
    let object = object.unpack().map_err(|e| Error::json("reading a stored service object", e))?;
    reconcile::reconcile(Arc::new(object), ctx).await
}

/// Runs the controller until `shutdown` completes.
pub async fn run(ctx: Arc<Shared>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    run_until(ctx, shutdown, || {}).await;
}

/// The controller as its watches are added to it.
type Wired = Controller<Packed>;

/// Like [`run`]; `synced` is called once every watch has listed (the
/// stores are filled and reconciles read from them).
pub async fn run_until(
    ctx: Arc<Shared>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    synced: impl FnOnce() + Send + 'static,
) {
    let mut stores = Stores::default();
    let (primary, controller) = watch_service_objects(&ctx);
    let primary_store = primary.store.clone();
    let store = primary_store.clone();
    ctx.metrics.instances.count_from(Some(Box::new(move || store.state().iter().map(|o| o.phase()).collect())));
    let controller = watch_platform_objects(controller, &ctx, &mut stores);
    let controller = watch_access_requests(controller, &ctx, &mut stores);
    let controller = watch_sources_and_copies(controller, &ctx, &mut stores);
    let controller = wake_on_blockers(controller, &ctx);

    let (trigger, all) = futures::channel::mpsc::unbounded::<()>();
    let pcs: Api<DynamicObject> = Api::all_with(ctx.clusters.platform.clone(), &ctx.plugin.provider_config);
    let by_name = watcher::Config::default().fields(&format!("metadata.name={}", ctx.identity.provider_name));
    let (watched, objects) = reflect(pcs, ctx.plugin.provider_config.clone(), by_name, true, Packed::pack);
    stores.provider_config = Some(watched);
    ctx.watches.set_stores(stores);
    let cache = tokio::spawn(report_synced(primary, synced));
    let halted = tokio::spawn(reconcile_all_when_the_canary_halts(ctx.clone(), trigger.clone()));
    let provider_config = tokio::spawn(watch_provider_config(ctx.clone(), objects, trigger));
    let evict = tokio::spawn(evict_idle(ctx.clone()));
    // Every instance in the store, as the controller asks for it.
    let (c, store) = (ctx.clone(), primary_store.clone());
    let all = all.inspect(move |()| {
        store.state().iter().for_each(|o| c.metrics.workqueue.requested(InstanceKey::of(o.as_ref())))
    });
    let queue = ctx.metrics.workqueue.clone();
    controller
        .reconcile_all_on(all)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, reconcile::error_policy, ctx.clone())
        .for_each(|result| async {
            match result {
                Ok((object, _)) => debug!(%object, "reconciled"),
                Err(controller::Error::ObjectNotFound(object)) => {
                    queue.dropped(&key_of(&object));
                    debug!(%object, "gone before its turn")
                }
                // A watch that cannot list or watch (retried with backoff):
                // the stores it fills stay behind until it recovers.
                Err(controller::Error::QueueError(e)) => warn!(error = %e, "a watch failed"),
                Err(e) => debug!(error = %e, "reconcile did not complete"),
            }
        })
        .await;
    provider_config.abort();
    halted.abort();
    cache.abort();
    evict.abort();
    ctx.metrics.instances.count_from(None);
    // The writers are gone with the watches: no reads from stale stores.
    ctx.watches.set_stores(Stores::default());
    ctx.watches.blockers.set_wake(None);
    ctx.watches.blockers.clear();
}

/// The primary watch: the service objects, listed once every other store
/// has listed. Returns their store (to report when it is synced) and the
/// controller over them.
fn watch_service_objects(ctx: &Arc<Shared>) -> (Watched, Wired) {
    let service =
        resource::dynamic_api(&ctx.clusters.onboarding, &ctx.plugin.service, ctx.watches.namespace.as_deref());
    // A tenant may make each of its objects a megabyte of labels: they are
    // listed a few at a time from etcd (a list from the watch cache ignores
    // the page size), and kept trimmed ([`Packed::seed`]).
    let config = watcher::Config::default().page_size(SERVICE_PAGE);
    let (primary, objects) = reflect(service, ctx.plugin.service.clone(), config, true, Packed::seed);
    // The host's own status writes are not a reason to look again: only
    // what a person or openmcp changes is (the spec, which moves the
    // generation; annotations such as the operation; labels; finalizers;
    // the deletion, which also moves the generation of an object with
    // finalizers). Without this, every status write was one more reconcile,
    // often before the stores had seen what that reconcile had just written.
    let queue = ctx.metrics.workqueue.clone();
    let objects = objects
        .predicate_filter(service_object_changed, PredicateConfig::default())
        .inspect_ok(move |object| queue.requested(InstanceKey::of(object)))
        .boxed();
    // The service objects are listed (and reconciles start) only once every
    // other watch has listed: reconciles read from those stores, and a read
    // before would go to the API server instead, with permissions the host
    // does not otherwise need.
    let c = ctx.clone();
    let objects = futures::stream::once(async move {
        stores_listed(c).await;
        objects
    })
    .flatten()
    .boxed();
    let controller = Controller::for_stream_with(objects, primary.store.clone(), ctx.plugin.service.clone())
        .with_config(controller::Config::default().concurrency(CONCURRENCY).debounce(DEBOUNCE));
    ctx.metrics.workqueue.start(&ctx.plugin.service.kind.to_lowercase(), CONCURRENCY.into(), DEBOUNCE);
    (primary, controller)
}

/// Every kind the plugin observes or writes on the platform cluster, with
/// the provider's label, mapped back through the owner labels.
fn watch_platform_objects(mut controller: Wired, ctx: &Arc<Shared>, stores: &mut Stores) -> Wired {
    let provider_selector = Owner::provider_selector(&ctx.identity.provider_name);
    for resource in platform_kinds(&ctx.plugin) {
        info!(kind = %resource.kind, "watching managed objects on the platform cluster");
        let api: Api<DynamicObject> = Api::all_with(ctx.clusters.platform.clone(), &resource);
        let config = watcher::Config::default().labels(&provider_selector);
        let (watched, objects) = reflect(api, resource.clone(), config, false, Packed::pack);
        stores.owned.push(watched);
        let c = ctx.clone();
        controller = controller.watches_stream_with(
            objects,
            requesting(ctx, move |o: Packed| owner_of(&c.plugin, &c.identity.provider_name, &o)),
            resource,
        );
    }
    controller
}

/// The instances' AccessRequests: a grant continues a waiting reconcile.
fn watch_access_requests(controller: Wired, ctx: &Arc<Shared>, stores: &mut Stores) -> Wired {
    let controller_name = ctx.plugin.descriptor().service.group.clone();
    let requests: Api<DynamicObject> = Api::all_with(ctx.clusters.platform.clone(), &access::access_request_resource());
    let managed_by = format!("{}={}", access::LABEL_MANAGED_BY, names::label_value(&controller_name));
    let (watched, objects) = reflect(
        requests,
        access::access_request_resource(),
        watcher::Config::default().labels(&managed_by),
        false,
        Packed::pack,
    );
    stores.access_requests = Some(watched);
    let c = ctx.clone();
    controller.watches_stream_with(
        objects,
        requesting(ctx, move |ar: Packed| {
            let labels = ar.full_metadata().ok()?.labels?;
            let name = labels.get(access::LABEL_ONBOARDING_NAME)?;
            let namespace = labels.get(access::LABEL_ONBOARDING_NAMESPACE)?;
            Some(instance_ref(&c.plugin, &InstanceKey::new(namespace, name)))
        }),
        access::access_request_resource(),
    )
}

/// The copy sources in the pod namespace (exactly the instances whose last
/// plan copies them) and the copies on the platform cluster.
fn watch_sources_and_copies(mut controller: Wired, ctx: &Arc<Shared>, stores: &mut Stores) -> Wired {
    let provider_selector = Owner::provider_selector(&ctx.identity.provider_name);
    for kind in copied_kinds(&ctx.plugin) {
        // Sources in the pod namespace: exactly the instances whose last plan
        // copies them, so a rotated pull secret or CA bundle rolls out at once.
        let sources = resource::dynamic_api(&ctx.clusters.platform, &kind, Some(&ctx.identity.pod_namespace));
        let (watched, objects) = reflect(sources, kind.clone(), watcher::Config::default(), true, Packed::pack);
        stores.sources.push(watched);
        let c = ctx.clone();
        let source_kind = kind.kind.clone();
        controller = controller.watches_stream_with(
            objects,
            requesting(ctx, move |o: Packed| {
                let users = c.memory.users_of_source(&source_kind, &o.name_any());
                users.into_iter().map(|user| instance_ref(&c.plugin, &user)).collect::<Vec<_>>()
            }),
            kind.clone(),
        );
        // The copies on the platform cluster: an edit or deletion is undone.
        let copies = resource::dynamic_api(&ctx.clusters.platform, &kind, None);
        let config = watcher::Config::default().labels(&format!("{provider_selector},{LABEL_COPY_OF}"));
        let (watched, objects) = reflect(copies, kind.clone(), config, false, Packed::pack);
        stores.copies.push(watched);
        let c = ctx.clone();
        controller = controller.watches_stream_with(
            objects,
            requesting(ctx, move |o: Packed| owner_of(&c.plugin, &c.identity.provider_name, &o)),
            kind,
        );
    }
    controller
}

/// What blocks a deletion is watched while it does (see
/// `stores::blockers`); a change there reconciles the instance.
fn wake_on_blockers(controller: Wired, ctx: &Arc<Shared>) -> Wired {
    let (blocker_changed, blocked) = futures::channel::mpsc::unbounded();
    ctx.watches.blockers.set_wake(Some(blocker_changed));
    let c = ctx.clone();
    controller.reconcile_on(blocked.map(move |key: InstanceKey| {
        let request = instance_ref(&c.plugin, &key);
        c.metrics.workqueue.requested(key);
        request
    }))
}

/// Drops the connection pools nobody used for [`clusters::POOL_IDLE`] and
/// the blocker watches no round read for [`blockers::IDLE`], so memory
/// follows the clusters that are busy, not all there are.
async fn evict_idle(ctx: Arc<Shared>) {
    let mut every = tokio::time::interval(clusters::POOL_IDLE / 2);
    loop {
        every.tick().await;
        let left = ctx.clusters.tenants.evict_idle(clusters::POOL_IDLE);
        debug!(pools = left, "idle connection pools dropped");
        let left = ctx.watches.blockers.evict_idle(blockers::IDLE);
        ctx.metrics.blockers(left, ctx.watches.blockers.bytes());
        debug!(watches = left, "blocker watches nobody read ended");
    }
}

/// Returns once every store the watches fill has its first list.
async fn stores_listed(ctx: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_millis(50));
    while !ctx.watches.stores().synced() {
        every.tick().await;
    }
}

/// Calls `synced` once the service objects are listed (which waits for
/// every other store), looking every 100 ms: cheap, and no waker to share.
async fn report_synced(primary: Watched, synced: impl FnOnce() + Send + 'static) {
    let mut every = tokio::time::interval(Duration::from_millis(100));
    while !primary.is_listed() {
        every.tick().await;
    }
    synced()
}

/// Reconciles every instance once the canary is halted: its cohort goes
/// back to the plugin now, not at its next poll.
async fn reconcile_all_when_the_canary_halts(ctx: Arc<Shared>, trigger: futures::channel::mpsc::UnboundedSender<()>) {
    let Some(canary) = &ctx.rollout.canary else { return };
    canary.wake.notified().await;
    let _ = trigger.unbounded_send(());
}

/// Watches the ProviderConfig: any change re-reconciles every instance; a
/// `reconcile` operation annotation is removed first (one-shot trigger).
async fn watch_provider_config(
    ctx: Arc<Shared>,
    mut events: Objects,
    trigger: futures::channel::mpsc::UnboundedSender<()>,
) {
    let api: Api<DynamicObject> = Api::all_with(ctx.clusters.platform.clone(), &ctx.plugin.provider_config);
    while let Some(event) = events.next().await {
        match event {
            Ok(pc) => {
                let meta = pc.full_metadata().unwrap_or_default();
                let annotations = meta.annotations.unwrap_or_default();
                let requested = annotations.get(OPERATION).map(String::as_str) == Some(OPERATION_RECONCILE);
                if requested && meta.deletion_timestamp.is_none() {
                    info!(name = %pc.name_any(), "reconcile of every instance requested by annotation");
                    if let Err(e) = reconcile::consume_reconcile_annotation(&api, &pc.name_any()).await {
                        warn!(error = %e, "could not remove the operation annotation of the ProviderConfig");
                    }
                }
                if trigger.unbounded_send(()).is_err() {
                    return;
                }
            }
            Err(e) => warn!(error = %e, "watching the ProviderConfig"),
        }
    }
}
