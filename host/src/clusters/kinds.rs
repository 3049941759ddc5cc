//! The plurals of the plugin's kinds, checked against what the API servers
//! serve before the host builds a request from them.
//!
//! A plugin names each kind with the REST plural its requests use, and the
//! host's checks (grant, hard rules, ownership) look at the group and kind.
//! A plural that belongs to another kind would make a check made for one
//! kind act on another (a `ConfigMap` read through `secrets` is a read of
//! Secrets). So every kind of the descriptor whose group version the
//! platform cluster serves (the core group and every built-in group, Flux's,
//! openmcp's) must have exactly the plural the platform's discovery gives
//! it, and the service kind the plural the onboarding cluster gives it
//! ([`check`], when `run` starts). Kinds of group versions only a tenant's
//! cluster serves (kro's, say, on a ControlPlane) are checked against that
//! cluster's discovery before a reconcile first uses the cluster
//! ([`verify`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use service_provider_sdk::contract::{ApiKind, Cluster, Descriptor};

use crate::Error;
use crate::plugin::grant::Denial;

/// Checks every kind of `descriptor` against the discovery of the platform
/// (and, for the service kind, the onboarding) cluster. Returns the group
/// versions the platform serves (their kinds are checked, on every
/// cluster: built-in kinds are the same everywhere).
pub async fn check(descriptor: &Descriptor, platform: &Client, onboarding: &Client) -> Result<BTreeSet<String>, Error> {
    let mut by_version: BTreeMap<(Cluster, String), Vec<&ApiKind>> = BTreeMap::new();
    let platform_kinds = std::iter::once(&descriptor.provider_config)
        .chain(descriptor.capabilities.iter().map(|c| &c.api))
        .chain(descriptor.observations.iter().map(|o| &o.api));
    for api in platform_kinds {
        by_version.entry((Cluster::Platform, api.api_version())).or_default().push(api);
    }
    by_version.entry((Cluster::Onboarding, descriptor.service.api_version())).or_default().push(&descriptor.service);
    let mut checked = BTreeSet::new();
    for ((cluster, api_version), kinds) in by_version {
        let client = if cluster == Cluster::Onboarding { onboarding } else { platform };
        if verify(client, cluster, &api_version, &kinds).await? && cluster == Cluster::Platform {
            checked.insert(api_version);
        }
    }
    Ok(checked)
}

/// The kinds `descriptor` uses on `cluster`, by group version.
pub fn on_cluster(descriptor: &Descriptor, cluster: Cluster) -> BTreeMap<String, Vec<&ApiKind>> {
    let mut by_version: BTreeMap<String, Vec<&ApiKind>> = BTreeMap::new();
    let capabilities = descriptor.capabilities.iter().filter(|c| c.cluster == cluster).map(|c| &c.api);
    let observations = descriptor.observations.iter().filter(|o| o.cluster == cluster).map(|o| &o.api);
    for api in capabilities.chain(observations) {
        by_version.entry(api.api_version()).or_default().push(api);
    }
    by_version
}

/// Checks `kinds` (all of group version `api_version`) against what
/// `client`'s cluster serves: `false` if it does not serve the group
/// version (there is nothing to act on, and nothing to check yet), `true`
/// if every kind is as described, a `plural-of-kind` refusal otherwise.
pub async fn verify(client: &Client, cluster: Cluster, api_version: &str, kinds: &[&ApiKind]) -> Result<bool, Error> {
    let Some(served) = discover(client, api_version, cluster).await? else { return Ok(false) };
    for api in kinds {
        if let Some(reason) = mismatch(api, &served) {
            let what = format!("kind {} of {api_version} as the plugin describes it", api.kind);
            let reason = format!("{reason} on the {cluster} cluster");
            return Err(Error::Denied(Denial::new("plural-of-kind", what, reason)));
        }
    }
    Ok(true)
}

/// What a group version serves, or `None` if it is not served.
async fn discover(client: &Client, api_version: &str, cluster: Cluster) -> Result<Option<APIResourceList>, Error> {
    let listed = match api_version.split_once('/') {
        Some(_) => client.list_api_group_resources(api_version).await,
        None => client.list_core_api_resources(api_version).await,
    };
    match listed {
        Ok(list) => Ok(Some(list)),
        Err(e) if crate::resource::kind_absent(&e) => Ok(None),
        Err(e) => Err(Error::kube(format!("discovering {api_version} on the {cluster} cluster"), e)),
    }
}

/// Why a kind's plural or scope is not what the server says, if it is not.
/// A kind the group version does not serve (it lives on another cluster)
/// is not a mismatch; its plural must then not be another kind's.
pub fn mismatch(api: &ApiKind, served: &APIResourceList) -> Option<String> {
    let resources: Vec<_> = served.resources.iter().filter(|r| !r.name.contains('/')).collect();
    if let Some(other) = resources.iter().find(|r| r.name == api.plural && r.kind != api.kind) {
        return Some(format!("{:?} is the plural of {}, not of {}", api.plural, other.kind, api.kind));
    }
    let own = resources.iter().find(|r| r.kind == api.kind)?;
    if own.name != api.plural {
        return Some(format!("its plural is {:?}, not {:?}", own.name, api.plural));
    }
    if own.namespaced != api.namespaced {
        return Some(format!("it is {}", if own.namespaced { "namespaced" } else { "cluster-scoped" }));
    }
    None
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    use super::*;

    fn served() -> APIResourceList {
        let resource = |name: &str, kind: &str, namespaced: bool| APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced,
            ..Default::default()
        };
        APIResourceList {
            group_version: "v1".into(),
            resources: vec![
                resource("configmaps", "ConfigMap", true),
                resource("secrets", "Secret", true),
                resource("namespaces", "Namespace", false),
                resource("namespaces/status", "Namespace", false),
            ],
        }
    }

    #[test]
    fn a_plural_must_be_the_kinds_own() {
        let kind = |k: &str, plural: &str, namespaced: bool| ApiKind::new("", "v1", k, plural, namespaced);
        assert_eq!(mismatch(&kind("ConfigMap", "configmaps", true), &served()), None);
        assert_eq!(mismatch(&kind("Namespace", "namespaces", false), &served()), None);
        assert_eq!(mismatch(&kind("Other", "others", true), &served()), None, "served elsewhere");
        let secrets = mismatch(&kind("ConfigMap", "secrets", true), &served()).unwrap();
        assert!(secrets.contains("\"secrets\" is the plural of Secret"), "{secrets}");
        assert!(mismatch(&kind("Other", "secrets", true), &served()).is_some(), "another kind's plural");
        assert!(mismatch(&kind("Namespace", "namespaces", true), &served()).unwrap().contains("cluster-scoped"));
    }
}
