//! Named plugin inputs ("cases") a plugin shares between its native unit
//! tests and the host's native-vs-component comparison: the same input must
//! give the same answer natively and through the component. A plugin keeps
//! its cases behind a cargo feature (e.g. `test-cases`) so they are not
//! compiled into the component.

use crate::contract::{Context, KubeconfigRef};
use crate::names;

/// Which call a case makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Plan,
    Cleanup,
}

/// One named input for `plan` or `cleanup`.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub call: Call,
    pub input: crate::contract::Input,
}

/// The context the host builds for the instance `namespace/name` once its
/// ControlPlane access is granted: the tenant namespace and the
/// AccessRequest's kubeconfig Secret named as openmcp names them.
/// `controller` is the service's API group.
pub fn granted_context(
    controller: &str,
    provider_name: &str,
    pod_namespace: &str,
    name: &str,
    namespace: &str,
) -> Context {
    let tenant = names::tenant_namespace(name, namespace).expect("non-empty names");
    Context {
        provider_name: provider_name.into(),
        control_plane: Some(KubeconfigRef {
            namespace: tenant.clone(),
            name: names::access_request_name(controller, name, "mcp"),
            key: "kubeconfig".into(),
        }),
        tenant_namespace: tenant,
        pod_namespace: pod_namespace.into(),
        workload: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granted_context_follows_openmcp_naming() {
        let c = granted_context("kro.services.open-control-plane.io", "kro", "openmcp-system", "test-mcp", "default");
        assert_eq!(c.tenant_namespace, names::tenant_namespace("test-mcp", "default").unwrap());
        let kubeconfig = c.control_plane.unwrap();
        assert_eq!(kubeconfig.name, "kro.services.open-control-plane.io--test-mcp--mcp");
        assert_eq!(kubeconfig.namespace, c.tenant_namespace);
    }
}
