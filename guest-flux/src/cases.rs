//! Named plugin inputs shared by the native tests and the host's component
//! test, so both run exactly the same cases. Built from the seed example:
//! ProviderConfig `flux` offering 2.8.3 (chart 2.18.2, a chart pull secret,
//! image pull secrets, controller image overrides) with a CA bundle, and a
//! `Flux` named `mcp-01`.

use serde_json::{Value, json};
use service_provider_sdk::contract::{Context, Input, Observed};
pub use service_provider_sdk::testing::{Call, Case};

use crate::describe::{BLOCKERS, OBSERVE_HELM_RELEASE, OBSERVE_OCI_REPOSITORY};

pub const POD_NAMESPACE: &str = "openmcp-system";
pub const PROVIDER_NAME: &str = "flux";
pub const CONTROLLER: &str = "flux.services.open-control-plane.io";

/// The seed's ProviderConfig.
pub fn provider_config() -> Value {
    json!({
        "apiVersion": "flux.services.open-control-plane.io/v1alpha1",
        "kind": "ProviderConfig",
        "metadata": {"name": "flux"},
        "spec": {
            "pollInterval": "5m",
            "caBundleRef": {"name": "custom-ca-bundle", "key": "ca-bundle.crt"},
            "versions": [{
                "version": "2.8.3",
                "chartVersion": "2.18.2",
                "chartUrl": "oci://ghcr.io/fluxcd-community/charts/flux2",
                "chartPullSecret": "chart-registry-credentials",
                "values": {
                    "imagePullSecrets": [{"name": "image-registry-credentials"}],
                    "helmController": {"image": "my-registry.example.com/fluxcd/helm-controller", "tag": "v1.5.3"},
                    "sourceController": {"image": "my-registry.example.com/fluxcd/source-controller", "tag": "v1.8.1"}
                }
            }]
        }
    })
}

/// A `Flux` object as the onboarding cluster would return it.
pub fn flux(name: &str, namespace: &str, version: &str) -> Value {
    json!({
        "apiVersion": "flux.services.open-control-plane.io/v1alpha1",
        "kind": "Flux",
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "uid": "1b0c1f5e-0000-4000-8000-000000000002"},
        "spec": {"version": version}
    })
}

/// The context the host would build once ControlPlane access is granted.
pub fn context(name: &str, namespace: &str) -> Context {
    service_provider_sdk::testing::granted_context(CONTROLLER, PROVIDER_NAME, POD_NAMESPACE, name, namespace)
}

pub fn input(object: Value, provider_config: Option<Value>) -> Input {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("mcp-01").to_string();
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    Input {
        object: object.to_string(),
        provider_config: provider_config.map(|pc| pc.to_string()),
        context: context(&name, &namespace),
        observed: Vec::new(),
    }
}

/// A Flux object with a `Ready` condition, as the host would observe it.
pub fn flux_object(kind: &str, ready: &str, message: &str) -> Value {
    json!({
        "kind": kind,
        "metadata": {"name": "flux", "generation": 1},
        "status": {"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": ready, "reason": "Test", "message": message, "observedGeneration": 1}
        ]}
    })
}

fn observed(id: &str, objects: &[Value]) -> Observed {
    Observed { id: id.into(), objects: objects.iter().map(Value::to_string).collect() }
}

fn tenant_object(kind: &str, name: &str) -> Value {
    json!({"kind": kind, "metadata": {"name": name, "namespace": "apps"}})
}

pub fn all() -> Vec<Case> {
    let pc = || Some(provider_config());
    let plan = |name, input| Case { name, call: Call::Plan, input };
    let cleanup = |name, input| Case { name, call: Call::Cleanup, input };
    let base = || input(flux("mcp-01", "default", "2.8.3"), pc());

    let mut ready = base();
    ready.observed = vec![
        observed(OBSERVE_OCI_REPOSITORY, &[flux_object("OCIRepository", "True", "stored artifact")]),
        observed(OBSERVE_HELM_RELEASE, &[flux_object("HelmRelease", "True", "Helm install succeeded")]),
    ];
    let mut failing = ready.clone();
    failing.observed[1] =
        observed(OBSERVE_HELM_RELEASE, &[flux_object("HelmRelease", "False", "install retries exhausted")]);

    let with = |change: &dyn Fn(&mut Value)| {
        let mut pc = provider_config();
        change(&mut pc);
        input(flux("mcp-01", "default", "2.8.3"), Some(pc))
    };
    let override_ns = with(&|pc| pc["spec"]["versions"][0]["values"]["namespaceOverride"] = json!("gitops"));
    let no_ca = with(&|pc| pc["spec"].as_object_mut().unwrap().remove("caBundleRef").map(drop).unwrap_or(()));
    let bad_values = with(&|pc| pc["spec"]["versions"][0]["values"]["imagePullSecrets"] = json!("one"));
    let bad_ca = with(&|pc| pc["spec"]["caBundleRef"]["key"] = json!(""));
    let bad_ca_values =
        with(&|pc| pc["spec"]["versions"][0]["values"]["kustomizeController"] = json!({"volumes": "x"}));
    let bad_poll = with(&|pc| pc["spec"]["pollInterval"] = json!("soon"));
    let bad_url = with(&|pc| pc["spec"]["versions"][0]["chartUrl"] = json!("https://charts.example/flux2"));
    let mut no_access = base();
    no_access.context.control_plane = None;

    let mut blocked = base();
    blocked.observed = BLOCKERS.iter().map(|(id, _, _, _)| observed(id, &[])).collect();
    blocked.observed[0] = observed(BLOCKERS[0].0, &[tenant_object("GitRepository", "podinfo")]);
    blocked.observed[4] =
        observed(BLOCKERS[4].0, &[tenant_object("Kustomization", "a"), tenant_object("Kustomization", "b")]);
    let mut unblocked = base();
    unblocked.observed = BLOCKERS.iter().map(|(id, _, _, _)| observed(id, &[])).collect();
    let mut access_gone = base();
    access_gone.context.control_plane = None;
    let withdrawn = with(&|pc| pc["spec"]["versions"] = json!([]));

    vec![
        plan("first reconcile", base()),
        plan("all ready", ready),
        plan("release failing", failing),
        plan("namespace override", override_ns),
        plan("without a CA bundle", no_ca),
        plan("unknown version", input(flux("mcp-01", "default", "9.9.9"), pc())),
        plan("missing provider config", input(flux("mcp-01", "default", "2.8.3"), None)),
        plan(
            "malformed object",
            input(json!({"metadata": {"name": "mcp-01", "namespace": "default"}, "spec": {}}), pc()),
        ),
        plan("malformed values", bad_values),
        plan("CA reference without a key", bad_ca),
        plan("CA section of the wrong shape", bad_ca_values),
        plan("malformed poll interval", bad_poll),
        plan("chart URL that is not OCI", bad_url),
        plan("no control-plane access yet", no_access),
        plan("name of 63 characters", input(flux(&"f".repeat(63), "tenant-ns", "2.8.3"), pc())),
        cleanup("deletion blocked by the tenant's Flux objects", blocked),
        cleanup("deletion with no Flux objects left", unblocked),
        cleanup("deletion with ControlPlane access gone", access_gone),
        cleanup("deletion after the version was withdrawn", withdrawn),
        cleanup("deletion without provider config", input(flux("mcp-01", "default", "2.8.3"), None)),
    ]
}
