//! The live path: from a new object to Ready, the errors a person can fix, edits and operation
//! annotations.

use super::*;

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
