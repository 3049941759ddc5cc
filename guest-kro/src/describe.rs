//! The plugin's self-description: what it serves, what it needs from the
//! host, and the allow-list of everything it may ask the host to touch.

use service_provider_sdk::contract::{
    Access, ApiKind, Capability, Cluster, Crd, Descriptor, Detail, NamespaceScope, Observation, PolicyRule, Stage,
};

use crate::api::{GROUP, VERSION};
use crate::desired::{HELM_RELEASE, KRO_SYSTEM, OCI_REPOSITORY};

pub const FINALIZER: &str = "kro.services.open-control-plane.io/finalizer";

/// Observation ids (see [`descriptor`]).
pub const OBSERVE_OCI_REPOSITORY: &str = "oci-repository";
pub const OBSERVE_HELM_RELEASE: &str = "helm-release";
pub const OBSERVE_RGDS: &str = "resource-graph-definitions";
pub const OBSERVE_GRAPHS: &str = "graphs";

const KRO_CRD: &str = include_str!("../../crds/kro.services.open-control-plane.io_kroes.yaml");
const PROVIDER_CONFIG_CRD: &str = include_str!("../../crds/kro.services.open-control-plane.io_providerconfigs.yaml");

fn kind(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> ApiKind {
    ApiKind::new(group, version, kind, plural, namespaced)
}

fn capability(cluster: Cluster, api: &ApiKind, scope: NamespaceScope, names: &[&str]) -> Capability {
    Capability { cluster, api: api.clone(), scope, names: names.iter().map(|s| s.to_string()).collect() }
}

pub fn oci_repository_kind() -> ApiKind {
    kind("source.toolkit.fluxcd.io", "v1", "OCIRepository", "ocirepositories", true)
}

pub fn helm_release_kind() -> ApiKind {
    kind("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true)
}

fn secret_kind() -> ApiKind {
    kind("", "v1", "Secret", "secrets", true)
}

fn namespace_kind() -> ApiKind {
    kind("", "v1", "Namespace", "namespaces", false)
}

pub fn rgd_kind() -> ApiKind {
    kind("kro.run", "v1alpha1", "ResourceGraphDefinition", "resourcegraphdefinitions", false)
}

/// kro v0.10's Graph: a set of resources kro creates and deletes itself
/// (namespaced, behind kro's `GraphKind` feature gate). Where the installed
/// kro does not serve it, observing it finds nothing.
pub fn graph_kind() -> ApiKind {
    kind("kro.run", "v1alpha1", "Graph", "graphs", true)
}

/// What the ControlPlane token may do. The same kubeconfig drives the Flux
/// HelmRelease, so it must cover installing the kro chart (CRDs, RBAC,
/// Deployment, Service, ServiceAccount, Helm's release Secrets) as well as the
/// host's own work (the `kro-system` namespace, pull-secret copies and the
/// count of ResourceGraphDefinitions and Graphs). Installing kro's ClusterRole, which gives
/// kro every verb on every resource, requires the RBAC verbs `escalate` and
/// `bind`; they are named (never through `*`), as the host requires of any
/// verb that is power over the cluster itself.
fn control_plane_rules() -> Vec<PolicyRule> {
    const ALL: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];
    const RBAC: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "escalate", "bind"];
    vec![
        PolicyRule::new(&[""], &["namespaces"], ALL),
        PolicyRule::new(&[""], &["secrets", "configmaps", "serviceaccounts", "services"], ALL),
        PolicyRule::new(&["apps"], &["deployments"], ALL),
        // helm-controller's readiness wait reads a Deployment's ReplicaSets
        // and Pods to tell whether it rolled out (kstatus).
        PolicyRule::new(&["apps"], &["replicasets"], &["get", "list", "watch"]),
        PolicyRule::new(&[""], &["pods"], &["get", "list", "watch"]),
        PolicyRule::new(&["apiextensions.k8s.io"], &["customresourcedefinitions"], ALL),
        PolicyRule::new(
            &["rbac.authorization.k8s.io"],
            &["clusterroles", "clusterrolebindings", "roles", "rolebindings"],
            RBAC,
        ),
        PolicyRule::new(&["kro.run"], &["resourcegraphdefinitions", "graphs"], &["get", "list", "watch"]),
    ]
}

pub fn descriptor() -> Descriptor {
    let tenant = || NamespaceScope::Tenant;
    Descriptor {
        name: "kro".into(),
        service: kind(GROUP, VERSION, "Kro", "kroes", true),
        provider_config: kind(GROUP, VERSION, "ProviderConfig", "providerconfigs", false),
        finalizer: FINALIZER.into(),
        crds: vec![
            Crd { cluster: Cluster::Onboarding, manifest: KRO_CRD.into() },
            Crd { cluster: Cluster::Platform, manifest: PROVIDER_CONFIG_CRD.into() },
        ],
        access: Access {
            control_plane_rules: control_plane_rules(),
            workload_cluster: false,
            workload_rules: Vec::new(),
        },
        capabilities: vec![
            capability(Cluster::Platform, &oci_repository_kind(), tenant(), &[OCI_REPOSITORY]),
            capability(Cluster::Platform, &helm_release_kind(), tenant(), &[HELM_RELEASE]),
            capability(Cluster::Platform, &secret_kind(), tenant(), &[]),
            capability(Cluster::ControlPlane, &namespace_kind(), NamespaceScope::ClusterScoped, &[KRO_SYSTEM]),
            capability(Cluster::ControlPlane, &secret_kind(), NamespaceScope::Named(KRO_SYSTEM.into()), &[]),
        ],
        observations: vec![
            Observation {
                id: OBSERVE_OCI_REPOSITORY.into(),
                cluster: Cluster::Platform,
                api: oci_repository_kind(),
                scope: tenant(),
                name: Some(OCI_REPOSITORY.into()),
                stage: Stage::Reconcile,
                detail: Detail::Full,
            },
            Observation {
                id: OBSERVE_HELM_RELEASE.into(),
                cluster: Cluster::Platform,
                api: helm_release_kind(),
                scope: tenant(),
                name: Some(HELM_RELEASE.into()),
                stage: Stage::Reconcile,
                detail: Detail::Full,
            },
            Observation {
                id: OBSERVE_RGDS.into(),
                cluster: Cluster::ControlPlane,
                api: rgd_kind(),
                scope: NamespaceScope::ClusterScoped,
                name: None,
                stage: Stage::Cleanup,
                detail: Detail::Metadata,
            },
            Observation {
                id: OBSERVE_GRAPHS.into(),
                cluster: Cluster::ControlPlane,
                api: graph_kind(),
                scope: NamespaceScope::Any,
                name: None,
                stage: Stage::Cleanup,
                detail: Detail::Metadata,
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names_the_service_and_finalizer() {
        let d = descriptor();
        assert_eq!(d.service.api_version(), "kro.services.open-control-plane.io/v1alpha1");
        assert_eq!((d.service.kind.as_str(), d.service.plural.as_str()), ("Kro", "kroes"));
        assert!(d.service.namespaced);
        assert!(!d.provider_config.namespaced);
        assert_eq!(d.finalizer, "kro.services.open-control-plane.io/finalizer");
        assert!(!d.access.workload_cluster);
    }

    #[test]
    fn crds_are_embedded_with_their_cluster_labels() {
        let d = descriptor();
        assert_eq!(d.crds.len(), 2);
        for crd in &d.crds {
            let label = format!(
                "openmcp.cloud/cluster: {}",
                match crd.cluster {
                    Cluster::Onboarding => "onboarding",
                    Cluster::Platform => "platform",
                    other => panic!("unexpected cluster {other}"),
                }
            );
            assert!(crd.manifest.contains(&label), "{label}");
        }
    }

    #[test]
    fn control_plane_token_is_not_a_wildcard() {
        let rules = descriptor().access.control_plane_rules;
        assert!(!rules.is_empty());
        for r in &rules {
            assert!(!r.api_groups.iter().any(|g| g.contains('*')), "{r:?}");
            assert!(!r.resources.iter().any(|g| g.contains('*')), "{r:?}");
            assert!(!r.verbs.iter().any(|v| v == "*"), "every verb named: {r:?}");
        }
        assert!(rules.iter().any(|r| r.api_groups == ["kro.run"] && r.verbs.contains(&"list".to_string())));
    }

    #[test]
    fn every_observation_kind_is_consistent() {
        let d = descriptor();
        let ids: Vec<&str> = d.observations.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, [OBSERVE_OCI_REPOSITORY, OBSERVE_HELM_RELEASE, OBSERVE_RGDS, OBSERVE_GRAPHS]);
        for blocker in &d.observations[2..] {
            assert_eq!(blocker.cluster, Cluster::ControlPlane);
            assert_eq!(blocker.stage, Stage::Cleanup);
            assert_eq!(blocker.detail, Detail::Metadata);
        }
        assert_eq!(d.observations[3].scope, NamespaceScope::Any, "Graphs are namespaced");
    }
}
