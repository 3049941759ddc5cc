//! Watches on a tenant's clusters while an instance's deletion is blocked.
//!
//! A plugin may block deletion on what it observes on the ControlPlane or a
//! workload cluster (kro: ResourceGraphDefinitions that removing kro would
//! orphan). Reading them again on every blocked round was a LIST per
//! instance every few seconds for as long as the tenant takes, hours at
//! times, and the deletion noticed the blocker gone only at its next round.
//! So while an instance is blocked, the host watches each of those
//! observations with the instance's own credentials: rounds read the
//! watch's store, an event wakes the instance at once, and the watch ends
//! when the instance is no longer blocked, is gone, or no round has read it
//! for [`IDLE`].
//!
//! These are the only watches on tenant clusters, one per blocked instance
//! and observation. Deny by default on size too: a watch keeps of each
//! object what every plugin sees of it, trimmed while it is parsed (`Slim`,
//! see [`super::trimmed`]), so annotations and managedFields a tenant piles
//! on are never built; it lists [`WATCH_PAGE`] objects a page, so that a
//! page fits the response limit of a tenant's cluster even of the largest
//! objects. A watch whose objects outgrow the plugin's input limit ends and
//! drops them, and reads fall back to a LIST, which that limit then refuses
//! with a clear error; so a tenant cannot make the host keep more than one
//! plugin input's worth per observation (twice that while a relist replaces
//! a list). No new watch starts while all of them hold more than
//! `BUDGET_INPUTS` inputs. A watch that cannot list (its credentials may
//! list but not watch, say) ends too, and its instance lists each round as
//! before. A watch whose kind the cluster does not serve (a CRD not
//! installed) stands for "none of it", and is started again every
//! [`ABSENT_RECHECK`] in case the kind was installed since: one request a
//! minute, not one a round.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::Resource;
use kube::api::{ApiResource, ObjectMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::de::{Deserialize, DeserializeSeed, Deserializer};
use serde_json::{Map, Value};
use service_provider_sdk::contract::Detail;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::trimmed::{Keep, Kept};
use super::{Packed, pack_event};
use follow::follow;

use crate::keys::InstanceKey;

/// How many objects a page of a blocker watch's list asks for: a page of
/// objects as large as an API server stores (about 1.5 MiB each) fits the
/// response limit of a tenant's cluster
/// ([`crate::clusters::MAX_TENANT_RESPONSE_BYTES`]), so a tenant with large
/// objects still gets a watch instead of a LIST every round.
pub const WATCH_PAGE: u32 = 8;

/// How long a watch that no round has read is kept (the instance went
/// without its deletion finishing, e.g. its finalizer was removed by hand).
pub const IDLE: Duration = Duration::from_secs(300);

/// One observation to watch for an instance.
pub struct Wanted {
    /// The observation's id (unique per plugin).
    pub id: String,
    /// A client with the instance's credentials for that cluster.
    pub client: Client,
    pub resource: ApiResource,
    /// Only in this namespace.
    pub namespace: Option<String>,
    /// Only the object of this name.
    pub name: Option<String>,
    /// Only metadata (a lighter watch, and all a metadata observation sees).
    pub metadata_only: bool,
    /// Whose credentials: a change (another kubeconfig Secret) starts a new
    /// watch, never reuses one made with other credentials.
    pub identity: String,
}

/// What the watch task reports.
#[derive(Default)]
struct Health {
    /// The store holds a complete list and no error came since: its
    /// contents can stand in for a LIST. Only a complete (re)list sets it;
    /// after an error an event may be lost for good.
    current: AtomicBool,
    /// The kind is not served: the store is empty, and current.
    absent: AtomicBool,
    /// The watch ended for good: it failed before its first list (the
    /// credentials may list but not watch) or outgrew the limit. Reads list instead, and it is not started again
    /// with the same credentials until it is evicted.
    ended: AtomicBool,
    /// The bytes of JSON its store holds (the host-wide budget).
    bytes: AtomicUsize,
    /// The store; dropped when the watch ends, so nothing of it is kept.
    store: Mutex<Option<Store<Packed>>>,
}

impl Health {
    fn new(store: Store<Packed>) -> Self {
        Health { store: Mutex::new(Some(store)), ..Health::default() }
    }

    fn end(&self) {
        self.current.store(false, Ordering::Release);
        self.ended.store(true, Ordering::Release);
        *self.store.lock().expect("not poisoned") = None;
        self.bytes.store(0, Ordering::Release);
    }
}

struct Watch {
    identity: String,
    health: Arc<Health>,
    task: JoinHandle<()>,
    started: Instant,
    used: Instant,
}

impl Watch {
    /// A watch that was listed, then failed and stayed behind for
    /// [`RESTART_AFTER`] (its token was rotated and it gets 401s, say) is
    /// started again.
    fn stuck(&self) -> bool {
        let health = &self.health;
        if health.absent.load(Ordering::Acquire) {
            return self.started.elapsed() > ABSENT_RECHECK;
        }
        self.started.elapsed() > RESTART_AFTER
            && !health.current.load(Ordering::Acquire)
            && !health.ended.load(Ordering::Acquire)
    }
}

/// How long a watch may stay behind before a round starts it again.
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// How long a watch found its kind not served before a round starts it
/// again, to see whether the kind was installed since.
pub const ABSENT_RECHECK: Duration = Duration::from_secs(60);

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The running watches, keyed by instance and observation id.
pub struct Blockers {
    entries: Mutex<HashMap<(InstanceKey, String), Watch>>,
    wake: Mutex<Option<UnboundedSender<InstanceKey>>>,
    /// The most one watch may hold: the plugin's input limit.
    max_bytes: usize,
}

/// All watches together hold at most this many plugin inputs' worth; past
/// it no new watch starts and blocked rounds list as before.
const BUDGET_INPUTS: usize = 2;

impl Blockers {
    /// `max_bytes`: the plugin's input limit.
    pub fn new(max_bytes: usize) -> Self {
        Blockers { entries: Mutex::default(), wake: Mutex::default(), max_bytes }
    }

    /// Where watch events send the instance to reconcile (the running
    /// controller's trigger); `None` while no controller runs.
    pub fn set_wake(&self, wake: Option<UnboundedSender<InstanceKey>>) {
        *self.wake.lock().expect("not poisoned") = wake;
    }

    /// The objects of an observation as its watch has them, if a watch with
    /// these credentials is running and current; `None`: read them instead.
    pub fn objects(&self, instance: &InstanceKey, id: &str, identity: &str) -> Option<Vec<Arc<Packed>>> {
        let mut entries = self.entries.lock().expect("not poisoned");
        let entry = entries.get_mut(&(instance.clone(), id.to_string()))?;
        if entry.identity != identity || !entry.health.current.load(Ordering::Acquire) {
            return None;
        }
        entry.used = Instant::now();
        let store = entry.health.store.lock().expect("not poisoned");
        store.as_ref().map(Store::state)
    }

    /// Keeps exactly the `wanted` watches of an instance: starts the missing
    /// ones while the budget allows, ends the others (an empty list ends
    /// them all).
    pub fn keep(&self, instance: &InstanceKey, wanted: Vec<Wanted>) {
        let mut entries = self.entries.lock().expect("not poisoned");
        entries.retain(|(of, id), entry| {
            of != instance || (!entry.stuck() && wanted.iter().any(|w| w.id == *id && w.identity == entry.identity))
        });
        let held = held(&entries);
        if held > BUDGET_INPUTS * self.max_bytes {
            warn!(bytes = held, "blocker watches are at their budget: blocked rounds list instead");
            return;
        }
        for w in wanted {
            if let Entry::Vacant(slot) = entries.entry((instance.clone(), w.id.clone())) {
                debug!(observation = %w.id, "watching what blocks the deletion");
                slot.insert(self.start(instance.clone(), w));
            }
        }
    }

    /// Ends the watches of an instance.
    pub fn forget(&self, instance: &InstanceKey) {
        self.keep(instance, Vec::new());
    }

    /// Ends the watches no round read for `idle`; returns how many are left.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        let mut entries = self.entries.lock().expect("not poisoned");
        entries.retain(|_, entry| entry.used.elapsed() < idle);
        entries.len()
    }

    /// Ends every watch (the controller stopped).
    pub fn clear(&self) {
        self.entries.lock().expect("not poisoned").clear();
    }

    /// The bytes of JSON the watches hold.
    pub fn bytes(&self) -> usize {
        held(&self.entries.lock().expect("not poisoned"))
    }

    /// How many watches run (or ended and are remembered).
    #[cfg(any(test, feature = "test-support"))]
    pub fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").len()
    }

    #[cfg(any(test, feature = "test-support"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn start(&self, instance: InstanceKey, wanted: Wanted) -> Watch {
        let writer = reflector::store::Writer::<Packed>::new(wanted.resource.clone());
        let store = writer.as_reader();
        let health = Arc::new(Health::new(store));
        let mut config = watcher::Config::default().page_size(WATCH_PAGE);
        if let Some(name) = &wanted.name {
            config = config.fields(&format!("metadata.name={name}"));
        }
        let (client, resource, namespace) = (wanted.client, &wanted.resource, wanted.namespace.as_deref());
        let events = match wanted.metadata_only {
            true => events::<true>(client, resource, namespace, config),
            false => events::<false>(client, resource, namespace, config),
        };
        let wake = self.wake.lock().expect("not poisoned").clone();
        let run = follow(events.reflect(writer), health.clone(), wake, instance, self.max_bytes);
        let now = Instant::now();
        Watch { identity: wanted.identity, health, task: tokio::spawn(run), started: now, used: now }
    }
}

/// The bytes of JSON all `entries` hold.
fn held(entries: &HashMap<(InstanceKey, String), Watch>) -> usize {
    entries.values().map(|e| e.health.bytes.load(Ordering::Acquire)).sum()
}

/// The events of a watch of `resource`, their objects [`Slim`] and packed.
fn events<const METADATA_ONLY: bool>(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    config: watcher::Config,
) -> BoxStream<'static, Result<watcher::Event<Packed>, watcher::Error>> {
    let api: Api<Slim<METADATA_ONLY>> = match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    };
    let resource = resource.clone();
    watcher(api, config).default_backoff().map_ok(move |event| pack_event(&event, |o| o.pack(&resource))).boxed()
}

/// An object as a blocker watch reads it: what every plugin sees of it,
/// trimmed while it is parsed ([`Keep`]), and the name, namespace and
/// resourceVersion the watch and its store go by. No annotations: the
/// grant names them per observation, and the watch is not told which (an
/// observation granted some is read by a LIST instead, see `gather`).
/// `METADATA_ONLY` asks the API server for metadata only (a lighter watch,
/// and all a metadata observation sees).
#[derive(Clone, Debug)]
struct Slim<const METADATA_ONLY: bool> {
    metadata: ObjectMeta,
    object: Map<String, Value>,
}

impl<const METADATA_ONLY: bool> Slim<METADATA_ONLY> {
    /// Packed for the store, with the kind of the watched resource (items
    /// of a list of a built-in kind come without it, metadata-only ones as
    /// `PartialObjectMetadata`).
    fn pack(&self, resource: &ApiResource) -> Packed {
        let kept = Kept { object: self.object.clone(), resource_version: None };
        Packed::pack_value(&kept.typed(&resource.api_version, &resource.kind))
    }
}

impl<'de, const METADATA_ONLY: bool> Deserialize<'de> for Slim<METADATA_ONLY> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let detail = if METADATA_ONLY { Detail::Metadata } else { Detail::Full };
        let Kept { object, resource_version } = Keep { detail, annotations: &[] }.deserialize(deserializer)?;
        let field = |key: &str| object.get("metadata")?.get(key)?.as_str().map(str::to_string);
        let metadata = ObjectMeta {
            name: field("name"),
            namespace: field("namespace"),
            resource_version,
            ..ObjectMeta::default()
        };
        Ok(Slim { metadata, object })
    }
}

/// Watched like a dynamic object of the resource; `metadata_api` makes the
/// watcher ask for metadata only.
impl<const METADATA_ONLY: bool> Resource for Slim<METADATA_ONLY> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn metadata_api() -> bool {
        METADATA_ONLY
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

mod follow;
#[cfg(test)]
mod tests;
