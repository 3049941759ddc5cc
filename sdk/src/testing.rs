//! Named plugin inputs ("cases") a plugin shares between its native unit
//! tests and the host's native-vs-component comparison: the same input must
//! give the same answer natively and through the component. A plugin keeps
//! its cases behind a cargo feature (e.g. `test-cases`) so they are not
//! compiled into the component.
//!
//! Cases leave a language as JSON ([`Fixture`], an array of them in a file
//! such as `testdata/cases.json`): [`check_shared`] runs such a file through
//! a provider natively, Go's `sptest.Run` does the same in `go test`, and
//! `service-provider-host plugin test` runs it through the component.

use serde::{Deserialize, Serialize};

use crate::contract::{CleanupPlan, Context, Input, KubeconfigRef, Plan, PlanError, Provider};
use crate::names;

/// Which call a case makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
        let expected = Answer::of::<P>(case.call, &case.input);
        Fixture { name: case.name, call: case.call, input: &case.input, expected }
    }
}

impl Answer {
    /// What `P` answers when `call` is made with `input`, natively.
    pub fn of<P: Provider>(call: Call, input: &Input) -> Answer {
        let answer = match call {
            Call::Plan => P::plan(input).map(Outcome::Plan),
            Call::Cleanup => P::cleanup(input).map(Outcome::Cleanup),
        };
        match answer {
            Ok(outcome) => Answer::Ok(outcome),
            Err(error) => Answer::Err(error),
        }
    }
}

/// One case as read from a shared file: a named input and the answer it
/// must get, `{"ok": …}` or `{"err": …}` in the JSON form of [`Answer`].
#[derive(Debug, Clone, Deserialize)]
pub struct SharedCase {
    pub name: String,
    pub call: Call,
    pub input: Input,
    pub expected: serde_json::Value,
}

/// Reads a JSON array of cases ([`Fixture`]'s form).
pub fn shared_cases(json: &str) -> Result<Vec<SharedCase>, String> {
    let cases: Vec<SharedCase> = serde_json::from_str(json).map_err(|e| format!("the cases are not valid: {e}"))?;
    match cases.is_empty() {
        true => Err("the file holds no cases".into()),
        false => Ok(cases),
    }
}

/// What `P` answers to `case`, in the form of [`SharedCase::expected`].
pub fn answer<P: Provider>(case: &SharedCase) -> serde_json::Value {
    serde_json::to_value(Answer::of::<P>(case.call, &case.input)).expect("contract types serialize")
}

/// Whether two answers are the same JSON value, each object `manifest`
/// compared as the JSON document it holds (the contract promises documents,
/// not their key order or spacing).
pub fn same_answer(want: &serde_json::Value, got: &serde_json::Value) -> bool {
    parse_manifests(want.clone()) == parse_manifests(got.clone())
}

fn parse_manifests(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, field)| match (key.as_str(), field) {
                    ("manifest", Value::String(text)) => {
                        let parsed = serde_json::from_str(&text).unwrap_or(Value::String(text));
                        (key, parsed)
                    }
                    (_, field) => (key, parse_manifests(field)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(parse_manifests).collect()),
        other => other,
    }
}

/// Runs every case of a shared file through `P` natively; the error names
/// each case whose answer differs, with both answers.
pub fn check_shared<P: Provider>(json: &str) -> Result<usize, String> {
    let cases = shared_cases(json)?;
    let differing: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let got = answer::<P>(case);
            (!same_answer(&case.expected, &got))
                .then(|| format!("case {:?}: answers differ\nwant: {}\n got: {got}", case.name, case.expected))
        })
        .collect();
    match differing.is_empty() {
        true => Ok(cases.len()),
        false => Err(differing.join("\n")),
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
