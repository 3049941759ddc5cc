//! Named plugin inputs shared by the native tests and the host's component
//! test, so both run exactly the same cases. Built from the seed example:
//! ProviderConfig `kro` offering v0.9.1 and v0.9.3 (the latter with a pull
//! secret and Helm values), and a `Kro` named `mcp-01`.

use serde_json::{Value, json};
use service_provider_sdk::contract::{Context, Input, Observed};
pub use service_provider_sdk::testing::{Call, Case};

use crate::describe::{OBSERVE_GRAPHS, OBSERVE_HELM_RELEASE, OBSERVE_OCI_REPOSITORY, OBSERVE_RGDS};

pub const POD_NAMESPACE: &str = "openmcp-system";
pub const PROVIDER_NAME: &str = "kro";
pub const CONTROLLER: &str = "kro.services.open-control-plane.io";

/// The seed's ProviderConfig.
pub fn provider_config() -> Value {
    json!({
        "apiVersion": "kro.services.open-control-plane.io/v1alpha1",
        "kind": "ProviderConfig",
        "metadata": {"name": "kro"},
        "spec": {
            "pollInterval": "5m",
            "versions": [
                {"version": "v0.9.1", "chartVersion": "0.9.1", "chartURL": "oci://registry.k8s.io/kro/charts/kro"},
                {"version": "v0.9.3", "chartVersion": "0.9.3", "chartURL": "oci://registry.k8s.io/kro/charts/kro",
                 "chartPullSecret": "my-registry-secret",
                 "helmValues": {"imagePullSecrets": [{"name": "my-registry-secret"}]}}
            ]
        }
    })
}

/// A `Kro` object as the onboarding cluster would return it.
pub fn kro(name: &str, namespace: &str, version: &str) -> Value {
    json!({
        "apiVersion": "kro.services.open-control-plane.io/v1alpha1",
        "kind": "Kro",
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "uid": "1b0c1f5e-0000-4000-8000-000000000001"},
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
pub fn flux_object(kind: &str, name: &str, ready: &str, message: &str) -> Value {
    json!({
        "kind": kind,
        "metadata": {"name": name, "generation": 1},
        "status": {"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": ready, "reason": "Test", "message": message}
        ]}
    })
}

/// A Flux object as the real controllers write it: the `Ready` condition
/// carries the generation it is about (`ready_generation`), while
/// `status.observedGeneration` only moves when a reconcile finished
/// successfully (-1 until then).
pub fn real_flux_object(
    kind: &str,
    name: &str,
    generations: (i64, i64, i64),
    ready: (&str, &str, &str),
    extra_status: Value,
) -> Value {
    let (generation, finished, ready_generation) = generations;
    let (status, reason, message) = ready;
    let mut object = json!({
        "kind": kind,
        "metadata": {"name": name, "generation": generation, "finalizers": ["finalizers.fluxcd.io"]},
        "status": extra_status,
    });
    object["status"]["observedGeneration"] = json!(finished);
    object["status"]["conditions"] = json!([
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "observedGeneration": ready_generation}
    ]);
    object
}

/// What source-controller says when the registry wants credentials.
pub const UNAUTHORIZED: &str = "failed to determine artifact digest: GET \
    http://127.0.0.1:5000/v2/kro/charts/kro/manifests/0.9.1: UNAUTHORIZED: authentication required; \
    [map[Action:pull Class: Name:kro/charts/kro Type:repository]]";

fn observed(id: &str, objects: &[Value]) -> Observed {
    Observed { id: id.into(), objects: objects.iter().map(Value::to_string).collect() }
}

fn rgd(name: &str) -> Value {
    json!({"apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition", "metadata": {"name": name}})
}

fn graph(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "kro.run/v1alpha1", "kind": "Graph", "metadata": {"name": name, "namespace": namespace}})
}

pub fn all() -> Vec<Case> {
    let pc = || Some(provider_config());
    let plan = |name, input| Case { name, call: Call::Plan, input };
    let cleanup = |name, input| Case { name, call: Call::Cleanup, input };

    let mut ready = input(kro("mcp-01", "default", "v0.9.3"), pc());
    ready.observed = vec![
        observed(
            OBSERVE_OCI_REPOSITORY,
            &[flux_object("OCIRepository", "kro-oci-repository", "True", "stored artifact")],
        ),
        observed(
            OBSERVE_HELM_RELEASE,
            &[flux_object("HelmRelease", "kro-helm-release", "True", "Helm install succeeded")],
        ),
    ];
    let mut half_ready = ready.clone();
    half_ready.observed[1] = observed(
        OBSERVE_HELM_RELEASE,
        &[flux_object("HelmRelease", "kro-helm-release", "False", "install retries exhausted")],
    );

    let repository = |generations, ready, extra| {
        observed(
            OBSERVE_OCI_REPOSITORY,
            &[real_flux_object("OCIRepository", "kro-oci-repository", generations, ready, extra)],
        )
    };
    let release = |generations, ready, extra| {
        observed(
            OBSERVE_HELM_RELEASE,
            &[real_flux_object("HelmRelease", "kro-helm-release", generations, ready, extra)],
        )
    };
    let refused = ("False", "OCIArtifactPullFailed", UNAUTHORIZED);
    let mut refused_without_secret = input(kro("mcp-01", "default", "v0.9.1"), pc());
    refused_without_secret.observed = vec![repository((1, -1, 1), refused, json!({}))];
    let mut refused_with_secret = input(kro("mcp-01", "default", "v0.9.3"), pc());
    refused_with_secret.observed = vec![repository((1, -1, 1), refused, json!({}))];
    let stored = ("True", "Succeeded", "stored artifact for digest '0.9.3@sha256:new'");
    let new_artifact = json!({"artifact": {"revision": "0.9.3@sha256:new"}});
    let mut not_finished = input(kro("mcp-01", "default", "v0.9.3"), pc());
    not_finished.observed = vec![
        repository((2, 1, 2), stored, new_artifact.clone()),
        release((1, 1, 1), ("True", "UpgradeSucceeded", "Helm upgrade succeeded"), json!({})),
    ];
    let mut behind_artifact = input(kro("mcp-01", "default", "v0.9.3"), pc());
    behind_artifact.observed = vec![
        repository((2, 2, 2), stored, new_artifact),
        release(
            (1, 1, 1),
            ("True", "InstallSucceeded", "Helm install succeeded"),
            json!({"lastAttemptedRevisionDigest": "sha256:old"}),
        ),
    ];

    // Read in the reconcile that applies v0.9.3 (the tenant just changed
    // spec.version): Flux's Ready=True is about the 0.9.1 spec.
    let mut old_spec = input(kro("mcp-01", "default", "v0.9.3"), pc());
    let mut old_repository = real_flux_object("OCIRepository", "kro-oci-repository", (1, 1, 1), stored, json!({}));
    old_repository["spec"] = json!({"interval": "1m", "url": "oci://registry.k8s.io/kro/charts/kro", "ref": {"tag": "0.9.1"}, "timeout": "60s"});
    old_spec.observed = vec![observed(OBSERVE_OCI_REPOSITORY, &[old_repository])];

    let mut garbled = input(kro("mcp-01", "default", "v0.9.3"), pc());
    garbled.observed = vec![Observed { id: OBSERVE_OCI_REPOSITORY.into(), objects: vec!["{\"kind\":".into()] }];

    let mut no_access = input(kro("mcp-01", "default", "v0.9.3"), pc());
    no_access.context.control_plane = None;

    let mut bad_poll = provider_config();
    bad_poll["spec"]["pollInterval"] = json!("soon");
    let mut bad_values = provider_config();
    bad_values["spec"]["versions"][1]["helmValues"] = json!({"imagePullSecrets": "my-registry-secret"});
    let mut bad_config = provider_config();
    bad_config["spec"]["versions"] = json!("v0.9.3");

    let mut blocked = input(kro("mcp-01", "default", "v0.9.3"), pc());
    blocked.observed = vec![observed(OBSERVE_RGDS, &[rgd("noop"), rgd("webapp")])];
    let mut by_graph = blocked.clone();
    by_graph.observed = vec![observed(OBSERVE_RGDS, &[]), observed(OBSERVE_GRAPHS, &[graph("web", "team-a")])];
    let mut by_both = blocked.clone();
    by_both.observed =
        vec![observed(OBSERVE_RGDS, &[rgd("noop")]), observed(OBSERVE_GRAPHS, &[graph("web", "team-a")])];
    let mut unblocked = blocked.clone();
    unblocked.observed = vec![observed(OBSERVE_RGDS, &[]), observed(OBSERVE_GRAPHS, &[])];
    let mut access_gone = input(kro("mcp-01", "default", "v0.9.3"), pc());
    access_gone.context.control_plane = None;
    let mut withdrawn = provider_config();
    withdrawn["spec"]["versions"] = json!([withdrawn["spec"]["versions"][0].clone()]);

    vec![
        plan("v0.9.3 first reconcile", input(kro("mcp-01", "default", "v0.9.3"), pc())),
        plan("v0.9.3 all ready", ready),
        plan("v0.9.3 release failing", half_ready),
        plan("v0.9.1 without pull secret", input(kro("mcp-01", "default", "v0.9.1"), pc())),
        plan("v0.9.1 chart pull refused without credentials", refused_without_secret),
        plan("v0.9.3 chart pull refused with credentials", refused_with_secret),
        plan("v0.9.3 ready before the reconcile finished", not_finished),
        plan("v0.9.3 release behind the new artifact", behind_artifact),
        plan("v0.9.3 observed with the spec of v0.9.1", old_spec),
        plan("unknown version", input(kro("mcp-01", "default", "9.9.9"), pc())),
        plan("missing provider config", input(kro("mcp-01", "default", "v0.9.3"), None)),
        plan(
            "malformed object",
            input(json!({"metadata": {"name": "mcp-01", "namespace": "default"}, "spec": {"version": 3}}), pc()),
        ),
        plan("malformed provider config", input(kro("mcp-01", "default", "v0.9.3"), Some(bad_config))),
        plan("malformed helm values", input(kro("mcp-01", "default", "v0.9.3"), Some(bad_values))),
        plan("malformed poll interval", input(kro("mcp-01", "default", "v0.9.3"), Some(bad_poll))),
        plan("no control-plane access yet", no_access),
        plan("observed object that is not JSON", garbled),
        plan("name of 23 characters", input(kro(&"a".repeat(23), "default", "v0.9.3"), pc())),
        plan("name of 63 characters", input(kro(&"b".repeat(63), "tenant-ns", "v0.9.3"), pc())),
        cleanup("deletion blocked by two RGDs", blocked),
        cleanup("deletion blocked by a Graph", by_graph),
        cleanup("deletion blocked by an RGD and a Graph", by_both),
        cleanup("deletion with no RGDs left", unblocked),
        cleanup("deletion with ControlPlane access gone", access_gone),
        cleanup("deletion after the version was withdrawn", input(kro("mcp-01", "default", "v0.9.3"), Some(withdrawn))),
        cleanup("deletion without provider config", input(kro("mcp-01", "default", "v0.9.3"), None)),
    ]
}
