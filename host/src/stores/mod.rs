//! What the host watches anyway, kept in memory: a reconcile reads from
//! these reflector stores instead of asking the API server again.
//!
//! The watches that fill them are the controller's triggers
//! ([`crate::controller::watch`]), so one watch both wakes an instance and answers its
//! reads. A store answers only what it covers completely: the ProviderConfig
//! (watched by name), the AccessRequests the provider made (watched by its
//! label), the copy sources in the pod namespace (every Secret and
//! ConfigMap there). The stores of labelled objects (the plugin's platform
//! kinds, the copies) hold only what this provider created, so a miss there
//! proves only that none of ours is there: the caller deletes nothing, and
//! creates only with a request that fails on an object someone else made
//! in the way (a POST, or a create-only apply), then reads that object.
//!
//! Until a store's first list is complete, and when there are no stores at
//! all (a reconcile called without the controller, as some tests do),
//! lookups answer [`Lookup::Unknown`] and callers read from the API server.
//! A missing store therefore costs requests, never correctness.
//!
//! Objects are kept as JSON text ([`Packed`]) and parsed when looked up.
//! What the host keeps of an object read for a plugin is decided while it
//! is parsed ([`trimmed`]): by the blocker watches and by observations.

pub mod blockers;
mod packed;
pub mod trimmed;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::warn;

pub use packed::{MAX_SEED_BYTES, OVERSIZED, Packed, pack_event};

/// What a store knows about one object.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(Arc<DynamicObject>),
    /// Certainly not there (the store covers its place completely).
    Absent,
    /// The store cannot tell: read from the API server.
    Unknown,
}

impl Lookup {
    /// The object, when the store has it.
    pub fn found(self) -> Option<Arc<DynamicObject>> {
        match self {
            Lookup::Found(o) => Some(o),
            Lookup::Absent | Lookup::Unknown => None,
        }
    }
}

/// One store and what it watches.
#[derive(Clone)]
pub struct Watched {
    pub resource: ApiResource,
    pub store: Store<Packed>,
    /// Whether every object of its kind in its place is in the store (no
    /// label selector), so a miss means absent.
    pub complete: bool,
    /// Set once the watch's first list is in the store. (A flag rather than
    /// the store's own readiness future: that wakes only its latest waiter,
    /// and the controller waits on the primary store's.)
    pub listed: Arc<AtomicBool>,
}

impl Watched {
    /// Whether the first list is complete: until then the store knows nothing.
    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::Acquire)
    }

    fn lookup(&self, namespace: Option<&str>, name: &str) -> Lookup {
        if !self.is_listed() {
            return Lookup::Unknown;
        }
        let mut key = ObjectRef::new_with(name, self.resource.clone());
        if let Some(namespace) = namespace {
            key = key.within(namespace);
        }
        match self.store.get(&key).map(|packed| packed.unpack()) {
            Some(Ok(object)) => Lookup::Found(Arc::new(object)),
            Some(Err(e)) => {
                warn!(kind = %self.resource.kind, name, error = %e, "a stored object does not parse; reading it instead");
                Lookup::Unknown
            }
            None if self.complete => Lookup::Absent,
            None => Lookup::Unknown,
        }
    }

    /// Like [`Self::lookup`], for a store that holds everything of this
    /// provider's in its place: a miss means none of ours is there.
    fn lookup_ours(&self, namespace: Option<&str>, name: &str) -> Lookup {
        match self.lookup(namespace, name) {
            Lookup::Unknown if self.is_listed() => Lookup::Absent,
            other => other,
        }
    }

    fn is(&self, api_version: &str, kind: &str) -> bool {
        self.resource.api_version == api_version && self.resource.kind == kind
    }
}

/// The stores of one running controller.
#[derive(Clone, Default)]
pub struct Stores {
    /// The ProviderConfig named `--provider-name` (cluster-scoped).
    pub provider_config: Option<Watched>,
    /// The provider's AccessRequests.
    pub access_requests: Option<Watched>,
    /// The plugin's platform kinds, objects carrying the provider label.
    pub owned: Vec<Watched>,
    /// Secrets and ConfigMaps in the pod namespace.
    pub sources: Vec<Watched>,
    /// The provider's copies on the platform cluster.
    pub copies: Vec<Watched>,
}

fn find<'a>(list: &'a [Watched], api_version: &str, kind: &str) -> Option<&'a Watched> {
    list.iter().find(|w| w.is(api_version, kind))
}

impl Stores {
    pub fn provider_config(&self, name: &str) -> Lookup {
        self.provider_config.as_ref().map_or(Lookup::Unknown, |w| w.lookup(None, name))
    }

    pub fn access_request(&self, namespace: &str, name: &str) -> Lookup {
        self.access_requests.as_ref().map_or(Lookup::Unknown, |w| w.lookup(Some(namespace), name))
    }

    /// The provider's own AccessRequest: a miss is [`Lookup::Absent`] (see
    /// [`Self::ours`]), for creating it where a create finds anything
    /// else in the way.
    pub fn our_access_request(&self, namespace: &str, name: &str) -> Lookup {
        self.access_requests.as_ref().map_or(Lookup::Unknown, |w| w.lookup_ours(Some(namespace), name))
    }

    /// A platform object of the plugin's kinds.
    pub fn owned(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Lookup {
        find(&self.owned, api_version, kind).map_or(Lookup::Unknown, |w| w.lookup(namespace, name))
    }

    /// This provider's own object, as far as the stores that watch by the
    /// provider's label can tell: the plugin's platform kinds, and Secrets
    /// (never plugin objects, so every Secret of ours is a copy). A miss is
    /// [`Lookup::Absent`]: none of *ours* is there, though something foreign
    /// may be. Right for deleting (only ours is ever deleted), and for
    /// creating only with a request that fails on whatever is there (a POST,
    /// or [`crate::reconcile::apply::create_or_read`]).
    pub fn ours(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Lookup {
        self.ours_store(api_version, kind).map_or(Lookup::Unknown, |w| w.lookup_ours(namespace, name))
    }

    /// The metadata of every object of this provider's of a kind, in
    /// `namespace` or everywhere, when a listed store holds all of them (see
    /// [`Self::ours`]). `None` also when one of them does not parse: the
    /// caller lists from the API server instead.
    pub fn all_ours(&self, resource: &ApiResource, namespace: Option<&str>) -> Option<Vec<ObjectMeta>> {
        let watched = self.ours_store(&resource.api_version, &resource.kind).filter(|w| w.is_listed())?;
        let all = watched.store.state().into_iter();
        let here = all.filter(|o| namespace.is_none() || o.namespace() == namespace);
        here.map(|o| o.full_metadata().ok()).collect()
    }

    fn ours_store(&self, api_version: &str, kind: &str) -> Option<&Watched> {
        let copies = find(&self.copies, api_version, kind).filter(|_| api_version == "v1" && kind == "Secret");
        find(&self.owned, api_version, kind).or(copies)
    }

    /// A copy source (`kind` Secret or ConfigMap) in the pod namespace.
    pub fn source(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        find(&self.sources, "v1", kind).map_or(Lookup::Unknown, |w| w.lookup(Some(namespace), name))
    }

    /// This provider's copy on the platform cluster; a miss is
    /// [`Lookup::Absent`] with the same caveat as [`Self::ours`].
    pub fn our_copy(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        find(&self.copies, "v1", kind).map_or(Lookup::Unknown, |w| w.lookup_ours(Some(namespace), name))
    }

    /// Whether every store has its first list (the caches are synced).
    pub fn synced(&self) -> bool {
        self.all().all(Watched::is_listed)
    }

    fn all(&self) -> impl Iterator<Item = &Watched> {
        let all = self.provider_config.iter().chain(&self.access_requests).chain(&self.owned);
        all.chain(&self.sources).chain(&self.copies)
    }

    /// How many objects the stores hold (a gauge for memory questions).
    pub fn objects(&self) -> usize {
        self.all().map(|w| w.store.len()).sum()
    }
}
