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
//! and observation. Deny by default on size too: a watch whose objects
//! outgrow the plugin's input limit ends and drops them, and reads fall back
//! to a LIST, which that limit then refuses with a clear error; so a tenant
//! cannot make the host keep more than one plugin input's worth per
//! observation (twice that while a relist replaces a list). No new watch
//! starts while all of them hold more than `BUDGET_INPUTS` inputs. A watch
//! that cannot list (its credentials may list but not watch, say) ends too,
//! and its instance lists each round as before.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta, TypeMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::{Packed, pack_event};
use follow::follow;

use crate::instance::InstanceKey;

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
    /// The watch ended for good: it failed before its first list (the
    /// credentials may list but not watch, the kind is not served) or
    /// outgrew the limit. Reads list instead, and it is not started again
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
        self.started.elapsed() > RESTART_AFTER
            && !health.current.load(Ordering::Acquire)
            && !health.ended.load(Ordering::Acquire)
    }
}

/// How long a watch may stay behind before a round starts it again.
const RESTART_AFTER: Duration = Duration::from_secs(10);

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
        let mut config = watcher::Config::default();
        if let Some(name) = &wanted.name {
            config = config.fields(&format!("metadata.name={name}"));
        }
        // List items of built-in kinds come without apiVersion and kind:
        // every stored object gets them from the resource.
        let (client, resource, namespace) = (wanted.client, &wanted.resource, wanted.namespace.as_deref());
        let types = TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() };
        let events = match wanted.metadata_only {
            // Metadata-only requests (`PartialObjectMeta` asks for them).
            true => {
                let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
                    Some(ns) => Api::namespaced_with(client, ns, resource),
                    None => Api::all_with(client, resource),
                };
                watcher(api, config)
                    .default_backoff()
                    .map_ok(move |event| {
                        pack_event(&event, |meta| {
                            let object =
                                DynamicObject { types: None, metadata: meta.metadata.clone(), data: json!({}) };
                            packed(object, &types)
                        })
                    })
                    .boxed()
            }
            false => watcher(crate::resource::dynamic_api(&client, resource, namespace), config)
                .default_backoff()
                .map_ok(move |event| pack_event(&event, |object| packed(object.clone(), &types)))
                .boxed(),
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

/// An object as a blocker watch keeps it: typed, without `managedFields`.
fn packed(mut object: DynamicObject, types: &TypeMeta) -> Packed {
    object.types = Some(types.clone());
    object.metadata.managed_fields = None;
    Packed::pack(&object)
}

mod follow;
#[cfg(test)]
mod tests;
