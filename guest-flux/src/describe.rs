//! The plugin's self-description: what it serves, what it needs from the
//! host, and the capabilities it requests.

use service_provider_sdk::contract::{
    Access, ApiKind, Capability, Cluster, Crd, Descriptor, Detail, NamespaceScope, Observation, PolicyRule, Stage,
};

use crate::api::{GROUP, VERSION};
use crate::desired::NAME;

pub const FINALIZER: &str = "flux.services.open-control-plane.io/finalizer";

/// Observation ids.
pub const OBSERVE_OCI_REPOSITORY: &str = "oci-repository";
pub const OBSERVE_HELM_RELEASE: &str = "helm-release";

/// The tenant's own Flux objects on the ControlPlane that block deletion:
/// `(observation id, kind, group/version, plural)`.
pub const BLOCKERS: [(&str, &str, &str, &str); 6] = [
    ("cp-gitrepositories", "GitRepository", "source.toolkit.fluxcd.io/v1", "gitrepositories"),
    ("cp-ocirepositories", "OCIRepository", "source.toolkit.fluxcd.io/v1", "ocirepositories"),
    ("cp-helmrepositories", "HelmRepository", "source.toolkit.fluxcd.io/v1", "helmrepositories"),
    ("cp-buckets", "Bucket", "source.toolkit.fluxcd.io/v1", "buckets"),
    ("cp-kustomizations", "Kustomization", "kustomize.toolkit.fluxcd.io/v1", "kustomizations"),
    ("cp-helmreleases", "HelmRelease", "helm.toolkit.fluxcd.io/v2", "helmreleases"),
];

const FLUX_CRD: &str = include_str!("../../crds/flux.services.open-control-plane.io_fluxes.yaml");
const PROVIDER_CONFIG_CRD: &str = include_str!("../../crds/flux.services.open-control-plane.io_providerconfigs.yaml");

fn kind_of(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> ApiKind {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiKind::new(group, version, kind, plural, namespaced)
}

pub fn oci_repository_kind() -> ApiKind {
    kind_of("source.toolkit.fluxcd.io/v1", "OCIRepository", "ocirepositories", true)
}

pub fn helm_release_kind() -> ApiKind {
    kind_of("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases", true)
}

/// What the ControlPlane token may do: install the flux2 chart (its CRDs,
/// RBAC, controllers' Deployments, Services, ServiceAccounts, network
/// policies and quota, Helm's release Secrets, `createNamespace`), the
/// host's copies (Secrets, the CA ConfigMap, the namespace), and read the
/// tenant's Flux objects for the deletion check. No wildcard groups,
/// resources or verbs; installing the controllers' ClusterRoles needs
/// `escalate` and `bind`, which are named, as the host requires.
fn control_plane_rules() -> Vec<PolicyRule> {
    const ALL: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];
    const RBAC: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "escalate", "bind"];
    const READ: &[&str] = &["get", "list", "watch"];
    vec![
        PolicyRule::new(
            &[""],
            &["namespaces", "secrets", "configmaps", "serviceaccounts", "services", "resourcequotas"],
            ALL,
        ),
        PolicyRule::new(&["apps"], &["deployments"], ALL),
        // helm-controller's readiness wait reads a Deployment's ReplicaSets
        // and Pods to tell whether it rolled out (kstatus).
        PolicyRule::new(&["apps"], &["replicasets"], READ),
        PolicyRule::new(&[""], &["pods"], READ),
        PolicyRule::new(&["networking.k8s.io"], &["networkpolicies"], ALL),
        PolicyRule::new(&["apiextensions.k8s.io"], &["customresourcedefinitions"], ALL),
        PolicyRule::new(
            &["rbac.authorization.k8s.io"],
            &["clusterroles", "clusterrolebindings", "roles", "rolebindings"],
            RBAC,
        ),
        PolicyRule::new(
            &["source.toolkit.fluxcd.io"],
            &["gitrepositories", "ocirepositories", "helmrepositories", "buckets"],
            READ,
        ),
        PolicyRule::new(&["kustomize.toolkit.fluxcd.io"], &["kustomizations"], READ),
        PolicyRule::new(&["helm.toolkit.fluxcd.io"], &["helmreleases"], READ),
    ]
}

pub fn descriptor() -> Descriptor {
    let capability = |cluster, api: ApiKind, scope, names: &[&str]| Capability {
        cluster,
        api,
        scope,
        names: names.iter().map(|n| n.to_string()).collect(),
    };
    let observe = |id: &str, cluster, api, scope, name: Option<&str>, stage, detail| Observation {
        id: id.into(),
        cluster,
        api,
        scope,
        name: name.map(str::to_string),
        stage,
        detail,
    };
    let secret = ApiKind::new("", "v1", "Secret", "secrets", true);
    let config_map = ApiKind::new("", "v1", "ConfigMap", "configmaps", true);
    let mut observations = vec![
        observe(
            OBSERVE_OCI_REPOSITORY,
            Cluster::Platform,
            oci_repository_kind(),
            NamespaceScope::Tenant,
            Some(NAME),
            Stage::Reconcile,
            Detail::Full,
        ),
        observe(
            OBSERVE_HELM_RELEASE,
            Cluster::Platform,
            helm_release_kind(),
            NamespaceScope::Tenant,
            Some(NAME),
            Stage::Reconcile,
            Detail::Full,
        ),
    ];
    for (id, kind, api_version, plural) in BLOCKERS {
        let api = kind_of(api_version, kind, plural, true);
        observations.push(observe(
            id,
            Cluster::ControlPlane,
            api,
            NamespaceScope::ClusterScoped,
            None,
            Stage::Cleanup,
            Detail::Metadata,
        ));
    }
    Descriptor {
        name: "flux".into(),
        service: ApiKind::new(GROUP, VERSION, "Flux", "fluxes", true),
        provider_config: ApiKind::new(GROUP, VERSION, "ProviderConfig", "providerconfigs", false),
        finalizer: FINALIZER.into(),
        crds: vec![
            Crd { cluster: Cluster::Onboarding, manifest: FLUX_CRD.into() },
            Crd { cluster: Cluster::Platform, manifest: PROVIDER_CONFIG_CRD.into() },
        ],
        access: Access {
            control_plane_rules: control_plane_rules(),
            workload_cluster: false,
            workload_rules: Vec::new(),
        },
        capabilities: vec![
            capability(Cluster::Platform, oci_repository_kind(), NamespaceScope::Tenant, &[NAME]),
            capability(Cluster::Platform, helm_release_kind(), NamespaceScope::Tenant, &[NAME]),
            capability(Cluster::Platform, secret.clone(), NamespaceScope::Tenant, &[]),
            // The flux namespace may be overridden per version: any namespace.
            capability(
                Cluster::ControlPlane,
                ApiKind::new("", "v1", "Namespace", "namespaces", false),
                NamespaceScope::ClusterScoped,
                &[],
            ),
            capability(Cluster::ControlPlane, secret, NamespaceScope::Any, &[]),
            capability(Cluster::ControlPlane, config_map, NamespaceScope::Any, &[]),
        ],
        observations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_names_the_flux_service() {
        let d = descriptor();
        assert_eq!(d.service.api_version(), "flux.services.open-control-plane.io/v1alpha1");
        assert_eq!((d.service.kind.as_str(), d.service.plural.as_str()), ("Flux", "fluxes"));
        assert_eq!(d.finalizer, "flux.services.open-control-plane.io/finalizer");
        assert_eq!(d.crds.len(), 2);
        assert!(d.crds.iter().any(|c| c.manifest.contains("openmcp.cloud/cluster: onboarding")));
    }

    #[test]
    fn the_control_plane_token_is_least_privilege_not_star_star_star() {
        let rules = descriptor().access.control_plane_rules;
        for r in &rules {
            assert!(!r.api_groups.iter().chain(&r.resources).any(|x| x == "*"), "{r:?}");
        }
        let read_only: Vec<&str> = rules
            .iter()
            .filter(|r| r.verbs == ["get", "list", "watch"])
            .flat_map(|r| r.api_groups.iter().map(String::as_str))
            .collect();
        let flux = read_only.iter().filter(|g| g.ends_with(".toolkit.fluxcd.io")).count();
        assert_eq!(flux, 3, "the Flux object groups are read-only: {read_only:?}");
    }

    #[test]
    fn deletion_blockers_are_observed_on_the_control_plane_only_for_cleanup() {
        let d = descriptor();
        let blockers: Vec<&Observation> =
            d.observations.iter().filter(|o| o.cluster == Cluster::ControlPlane).collect();
        assert_eq!(blockers.len(), BLOCKERS.len());
        assert!(blockers.iter().all(|o| o.stage == Stage::Cleanup && o.detail == Detail::Metadata));
    }
}
