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
//! outgrow the plugin's input limit ends, and reads fall back to a LIST,
//! which that limit then refuses with a clear error; so a tenant cannot
//! make the host keep more than one plugin input's worth per observation.
//!
//! This file is long because its tests drive the watch loop with scripted
//! watch events (listing, errors, growth past the limit).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta, TypeMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::{Packed, pack_event};

/// `(namespace, name)` of a service object.
pub type InstanceKey = (String, String);

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
    /// The store holds a complete list and no error came since the last
    /// event: its contents can stand in for a LIST.
    current: AtomicBool,
}

struct Watch {
    identity: String,
    store: Store<Packed>,
    health: Arc<Health>,
    task: JoinHandle<()>,
    started: Instant,
    used: Instant,
}

impl Watch {
    /// A watch that had time to list and is not current (its credentials
    /// were rotated and it gets 401s, say) is started again.
    fn stuck(&self) -> bool {
        self.started.elapsed() > RESTART_AFTER && !self.health.current.load(Ordering::Acquire)
    }
}

/// How long a watch may take to become current before a round starts it
/// again.
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
    max_bytes: usize,
}

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
        Some(entry.store.state())
    }

    /// Keeps exactly the `wanted` watches of an instance: starts the missing
    /// ones, ends the others (an empty list ends them all).
    pub fn keep(&self, instance: &InstanceKey, wanted: Vec<Wanted>) {
        let mut entries = self.entries.lock().expect("not poisoned");
        entries.retain(|(of, id), entry| {
            of != instance || (!entry.stuck() && wanted.iter().any(|w| w.id == *id && w.identity == entry.identity))
        });
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

    /// How many watches run.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn start(&self, instance: InstanceKey, wanted: Wanted) -> Watch {
        let writer = reflector::store::Writer::<Packed>::new(wanted.resource.clone());
        let store = writer.as_reader();
        let health = Arc::new(Health::default());
        let mut config = watcher::Config::default();
        if let Some(name) = &wanted.name {
            config = config.fields(&format!("metadata.name={name}"));
        }
        let (client, resource, namespace) = (wanted.client, &wanted.resource, wanted.namespace.as_deref());
        let events = match wanted.metadata_only {
            true => {
                let types = TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() };
                let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
                    Some(ns) => Api::namespaced_with(client, ns, resource),
                    None => Api::all_with(client, resource),
                };
                watcher(api, config)
                    .default_backoff()
                    .map_ok(move |event| {
                        pack_event(&event, |meta| {
                            let mut object = DynamicObject {
                                types: Some(types.clone()),
                                metadata: meta.metadata.clone(),
                                data: json!({}),
                            };
                            object.managed_fields_mut().clear();
                            Packed::pack(&object)
                        })
                    })
                    .boxed()
            }
            false => watcher(crate::resource::dynamic_api(&client, resource, namespace), config)
                .default_backoff()
                .map_ok(|event| {
                    pack_event(&event, |object| {
                        let mut object = object.clone();
                        object.managed_fields_mut().clear();
                        Packed::pack(&object)
                    })
                })
                .boxed(),
        };
        let wake = self.wake.lock().expect("not poisoned").clone();
        let run = follow(events.reflect(writer), store.clone(), health.clone(), wake, instance, self.max_bytes);
        let now = Instant::now();
        Watch { identity: wanted.identity, store, health, task: tokio::spawn(run), started: now, used: now }
    }
}

/// Drives one watch: keeps [`Health`] up to date, wakes the instance on
/// every change once listed, and ends the watch when its objects outgrow
/// `max_bytes`.
async fn follow(
    events: impl Stream<Item = Result<watcher::Event<Packed>, watcher::Error>> + Send,
    store: Store<Packed>,
    health: Arc<Health>,
    wake: Option<UnboundedSender<InstanceKey>>,
    instance: InstanceKey,
    max_bytes: usize,
) {
    let mut events = std::pin::pin!(events);
    // The initial list is held by the store's writer until it is complete:
    // counted here as it comes, so a huge one ends the watch early.
    let mut listing = 0usize;
    while let Some(event) = events.next().await {
        let changed = match event {
            Err(e) => {
                debug!(error = %e, "a blocker watch failed; reads go to the API server until it recovers");
                health.current.store(false, Ordering::Release);
                continue;
            }
            Ok(watcher::Event::Init) => {
                listing = 0;
                false
            }
            Ok(watcher::Event::InitApply(object)) => {
                listing += object.bytes();
                false
            }
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => true,
        };
        let bytes = match changed {
            true => store.state().iter().map(|o| o.bytes()).sum(),
            false => listing,
        };
        if bytes > max_bytes {
            warn!(bytes, max_bytes, "what blocks the deletion outgrew the plugin's input limit: no longer watched");
            health.current.store(false, Ordering::Release);
            return;
        }
        if changed {
            health.current.store(true, Ordering::Release);
            if let Some(wake) = &wake {
                let _ = wake.unbounded_send(instance.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::stream;

    use super::*;

    fn object(name: &str, filler: usize) -> Packed {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition",
            "metadata": {"name": name}, "spec": {"filler": "x".repeat(filler)}
        }))
        .expect("object");
        Packed::pack(&object)
    }

    fn resource() -> ApiResource {
        crate::resource::api_resource("kro.run/v1alpha1", "ResourceGraphDefinition", "resourcegraphdefinitions")
    }

    async fn run(
        events: Vec<Result<watcher::Event<Packed>, watcher::Error>>,
        max_bytes: usize,
    ) -> (Store<Packed>, bool, Vec<InstanceKey>) {
        let writer = reflector::store::Writer::<Packed>::new(resource());
        let store = writer.as_reader();
        let health = Arc::new(Health::default());
        let (wake, woken) = futures::channel::mpsc::unbounded();
        let instance = ("default".to_string(), "mcp-01".to_string());
        follow(stream::iter(events).reflect(writer), store.clone(), health.clone(), Some(wake), instance, max_bytes)
            .await;
        (store, health.current.load(Ordering::Acquire), woken.collect().await)
    }

    #[tokio::test]
    async fn a_listed_watch_is_current_and_wakes_its_instance_on_each_change() {
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(object("a", 10))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Delete(object("a", 10))),
        ];
        let (store, current, woken) = run(events, 1 << 20).await;
        assert!(current);
        assert!(store.state().is_empty(), "the deletion reached the store");
        assert_eq!(woken.len(), 2, "once listed, and once for the deletion");
    }

    #[tokio::test]
    async fn an_error_makes_the_store_not_current_until_the_next_event() {
        let error = || Err(watcher::Error::NoResourceVersion);
        let listed = [Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)];
        let (_, current, _) = run(listed.into_iter().chain([error()]).collect(), 1 << 20).await;
        assert!(!current, "after an error the store may be stale");
        let recovered = [
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitDone),
            error(),
            Ok(watcher::Event::Apply(object("b", 1))),
        ];
        let (store, current, _) = run(recovered.into_iter().collect(), 1 << 20).await;
        assert!(current);
        assert_eq!(store.state().len(), 1);
    }

    #[tokio::test]
    async fn a_watch_whose_objects_outgrow_the_input_limit_ends() {
        let during_the_list = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(object("a", 600))),
            Ok(watcher::Event::InitApply(object("b", 600))),
            Ok(watcher::Event::InitDone),
        ];
        let (_, current, woken) = run(during_the_list, 1000).await;
        assert!(!current && woken.is_empty(), "ended before the list was complete");
        let later = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(object("a", 600))),
            Ok(watcher::Event::Apply(object("b", 600))),
            Ok(watcher::Event::Apply(object("c", 1))),
        ];
        let (store, current, woken) = run(later, 1000).await;
        assert!(!current, "not current once it ended");
        assert_eq!(store.state().len(), 2, "nothing after the object that crossed the limit");
        assert_eq!(woken.len(), 2);
    }
}
