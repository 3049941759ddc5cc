//! The service-provider lifecycle on real API servers: the host's controller
//! with the Kro component, the openmcp and Flux simulators, one behaviour
//! per test. Run with `task test` (builds the plugin and the API servers).

use std::time::Duration;

use host_test_support::*;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use service_provider_host::reconcile;
use std::sync::Arc;

mod adopt;

const DOCKER: &str = "kubernetes.io/dockerconfigjson";

fn one(instance: &str, flux_ready: bool) -> Options {
    Options { instances: vec![instance.to_string()], flux_ready, workload: false }
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name).await.expect("read").map(|o| serde_json::to_value(o).unwrap())
}

#[tokio::test]
async fn happy_path_reaches_ready_with_exact_flux_objects() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;

    let kro = f.wait_ready("mcp-01").await;
    assert_eq!(ready(&kro)["reason"], "ReconcileSuccess");
    assert_eq!(ready(&kro)["message"], "Domain Service is ready");
    assert_eq!(kro["status"]["observedGeneration"], kro["metadata"]["generation"]);
    assert!(
        kro["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "kro.services.open-control-plane.io/finalizer")
    );
    let resources = kro["status"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2);
    assert!(resources.iter().all(|r| r["phase"] == "Ready"));

    let tenant = f.tenant("mcp-01");
    let repo = get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.expect("OCIRepository");
    assert_eq!(repo["spec"]["ref"]["tag"], "0.9.1");
    assert_eq!(repo["spec"]["url"], "oci://registry.k8s.io/kro/charts/kro");
    let release = get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.expect("HelmRelease");
    assert_eq!(release["spec"]["chartRef"]["namespace"], tenant.as_str());
    assert_eq!(release["spec"]["targetNamespace"], "kro-system");

    // The AccessRequest: openmcp naming and labels, least-privilege token,
    // and the HelmRelease uses the Secret its status names.
    let ar_name = "kro.services.open-control-plane.io--mcp-01--mcp";
    let ar = get(&f.access_requests("mcp-01"), ar_name).await.expect("AccessRequest");
    assert_eq!(ar["metadata"]["labels"]["openmcp.cloud/managed-by"], GROUP);
    assert_eq!(ar["metadata"]["labels"]["openmcp.cloud/onboarding-name"], "mcp-01");
    assert_eq!(ar["spec"]["requestRef"]["name"], "mcp-01");
    assert!(
        ar["metadata"]["finalizers"].as_array().unwrap().iter().any(|x| x == "clusters.openmcp.cloud/clusteraccess")
    );
    let rules = ar["spec"]["token"]["permissions"][0]["rules"].as_array().unwrap();
    assert!(rules.iter().all(|r| r["resources"].as_array().unwrap().iter().all(|x| x != "*")));
    assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], ar["status"]["secretRef"]["name"]);
    assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["key"], "kubeconfig");

    f.wait_event("mcp-01", "Normal", "Ready").await;
    f.stop_operator().await;
}

#[tokio::test]
async fn a_missing_provider_config_is_actionable_and_recovers() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let kro = f
        .wait_kro("mcp-01", "missing-config message", |k| {
            ready(k)["message"].as_str().is_some_and(|m| m.starts_with("No ProviderConfig found"))
        })
        .await;
    assert_eq!(kro["status"]["phase"], "Progressing");
    assert!(ready(&kro)["message"].as_str().unwrap().contains(&format!("\"{}\"", f.provider)));
    f.wait_event("mcp-01", "Warning", "ReconcileError").await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.wait_ready("mcp-01").await;
    f.stop_operator().await;
}

/// Every new Ready message is an Event carrying it, even when the type and
/// reason stay the same (a shared recorder would only count the first).
#[tokio::test]
async fn each_new_error_message_is_an_event_of_its_own() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let with_note = |text: &'static str| {
        let f = &f;
        async move {
            eventually(&format!("an Event saying {text:?}"), WAIT, || async {
                let events = f.events("mcp-01").await;
                events.into_iter().find(|e| {
                    e.reason.as_deref() == Some("ReconcileError") && e.note.as_deref().is_some_and(|n| n.contains(text))
                })
            })
            .await
        }
    };
    let first = with_note("No ProviderConfig found").await;
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    let second = with_note("available versions are: v0.9.3").await;
    assert_ne!(first.metadata.name, second.metadata.name, "two Events");
    f.stop_operator().await;
}

#[tokio::test]
async fn an_unknown_version_lists_the_offer_and_a_fixed_one_proceeds() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1"), version("v0.9.3", "0.9.3")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v9.9.9").await;
    let kro = f.wait_kro("mcp-01", "ReconcileError", |k| ready(k)["reason"] == "ReconcileError").await;
    assert_eq!(kro["status"]["phase"], "Progressing");
    assert_eq!(
        ready(&kro)["message"],
        "invalid user input: requested version is not available: \"v9.9.9\", available versions are: v0.9.1, v0.9.3"
    );
    let event = f.wait_event("mcp-01", "Warning", "ReconcileError").await;
    assert!(event.note.unwrap_or_default().contains("available versions are"));
    assert!(get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.is_none(), "nothing applied");

    f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.3"}})).await;
    let kro = f.wait_ready("mcp-01").await;
    assert_eq!(kro["status"]["observedGeneration"], 2);
    f.stop_operator().await;
}

#[tokio::test]
async fn a_version_upgrade_changes_the_oci_repository_tag() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1"), version("v0.9.3", "0.9.3")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.3"}})).await;
    let repos = f.flux_objects("OCIRepository", "mcp-01");
    eventually("tag 0.9.3", WAIT, || async {
        get(&repos, "kro-oci-repository").await.filter(|r| r["spec"]["ref"]["tag"] == "0.9.3")
    })
    .await;
    f.wait_kro("mcp-01", "Ready for generation 2", |k| {
        k["status"]["phase"] == "Ready" && k["status"]["observedGeneration"] == 2
    })
    .await;
    f.stop_operator().await;
}

#[tokio::test]
async fn a_provider_config_edit_re_reconciles_every_instance() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    // pollInterval is 1m: only the ProviderConfig watch can make this fast.
    f.provider_config(
        json!([{"version": "v0.9.1", "chartVersion": "0.9.2", "chartURL": "registry.example/charts/kro"}]),
    )
    .await;
    let repos = f.flux_objects("OCIRepository", "mcp-01");
    let repo = eventually("new chart", Duration::from_secs(30), || async {
        get(&repos, "kro-oci-repository").await.filter(|r| r["spec"]["ref"]["tag"] == "0.9.2")
    })
    .await;
    assert_eq!(repo["spec"]["url"], "oci://registry.example/charts/kro");
    f.stop_operator().await;
}

#[tokio::test]
async fn a_users_edit_of_the_helm_release_is_reverted() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    let releases = f.flux_objects("HelmRelease", "mcp-01");
    releases
        .patch(
            "kro-helm-release",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"releaseName": "hijacked", "targetNamespace": "elsewhere"}})),
        )
        .await
        .expect("user edit");
    eventually("edit reverted", Duration::from_secs(30), || async {
        get(&releases, "kro-helm-release")
            .await
            .filter(|r| r["spec"]["releaseName"] == "kro" && r["spec"]["targetNamespace"] == "kro-system")
    })
    .await;
    f.stop_operator().await;
}

#[tokio::test]
async fn chart_pull_secrets_are_copied_rotated_and_cleaned_up() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.source_secret("registry", DOCKER, "{\"auths\":{}}").await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry"}])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;

    let tenant = f.tenant("mcp-01");
    let copies: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &tenant);
    let copy = copies.get("sp-kro-registry").await.expect("prefixed copy in the tenant namespace");
    assert_eq!(copy.type_.as_deref(), Some(DOCKER));
    assert_eq!(copy.data.as_ref().unwrap()[".dockerconfigjson"].0, b"{\"auths\":{}}");
    assert_eq!(copy.metadata.labels.as_ref().unwrap()["service-provider.open-control-plane.io/copy-of"], "registry");
    let repo = get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.unwrap();
    assert_eq!(repo["spec"]["secretRef"]["name"], "sp-kro-registry");

    // Rotation reaches the copy through the Secret watch, not the 1m poll.
    f.source_secret("registry", DOCKER, "{\"auths\":{\"r\":{}}}").await;
    eventually("rotated copy", Duration::from_secs(30), || async {
        copies
            .get_opt("sp-kro-registry")
            .await
            .unwrap()
            .filter(|s| s.data.as_ref().unwrap()[".dockerconfigjson"].0 == b"{\"auths\":{\"r\":{}}}")
    })
    .await;

    // Dropping the pull secret from the config removes the copy.
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    eventually("copy removed", Duration::from_secs(30), || async {
        copies.get_opt("sp-kro-registry").await.unwrap().is_none().then_some(())
    })
    .await;
    let repos = f.flux_objects("OCIRepository", "mcp-01");
    eventually("secretRef removed", WAIT, || async {
        get(&repos, "kro-oci-repository").await.filter(|r| r["spec"].get("secretRef").is_none())
    })
    .await;
    f.stop_operator().await;
}

#[tokio::test]
async fn a_pull_secret_of_the_wrong_type_is_refused_clearly() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.source_secret("opaque-registry", "Opaque", "token").await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "opaque-registry"}]))
        .await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    let kro = f.wait_kro("mcp-01", "type error", |k| ready(k)["reason"] == "ReconcileError").await;
    let message = ready(&kro)["message"].as_str().unwrap().to_string();
    assert!(message.contains("has type Opaque, but kubernetes.io/dockerconfigjson is required"), "{message}");
    f.wait_event("mcp-01", "Warning", "ReconcileError").await;
    let copies: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    assert!(copies.get_opt("sp-kro-opaque-registry").await.unwrap().is_none(), "nothing copied");
    f.stop_operator().await;
}

/// The copy target is created without reading it first (the store of
/// copies has none of ours there): a create-only apply. Someone else's
/// Secret in that place must make it fail, not be taken over.
#[tokio::test]
async fn a_foreign_secret_where_a_copy_goes_is_a_conflict_and_stays_untouched() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.source_secret("registry", DOCKER, "{\"auths\":{}}").await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry"}])).await;
    let tenant = f.tenant("mcp-01");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &tenant);
    let foreign: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "sp-kro-registry", "namespace": tenant, "labels": {"owner": "admin"}},
        "type": DOCKER,
        "stringData": {".dockerconfigjson": "{\"auths\":{\"admin\":{}}}"}
    }))
    .unwrap();
    let before = secrets.create(&PostParams::default(), &foreign).await.expect("the admin's Secret");
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;

    let kro = f.wait_kro("mcp-01", "conflict", |k| ready(k)["reason"] == "Conflict").await;
    let message = ready(&kro)["message"].as_str().unwrap().to_string();
    assert!(message.contains("was not created by this provider"), "{message}");
    f.wait_event("mcp-01", "Warning", "Conflict").await;
    let after = secrets.get("sp-kro-registry").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "not written to");
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert_eq!(after.data, before.data);
    f.stop_operator().await;
}

#[tokio::test]
async fn a_missing_source_secret_is_reported_and_its_creation_resumes_at_once() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "late"}])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    let kro = f.wait_kro("mcp-01", "missing secret", |k| ready(k)["reason"] == "ReconcileError").await;
    let message = ready(&kro)["message"].as_str().unwrap().to_string();
    assert!(message.contains(&format!("Secret {}/late does not exist", f.pod_ns)), "{message}");
    // The Secret watch maps the new Secret to this instance: no 1m poll wait.
    f.source_secret("late", DOCKER, "{}").await;
    eventually("Ready after the Secret appears", Duration::from_secs(30), || async {
        f.kro("mcp-01").await.filter(|k| k["status"]["phase"] == "Ready")
    })
    .await;
    f.stop_operator().await;
}

#[tokio::test]
async fn image_pull_secrets_are_copied_into_kro_system_on_the_control_plane() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.source_secret("pull", DOCKER, "{\"auths\":{\"img\":{}}}").await;
    f.provider_config(json!([{
        "version": "v0.9.3", "chartVersion": "0.9.3",
        "helmValues": {"imagePullSecrets": [{"name": "pull"}], "config": {"logLevel": "debug"}}
    }]))
    .await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let on_cp: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.control_plane.clone(), "kro-system");
    let copy = on_cp.get("pull").await.expect("copy in kro-system on the ControlPlane");
    assert_eq!(copy.type_.as_deref(), Some(DOCKER));
    assert_eq!(copy.data.as_ref().unwrap()[".dockerconfigjson"].0, b"{\"auths\":{\"img\":{}}}");
    let release = get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.unwrap();
    assert_eq!(release["spec"]["values"]["imagePullSecrets"][0]["name"], "pull");
    assert_eq!(release["spec"]["values"]["config"]["logLevel"], "debug");

    // Deleting the instance removes the copy from the ControlPlane too.
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(on_cp.get_opt("pull").await.unwrap().is_none(), "ControlPlane copy removed");
    f.stop_operator().await;
}

#[tokio::test]
async fn operation_annotations_on_the_service_object() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    // ignore: a bad version is not even looked at.
    f.patch_kro(
        "mcp-01",
        json!({"metadata": {"annotations": {"openmcp.cloud/operation": "ignore"}}, "spec": {"version": "v0"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kro = f.kro("mcp-01").await.unwrap();
    assert_eq!(kro["status"]["phase"], "Ready", "ignored: status untouched");
    assert_eq!(kro["status"]["observedGeneration"], 1);

    // Removing it resumes reconciliation.
    f.patch_kro("mcp-01", json!({"metadata": {"annotations": {"openmcp.cloud/operation": null}}})).await;
    f.wait_kro("mcp-01", "ReconcileError", |k| ready(k)["reason"] == "ReconcileError").await;

    // reconcile: consumed.
    f.patch_kro(
        "mcp-01",
        json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}, "spec": {"version": "v0.9.1"}}),
    )
    .await;
    let kro = f
        .wait_kro("mcp-01", "annotation consumed and Ready", |k| {
            k["metadata"]["annotations"].get("openmcp.cloud/operation").is_none() && k["status"]["phase"] == "Ready"
        })
        .await;
    assert_eq!(kro["status"]["observedGeneration"], 3);
    f.stop_operator().await;
}

#[tokio::test]
async fn operation_annotations_on_the_provider_config() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    let repos = f.flux_objects("OCIRepository", "mcp-01");

    // ignore on the ProviderConfig: its edits are not rolled out.
    let spec = |chart: &str| json!({"pollInterval": "1m", "versions": [version("v0.9.1", chart)]});
    f.provider_config_with(spec("0.9.2"), Some(json!({"openmcp.cloud/operation": "ignore"}))).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(get(&repos, "kro-oci-repository").await.unwrap()["spec"]["ref"]["tag"], "0.9.1");

    // reconcile on the ProviderConfig: consumed, and the edit is rolled out.
    f.provider_config_with(spec("0.9.2"), Some(json!({"openmcp.cloud/operation": "reconcile"}))).await;
    eventually("tag 0.9.2", WAIT, || async {
        get(&repos, "kro-oci-repository").await.filter(|r| r["spec"]["ref"]["tag"] == "0.9.2")
    })
    .await;
    let pcs = f.provider_configs();
    eventually("annotation consumed", WAIT, || async {
        get(&pcs, &f.provider).await.filter(|pc| pc["metadata"]["annotations"].get("openmcp.cloud/operation").is_none())
    })
    .await;
    f.stop_operator().await;
}

fn rgd(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": name},
        "spec": {"schema": {"apiVersion": "v1alpha1", "kind": format!("Thing{}", name.len()), "spec": {"name": "string"}}}
    }))
    .unwrap()
}

/// The chart version with its pull secret, and nothing else.
async fn seed_chart_config(f: &Fixture) {
    f.source_secret("registry", DOCKER, "{}").await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry"}])).await;
}

/// `mcp-01` Ready, then deleted while the RGD `noop` exists on its
/// ControlPlane: returns once the status says the deletion is blocked.
async fn ready_then_blocked_by_one_rgd(f: &Fixture) -> Api<DynamicObject> {
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let rgds: Api<DynamicObject> = Api::all_with(f.control_plane.clone(), &rgd_resource());
    rgds.create(&PostParams::default(), &rgd("noop")).await.expect("RGD created");
    f.delete_kro("mcp-01").await;
    let blocked = |k: &Value| {
        ready(k)["message"].as_str().is_some_and(|m| m.contains("waiting for 1 kro ResourceGraphDefinition(s)"))
    };
    f.wait_kro("mcp-01", "deletion blocked by one RGD", blocked).await;
    rgds
}

#[tokio::test]
async fn deletion_is_blocked_by_rgds_then_completes() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;

    let rgds: Api<DynamicObject> = Api::all_with(f.control_plane.clone(), &rgd_resource());
    for name in ["noop", "webapp"] {
        rgds.create(&PostParams::default(), &rgd(name)).await.expect("RGD created");
    }
    f.delete_kro("mcp-01").await;
    let kro = f
        .wait_kro("mcp-01", "deletion blocked", |k| {
            ready(k)["message"].as_str().is_some_and(|m| m.contains("waiting for 2 kro ResourceGraphDefinition(s)"))
        })
        .await;
    assert_eq!(kro["status"]["phase"], "Terminating");
    assert_eq!(ready(&kro)["reason"], "Terminating");
    assert!(
        get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_some(),
        "kro stays while RGDs exist"
    );

    for name in ["noop", "webapp"] {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none());
    assert!(get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.is_none());
    assert!(
        get(&f.access_requests("mcp-01"), "kro.services.open-control-plane.io--mcp-01--mcp").await.is_none(),
        "AccessRequest removed"
    );
    let copies: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    assert!(copies.get_opt("sp-kro-registry").await.unwrap().is_none(), "pull-secret copy removed");
    f.stop_operator().await;
}

/// While its deletion is blocked, an instance watches what blocks it on the
/// ControlPlane (with its own credentials) instead of listing it every
/// round: blocked rounds make no request there, a change reaches the
/// status through the watch, and the watch ends with the deletion.
#[tokio::test]
async fn a_blocked_deletion_watches_its_blockers_instead_of_listing_them() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    let ctx = f.context().await;
    f.start_operator_on(ctx.clone());
    let rgds = ready_then_blocked_by_one_rgd(&f).await;
    let blocked_by = |n: usize| {
        let text = format!("waiting for {n} kro ResourceGraphDefinition(s)");
        move |k: &Value| ready(k)["message"].as_str().is_some_and(|m| m.contains(&text))
    };
    assert_eq!(ctx.blockers().len(), 1, "the blocker is watched");
    // The plugin asks to be looked at again every 10 s.
    let rounds = || f.metrics.reconciles(reconcile::Ended::Deleting);
    let next_round = |after: u64| async move {
        eventually("a blocked round", WAIT, || async { (rounds() > after).then_some(()) }).await;
    };
    next_round(rounds()).await;
    // From the round after the watch started: no request to the ControlPlane.
    let control_plane_reads = || f.metrics.requests("control-plane", &["GET"]);
    let before = (control_plane_reads(), rounds());
    tokio::time::sleep(Duration::from_secs(21)).await;
    assert!(rounds() >= before.1 + 2, "blocked rounds ran");
    assert_eq!(control_plane_reads() - before.0, 0, "a blocked round read the ControlPlane: the watch was not used");

    // A change wakes the instance at once, not at its next round (10 s
    // after the last one, which has just run).
    next_round(rounds()).await;
    let changed = std::time::Instant::now();
    rgds.create(&PostParams::default(), &rgd("webapp")).await.expect("RGD created");
    f.wait_kro("mcp-01", "deletion blocked by two RGDs", blocked_by(2)).await;
    assert!(
        changed.elapsed() < Duration::from_secs(6),
        "the change waited for the next round: {:?}",
        changed.elapsed()
    );
    for name in ["noop", "webapp"] {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_gone("mcp-01").await;
    assert_eq!(ctx.blockers().len(), 0, "the watch ended with the deletion");
    f.stop_operator().await;
}

/// A tenant who fills its ControlPlane while its deletion is blocked
/// cannot make the host hold it: the watch ends at the plugin's input
/// limit and keeps nothing, the round that lists instead fails with the
/// input limit in the status, and once the tenant cleans up the deletion
/// goes on.
#[tokio::test]
async fn a_blocker_watch_ends_at_the_input_limit_and_keeps_nothing() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    let limit = 64 << 10;
    let limits = service_provider_host::plugin::sandbox::Limits { input_bytes: limit, ..Default::default() };
    let ctx = f.context_with(plugins::load(plugins::KRO, limits)).await;
    f.start_operator_on(ctx.clone());
    let rgds = ready_then_blocked_by_one_rgd(&f).await;
    let message = |k: &Value| ready(k)["message"].as_str().unwrap_or_default().to_string();
    assert_eq!(ctx.blockers().len(), 1, "the blocker is watched");

    // Four RGDs of about 20 KiB of metadata each (labels: annotations never
    // reach the plugin): more than one input's worth.
    let big = |name: &str| {
        let mut rgd = rgd(name);
        let filler = (0..150).map(|i| (format!("filler.example/{}-{i:03}", "k".repeat(50)), "x".repeat(63)));
        rgd.metadata.labels = Some(filler.collect());
        rgd
    };
    let names = ["big-a", "big-b", "big-c", "big-d"];
    for name in names {
        rgds.create(&PostParams::default(), &big(name)).await.expect("RGD created");
    }
    f.wait_kro("mcp-01", "the input limit in the status", |k| message(k).contains("more than the limit")).await;
    assert!(ctx.blockers().bytes() <= limit, "the host holds {} bytes of the tenant's RGDs", ctx.blockers().bytes());

    for name in names {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_kro("mcp-01", "blocked again", |k| message(k).contains("waiting for 1 kro")).await;
    rgds.delete("noop", &DeleteParams::default()).await.expect("RGD deleted");
    f.wait_gone("mcp-01").await;
    assert_eq!(ctx.blockers().len(), 0);
    f.stop_operator().await;
}

#[tokio::test]
async fn deletion_completes_when_the_access_request_is_already_gone() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.stop_operator().await;

    // The ControlPlane goes away behind the provider's back.
    f.openmcp.unregister_control_plane("mcp-01", &f.ns).await.unwrap();
    let ars = f.access_requests("mcp-01");
    let ar_name = "kro.services.open-control-plane.io--mcp-01--mcp";
    ars.patch(ar_name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    ars.delete(ar_name, &DeleteParams::default()).await.unwrap();
    eventually("AccessRequest gone", WAIT, || async { get(&ars, ar_name).await.is_none().then_some(()) }).await;

    f.delete_kro("mcp-01").await;
    f.start_operator().await;
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none(), "not orphaned");
    assert!(get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.is_none(), "not orphaned");
    f.stop_operator().await;
}

/// Someone else's AccessRequest under the name the instance would use: the
/// host says so and never takes it over, not when creating (the store has
/// none of ours, so the create meets it: a 409, then a look) and not when
/// the instance is deleted (it is neither deleted nor changed).
#[tokio::test]
async fn an_access_request_that_is_not_ours_is_a_conflict_and_is_left_alone() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let ar_name = "kro.services.open-control-plane.io--mcp-01--mcp";
    let tenant = f.tenant("mcp-01");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.platform.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": tenant}})).unwrap();
    if let Err(e) = namespaces.create(&PostParams::default(), &namespace).await {
        assert!(matches!(&e, kube::Error::Api(s) if s.is_already_exists()), "{e}");
    }
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": access_request_resource().api_version, "kind": "AccessRequest",
        "metadata": {"name": ar_name, "namespace": tenant, "labels": {"team": "someone-else"}},
        "spec": {"requestRef": {"name": "someone-else", "namespace": tenant}, "token": {"permissions": []}}
    }))
    .unwrap();
    let ars = f.access_requests("mcp-01");
    ars.create(&PostParams::default(), &foreign).await.unwrap();
    let before = get(&ars, ar_name).await.unwrap();

    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let kro = f.wait_kro("mcp-01", "a conflict", |k| ready(k)["reason"] == "Conflict").await;
    let message = ready(&kro)["message"].as_str().unwrap();
    assert!(message.contains(ar_name) && message.contains("not managed by this provider"), "{message}");
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none(), "nothing applied");

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    let after = get(&ars, ar_name).await.expect("the foreign AccessRequest is not deleted");
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"], "labels untouched");
    assert_eq!(after["metadata"]["finalizers"], before["metadata"]["finalizers"], "no finalizer added");
    assert_eq!(after["spec"], before["spec"], "spec untouched");
    assert!(after["metadata"]["deletionTimestamp"].is_null(), "not being deleted");
    f.stop_operator().await;
}

/// An instance whose ControlPlane does not exist yet: its tenant namespace
/// is made for the AccessRequest, the wait is reported once it has lasted
/// (a grant usually follows at once, so the first seconds write nothing),
/// and the instance is installed when the ControlPlane appears.
#[tokio::test]
async fn a_grant_that_takes_long_is_reported_then_proceeds() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    f.start_operator().await;
    f.create_kro("mcp-02", "v0.9.3").await;
    let kro = f
        .wait_kro("mcp-02", "the wait for access", |k| {
            ready(k)["message"].as_str().is_some_and(|m| m.starts_with("Waiting for ControlPlane access"))
        })
        .await;
    f.wait_event("mcp-02", "Normal", "Progressing").await;
    let ar = get(&f.access_requests("mcp-02"), "kro.services.open-control-plane.io--mcp-02--mcp").await.unwrap();
    let time = |v: &Value| v.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let requested = time(&ar["metadata"]["creationTimestamp"]);
    let reported = time(&ready(&kro)["lastTransitionTime"]);
    let after = reported.duration_since(requested).as_secs_f64();
    assert!(after >= 4.0, "the wait was reported {after}s after the request");

    // (This test's simulated Flux serves only mcp-01: installing is as far
    // as mcp-02 gets.)
    f.openmcp.register_control_plane("mcp-02", &f.ns, &f.cp).await.unwrap();
    f.wait_kro("mcp-02", "installing", |k| ready(k)["message"] == "Waiting for managed resources to become ready")
        .await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-02"), "kro-helm-release").await.is_some(), "installed");
    f.stop_operator().await;
}

#[tokio::test]
async fn deletion_does_not_need_the_version_to_be_offered() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    f.wait_kro("mcp-01", "version withdrawn", |k| ready(k)["reason"] == "ReconcileError").await;
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none());
    f.stop_operator().await;
}

#[tokio::test]
async fn names_of_23_and_63_characters_work() {
    let short = "a".repeat(23);
    let long = "b".repeat(63);
    let mut f =
        Fixture::new(Options { instances: vec![short.clone(), long.clone()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    for name in [&short, &long] {
        f.create_kro(name, "v0.9.1").await;
    }
    for name in [&short, &long] {
        f.wait_ready(name).await;
        let release = get(&f.flux_objects("HelmRelease", name), "kro-helm-release").await.unwrap();
        let ar_name = service_provider_sdk::names::access_request_name(GROUP, name, "mcp");
        assert!(ar_name.len() <= 63, "{ar_name}");
        let ar = get(&f.access_requests(name), &ar_name).await.expect("AccessRequest");
        assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], ar["status"]["secretRef"]["name"], "{name}");
    }
    f.stop_operator().await;
}

#[tokio::test]
async fn two_tenants_are_isolated() {
    let mut f =
        Fixture::new(Options { instances: vec!["alpha".into(), "beta".into()], flux_ready: true, workload: false })
            .await;
    f.provider_config(json!([version("v0.9.1", "0.9.1"), version("v0.9.3", "0.9.3")])).await;
    f.start_operator().await;
    f.create_kro("alpha", "v0.9.1").await;
    f.create_kro("beta", "v0.9.3").await;
    f.wait_ready("alpha").await;
    f.wait_ready("beta").await;
    assert_ne!(f.tenant("alpha"), f.tenant("beta"));
    let tag = |v: Option<Value>| v.unwrap()["spec"]["ref"]["tag"].clone();
    assert_eq!(tag(get(&f.flux_objects("OCIRepository", "alpha"), "kro-oci-repository").await), "0.9.1");
    assert_eq!(tag(get(&f.flux_objects("OCIRepository", "beta"), "kro-oci-repository").await), "0.9.3");

    f.delete_kro("alpha").await;
    f.wait_gone("alpha").await;
    assert!(get(&f.flux_objects("OCIRepository", "alpha"), "kro-oci-repository").await.is_none());
    assert_eq!(
        tag(get(&f.flux_objects("OCIRepository", "beta"), "kro-oci-repository").await),
        "0.9.3",
        "beta untouched"
    );
    assert_eq!(f.kro("beta").await.unwrap()["status"]["phase"], "Ready");
    f.stop_operator().await;
}

#[tokio::test]
async fn onboarding_access_is_requested_through_openmcp() {
    let f = Fixture::new(one("mcp-01", true)).await;
    let settings = f.settings();
    let onboarding = service_provider_host::controller::onboarding_client(
        &f.platform,
        &settings,
        plugin().descriptor(),
        service_provider_host::controller::Onboard::Run,
        &f.metrics,
    )
    .await
    .expect("onboarding access granted by openmcp");
    // The kubeconfig the simulator handed out reaches the onboarding cluster.
    Api::<DynamicObject>::namespaced_with(onboarding, &f.ns, &kro_resource())
        .list(&Default::default())
        .await
        .expect("list Kro");
    let ars: Api<DynamicObject> = Api::namespaced_with(f.platform.clone(), &f.pod_ns, &access_request_resource());
    let ar = get(&ars, "kro.services.open-control-plane.io--onboarding-run").await.expect("onboarding AccessRequest");
    let rules = ar["spec"]["token"]["permissions"][0]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["apiGroups"][0], GROUP, "least privilege: only the service group");
}

/// The seed's ProviderConfig: a chart pull secret and imagePullSecrets,
/// both sources present.
async fn seed_config_with_pull_secrets(f: &Fixture) {
    f.source_secret("registry", DOCKER, "{}").await;
    f.source_secret("pull", DOCKER, "{}").await;
    f.provider_config(json!([{
        "version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry",
        "helmValues": {"imagePullSecrets": [{"name": "pull"}]}
    }]))
    .await;
}

/// Requests made by single reconciles, called directly so each one can be
/// counted on its own. A no-op reconcile must make no write request.
#[tokio::test]
async fn a_no_op_reconcile_makes_no_write_requests() {
    let f = Fixture::new(one("mcp-01", true)).await;
    seed_config_with_pull_secrets(&f).await;
    f.create_kro("mcp-01", "v0.9.3").await;
    let ctx = f.context().await;
    let clusters = ["platform", "onboarding", "control-plane"];
    let counts = |m: &service_provider_host::metrics::Metrics| {
        clusters.iter().map(|c| (m.requests(c, &["GET"]), m.writes(c))).collect::<Vec<_>>()
    };
    let once = async |ctx: &Arc<reconcile::Context>| -> (Vec<(u64, u64)>, Action) {
        let object = Arc::new(f.kroes().get("mcp-01").await.unwrap());
        let before = counts(&f.metrics);
        let action = reconcile::reconcile(object, ctx.clone()).await.expect("reconcile");
        let after = counts(&f.metrics);
        (before.iter().zip(&after).map(|(b, a)| (a.0 - b.0, a.1 - b.1)).collect(), action)
    };
    let total = |d: &[(u64, u64)]| d.iter().map(|(r, w)| r + w).sum::<u64>();

    once(&ctx).await; // adds the finalizer
    // Until the AccessRequest is granted, reconciles wait.
    let first = eventually("a full first reconcile", WAIT, || async {
        let (delta, _) = once(&ctx).await;
        f.flux_objects("HelmRelease", "mcp-01").get_opt("kro-helm-release").await.unwrap().map(|_| delta)
    })
    .await;
    // Flux reports Ready; a later reconcile records it in the status.
    eventually("Ready", WAIT, || async {
        once(&ctx).await;
        f.kro("mcp-01").await.filter(|k| k["status"]["phase"] == "Ready")
    })
    .await;
    let (noop, action) = once(&ctx).await;
    eprintln!(
        "requests (reads, writes) per cluster [platform, onboarding, control-plane]: first reconcile {first:?} = {} requests; no-op reconcile {noop:?} = {} requests",
        total(&first),
        total(&noop)
    );
    assert!(first.iter().map(|(_, w)| w).sum::<u64>() >= 6, "the first reconcile writes: {first:?}");
    assert_eq!(noop.iter().map(|(_, w)| w).sum::<u64>(), 0, "no-op reconcile wrote: {noop:?}");
    assert_eq!(action, Action::requeue(Duration::from_secs(60)), "requeue after pollInterval");
}

/// With the controller running, a steady-state reconcile reads from the
/// watches' stores and what it verified earlier: no request at all, on
/// any cluster. A `reconcile` operation annotation makes it look again.
#[tokio::test]
async fn a_steady_state_reconcile_with_the_watches_running_makes_no_request() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_config_with_pull_secrets(&f).await;
    let ctx = f.context().await;
    f.start_operator_on(ctx.clone());
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let clusters = ["platform", "onboarding", "control-plane"];
    let requests =
        || clusters.iter().map(|c| f.metrics.requests(c, &["GET", "LIST"]) + f.metrics.writes(c)).sum::<u64>();
    // Settled: the watch events of the last writes have come and gone.
    let previous = std::sync::atomic::AtomicU64::new(requests());
    eventually("no more requests for a second", WAIT, || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = requests();
        (previous.swap(now, std::sync::atomic::Ordering::Relaxed) == now).then_some(())
    })
    .await;
    let object = Arc::new(f.kroes().get("mcp-01").await.unwrap());
    let before = requests();
    reconcile::reconcile(object.clone(), ctx.clone()).await.expect("reconcile");
    assert_eq!(requests() - before, 0, "a steady-state reconcile made requests");

    let control_plane_reads = f.metrics.requests("control-plane", &["GET"]);
    f.patch_kro("mcp-01", json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}})).await;
    eventually("the full look reads the ControlPlane again", WAIT, || async {
        (f.metrics.requests("control-plane", &["GET"]) > control_plane_reads).then_some(())
    })
    .await;
    f.stop_operator().await;
}

#[tokio::test]
async fn a_plugin_that_asks_for_a_workload_cluster_gets_one() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true }).await;
    workload_cluster_lifecycle(f, false).await;
}

/// A workload ClusterRequest a host before 0.2 made (purpose label `.wl`,
/// no finalizer) is this instance's: it keeps its UID and gets openmcp's
/// labels and finalizer.
#[tokio::test]
async fn a_workload_request_of_a_former_host_is_relabelled_in_place() {
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true }).await;
    workload_cluster_lifecycle(f, true).await;
}

/// The workload-echo plugin's lifecycle on `f` (also on openmcp-operator:
/// `crate::openmcp`), optionally with a workload ClusterRequest labelled as
/// a former host labelled it already there.
pub(crate) async fn workload_cluster_lifecycle(mut f: Fixture, former: bool) {
    let name = "kro.services.open-control-plane.io--mcp-01--wl";
    let tenant = f.tenant("mcp-01");
    let requests: Api<DynamicObject> = Api::namespaced_with(
        f.platform.clone(),
        &tenant,
        &service_provider_host::reconcile::access::cluster_request_resource(),
    );
    let onboarding_namespace = f.ns.clone();
    let purpose = |suffix: &str| format!("{onboarding_namespace}.mcp-01.{suffix}");
    let former_uid = match former {
        false => None,
        true => {
            let labels = json!({
                "openmcp.cloud/managed-by": "kro.services.open-control-plane.io",
                "openmcp.cloud/managed-purpose": purpose("wl"),
                "openmcp.cloud/onboarding-name": "mcp-01",
                "openmcp.cloud/onboarding-namespace": f.ns,
            });
            let request: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "ClusterRequest",
                "metadata": {"name": name, "namespace": tenant, "labels": labels},
                "spec": {"purpose": "workload"},
            }))
            .unwrap();
            Some(requests.create(&Default::default(), &request).await.expect("a former host's request").metadata.uid)
        }
    };
    f.provider_config(json!([version("v1", "1")])).await;
    f.start_operator_with(workload_echo_plugin()).await;
    f.create_kro("mcp-01", "v7").await;
    f.wait_ready("mcp-01").await;

    let request = get(&requests, name).await.expect("workload ClusterRequest");
    assert_eq!(request["spec"]["purpose"], "workload");
    // openmcp's library's labels and finalizer (its purpose label names the
    // registration, `workload`; the name suffix is `wl`).
    assert_eq!(request["metadata"]["labels"]["openmcp.cloud/managed-purpose"], purpose("workload"));
    let finalizers = request["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    assert!(finalizers.iter().any(|x| x == "clusters.openmcp.cloud/clusteraccess"), "{finalizers:?}");
    if let Some(uid) = former_uid {
        assert_eq!(request["metadata"]["uid"].as_str(), uid.as_deref(), "relabelled in place");
    }
    let ar = get(&f.access_requests("mcp-01"), name).await.expect("workload AccessRequest");
    assert_eq!(ar["spec"]["requestRef"]["name"], name);
    assert_eq!(ar["metadata"]["labels"]["openmcp.cloud/managed-purpose"], purpose("workload"));
    assert_eq!(ar["spec"]["token"]["permissions"][0]["rules"][0]["resources"], json!(["configmaps"]));

    let on_workload: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(f.workload.as_ref().unwrap().client().await.unwrap(), "default");
    let echo = on_workload.get("echo").await.expect("ConfigMap on the workload cluster");
    assert_eq!(echo.data.unwrap()["version"], "v7");
    // The plugin's CRD for the workload cluster was installed there by `run`.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(f.workload.as_ref().unwrap().client().await.unwrap());
    assert!(
        crds.get_opt("echoes.kro.services.open-control-plane.io").await.unwrap().is_some(),
        "CRD on the workload cluster"
    );

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(on_workload.get_opt("echo").await.unwrap().is_none(), "removed from the workload cluster");
    assert!(get(&f.access_requests("mcp-01"), name).await.is_none(), "workload AccessRequest removed");
    assert!(get(&requests, name).await.is_none(), "workload ClusterRequest removed");
    f.stop_operator().await;
}

/// ControlPlane clients are cached per kubeconfig Secret and rebuilt when the
/// Secret changes (openmcp rotates tokens): a broken kubeconfig shows up at
/// once, and the restored one is used again.
#[tokio::test]
async fn a_rotated_control_plane_kubeconfig_is_picked_up() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    let ar = get(&f.access_requests("mcp-01"), "kro.services.open-control-plane.io--mcp-01--mcp").await.unwrap();
    let secret_name = ar["status"]["secretRef"]["name"].as_str().unwrap().to_string();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    let original = secrets.get(&secret_name).await.unwrap();
    let set = |text: Vec<u8>| {
        let data = k8s_openapi::ByteString(text);
        json!({"data": {"kubeconfig": data}})
    };
    secrets
        .patch(&secret_name, &PatchParams::default(), &Patch::Merge(&set(b"not: [a kubeconfig".to_vec())))
        .await
        .unwrap();
    let trigger = json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}});
    f.patch_kro("mcp-01", trigger.clone()).await;
    let kro = f.wait_kro("mcp-01", "broken kubeconfig noticed", |k| ready(k)["reason"] == "ReconcileError").await;
    assert!(ready(&kro)["message"].as_str().unwrap().contains("kubeconfig"), "{kro:#}");

    let restored = original.data.unwrap()["kubeconfig"].0.clone();
    secrets.patch(&secret_name, &PatchParams::default(), &Patch::Merge(&set(restored))).await.unwrap();
    f.patch_kro("mcp-01", trigger).await;
    f.wait_kro("mcp-01", "Ready again", |k| k["status"]["phase"] == "Ready").await;
    f.stop_operator().await;
}

/// Pruning: an object the plugin stops planning is deleted; objects of the
/// same kind that are not the instance's (a user's, another instance's)
/// stay, and deleting the instance leaves nothing of it behind.
#[tokio::test]
async fn an_object_the_plugin_stops_planning_is_pruned_and_nothing_else() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use service_provider_host::owner::Owner;

    let mut f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true }).await;
    f.provider_config(json!([version("v1", "1")])).await;
    f.start_operator_with(workload_echo_plugin()).await;
    f.create_kro("mcp-01", "v7+a+b").await;
    f.wait_ready("mcp-01").await;

    let workload = f.workload.as_ref().unwrap().client().await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(workload, "default");
    for name in ["echo", "echo-a", "echo-b"] {
        config_maps.get(name).await.unwrap_or_else(|e| panic!("{name} planned and applied: {e}"));
    }
    // Bystanders: a user's ConfigMap, and one of another instance of the
    // same provider (owner labels and annotation, as the host writes them).
    let other = Owner { provider: f.provider.clone(), name: "mcp-02".into(), namespace: f.ns.clone() };
    for (name, labels, annotations) in [
        ("users-own", None, None),
        (
            "echo-c",
            Some(other.labels()),
            Some([(service_provider_host::owner::ANNOTATION_INSTANCE.to_string(), other.annotation())].into()),
        ),
    ] {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), labels, annotations, ..Default::default() },
            ..Default::default()
        };
        config_maps.create(&PostParams::default(), &cm).await.expect("bystander created");
    }

    f.patch_kro("mcp-01", json!({"spec": {"version": "v7+a"}})).await;
    eventually("echo-b pruned", WAIT, || async {
        config_maps.get_opt("echo-b").await.unwrap().is_none().then_some(())
    })
    .await;
    for name in ["echo", "echo-a", "users-own", "echo-c"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_some(), "{name} must stay");
    }
    f.wait_kro("mcp-01", "Ready for generation 2", |k| k["status"]["observedGeneration"] == 2).await;

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    for name in ["echo", "echo-a"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_none(), "{name} removed with the instance");
    }
    for name in ["users-own", "echo-c"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_some(), "{name} is not the instance's and stays");
    }
    f.stop_operator().await;
}

/// Two instances whose ControlPlanes share one cluster (as in the scale
/// benchmark) need the same pull-secret copy in `kro-system`: they share it
/// instead of fighting over it, so reconciling either writes nothing.
#[tokio::test]
async fn instances_sharing_a_cluster_share_an_identical_copy_without_writes() {
    let f = Fixture::new(Options { instances: vec!["alpha".into(), "beta".into()], flux_ready: true, workload: false })
        .await;
    f.source_secret("pull", DOCKER, "{\"auths\":{}}").await;
    f.provider_config(json!([{
        "version": "v0.9.3", "chartVersion": "0.9.3", "helmValues": {"imagePullSecrets": [{"name": "pull"}]}
    }]))
    .await;
    let ctx = f.context().await;
    for name in ["alpha", "beta"] {
        f.create_kro(name, "v0.9.3").await;
    }
    let reconcile_once = async |name: &str| {
        let object = Arc::new(f.kroes().get(name).await.unwrap());
        reconcile::reconcile(object, ctx.clone()).await
    };
    eventually("both Ready", WAIT, || async {
        for name in ["alpha", "beta"] {
            let _ = reconcile_once(name).await;
        }
        let ready = |k: Option<Value>| k.is_some_and(|k| k["status"]["phase"] == "Ready");
        (ready(f.kro("alpha").await) && ready(f.kro("beta").await)).then_some(())
    })
    .await;
    let on_cp: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.control_plane.clone(), "kro-system");
    assert!(on_cp.get_opt("pull").await.unwrap().is_some(), "the shared copy");
    let writes = || ["platform", "onboarding", "control-plane"].iter().map(|c| f.metrics.writes(c)).sum::<u64>();
    let before = writes();
    for name in ["alpha", "beta", "alpha", "beta"] {
        reconcile_once(name).await.expect("reconcile");
    }
    assert_eq!(writes() - before, 0, "no instance rewrites the other's copy");
}
