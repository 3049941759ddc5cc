//! Watch-driven rounds for the simulators at scale.
//!
//! Listing every kind cluster-wide each round costs the API server the same
//! whether anything changed or not: at 500 tenants that polling, not the
//! provider under test, was a third of a core on the platform API server.
//! Acting on objects one after another made the simulator the slowest
//! "controller" in the chain. So in their cluster-wide modes the simulators
//! read from reflector stores, a watch event wakes the next round, and a
//! round acts on several objects at once, as a real controller's workers do.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::{Future, ready};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, stream};
use kube::Resource;
use kube::api::{Api, ObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::process::lock_unpoisoned;

/// How many objects a round acts on at once.
const WORKERS: usize = 8;
/// How long a round waits for a new watch to list its objects.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a round waiting for the first list looks for a watch error.
const SYNC_STEP: Duration = Duration::from_millis(100);

/// What a round's action on one object came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing more to do with this version of the object: it was written
    /// to (its next version comes as an event) or needs nothing.
    Settled,
    /// Look again next round even if it has not changed: what it waits for
    /// is time, or another object.
    Retry,
}

/// A cluster-wide reflector store whose every event wakes `wake`, and
/// which of its objects a round already settled.
pub(crate) struct Watched<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    dyntype: K::DynamicType,
    settled: SettledVersions,
    /// The watch's latest error, cleared by its next event: while it is
    /// set the store may be stale, and rounds fail with it (as a failed
    /// list fails a round in the listing mode).
    error: Arc<Mutex<Option<String>>>,
    task: JoinHandle<()>,
}

impl<K> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Starts watching on the harness runtime (so the watch outlives the
    /// test runtime that started the simulator).
    pub(crate) fn start(api: Api<K>, dyntype: K::DynamicType, wake: Arc<Notify>) -> Self {
        let writer = Writer::new(dyntype.clone());
        let store = writer.as_reader();
        let events = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
        let error = Arc::new(Mutex::new(None));
        let latest = error.clone();
        let task = crate::env::runtime().spawn(events.for_each(move |event| {
            *lock_unpoisoned(&latest) = event.err().map(|e| format!("simulator watch failed: {e}"));
            wake.notify_one();
            ready(())
        }));
        Self { store, dyntype, settled: SettledVersions::default(), error, task }
    }

    /// Every object as last seen, once the first list has arrived and while
    /// the watch is healthy.
    pub(crate) async fn snapshot(&self) -> Result<Vec<Arc<K>>> {
        let started = std::time::Instant::now();
        loop {
            if let Some(e) = lock_unpoisoned(&self.error).clone() {
                return Err(Error::Other(e));
            }
            match tokio::time::timeout(SYNC_STEP, self.store.wait_until_ready()).await {
                Ok(Ok(())) => return Ok(self.store.state()),
                Ok(Err(e)) => return Err(Error::Other(format!("simulator watch ended: {e}"))),
                Err(_) if started.elapsed() >= SYNC_TIMEOUT => {
                    return Err(Error::Other(format!("simulator watch did not list within {SYNC_TIMEOUT:?}")));
                }
                Err(_) => {}
            }
        }
    }

    /// One object by namespace and name, as last seen.
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&ObjectRef::new_with(name, self.dyntype.clone()).within(namespace))
    }

    /// Runs `act` on every one of `objects` (a filtered [`Self::snapshot`])
    /// that changed since a round last settled it, up to [`WORKERS`] at a
    /// time, and returns the first error. What `act` settles is recorded;
    /// a failed object keeps its old record, which no longer matches, so
    /// the next round retries it. A round woken by one event so looks at
    /// the objects that changed, not at all of them (at 500 tenants that
    /// scan, every round, was most of the simulators' CPU).
    pub(crate) async fn act_on_changed<F, Fut>(&self, objects: Vec<Arc<K>>, act: F) -> Result<()>
    where
        F: Fn(Arc<K>) -> Fut,
        Fut: Future<Output = Result<Outcome>>,
    {
        let settled = &self.settled;
        settled.retain(&objects);
        let changed = objects.into_iter().filter(|o| settled.changed(o.meta()));
        let results: Vec<Result<()>> = stream::iter(changed)
            .map(|object| {
                let meta = object.meta().clone();
                let action = act(object);
                async move {
                    if action.await? == Outcome::Settled {
                        settled.record(&meta);
                    }
                    Ok(())
                }
            })
            .buffer_unordered(WORKERS)
            .collect()
            .await;
        results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
    }
}

impl<K: Resource + 'static> Drop for Watched<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The resourceVersion each object had when a round last settled it.
///
/// A round woken by the events of the previous round's own writes can start
/// before the store has those events; without this it would act again on
/// the state it already handled (a stale `resourceVersion` guard then
/// fails with a conflict). An object is looked at again once its version
/// changes.
#[derive(Default)]
struct SettledVersions(Mutex<HashMap<String, String>>);

impl SettledVersions {
    /// Whether the object changed since a round last settled it.
    fn changed(&self, meta: &ObjectMeta) -> bool {
        let settled = lock_unpoisoned(&self.0);
        settled.get(meta.uid.as_deref().unwrap_or_default()) != meta.resource_version.as_ref()
    }

    /// Records that a round settled this version of the object.
    fn record(&self, meta: &ObjectMeta) {
        if let (Some(uid), Some(version)) = (&meta.uid, &meta.resource_version) {
            lock_unpoisoned(&self.0).insert(uid.clone(), version.clone());
        }
    }

    /// Drops entries of objects no longer in `objects`.
    fn retain<K: Resource>(&self, objects: &[Arc<K>]) {
        let live: std::collections::HashSet<&str> = objects.iter().filter_map(|o| o.meta().uid.as_deref()).collect();
        lock_unpoisoned(&self.0).retain(|uid, _| live.contains(uid.as_str()));
    }
}
