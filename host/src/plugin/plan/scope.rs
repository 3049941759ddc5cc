//! Where an instance's context lets a plugin reach: the clusters it has
//! access to, and the namespace each scope of the contract stands for.

use service_provider_sdk::contract::{Cluster, Context, NamespaceScope};

/// The namespace a contract scope resolves to for this context; `None` for
/// cluster-scoped and for any namespace (a list across all namespaces).
pub fn scope_namespace<'a>(scope: &'a NamespaceScope, context: &'a Context) -> Option<&'a str> {
    match scope {
        NamespaceScope::Tenant => Some(&context.tenant_namespace),
        NamespaceScope::Named(ns) => Some(ns),
        NamespaceScope::ClusterScoped | NamespaceScope::Any => None,
    }
}

/// Whether the host can reach a cluster for the instance of this context.
pub fn reachable(cluster: Cluster, context: &Context) -> bool {
    match cluster {
        Cluster::Platform | Cluster::Onboarding => true,
        Cluster::ControlPlane => context.control_plane.is_some(),
        Cluster::Workload => context.workload.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_resolve_against_the_context() {
        let context = Context {
            provider_name: "p".into(),
            tenant_namespace: "mcp--t".into(),
            pod_namespace: "pods".into(),
            control_plane: None,
            workload: None,
        };
        assert_eq!(scope_namespace(&NamespaceScope::Tenant, &context), Some("mcp--t"));
        assert_eq!(scope_namespace(&NamespaceScope::Named("x".into()), &context), Some("x"));
        assert_eq!(scope_namespace(&NamespaceScope::ClusterScoped, &context), None);
        assert!(reachable(Cluster::Platform, &context));
        assert!(!reachable(Cluster::ControlPlane, &context));
    }
}
