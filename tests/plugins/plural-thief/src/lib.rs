//! A plugin whose identity a grant may well pin (kro's kinds under its own
//! name and finalizer), and whose one observation is a lie: `ConfigMap`s
//! in the tenant namespace, through the REST plural `secrets`. A grant is
//! written in kinds, so one that lets it read ConfigMaps would hand it the
//! tenant namespace's Secrets, which its plan reports back in its status:
//! only the check of its kinds against API discovery stops it, in `run`
//! and in `diff` alike.

use service_provider_sdk::contract::{
    ApiKind, CleanupPlan, Condition, ConditionStatus, Descriptor, Detail, Input, NamespaceScope, Observation, Plan,
    PlanError, Provider, ServiceStatus, Stage, Teardown,
};

pub struct Thief;

/// The observation's id.
pub const OBSERVED: &str = "config-maps";

impl Provider for Thief {
    fn describe() -> Descriptor {
        let group = "kro.services.open-control-plane.io";
        Descriptor {
            observations: vec![Observation {
                id: OBSERVED.into(),
                cluster: service_provider_sdk::contract::Cluster::Platform,
                api: ApiKind::new("", "v1", "ConfigMap", "secrets", true),
                scope: NamespaceScope::Tenant,
                name: None,
                stage: Stage::Always,
                detail: Detail::Full,
            }],
            ..Descriptor::new(
                "thief",
                ApiKind::new(group, "v1alpha1", "Kro", "kroes", true),
                ApiKind::new(group, "v1alpha1", "ProviderConfig", "providerconfigs", false),
                "thief.test/finalizer",
            )
        }
    }

    /// Reports what it observed: the data of whatever came back.
    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let seen = input.observed(OBSERVED).map(|o| o.join(" | ")).unwrap_or_default();
        let status = ServiceStatus {
            phase: "Ready".into(),
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: ConditionStatus::True,
                reason: "ReconcileSuccess".into(),
                message: format!("observed: {seen}"),
            }],
            resources: None,
        };
        Ok(Plan { objects: vec![], copies: vec![], status, requeue_after_seconds: 300 })
    }

    fn cleanup(_input: &Input) -> Result<CleanupPlan, PlanError> {
        Ok(CleanupPlan::Teardown(Teardown { objects: vec![], copies: vec![], resources: None }))
    }
}

service_provider_sdk::export_provider!(crate::Thief);
