//! Cluster access through openmcp: AccessRequests of the host's and of others, slow grants,
//! workload clusters, rotated kubeconfigs.

use super::*;

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

/// An instance whose ControlPlane is not ready yet (its tenant namespace is
/// there, its access not granted): the wait is reported once it has lasted
/// (a grant usually follows at once, so the first seconds write nothing),
/// and the instance is installed when the ControlPlane appears.
#[tokio::test]
async fn a_grant_that_takes_long_is_reported_then_proceeds() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    f.start_operator().await;
    // openmcp makes the tenant namespace as it starts to provision the
    // ControlPlane, and grants access once the cluster is there (without
    // the namespace, the host would create nothing: see deploy.rs).
    let provisioning: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
        "metadata": {"name": f.tenant("mcp-02"), "labels": {
            "core.openmcp.cloud/mcp-name": "mcp-02",
            "core.openmcp.cloud/mcp-namespace": f.ns,
            "openmcp.cloud/managed-by": testbed::openmcp_sim::MANAGER,
        }},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(f.platform.clone())
        .create(&Default::default(), &provisioning)
        .await
        .expect("the tenant namespace");
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
