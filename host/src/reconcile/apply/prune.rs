//! Pruning: deleting what an instance owns but no longer plans.
//!
//! After a successful apply the host knows the instance's *inventory*: every
//! object and copy the plan asked for. Anything else that carries the
//! instance's owner labels, of a kind and in a scope the plugin may write,
//! is an orphan and is deleted, whatever its kind. Namespaces are never
//! pruned: deleting one deletes everything in it, including what others put
//! there.
//!
//! Listing costs requests, so the reconcile prunes only when the inventory
//! differs from the one it last pruned against (always after a restart), and
//! once with an empty inventory when the instance is deleted.

use kube::Client;
use kube::api::{ApiResource, ListParams, ObjectMeta};
use service_provider_sdk::contract::{Cluster, Context, Descriptor};

use crate::Error;
use crate::owner::Owner;
use crate::plugin::plan::scope::scope_namespace;
use crate::plugin::plan::{Inventory, ObjectKey};
use crate::resource::{self, LIST_PAGE, dynamic_api, kind_absent};
use crate::stores::Stores;

/// Where to look for orphans: a kind, and a namespace (all namespaces, or
/// cluster-scoped, when `None`).
#[derive(Debug, Clone)]
pub struct Scope {
    pub resource: ApiResource,
    pub namespace: Option<String>,
}

impl Scope {
    /// Every kind and namespace the plugin may write to on `cluster`, once.
    pub fn writable(descriptor: &Descriptor, context: &Context, cluster: Cluster) -> Vec<Scope> {
        let mut scopes: Vec<Scope> = Vec::new();
        for c in descriptor.capabilities.iter().filter(|c| c.cluster == cluster) {
            let namespace = scope_namespace(&c.scope, context).map(str::to_string);
            let resource = resource::of_kind(&c.api);
            if !scopes.iter().any(|s| s.resource == resource && s.namespace == namespace) {
                scopes.push(Scope { resource, namespace });
            }
        }
        scopes
    }
}

/// Deletes every object of `scopes` on one cluster that `owner` owns and
/// `keep` does not list. Returns how many deletions were requested.
/// Candidates come from `stores` where one holds all of the provider's
/// objects of a kind (only on the platform cluster), else from a list.
pub async fn prune(
    client: &Client,
    cluster: Cluster,
    scopes: &[Scope],
    owner: &Owner,
    keep: &Inventory,
    stores: Option<&Stores>,
) -> Result<usize, Error> {
    let selector = owner.selector();
    let mut deleted = 0;
    for scope in scopes.iter().filter(|s| !(s.resource.kind == "Namespace" && s.resource.group.is_empty())) {
        let cached = stores
            .filter(|_| cluster == Cluster::Platform)
            .and_then(|stores| stores.all_ours(&scope.resource, scope.namespace.as_deref()));
        let at = Orphans { client, cluster, scope, owner, keep };
        if let Some(metadata) = cached {
            deleted += at.delete(&metadata).await?;
            continue;
        }
        // A page at a time: a tenant may have labelled any number of
        // objects on its own cluster like ours.
        let api = dynamic_api(client, &scope.resource, scope.namespace.as_deref());
        let mut params = ListParams::default().labels(&selector).limit(LIST_PAGE);
        loop {
            let list = match api.list_metadata(&params).await {
                Ok(list) => list,
                Err(e) if kind_absent(&e) => break,
                Err(e) => {
                    let what = format!("listing {} objects to prune on the {cluster} cluster", scope.resource.kind);
                    return Err(Error::kube(what, e));
                }
            };
            let candidates: Vec<ObjectMeta> = list.items.into_iter().map(|o| o.metadata).collect();
            deleted += at.delete(&candidates).await?;
            match list.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(deleted)
}

/// Where orphans are looked for: one kind and scope on one cluster.
struct Orphans<'a> {
    client: &'a Client,
    cluster: Cluster,
    scope: &'a Scope,
    owner: &'a Owner,
    keep: &'a Inventory,
}

impl Orphans<'_> {
    /// Deletes the candidates the instance owns and no longer plans;
    /// returns how many deletions were requested.
    async fn delete(&self, candidates: &[ObjectMeta]) -> Result<usize, Error> {
        let (cluster, kind) = (self.cluster, &self.scope.resource.kind);
        let mut deleted = 0;
        for meta in candidates {
            let (Some(name), None) = (meta.name.clone(), meta.deletion_timestamp.as_ref()) else { continue };
            let key = ObjectKey {
                cluster,
                group: self.scope.resource.group.clone(),
                kind: kind.clone(),
                namespace: meta.namespace.clone(),
                name: name.clone(),
            };
            // The exact owner, not just the (possibly shortened) labels.
            if self.keep.contains(&key) || !self.owner.owns(meta) {
                continue;
            }
            let api = dynamic_api(self.client, &self.scope.resource, meta.namespace.as_deref());
            match api.delete(&name, &super::exactly(meta)).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => {
                    let place = meta.namespace.as_ref().map_or(name.clone(), |ns| format!("{ns}/{name}"));
                    return Err(Error::kube(format!("deleting orphaned {kind} {place} on the {cluster} cluster"), e));
                }
            }
        }
        Ok(deleted)
    }
}
