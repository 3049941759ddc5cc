//! Kubernetes resource plumbing shared by every stage: from the contract's
//! kind descriptions and `apiVersion` strings to kube's `ApiResource` and
//! dynamic `Api` handles. A leaf module: it imports nothing from the crate
//! but [`crate::syntax`].

use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::{Api, Client};
use service_provider_sdk::contract::ApiKind;

use crate::syntax::split_api_version;

/// How many objects one page of a LIST the host reads asks for (an
/// observation's, a prune's): what a tenant has put on its cluster is read
/// a page at a time, never whole. An observation asks again for fewer (as
/// many as fitted, at most half) when a page's response is larger than it
/// reads at once (see `gather::list`).
pub const LIST_PAGE: u32 = 250;

/// The resource for an `apiVersion`, kind and REST plural.
pub fn api_resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = split_api_version(api_version);
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

/// The resource a contract kind describes.
pub fn of_kind(kind: &ApiKind) -> ApiResource {
    api_resource(&kind.api_version(), &kind.kind, &kind.plural)
}

/// A dynamic `Api` in one namespace, or across all namespaces (and for
/// cluster-scoped kinds) when `namespace` is `None`.
pub fn dynamic_api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Whether a list or get failed because the kind itself is not served (its
/// CRD is not installed): for the host that means "no such objects". The API
/// server answers such a path with a plain-text 404, which kube cannot read
/// as a Status, so the code is what counts.
pub fn kind_absent(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.is_not_found() || s.code == 404)
}

/// Whether the object a DELETE answered with is gone already: it had no
/// finalizers and no grace period, so the API server removed it at once.
/// One still being deleted carries a deletion timestamp; an object is
/// trusted to be gone only when it carries neither that nor finalizers. A
/// deletion that waits for the object's watch event costs a reconcile of
/// its own, so an ordered teardown goes on in the same round instead.
pub fn deleted_at_once(answer: &ObjectMeta) -> bool {
    answer.deletion_timestamp.is_none() && answer.finalizers.as_ref().is_none_or(Vec::is_empty)
}

/// The size of an object the API server answered a write with: its JSON,
/// `managedFields` included, as etcd stores it (near enough).
pub fn stored_size(object: &impl serde::Serialize) -> usize {
    serde_json::to_vec(object).map_or(0, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_without_finalizers_or_deletion_timestamp_is_gone() {
        let meta = |finalizers: &[&str], deleting: bool| ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            deletion_timestamp: deleting
                .then(|| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default())),
            ..ObjectMeta::default()
        };
        assert!(deleted_at_once(&meta(&[], false)));
        assert!(deleted_at_once(&ObjectMeta::default()));
        assert!(!deleted_at_once(&meta(&["finalizers.fluxcd.io"], true)), "waits for its finalizer");
        assert!(!deleted_at_once(&meta(&[], true)), "a grace period: still there");
        assert!(!deleted_at_once(&meta(&["x"], false)));
    }

    #[test]
    fn core_and_grouped_versions_split() {
        let core = api_resource("v1", "Secret", "secrets");
        assert_eq!((core.group.as_str(), core.version.as_str()), ("", "v1"));
        let flux = api_resource("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases");
        assert_eq!((flux.group.as_str(), flux.version.as_str()), ("helm.toolkit.fluxcd.io", "v2"));
        let kind = ApiKind::new("kro.run", "v1alpha1", "ResourceGraphDefinition", "resourcegraphdefinitions", false);
        assert_eq!(of_kind(&kind).api_version, "kro.run/v1alpha1");
    }
}
