//! The `wasm32` export shim: converts between the WIT bindings and the SDK's
//! contract types and forwards to [`KroProvider`]. No logic lives here, so
//! everything that matters is covered by the native tests.

use service_provider_sdk::contract as sdk;

use crate::KroProvider;
use sdk::Provider as _;

wit_bindgen::generate!({ world: "plugin", path: "../wit" });

use exports::open_control_plane::service_provider::provider::Guest;
use open_control_plane::service_provider::types as wit;

struct Component;

impl Guest for Component {
    fn describe() -> wit::Descriptor {
        descriptor(KroProvider::describe())
    }

    fn plan(input: wit::Input) -> Result<wit::ReconcilePlan, wit::PlanError> {
        KroProvider::plan(&self::input(input)).map(plan).map_err(plan_error)
    }

    fn cleanup(input: wit::Input) -> Result<wit::CleanupPlan, wit::PlanError> {
        KroProvider::cleanup(&self::input(input)).map(cleanup_plan).map_err(plan_error)
    }
}

export!(Component);

fn cluster(c: sdk::Cluster) -> wit::Cluster {
    match c {
        sdk::Cluster::Platform => wit::Cluster::Platform,
        sdk::Cluster::Onboarding => wit::Cluster::Onboarding,
        sdk::Cluster::ControlPlane => wit::Cluster::ControlPlane,
        sdk::Cluster::Workload => wit::Cluster::Workload,
    }
}

fn api_kind(k: sdk::ApiKind) -> wit::ApiKind {
    wit::ApiKind { group: k.group, version: k.version, kind: k.kind, plural: k.plural, namespaced: k.namespaced }
}

fn scope(s: sdk::NamespaceScope) -> wit::NamespaceScope {
    match s {
        sdk::NamespaceScope::Tenant => wit::NamespaceScope::Tenant,
        sdk::NamespaceScope::Named(n) => wit::NamespaceScope::Named(n),
        sdk::NamespaceScope::ClusterScoped => wit::NamespaceScope::ClusterScoped,
    }
}

fn rule(r: sdk::PolicyRule) -> wit::PolicyRule {
    wit::PolicyRule {
        api_groups: r.api_groups,
        resources: r.resources,
        resource_names: r.resource_names,
        verbs: r.verbs,
    }
}

fn descriptor(d: sdk::Descriptor) -> wit::Descriptor {
    wit::Descriptor {
        name: d.name,
        service: api_kind(d.service),
        provider_config: api_kind(d.provider_config),
        finalizer: d.finalizer,
        crds: d.crds.into_iter().map(|c| wit::Crd { cluster: cluster(c.cluster), manifest: c.manifest }).collect(),
        access: wit::Access {
            control_plane_rules: d.access.control_plane_rules.into_iter().map(rule).collect(),
            workload_cluster: d.access.workload_cluster,
            workload_rules: d.access.workload_rules.into_iter().map(rule).collect(),
        },
        capabilities: d
            .capabilities
            .into_iter()
            .map(|c| wit::Capability {
                cluster: cluster(c.cluster),
                api: api_kind(c.api),
                scope: scope(c.scope),
                names: c.names,
            })
            .collect(),
        observations: d
            .observations
            .into_iter()
            .map(|o| wit::Observation {
                id: o.id,
                cluster: cluster(o.cluster),
                api: api_kind(o.api),
                scope: scope(o.scope),
                name: o.name,
                stage: match o.stage {
                    sdk::Stage::Reconcile => wit::Stage::Reconcile,
                    sdk::Stage::Cleanup => wit::Stage::Cleanup,
                    sdk::Stage::Always => wit::Stage::Always,
                },
                detail: match o.detail {
                    sdk::Detail::Full => wit::Detail::Full,
                    sdk::Detail::Metadata => wit::Detail::Metadata,
                },
            })
            .collect(),
    }
}

fn kubeconfig_ref(k: wit::KubeconfigRef) -> sdk::KubeconfigRef {
    sdk::KubeconfigRef { namespace: k.namespace, name: k.name, key: k.key }
}

fn input(i: wit::Input) -> sdk::Input {
    sdk::Input {
        object: i.object,
        provider_config: i.provider_config,
        context: sdk::Context {
            provider_name: i.context.provider_name,
            tenant_namespace: i.context.tenant_namespace,
            pod_namespace: i.context.pod_namespace,
            control_plane: i.context.control_plane.map(kubeconfig_ref),
            workload: i.context.workload.map(kubeconfig_ref),
        },
        observed: i.observed.into_iter().map(|o| sdk::Observed { id: o.id, objects: o.objects }).collect(),
    }
}

fn resource_status(r: sdk::ResourceStatus) -> wit::ResourceStatus {
    wit::ResourceStatus {
        api_group: r.api_group,
        kind: r.kind,
        name: r.name,
        namespace: r.namespace,
        phase: r.phase,
        message: r.message,
        location: r.location,
    }
}

fn resources(r: Option<Vec<sdk::ResourceStatus>>) -> Option<Vec<wit::ResourceStatus>> {
    r.map(|list| list.into_iter().map(resource_status).collect())
}

fn plan(p: sdk::Plan) -> wit::ReconcilePlan {
    wit::ReconcilePlan {
        objects: p
            .objects
            .into_iter()
            .map(|o| wit::DesiredObject { cluster: cluster(o.cluster), manifest: o.manifest })
            .collect(),
        secret_copies: p
            .secret_copies
            .into_iter()
            .map(|c| wit::SecretCopy {
                source_name: c.source_name,
                target_cluster: cluster(c.target_cluster),
                target_namespace: c.target_namespace,
                target_name: c.target_name,
                required_type: c.required_type,
            })
            .collect(),
        status: wit::ServiceStatus {
            phase: p.status.phase,
            conditions: p
                .status
                .conditions
                .into_iter()
                .map(|c| wit::Condition {
                    type_: c.type_,
                    status: match c.status {
                        sdk::ConditionStatus::True => wit::ConditionStatus::True,
                        sdk::ConditionStatus::False => wit::ConditionStatus::False,
                        sdk::ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
                    },
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
            resources: resources(p.status.resources),
        },
        requeue_after_seconds: p.requeue_after_seconds,
    }
}

fn object_ref(o: sdk::ObjectRef) -> wit::ObjectRef {
    wit::ObjectRef {
        cluster: cluster(o.cluster),
        api_version: o.api_version,
        kind: o.kind,
        plural: o.plural,
        namespace: o.namespace,
        name: o.name,
    }
}

fn cleanup_plan(c: sdk::CleanupPlan) -> wit::CleanupPlan {
    match c {
        sdk::CleanupPlan::Blocked(b) => wit::CleanupPlan::Blocked(wit::Blocked {
            message: b.message,
            requeue_after_seconds: b.requeue_after_seconds,
            resources: resources(b.resources),
        }),
        sdk::CleanupPlan::Teardown(t) => wit::CleanupPlan::Teardown(wit::Teardown {
            objects: t.objects.into_iter().map(object_ref).collect(),
            secret_copies: t.secret_copies.into_iter().map(object_ref).collect(),
            resources: resources(t.resources),
        }),
    }
}

fn plan_error(e: sdk::PlanError) -> wit::PlanError {
    match e {
        sdk::PlanError::InvalidInput(i) => wit::PlanError::InvalidInput(wit::InvalidInput {
            message: i.message,
            requeue_after_seconds: i.requeue_after_seconds,
        }),
        sdk::PlanError::Transient(m) => wit::PlanError::Transient(m),
    }
}
