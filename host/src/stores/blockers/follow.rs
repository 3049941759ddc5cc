//! One blocker watch's loop: what its store holds, whether it is current,
//! when it wakes its instance, and when it ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::channel::mpsc::UnboundedSender;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::watcher;
use tracing::{debug, warn};

use super::Health;
use crate::keys::InstanceKey;
use crate::stores::Packed;

/// The bytes of a store's objects, kept up to date event by event (no sum
/// over the store per event): the objects listed so far (held by the
/// store's writer until the list is complete) and those in the store.
#[derive(Default)]
struct Sizes {
    listing: Part,
    stored: Part,
}

/// Sizes by object, and their running total.
#[derive(Default)]
struct Part {
    sizes: HashMap<(Option<String>, String), usize>,
    total: usize,
}

impl Part {
    fn key(object: &Packed) -> (Option<String>, String) {
        (object.namespace().map(str::to_string), object.name_any())
    }

    fn insert(&mut self, object: &Packed) {
        let old = self.sizes.insert(Self::key(object), object.bytes()).unwrap_or(0);
        self.total = self.total - old + object.bytes();
    }

    fn remove(&mut self, object: &Packed) {
        self.total -= self.sizes.remove(&Self::key(object)).unwrap_or(0);
    }
}

impl Sizes {
    fn total(&self) -> usize {
        self.listing.total + self.stored.total
    }
}

/// Whether a watch failed to start because its kind is not served.
fn kind_not_served(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) => crate::resource::kind_absent(e),
        _ => false,
    }
}

/// Drives one watch: keeps [`Health`] up to date, wakes the instance on
/// every change once listed, and ends the watch when it cannot list or its
/// objects outgrow `max_bytes`.
pub(super) async fn follow(
    events: impl Stream<Item = Result<watcher::Event<Packed>, watcher::Error>> + Send,
    health: Arc<Health>,
    wake: Option<UnboundedSender<InstanceKey>>,
    instance: InstanceKey,
    max_bytes: usize,
) {
    let mut events = std::pin::pin!(events);
    let mut sizes = Sizes::default();
    let mut listed = false;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            // The kind is not served (kro without its Graph CRD, say): there
            // is none of it, and rounds say so from the empty store without a
            // request, until the watch is started again (`ABSENT_RECHECK`).
            Err(e) if !listed && kind_not_served(&e) => {
                debug!("a blocker's kind is not served: none of it");
                health.absent.store(true, Ordering::Release);
                health.current.store(true, Ordering::Release);
                return;
            }
            Err(e) if !listed => {
                debug!(error = %e, "a blocker cannot be watched: blocked rounds list it instead");
                break;
            }
            Err(e) => {
                debug!(error = %e, "a blocker watch failed: blocked rounds list until it lists again");
                health.current.store(false, Ordering::Release);
                continue;
            }
        };
        let changed = match &event {
            watcher::Event::Init => {
                sizes.listing = Part::default();
                false
            }
            watcher::Event::InitApply(o) => {
                sizes.listing.insert(o);
                false
            }
            watcher::Event::InitDone => {
                sizes.stored = std::mem::take(&mut sizes.listing);
                listed = true;
                health.current.store(true, Ordering::Release);
                true
            }
            watcher::Event::Apply(o) => {
                sizes.stored.insert(o);
                health.current.load(Ordering::Acquire)
            }
            watcher::Event::Delete(o) => {
                sizes.stored.remove(o);
                health.current.load(Ordering::Acquire)
            }
        };
        let bytes = sizes.total();
        health.bytes.store(bytes, Ordering::Release);
        if bytes > max_bytes {
            warn!(bytes, max_bytes, "what blocks the deletion outgrew the plugin's input limit: no longer watched");
            break;
        }
        if changed && let Some(wake) = &wake {
            let _ = wake.unbounded_send(instance.clone());
        }
    }
    health.end();
}
