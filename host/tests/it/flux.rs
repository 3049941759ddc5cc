//! The Flux provider (guest-flux) in the host on real API servers, with the
//! openmcp and Flux simulators: what service-provider-flux's e2e tests check,
//! and its gaps closed (deletion after the version is withdrawn, copies
//! removed when the ProviderConfig drops them).

use std::collections::BTreeMap;

use host_test_support::plugins::flux_plugin;
use host_test_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use serde_json::{Value, json};

const DOCKER: &str = "kubernetes.io/dockerconfigjson";

fn one(instance: &str) -> Options {
    Options { instances: vec![instance.to_string()], flux_ready: true, workload: false }
}

async fn flux_fixture(instance: &str) -> Fixture {
    Fixture::with_service(one(instance), Service::FLUX).await
}

/// A CA bundle ConfigMap in the provider's namespace.
async fn ca_bundle(f: &Fixture, name: &str, pem: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(f.pod_ns.clone()), ..Default::default() },
        data: Some(BTreeMap::from([("ca.crt".to_string(), pem.to_string())])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(f.platform.clone(), &f.pod_ns)
        .patch(name, &PatchParams::apply("e2e-test").force(), &Patch::Apply(&cm))
        .await
        .expect("CA bundle applied");
}

/// The ProviderConfig spec: Flux 2.8.3 with the given chart secret, image
/// pull secret and CA bundle (each optional).
fn spec(chart: Option<&str>, image: Option<&str>, ca: Option<&str>) -> Value {
    let mut version = json!({"version": "2.8.3", "chartVersion": "2.18.2"});
    if let Some(chart) = chart {
        version["chartPullSecret"] = json!(chart);
    }
    if let Some(image) = image {
        version["values"] = json!({"imagePullSecrets": [{"name": image}]});
    }
    let mut spec = json!({"pollInterval": "1m", "versions": [version]});
    if let Some(ca) = ca {
        spec["caBundleRef"] = json!({"name": ca, "key": "ca.crt"});
    }
    spec
}

fn names_of<K: kube::Resource>(list: Vec<K>) -> Vec<String> {
    list.iter().filter_map(|o| o.meta().name.clone()).collect()
}

/// The copies the host made for instances (copy label) in a namespace.
async fn copies<K>(client: &kube::Client, namespace: &str) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let selector = service_provider_host::owner::LABEL_COPY_OF;
    names_of(api.list(&kube::api::ListParams::default().labels(selector)).await.expect("list copies").items)
}

#[tokio::test]
async fn flux_gets_ready_with_copies_that_follow_the_provider_config() {
    copies_follow_the_provider_config(flux_fixture("mcp-01").await).await;
}

/// The Flux lifecycle with every kind of copy, on whatever `f` runs on
/// (also openmcp-operator with scoped tokens: `crate::openmcp`).
pub(crate) async fn copies_follow_the_provider_config(mut f: Fixture) {
    for name in ["chart-a", "img-a", "chart-b", "img-b"] {
        f.source_secret(name, DOCKER, &format!("{{\"auths\":{{\"{name}\":{{}}}}}}")).await;
    }
    ca_bundle(&f, "ca-a", "PEM A").await;
    ca_bundle(&f, "ca-b", "PEM B").await;
    f.provider_config_with(spec(Some("chart-a"), Some("img-a"), Some("ca-a")), None).await;
    f.start_operator_with(flux_plugin()).await;
    f.create_instance("mcp-01", "2.8.3").await;

    let flux = f.wait_ready("mcp-01").await;
    assert_eq!(ready(&flux)["message"], "Domain Service is ready");
    let tenant = f.tenant("mcp-01");
    let chart_copy = Api::<Secret>::namespaced(f.platform.clone(), &tenant).get("sp-flux-chart-a").await.unwrap();
    assert_eq!(chart_copy.type_.as_deref(), Some(DOCKER));
    let cp = f.control_plane.clone();
    let image_copy = Api::<Secret>::namespaced(cp.clone(), "flux-system").get("img-a").await.unwrap();
    assert_eq!(image_copy.type_.as_deref(), Some(DOCKER));
    let ca = Api::<ConfigMap>::namespaced(cp.clone(), "flux-system").get("custom-ca-bundle").await.unwrap();
    assert_eq!(ca.data.unwrap()["ca.crt"], "PEM A");
    let release = f.flux_objects("HelmRelease", "mcp-01").get("flux").await.unwrap();
    let spec_of = |o: &kube::api::DynamicObject| o.data["spec"].clone();
    let release_spec = spec_of(&release);
    assert_eq!(release_spec["driftDetection"]["mode"], "enabled");
    assert_eq!(release_spec["uninstall"]["keepHistory"], false);
    assert_eq!(release_spec["values"]["sourceController"]["extraEnv"][0]["name"], "SSL_CERT_DIR");
    let repo = f.flux_objects("OCIRepository", "mcp-01").get("flux").await.unwrap();
    assert_eq!(spec_of(&repo)["secretRef"]["name"], "sp-flux-chart-a");

    // Swapping every source: the old copies go, the new ones come.
    f.provider_config_with(spec(Some("chart-b"), Some("img-b"), Some("ca-b")), None).await;
    eventually("copies swapped", WAIT, || async {
        let tenant_copies = copies::<Secret>(&f.platform, &tenant).await;
        let cp_secrets = copies::<Secret>(&cp, "flux-system").await;
        let ca = Api::<ConfigMap>::namespaced(cp.clone(), "flux-system").get_opt("custom-ca-bundle").await.unwrap();
        let ca_pem = ca.and_then(|c| c.data).map(|d| d["ca.crt"].clone());
        (tenant_copies == ["sp-flux-chart-b"] && cp_secrets == ["img-b"] && ca_pem.as_deref() == Some("PEM B"))
            .then_some(())
    })
    .await;

    // A rotated CA bundle reaches the ControlPlane through the source watch.
    ca_bundle(&f, "ca-b", "PEM B rotated").await;
    eventually("CA rotated", WAIT, || async {
        let ca = Api::<ConfigMap>::namespaced(cp.clone(), "flux-system").get_opt("custom-ca-bundle").await.unwrap();
        ca.and_then(|c| c.data).filter(|d| d["ca.crt"] == "PEM B rotated")
    })
    .await;

    // Dropping them all leaves no copy behind anywhere.
    f.provider_config_with(spec(None, None, None), None).await;
    eventually("every copy removed", WAIT, || async {
        let left = copies::<Secret>(&f.platform, &tenant).await.len()
            + copies::<Secret>(&cp, "flux-system").await.len()
            + copies::<ConfigMap>(&cp, "flux-system").await.len();
        (left == 0).then_some(())
    })
    .await;
    f.wait_ready("mcp-01").await;

    // Deletion does not need the version to be offered any more.
    let mut withdrawn = spec(None, None, None);
    withdrawn["versions"][0]["version"] = json!("2.9.0");
    f.provider_config_with(withdrawn, None).await;
    f.wait_instance("mcp-01", "version withdrawn", |k| ready(k)["reason"] == "ReconcileError").await;
    f.delete_instance("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(f.flux_objects("HelmRelease", "mcp-01").get_opt("flux").await.unwrap().is_none());
    assert!(f.flux_objects("OCIRepository", "mcp-01").get_opt("flux").await.unwrap().is_none());
    f.stop_operator().await;
}

#[tokio::test]
async fn a_namespace_override_and_the_operation_annotations() {
    let mut f = flux_fixture("mcp-01").await;
    f.source_secret("img", DOCKER, "{}").await;
    let mut overridden = spec(None, Some("img"), None);
    overridden["versions"][0]["values"]["namespaceOverride"] = json!("gitops");
    f.provider_config_with(overridden, None).await;
    f.start_operator_with(flux_plugin()).await;
    f.create_instance("mcp-01", "2.8.3").await;
    f.wait_ready("mcp-01").await;
    let cp = f.control_plane.clone();
    assert!(Api::<Secret>::namespaced(cp.clone(), "gitops").get_opt("img").await.unwrap().is_some());
    let release = f.flux_objects("HelmRelease", "mcp-01").get("flux").await.unwrap();
    assert_eq!(release.data["spec"]["targetNamespace"], "gitops");

    // ignore: a bad version is not even looked at; reconcile: consumed.
    f.patch_instance(
        "mcp-01",
        json!({"metadata": {"annotations": {"openmcp.cloud/operation": "ignore"}}, "spec": {"version": "0"}}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(f.instance("mcp-01").await.unwrap()["status"]["phase"], "Ready", "ignored");
    f.patch_instance(
        "mcp-01",
        json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}, "spec": {"version": "2.8.3"}}),
    )
    .await;
    let flux = f
        .wait_instance("mcp-01", "annotation consumed", |k| {
            k["metadata"]["annotations"].get("openmcp.cloud/operation").is_none()
                && k["status"]["observedGeneration"] == 3
        })
        .await;
    assert_eq!(flux["status"]["phase"], "Ready");
    f.stop_operator().await;
}

#[tokio::test]
async fn an_unknown_version_lists_the_offer() {
    let mut f = flux_fixture("mcp-01").await;
    f.provider_config_with(spec(None, None, None), None).await;
    f.start_operator_with(flux_plugin()).await;
    f.create_instance("mcp-01", "9.9.9").await;
    let flux = f.wait_instance("mcp-01", "ReconcileError", |k| ready(k)["reason"] == "ReconcileError").await;
    assert_eq!(
        ready(&flux)["message"],
        "invalid user input: requested version is not available: \"9.9.9\", available versions are: 2.8.3"
    );
    f.stop_operator().await;
}
