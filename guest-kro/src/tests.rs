//! Behaviour of the whole plugin on the shared cases (`cases.rs`). The host
//! runs the same cases through the compiled component and expects identical
//! answers.

use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Cluster, ConditionStatus, Plan, PlanError, Provider};

use crate::KroProvider;
use crate::cases::{self, Call, Case};

fn case(name: &str) -> Case {
    cases::all().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name:?}"))
}

fn plan(name: &str) -> Result<Plan, PlanError> {
    let c = case(name);
    assert_eq!(c.call, Call::Plan);
    KroProvider::plan(&c.input)
}

fn cleanup(name: &str) -> CleanupPlan {
    let c = case(name);
    assert_eq!(c.call, Call::Cleanup);
    KroProvider::cleanup(&c.input).expect("cleanup never fails")
}

fn manifests(plan: &Plan) -> Vec<(Cluster, Value)> {
    plan.objects.iter().map(|o| (o.cluster, serde_json::from_str(&o.manifest).expect("manifest is JSON"))).collect()
}

fn invalid_input(result: Result<Plan, PlanError>) -> (String, u32) {
    match result {
        Err(PlanError::InvalidInput(i)) => (i.message, i.requeue_after_seconds),
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn first_reconcile_plans_namespace_flux_objects_and_copies() {
    let plan = plan("v0.9.3 first reconcile").unwrap();
    let objects = manifests(&plan);
    let tenant = "mcp--".to_string() + &service_provider_sdk::names::k8s_name_uuid(&["default", "mcp-01"]).unwrap();
    assert_eq!(objects.len(), 3);
    assert_eq!(objects[0].0, Cluster::ControlPlane);
    assert_eq!(objects[0].1["metadata"]["name"], "kro-system");
    let (_, repo) = &objects[1];
    assert_eq!(repo["kind"], "OCIRepository");
    assert_eq!(repo["metadata"]["namespace"], tenant.as_str());
    assert_eq!(repo["spec"]["ref"]["tag"], "0.9.3");
    assert_eq!(repo["spec"]["secretRef"]["name"], "sp-kro-my-registry-secret");
    let (_, release) = &objects[2];
    assert_eq!(release["kind"], "HelmRelease");
    assert_eq!(
        release["spec"]["kubeConfig"]["secretRef"]["name"], "kro.services.open-control-plane.io--mcp-01--mcp",
        "kubeconfig reference comes from the context (AccessRequest status)"
    );
    assert_eq!(release["spec"]["values"]["imagePullSecrets"][0]["name"], "my-registry-secret");

    assert_eq!(plan.copies.len(), 2);
    assert_eq!(plan.copies[0].target_name, "sp-kro-my-registry-secret");
    assert_eq!(plan.copies[1].target_cluster, Cluster::ControlPlane);
    assert_eq!(plan.copies[1].target_namespace, "kro-system");
    assert_eq!(plan.requeue_after_seconds, 300, "pollInterval 5m");

    assert_eq!(plan.status.phase, "Progressing");
    assert_eq!(plan.status.conditions[0].reason, "Reconciling");
    let resources = plan.status.resources.unwrap();
    assert!(resources.iter().all(|r| r.phase == "Progressing" && r.message.is_none()));
}

#[test]
fn ready_flux_objects_make_the_instance_ready() {
    let plan = plan("v0.9.3 all ready").unwrap();
    assert_eq!(plan.status.phase, "Ready");
    assert_eq!(plan.status.conditions[0].status, ConditionStatus::True);
    assert!(plan.status.resources.unwrap().iter().all(|r| r.phase == "Ready"));
}

#[test]
fn a_failing_release_keeps_progressing_with_flux_message() {
    let plan = plan("v0.9.3 release failing").unwrap();
    assert_eq!(plan.status.phase, "Progressing");
    let resources = plan.status.resources.unwrap();
    assert_eq!(resources[0].phase, "Ready");
    assert_eq!(resources[1].message.as_deref(), Some("install retries exhausted"));
    assert_eq!(
        plan.status.conditions[0].message,
        "Waiting for managed resources to become ready: HelmRelease kro-helm-release: install retries exhausted"
    );
}

fn resource_messages(plan: &Plan) -> Vec<(String, Option<String>)> {
    let resources = plan.status.resources.as_ref().expect("resources");
    resources.iter().map(|r| (r.phase.clone(), r.message.clone())).collect()
}

#[test]
fn a_refused_chart_pull_without_credentials_says_what_to_configure() {
    let plan = plan("v0.9.1 chart pull refused without credentials").unwrap();
    assert_eq!(plan.status.phase, "Progressing");
    let explained = format!(
        "the registry refused to serve chart oci://registry.k8s.io/kro/charts/kro:0.9.1 without credentials: set \
         chartPullSecret of version v0.9.1 of ProviderConfig kro to a Secret of type kubernetes.io/dockerconfigjson \
         in namespace openmcp-system that may pull it (Flux: {})",
        cases::UNAUTHORIZED
    );
    assert_eq!(resource_messages(&plan)[0], ("Progressing".to_string(), Some(explained.clone())));
    assert_eq!(
        plan.status.conditions[0].message,
        format!("Waiting for managed resources to become ready: OCIRepository kro-oci-repository: {explained}")
    );
    assert_eq!(plan.status.conditions[0].reason, "Reconciling");
}

#[test]
fn refused_credentials_name_the_pull_secret_and_its_copy() {
    let plan = plan("v0.9.3 chart pull refused with credentials").unwrap();
    let tenant = "mcp--".to_string() + &service_provider_sdk::names::k8s_name_uuid(&["default", "mcp-01"]).unwrap();
    let (_, message) = &resource_messages(&plan)[0];
    let message = message.as_deref().unwrap();
    assert!(
        message.starts_with(&format!(
            "the registry refused the credentials of Secret openmcp-system/my-registry-secret (chartPullSecret of \
             version v0.9.3 of ProviderConfig kro, copied to {tenant}/sp-kro-my-registry-secret) for chart \
             oci://registry.k8s.io/kro/charts/kro:0.9.3: update that Secret"
        )),
        "{message}"
    );
    assert!(message.ends_with(&format!("(Flux: {})", cases::UNAUTHORIZED)), "{message}");
}

#[test]
fn ready_true_before_flux_finished_the_generation_is_not_ready() {
    let plan = plan("v0.9.3 ready before the reconcile finished").unwrap();
    assert_eq!(plan.status.phase, "Progressing");
    assert_eq!(
        resource_messages(&plan)[0],
        ("Progressing".to_string(), Some("waiting for Flux to reconcile generation 2".to_string()))
    );
    assert_eq!(plan.status.conditions[0].message, "Waiting for managed resources to become ready", "not a failure");
}

#[test]
fn a_release_still_on_the_old_artifact_is_not_ready() {
    let plan = plan("v0.9.3 release behind the new artifact").unwrap();
    assert_eq!(plan.status.phase, "Progressing");
    assert_eq!(
        resource_messages(&plan),
        [
            ("Ready".to_string(), None),
            (
                "Progressing".to_string(),
                Some("waiting for Flux to install chart revision 0.9.3@sha256:new".to_string())
            )
        ]
    );
}

#[test]
fn a_flux_object_read_before_the_new_spec_was_applied_is_not_ready() {
    let plan = plan("v0.9.3 observed with the spec of v0.9.1").unwrap();
    assert_eq!(plan.status.phase, "Progressing");
    assert_eq!(
        resource_messages(&plan)[0],
        ("Progressing".to_string(), Some("waiting for Flux to reconcile the updated spec".to_string()))
    );
}

#[test]
fn a_version_without_pull_secrets_copies_nothing() {
    let plan = plan("v0.9.1 without pull secret").unwrap();
    let objects = manifests(&plan);
    assert_eq!(objects.len(), 2, "no kro-system namespace needed");
    assert!(objects[0].1["spec"].get("secretRef").is_none());
    assert!(objects[1].1["spec"].get("values").is_none());
    assert!(plan.copies.is_empty());
}

#[test]
fn unknown_version_is_invalid_input_listing_the_offer() {
    let (message, requeue) = invalid_input(plan("unknown version"));
    assert_eq!(
        message,
        "invalid user input: requested version is not available: \"9.9.9\", available versions are: v0.9.1, v0.9.3"
    );
    assert_eq!(requeue, 300);
}

#[test]
fn missing_provider_config_is_invalid_input() {
    let (message, requeue) = invalid_input(plan("missing provider config"));
    assert!(message.ends_with("no provider config is configured"), "{message}");
    assert_eq!(requeue, 60);
}

#[test]
fn malformed_inputs_are_invalid_input_with_clear_messages() {
    let (message, _) = invalid_input(plan("malformed object"));
    assert_eq!(message, "invalid Kro object: spec.version must be a string, not a number");
    let (message, _) = invalid_input(plan("malformed provider config"));
    assert_eq!(message, "invalid ProviderConfig: spec.versions must be a list, not a string");
    let (message, requeue) = invalid_input(plan("malformed helm values"));
    assert_eq!(message, "failed to parse helm values: helmValues.imagePullSecrets must be a list, not a string");
    assert_eq!(requeue, 300);
    let (message, requeue) = invalid_input(plan("malformed poll interval"));
    assert!(message.contains("spec.pollInterval"), "{message}");
    assert_eq!(requeue, 60);
}

#[test]
fn planning_without_control_plane_access_is_transient() {
    match plan("no control-plane access yet") {
        Err(PlanError::Transient(m)) => assert!(m.contains("ControlPlane access"), "{m}"),
        other => panic!("expected transient error, got {other:?}"),
    }
}

#[test]
fn long_names_get_valid_references() {
    for name in ["name of 23 characters", "name of 63 characters"] {
        let plan = plan(name).unwrap();
        let release = &manifests(&plan)[2].1;
        let secret = release["spec"]["kubeConfig"]["secretRef"]["name"].as_str().unwrap();
        assert!(secret.len() <= 63, "{name}: {secret}");
        assert!(secret.ends_with("--mcp"));
    }
}

#[test]
fn deletion_is_blocked_while_rgds_exist() {
    match cleanup("deletion blocked by two RGDs") {
        CleanupPlan::Blocked(b) => {
            assert_eq!(
                b.message,
                "deletion blocked: waiting for 2 kro ResourceGraphDefinition(s) to be removed from the control plane"
            );
            assert_eq!(b.requeue_after_seconds, 10);
            assert!(b.resources.unwrap().iter().all(|r| r.phase == "Terminating"));
        }
        other => panic!("expected blocked, got {other:?}"),
    }
}

#[test]
fn deletion_is_blocked_while_graphs_exist() {
    let message = |name| match cleanup(name) {
        CleanupPlan::Blocked(b) => b.message,
        other => panic!("{name}: expected blocked, got {other:?}"),
    };
    assert_eq!(
        message("deletion blocked by a Graph"),
        "deletion blocked: waiting for 1 kro Graph(s) to be removed from the control plane"
    );
    assert_eq!(
        message("deletion blocked by an RGD and a Graph"),
        "deletion blocked: waiting for 1 kro ResourceGraphDefinition(s) and 1 Graph(s) to be removed from the control plane"
    );
}

fn teardown(name: &str) -> service_provider_sdk::contract::Teardown {
    match cleanup(name) {
        CleanupPlan::Teardown(t) => t,
        other => panic!("{name}: expected teardown, got {other:?}"),
    }
}

#[test]
fn teardown_deletes_the_release_before_the_repository() {
    let t = teardown("deletion with no RGDs left");
    let kinds: Vec<&str> = t.objects.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(kinds, ["HelmRelease", "OCIRepository"]);
    assert!(t.objects.iter().all(|o| o.cluster == Cluster::Platform));
    let copies: Vec<(Cluster, &str)> = t.copies.iter().map(|c| (c.cluster, c.name.as_str())).collect();
    assert_eq!(
        copies,
        [(Cluster::Platform, "sp-kro-my-registry-secret"), (Cluster::ControlPlane, "my-registry-secret")]
    );
}

#[test]
fn deletion_proceeds_without_control_plane_access() {
    let t = teardown("deletion with ControlPlane access gone");
    assert_eq!(t.objects.len(), 2, "platform-side objects are still removed");
    let clusters: Vec<Cluster> = t.copies.iter().map(|c| c.cluster).collect();
    assert_eq!(clusters, [Cluster::Platform], "no ControlPlane copies named without access");
}

#[test]
fn deletion_does_not_need_the_version_or_the_config() {
    for name in ["deletion after the version was withdrawn", "deletion without provider config"] {
        let t = teardown(name);
        assert_eq!(t.objects.len(), 2, "{name}");
        assert!(t.copies.is_empty(), "{name}: unknown copies are left to the host's label cleanup");
    }
}

#[test]
fn every_shared_case_has_a_defined_outcome() {
    // The host test relies on these cases neither panicking nor being empty.
    let all = cases::all();
    assert!(all.len() >= 15);
    for c in all {
        match c.call {
            Call::Plan => drop(KroProvider::plan(&c.input)),
            Call::Cleanup => drop(KroProvider::cleanup(&c.input)),
        }
    }
}
