//! Behaviour of the whole plugin on the shared cases (`cases.rs`). The host
//! runs the same cases through the compiled component and expects identical
//! answers.

use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Cluster, CopyKind, Plan, PlanError, Provider};
use service_provider_sdk::names;

use crate::FluxProvider;
use crate::cases::{self, Call, Case};

fn case(name: &str) -> Case {
    cases::all().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name:?}"))
}

fn plan(name: &str) -> Result<Plan, PlanError> {
    let c = case(name);
    assert_eq!(c.call, Call::Plan);
    FluxProvider::plan(&c.input)
}

fn cleanup(name: &str) -> CleanupPlan {
    let c = case(name);
    assert_eq!(c.call, Call::Cleanup);
    FluxProvider::cleanup(&c.input).expect("cleanup never fails")
}

fn manifests(plan: &Plan) -> Vec<(Cluster, Value)> {
    plan.objects.iter().map(|o| (o.cluster, serde_json::from_str(&o.manifest).expect("manifest is JSON"))).collect()
}

fn invalid_input(result: Result<Plan, PlanError>) -> String {
    match result {
        Err(PlanError::InvalidInput(i)) => i.message,
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn the_seed_example_plans_namespace_flux_objects_and_three_copies() {
    let plan = plan("first reconcile").unwrap();
    let tenant = names::tenant_namespace("mcp-01", "default").unwrap();
    let objects = manifests(&plan);
    assert_eq!(objects.len(), 3);
    assert_eq!((objects[0].0, objects[0].1["metadata"]["name"].as_str()), (Cluster::ControlPlane, Some("flux-system")));
    let (_, repo) = &objects[1];
    assert_eq!(repo["kind"], "OCIRepository");
    assert_eq!(repo["metadata"]["namespace"], tenant.as_str());
    assert_eq!(repo["spec"]["interval"], "5m", "the poll interval is the Flux interval");
    assert_eq!(repo["spec"]["secretRef"]["name"], "sp-flux-chart-registry-credentials");
    let (_, release) = &objects[2];
    assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], "flux.services.open-control-plane.io--mcp-01--mcp");
    assert_eq!(release["spec"]["values"]["helmController"]["image"], "my-registry.example.com/fluxcd/helm-controller");
    for section in crate::config::CONTROLLER_SECTIONS {
        assert_eq!(release["spec"]["values"][section]["volumeMounts"][0]["mountPath"], crate::config::CA_MOUNT_PATH);
    }

    let copies: Vec<(CopyKind, Cluster, &str, &str, &str)> = plan
        .copies
        .iter()
        .map(|c| {
            (
                c.kind.clone(),
                c.target_cluster,
                c.source_name.as_str(),
                c.target_namespace.as_str(),
                c.target_name.as_str(),
            )
        })
        .collect();
    let docker = || CopyKind::Secret("kubernetes.io/dockerconfigjson".into());
    assert_eq!(
        copies,
        [
            (
                docker(),
                Cluster::Platform,
                "chart-registry-credentials",
                tenant.as_str(),
                "sp-flux-chart-registry-credentials"
            ),
            (
                docker(),
                Cluster::ControlPlane,
                "image-registry-credentials",
                "flux-system",
                "image-registry-credentials"
            ),
            (CopyKind::ConfigMap, Cluster::ControlPlane, "custom-ca-bundle", "flux-system", "custom-ca-bundle"),
        ]
    );
    assert_eq!(plan.requeue_after_seconds, 300);
    assert_eq!(plan.status.phase, "Progressing");
    assert_eq!(plan.status.conditions[0].message, "Waiting for managed resources to become ready");
}

#[test]
fn ready_flux_objects_make_the_instance_ready_and_failures_are_named() {
    let ready = plan("all ready").unwrap();
    assert_eq!(ready.status.phase, "Ready");
    assert_eq!(ready.status.conditions[0].message, "Domain Service is ready");
    let failing = plan("release failing").unwrap();
    assert_eq!(failing.status.conditions[0].message, "HelmRelease flux: install retries exhausted");
}

#[test]
fn a_namespace_override_moves_flux_and_every_copy() {
    let plan = plan("namespace override").unwrap();
    let objects = manifests(&plan);
    assert_eq!(objects[0].1["metadata"]["name"], "gitops");
    assert_eq!(objects[2].1["spec"]["targetNamespace"], "gitops");
    assert!(
        plan.copies
            .iter()
            .filter(|c| c.target_cluster == Cluster::ControlPlane)
            .all(|c| c.target_namespace == "gitops")
    );
}

#[test]
fn without_a_ca_bundle_nothing_about_it_is_planned() {
    let plan = plan("without a CA bundle").unwrap();
    assert!(plan.copies.iter().all(|c| c.kind != CopyKind::ConfigMap));
    let release = &manifests(&plan)[2].1;
    assert!(release["spec"]["values"]["sourceController"].get("volumes").is_none());
}

#[test]
fn user_errors_are_invalid_input_with_actionable_messages() {
    assert_eq!(
        invalid_input(plan("unknown version")),
        "invalid user input: requested version is not available: \"9.9.9\", available versions are: 2.8.3"
    );
    assert!(invalid_input(plan("missing provider config")).contains("no provider config is configured"));
    assert!(invalid_input(plan("malformed object")).starts_with("invalid Flux object: "));
    assert!(invalid_input(plan("malformed values")).starts_with("failed to parse values: "));
    assert_eq!(invalid_input(plan("CA reference without a key")), "caBundleRef.key must be set");
    assert!(invalid_input(plan("CA section of the wrong shape")).contains("kustomizeController.volumes is not a list"));
    assert!(invalid_input(plan("malformed poll interval")).contains("spec.pollInterval \"soon\""));
    assert!(invalid_input(plan("chart URL that is not OCI")).contains("is not an oci:// URL"));
}

#[test]
fn without_control_plane_access_the_plan_is_retried() {
    match plan("no control-plane access yet") {
        Err(PlanError::Transient(m)) => assert!(m.contains("not been granted")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_names_stay_valid() {
    let plan = plan("name of 63 characters").unwrap();
    let kubeconfig = &manifests(&plan)[2].1["spec"]["kubeConfig"]["secretRef"]["name"];
    assert!(kubeconfig.as_str().unwrap().len() <= 63, "{kubeconfig}");
    assert!(plan.copies.iter().all(|c| c.target_name.len() <= 63));
    let prefixed = crate::desired::chart_pull_secret_copy_name(&"x".repeat(70));
    assert!(prefixed.starts_with("sp-flux-") && prefixed.len() <= 63, "{prefixed}");
}

#[test]
fn deletion_waits_for_the_tenants_flux_objects() {
    match cleanup("deletion blocked by the tenant's Flux objects") {
        CleanupPlan::Blocked(b) => {
            assert_eq!(
                b.message,
                "deletion blocked: waiting for the Flux objects on the control plane to be removed (1 GitRepository, 2 Kustomization)"
            );
            assert!(b.resources.unwrap().iter().all(|r| r.phase == "Terminating"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deletion_needs_neither_the_version_nor_the_config_nor_access() {
    for name in [
        "deletion with no Flux objects left",
        "deletion with ControlPlane access gone",
        "deletion after the version was withdrawn",
        "deletion without provider config",
    ] {
        match cleanup(name) {
            CleanupPlan::Teardown(t) => {
                let order: Vec<&str> = t.objects.iter().map(|o| o.kind.as_str()).collect();
                assert_eq!(
                    order,
                    ["HelmRelease", "OCIRepository"],
                    "{name}: the release first, so Flux is uninstalled"
                );
                assert!(t.objects.iter().all(|o| o.cluster == Cluster::Platform && o.name == "flux"));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
