//! Copies of the pod namespace's Secrets onto the platform and the ControlPlane: made, rotated,
//! refused, shared, cleaned up.

use super::*;

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
