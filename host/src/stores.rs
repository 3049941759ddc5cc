//! What the host watches anyway, kept in memory: a reconcile reads from
//! these reflector stores instead of asking the API server again.
//!
//! The watches that fill them are the controller's triggers
//! ([`crate::watch`]), so one watch both wakes an instance and answers its
//! reads. A store answers only what it covers completely: the ProviderConfig
//! (watched by name), the AccessRequests the provider made (watched by its
//! label), the copy sources in the pod namespace (every Secret and
//! ConfigMap there). The stores of labelled objects (the plugin's platform
//! kinds, the copies) hold only what this provider created, so a miss there
//! proves nothing: the caller reads from the API server, which also finds an
//! object someone else made in the way.
//!
//! Until a store's first list is complete, and when there are no stores at
//! all (a reconcile called without the controller, as some tests do),
//! lookups answer [`Lookup::Unknown`] and callers read from the API server.
//! A missing store therefore costs requests, never correctness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};

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
    pub store: Store<DynamicObject>,
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
        match self.store.get(&key) {
            Some(object) => Lookup::Found(object),
            None if self.complete => Lookup::Absent,
            None => Lookup::Unknown,
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

    /// A platform object of the plugin's kinds.
    pub fn owned(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Lookup {
        find(&self.owned, api_version, kind).map_or(Lookup::Unknown, |w| w.lookup(namespace, name))
    }

    /// A copy source (`kind` Secret or ConfigMap) in the pod namespace.
    pub fn source(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        find(&self.sources, "v1", kind).map_or(Lookup::Unknown, |w| w.lookup(Some(namespace), name))
    }

    /// A copy on the platform cluster.
    pub fn copy(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        find(&self.copies, "v1", kind).map_or(Lookup::Unknown, |w| w.lookup(Some(namespace), name))
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
