//! Named plugin inputs ("cases") a plugin shares between its native unit
//! tests and the host's native-vs-component comparison: the same input must
//! give the same answer natively and through the component. A plugin keeps
//! its cases behind a cargo feature (e.g. `test-cases`) so they are not
//! compiled into the component.

use serde::Serialize;

use crate::contract::{CleanupPlan, Context, Input, KubeconfigRef, Plan, PlanError, Provider};
use crate::names;

/// Which call a case makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    Plan,
    Cleanup,
}

/// One named input for `plan` or `cleanup`.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub call: Call,
    pub input: Input,
}

/// A case with the answer a provider gives to it: the form in which cases
/// leave Rust, e.g. for a port of a plugin to another language
/// (`sdk-go/sptest` reads it).
#[derive(Debug, Clone, Serialize)]
pub struct Fixture<'a> {
    pub name: &'static str,
    pub call: Call,
    pub input: &'a Input,
    /// `{"ok": <plan or cleanup plan>}` or `{"err": <plan error>}`.
    pub expected: Answer,
}

/// What a call answered.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Ok(Outcome),
    Err(PlanError),
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Plan(Plan),
    Cleanup(CleanupPlan),
}

impl<'a> Fixture<'a> {
    /// Runs `case` through the provider `P` natively.
    pub fn answered_by<P: Provider>(case: &'a Case) -> Self {
        let expected = match case.call {
            Call::Plan => P::plan(&case.input).map(Outcome::Plan),
            Call::Cleanup => P::cleanup(&case.input).map(Outcome::Cleanup),
        };
        let expected = match expected {
            Ok(outcome) => Answer::Ok(outcome),
            Err(error) => Answer::Err(error),
        };
        Fixture { name: case.name, call: case.call, input: &case.input, expected }
    }
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
