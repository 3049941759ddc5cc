//! Conversions between the generated bindings and the SDK contract types the
//! rest of the host works with. Mechanical on purpose: one function per
//! record, field by field, so a WIT change fails to compile here.

use service_provider_sdk::contract as sdk;

use super::bindings::open_control_plane::service_provider::types as wit;

fn cluster(c: wit::Cluster) -> sdk::Cluster {
    match c {
        wit::Cluster::Platform => sdk::Cluster::Platform,
        wit::Cluster::Onboarding => sdk::Cluster::Onboarding,
        wit::Cluster::ControlPlane => sdk::Cluster::ControlPlane,
        wit::Cluster::Workload => sdk::Cluster::Workload,
    }
}

fn api_kind(k: wit::ApiKind) -> sdk::ApiKind {
    sdk::ApiKind { group: k.group, version: k.version, kind: k.kind, plural: k.plural, namespaced: k.namespaced }
}

fn scope(s: wit::NamespaceScope) -> sdk::NamespaceScope {
    match s {
        wit::NamespaceScope::Tenant => sdk::NamespaceScope::Tenant,
        wit::NamespaceScope::Named(n) => sdk::NamespaceScope::Named(n),
        wit::NamespaceScope::ClusterScoped => sdk::NamespaceScope::ClusterScoped,
    }
}

fn rule(r: wit::PolicyRule) -> sdk::PolicyRule {
    sdk::PolicyRule {
        api_groups: r.api_groups,
        resources: r.resources,
        resource_names: r.resource_names,
        verbs: r.verbs,
    }
}

pub(super) fn descriptor(d: wit::Descriptor) -> sdk::Descriptor {
    sdk::Descriptor {
        name: d.name,
        service: api_kind(d.service),
        provider_config: api_kind(d.provider_config),
        finalizer: d.finalizer,
        crds: d.crds.into_iter().map(|c| sdk::Crd { cluster: cluster(c.cluster), manifest: c.manifest }).collect(),
        access: sdk::Access {
            control_plane_rules: d.access.control_plane_rules.into_iter().map(rule).collect(),
            workload_cluster: d.access.workload_cluster,
            workload_rules: d.access.workload_rules.into_iter().map(rule).collect(),
        },
        capabilities: d
            .capabilities
            .into_iter()
            .map(|c| sdk::Capability {
                cluster: cluster(c.cluster),
                api: api_kind(c.api),
                scope: scope(c.scope),
                names: c.names,
            })
            .collect(),
        observations: d
            .observations
            .into_iter()
            .map(|o| sdk::Observation {
                id: o.id,
                cluster: cluster(o.cluster),
                api: api_kind(o.api),
                scope: scope(o.scope),
                name: o.name,
                stage: match o.stage {
                    wit::Stage::Reconcile => sdk::Stage::Reconcile,
                    wit::Stage::Cleanup => sdk::Stage::Cleanup,
                    wit::Stage::Always => sdk::Stage::Always,
                },
                detail: match o.detail {
                    wit::Detail::Full => sdk::Detail::Full,
                    wit::Detail::Metadata => sdk::Detail::Metadata,
                },
            })
            .collect(),
    }
}

fn kubeconfig_ref(k: &sdk::KubeconfigRef) -> wit::KubeconfigRef {
    wit::KubeconfigRef { namespace: k.namespace.clone(), name: k.name.clone(), key: k.key.clone() }
}

pub(super) fn input(i: &sdk::Input) -> wit::Input {
    wit::Input {
        object: i.object.clone(),
        provider_config: i.provider_config.clone(),
        context: wit::Context {
            provider_name: i.context.provider_name.clone(),
            tenant_namespace: i.context.tenant_namespace.clone(),
            pod_namespace: i.context.pod_namespace.clone(),
            control_plane: i.context.control_plane.as_ref().map(kubeconfig_ref),
            workload: i.context.workload.as_ref().map(kubeconfig_ref),
        },
        observed: i.observed.iter().map(|o| wit::Observed { id: o.id.clone(), objects: o.objects.clone() }).collect(),
    }
}

fn resource_status(r: wit::ResourceStatus) -> sdk::ResourceStatus {
    sdk::ResourceStatus {
        api_group: r.api_group,
        kind: r.kind,
        name: r.name,
        namespace: r.namespace,
        phase: r.phase,
        message: r.message,
        location: r.location,
    }
}

fn resources(r: Option<Vec<wit::ResourceStatus>>) -> Option<Vec<sdk::ResourceStatus>> {
    r.map(|list| list.into_iter().map(resource_status).collect())
}

pub(super) fn plan(p: wit::ReconcilePlan) -> sdk::Plan {
    sdk::Plan {
        objects: p
            .objects
            .into_iter()
            .map(|o| sdk::DesiredObject { cluster: cluster(o.cluster), manifest: o.manifest })
            .collect(),
        secret_copies: p
            .secret_copies
            .into_iter()
            .map(|c| sdk::SecretCopy {
                source_name: c.source_name,
                target_cluster: cluster(c.target_cluster),
                target_namespace: c.target_namespace,
                target_name: c.target_name,
                required_type: c.required_type,
            })
            .collect(),
        status: sdk::ServiceStatus {
            phase: p.status.phase,
            conditions: p
                .status
                .conditions
                .into_iter()
                .map(|c| sdk::Condition {
                    type_: c.type_,
                    status: match c.status {
                        wit::ConditionStatus::True => sdk::ConditionStatus::True,
                        wit::ConditionStatus::False => sdk::ConditionStatus::False,
                        wit::ConditionStatus::Unknown => sdk::ConditionStatus::Unknown,
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

fn object_ref(o: wit::ObjectRef) -> sdk::ObjectRef {
    sdk::ObjectRef {
        cluster: cluster(o.cluster),
        api_version: o.api_version,
        kind: o.kind,
        plural: o.plural,
        namespace: o.namespace,
        name: o.name,
    }
}

pub(super) fn cleanup_plan(c: wit::CleanupPlan) -> sdk::CleanupPlan {
    match c {
        wit::CleanupPlan::Blocked(b) => sdk::CleanupPlan::Blocked(sdk::Blocked {
            message: b.message,
            requeue_after_seconds: b.requeue_after_seconds,
            resources: resources(b.resources),
        }),
        wit::CleanupPlan::Teardown(t) => sdk::CleanupPlan::Teardown(sdk::Teardown {
            objects: t.objects.into_iter().map(object_ref).collect(),
            secret_copies: t.secret_copies.into_iter().map(object_ref).collect(),
            resources: resources(t.resources),
        }),
    }
}

pub(super) fn plan_error(e: wit::PlanError) -> sdk::PlanError {
    match e {
        wit::PlanError::InvalidInput(i) => sdk::PlanError::InvalidInput(sdk::InvalidInput {
            message: i.message,
            requeue_after_seconds: i.requeue_after_seconds,
        }),
        wit::PlanError::Transient(m) => sdk::PlanError::Transient(m),
    }
}
