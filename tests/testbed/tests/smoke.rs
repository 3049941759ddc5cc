//! Smoke tests of the test bed on real kube-apiserver/etcd processes.
//!
//! All tests share one [`testbed::TestEnv`] (three clusters) and isolate
//! themselves by namespace and object names.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use guest_kro::api::{Kro, KroSpec, KroVersion, ProviderConfig, ProviderConfigSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testbed::crds::{self, Purpose};
use testbed::eventually;
use testbed::openmcp_sim::api::{AccessRequest, AccessRequestSpec, ClusterRequest, ClusterRequestSpec, NamespacedRef};
use testbed::openmcp_sim::{CLUSTER_ACCESS_FINALIZER, KUBECONFIG_KEY};
use testbed::{Cluster, FluxKind, FluxOptions, FluxSimulator, OpenMcpSimulator, SimulatorOptions};

/// A name unique within this test binary run (namespaces are never deleted:
/// no namespace controller runs).
fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

async fn create_namespace(client: &Client, name: &str) {
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
}

async fn marker(client: &Client) -> String {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get(testbed::MARKER_CONFIGMAP)
        .await
        .expect("marker ConfigMap");
    cm.data.unwrap_or_default().remove("cluster").unwrap_or_default()
}

fn kro_version(version: &str) -> KroVersion {
    KroVersion {
        version: version.into(),
        chart_version: version.into(),
        chart_url: None,
        chart_pull_secret: None,
        helm_values: None,
    }
}

#[tokio::test]
async fn three_clusters_are_ready_and_distinct() {
    let env = testbed::shared().await.expect("test environment");
    eprintln!(
        "testbed: 3 clusters ready in {:?} (in parallel), CRDs in {:?}",
        env.timings.clusters_ready, env.timings.crds_ready
    );
    let mut servers = Vec::new();
    for (purpose, name) in
        [(Purpose::Platform, "platform"), (Purpose::Onboarding, "onboarding"), (Purpose::ControlPlane, "control-plane")]
    {
        let cluster: &Cluster = env.cluster(purpose);
        let client = cluster.client().await.expect("client");
        assert_eq!(marker(&client).await, name, "each kubeconfig reaches its own cluster");
        let version = client.apiserver_version().await.expect("/version");
        assert_eq!(version.git_version, testbed::bins::K8S_VERSION, "version ldflags");
        let rss = cluster.rss().expect("processes are running");
        eprintln!(
            "testbed: {name}: ready after {:?}, RSS apiserver {} MiB + etcd {} MiB",
            cluster.startup_duration(),
            rss.apiserver_bytes >> 20,
            rss.etcd_bytes >> 20
        );
        assert!(cluster.kubeconfig_yaml().contains("client-certificate-data"));
        servers.push(cluster.server_url().to_string());
    }
    servers.sort();
    servers.dedup();
    assert_eq!(servers.len(), 3, "three distinct API servers");
}

#[tokio::test]
async fn every_crd_is_established_on_its_cluster() {
    let env = testbed::shared().await.expect("test environment");
    for purpose in [Purpose::Platform, Purpose::Onboarding, Purpose::ControlPlane] {
        let expected = crds::crds_for(purpose).expect("CRD sources");
        assert!(!expected.is_empty(), "{purpose:?} has CRDs");
        let client = env.cluster(purpose).client().await.expect("client");
        let api: Api<CustomResourceDefinition> = Api::all(client);
        for crd in &expected {
            let live = api.get(&crd.name).await.unwrap_or_else(|e| panic!("{} on {purpose:?}: {e}", crd.name));
            assert!(crds::is_established(&live), "{} is Established", crd.name);
        }
    }
    // Spot-check the placement by label.
    let names = |p| crds::crds_for(p).unwrap().into_iter().map(|c| c.name).collect::<Vec<_>>();
    let platform = names(Purpose::Platform);
    for name in [
        "providerconfigs.kro.services.open-control-plane.io",
        "accessrequests.clusters.openmcp.cloud",
        "clusterrequests.clusters.openmcp.cloud",
        "serviceproviders.openmcp.cloud",
        "ocirepositories.source.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
    ] {
        assert!(platform.iter().any(|n| n == name), "{name} on platform: {platform:?}");
    }
    assert_eq!(
        names(Purpose::Onboarding),
        ["fluxes.flux.services.open-control-plane.io", "kroes.kro.services.open-control-plane.io"]
    );
    assert_eq!(names(Purpose::ControlPlane), ["resourcegraphdefinitions.kro.run"]);
    let kro_on_platform = Api::<CustomResourceDefinition>::all(env.platform.client().await.unwrap())
        .get_opt("kroes.kro.services.open-control-plane.io")
        .await
        .unwrap();
    assert!(kro_on_platform.is_none(), "Kro CRD is installed on onboarding only");
}

#[tokio::test]
async fn kro_and_provider_config_round_trip_with_server_defaults() {
    let env = testbed::shared().await.expect("test environment");

    let onboarding = env.onboarding.client().await.unwrap();
    let ns = unique("kro");
    create_namespace(&onboarding, &ns).await;
    let kros: Api<Kro> = Api::namespaced(onboarding, &ns);
    kros.create(&PostParams::default(), &Kro::new("mcp-a", KroSpec { version: "0.9.3".into() }))
        .await
        .expect("create Kro");
    let kro = kros.get("mcp-a").await.expect("read Kro back");
    assert_eq!(kro.spec.version, "0.9.3");
    assert!(kro.status.is_none());

    let platform = env.platform.client().await.unwrap();
    let configs: Api<ProviderConfig> = Api::all(platform);
    let name = unique("kro");
    let spec = ProviderConfigSpec { versions: vec![kro_version("0.9.3")], poll_interval: None };
    configs.create(&PostParams::default(), &ProviderConfig::new(&name, spec)).await.expect("create ProviderConfig");
    let config = configs.get(&name).await.expect("read ProviderConfig back");
    assert_eq!(config.spec.poll_interval.as_deref(), Some("1m"), "pollInterval default");
    assert_eq!(
        config.spec.versions[0].chart_url.as_deref(),
        Some("oci://registry.k8s.io/kro/charts/kro"),
        "chartURL default"
    );
}

#[tokio::test]
async fn invalid_provider_config_is_rejected() {
    let env = testbed::shared().await.expect("test environment");
    let configs: Api<ProviderConfig> = Api::all(env.platform.client().await.unwrap());
    let invalid = ProviderConfig::new(&unique("invalid"), ProviderConfigSpec { versions: vec![], poll_interval: None });
    match configs.create(&PostParams::default(), &invalid).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert_eq!(e.reason, "Invalid", "{e:?}");
            assert!(e.message.contains("versions"), "{}", e.message);
        }
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

fn access_request(name: &str, request: &str, request_ns: &str) -> AccessRequest {
    let mut ar = AccessRequest::new(
        name,
        AccessRequestSpec {
            request_ref: Some(NamespacedRef { name: request.into(), namespace: request_ns.into() }),
            token: Some(json!({
                "permissions": [{ "rules": [{ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] }] }],
                "roleRefs": [{ "name": "cluster-admin", "kind": "ClusterRole" }],
            })),
            ..Default::default()
        },
    );
    ar.metadata.finalizers = Some(vec![CLUSTER_ACCESS_FINALIZER.into()]);
    ar
}

/// Waits for the AR to be Granted for its generation; returns the kubeconfig.
async fn granted_kubeconfig(platform: &Client, ns: &str, name: &str) -> String {
    let ars: Api<AccessRequest> = Api::namespaced(platform.clone(), ns);
    let secret_name = eventually(&format!("AccessRequest {ns}/{name} granted"), Duration::from_secs(30), || async {
        let ar = ars.get(name).await.ok()?;
        let status = ar.status?;
        (status.phase == "Granted" && Some(status.observed_generation) == ar.metadata.generation)
            .then_some(status.secret_ref?.name)
    })
    .await;
    let secret = Api::<Secret>::namespaced(platform.clone(), ns).get(&secret_name).await.expect("kubeconfig Secret");
    let data = secret.data.unwrap_or_default();
    String::from_utf8(data.get(KUBECONFIG_KEY).expect("kubeconfig key").0.clone()).expect("utf-8")
}

#[tokio::test]
async fn simulator_grants_access_to_the_right_clusters() {
    grants_access_to_the_right_clusters(false).await;
}

#[tokio::test]
async fn simulator_watching_cluster_wide_grants_access_to_the_right_clusters() {
    grants_access_to_the_right_clusters(true).await;
}

async fn grants_access_to_the_right_clusters(cluster_wide: bool) {
    let env = testbed::shared().await.expect("test environment");
    let platform = env.platform.client().await.unwrap();
    let provider_ns = unique("openmcp-system");
    let sim = OpenMcpSimulator::start(
        &env.platform,
        &env.onboarding,
        SimulatorOptions { provider_namespaces: vec![provider_ns.clone()], cluster_wide, ..Default::default() },
    );
    create_namespace(&platform, &provider_ns).await;

    // ControlPlane access: the MCP ClusterRequest is named after the ControlPlane.
    let cp_name = unique("mcp");
    let tenant =
        sim.register_control_plane(&cp_name, "default", &env.control_plane).await.expect("register ControlPlane");
    assert_eq!(tenant, service_provider_sdk::names::tenant_namespace(&cp_name, "default").unwrap());
    let cr =
        Api::<ClusterRequest>::namespaced(platform.clone(), &tenant).get(&cp_name).await.expect("MCP ClusterRequest");
    assert_eq!(cr.spec.purpose, "mcp");
    assert_eq!(cr.status.as_ref().map(|s| s.phase.as_str()), Some("Granted"));

    let ar_name =
        service_provider_sdk::names::access_request_name("kro.services.open-control-plane.io", &cp_name, "mcp");
    let ars: Api<AccessRequest> = Api::namespaced(platform.clone(), &tenant);
    ars.create(&PostParams::default(), &access_request(&ar_name, &cp_name, &tenant))
        .await
        .expect("create MCP AccessRequest");
    let kubeconfig = granted_kubeconfig(&platform, &tenant, &ar_name).await;
    let mcp = testbed::client_from_kubeconfig(&kubeconfig).await.expect("client from Secret");
    assert_eq!(marker(&mcp).await, "control-plane", "the AR's kubeconfig reaches the ControlPlane cluster");
    let namespaces = Api::<Namespace>::all(mcp).list(&Default::default()).await.expect("list namespaces");
    assert!(namespaces.items.iter().any(|n| n.name_any() == "kube-system"));

    // Onboarding access: the init pair a provider requests at start-up.
    let init = "kro.services.open-control-plane.io--onboarding-init";
    Api::<ClusterRequest>::namespaced(platform.clone(), &provider_ns)
        .create(
            &PostParams::default(),
            &ClusterRequest::new(
                init,
                ClusterRequestSpec { purpose: "onboarding".into(), wait_for_cluster_deletion: None },
            ),
        )
        .await
        .expect("create onboarding ClusterRequest");
    Api::<AccessRequest>::namespaced(platform.clone(), &provider_ns)
        .create(&PostParams::default(), &access_request(init, init, &provider_ns))
        .await
        .expect("create onboarding AccessRequest");
    let kubeconfig = granted_kubeconfig(&platform, &provider_ns, init).await;
    let onboarding = testbed::client_from_kubeconfig(&kubeconfig).await.unwrap();
    assert_eq!(marker(&onboarding).await, "onboarding");

    // Deletion: finalizers are honoured, the Secret goes with the AR.
    ars.delete(&ar_name, &DeleteParams::default()).await.expect("delete AR");
    eventually("AccessRequest to be gone", Duration::from_secs(30), || async {
        ars.get_opt(&ar_name).await.ok()?.is_none().then_some(())
    })
    .await;
    let secret = Api::<Secret>::namespaced(platform.clone(), &tenant).get_opt(&ar_name).await.unwrap();
    assert!(secret.is_none(), "kubeconfig Secret deleted with its AccessRequest");

    assert_eq!(sim.last_error(), None);
    sim.stop().await;
}

#[tokio::test]
async fn flux_simulator_sets_conditions_and_delays_helm_release_deletion() {
    flux_sets_conditions_and_delays_helm_release_deletion(true).await;
}

/// Watching every namespace: it also acts on the other Flux test's objects,
/// the same way (same options), so the two can run at once.
#[tokio::test]
async fn flux_simulator_watching_every_namespace_sets_conditions_and_delays_helm_release_deletion() {
    flux_sets_conditions_and_delays_helm_release_deletion(false).await;
}

async fn flux_sets_conditions_and_delays_helm_release_deletion(namespaced: bool) {
    let env = testbed::shared().await.expect("test environment");
    let platform = env.platform.client().await.unwrap();
    let ns = unique("flux");
    create_namespace(&platform, &ns).await;
    let namespaces = if namespaced { vec![ns.clone()] } else { Vec::new() };
    let flux = FluxSimulator::start(
        &env.platform,
        FluxOptions { namespaces, deletion_delay: Duration::from_secs(1), ..Default::default() },
    );

    let api =
        |kind: FluxKind| -> Api<DynamicObject> { Api::namespaced_with(platform.clone(), &ns, &kind.api_resource()) };
    let object = |kind: FluxKind, spec: serde_json::Value| {
        let resource: ApiResource = kind.api_resource();
        let mut o = DynamicObject::new("kro", &resource);
        o.data = json!({ "spec": spec });
        o
    };
    api(FluxKind::OciRepository)
        .create(
            &PostParams::default(),
            &object(
                FluxKind::OciRepository,
                json!({ "url": "oci://registry.k8s.io/kro/charts/kro", "interval": "1m" }),
            ),
        )
        .await
        .expect("create OCIRepository");
    api(FluxKind::HelmRelease)
        .create(
            &PostParams::default(),
            &object(
                FluxKind::HelmRelease,
                json!({ "interval": "1m", "chartRef": { "kind": "OCIRepository", "name": "kro" } }),
            ),
        )
        .await
        .expect("create HelmRelease");

    let ready = |o: &DynamicObject| -> Option<(String, String)> {
        let c = o.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?;
        Some((c["status"].as_str()?.to_string(), c["message"].as_str()?.to_string()))
    };
    flux.set_ready(FluxKind::OciRepository, &ns, "kro", true, "stored artifact").await.unwrap();
    flux.set_ready(FluxKind::HelmRelease, &ns, "kro", false, "install retries exhausted").await.unwrap();
    let repo = api(FluxKind::OciRepository).get("kro").await.unwrap();
    assert_eq!(ready(&repo), Some(("True".into(), "stored artifact".into())));
    let release = api(FluxKind::HelmRelease).get("kro").await.unwrap();
    assert_eq!(ready(&release), Some(("False".into(), "install retries exhausted".into())));

    eventually("HelmRelease finalizer", Duration::from_secs(10), || async {
        let r = api(FluxKind::HelmRelease).get("kro").await.ok()?;
        r.finalizers().iter().any(|f| f == testbed::flux_sim::HELM_RELEASE_FINALIZER).then_some(())
    })
    .await;
    let deleted_at = Instant::now();
    api(FluxKind::HelmRelease).delete("kro", &DeleteParams::default()).await.unwrap();
    let pending = api(FluxKind::HelmRelease).get_opt("kro").await.unwrap();
    assert!(pending.is_some_and(|r| r.metadata.deletion_timestamp.is_some()), "deletion waits for the finalizer");
    eventually("HelmRelease to be gone", Duration::from_secs(15), || async {
        api(FluxKind::HelmRelease).get_opt("kro").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(deleted_at.elapsed() >= Duration::from_secs(1), "deletion delay honoured");
    assert_eq!(flux.last_error(), None);
    flux.stop().await;
}

#[tokio::test]
async fn simulator_can_leave_the_clusteraccess_finalizer_to_the_provider() {
    let env = testbed::shared().await.expect("test environment");
    let platform = env.platform.client().await.unwrap();
    let ns = unique("provider");
    let sim = OpenMcpSimulator::start(
        &env.platform,
        &env.onboarding,
        SimulatorOptions { remove_clusteraccess_finalizer: false, ..Default::default() },
    );
    sim.watch_namespace(&ns).await.expect("watch namespace");
    let run = "kro.services.open-control-plane.io--onboarding-run";
    Api::<ClusterRequest>::namespaced(platform.clone(), &ns)
        .create(
            &PostParams::default(),
            &ClusterRequest::new(
                run,
                ClusterRequestSpec { purpose: "onboarding".into(), wait_for_cluster_deletion: None },
            ),
        )
        .await
        .unwrap();
    let ars: Api<AccessRequest> = Api::namespaced(platform.clone(), &ns);
    ars.create(&PostParams::default(), &access_request(run, run, &ns)).await.unwrap();
    granted_kubeconfig(&platform, &ns, run).await;

    ars.delete(run, &DeleteParams::default()).await.unwrap();
    // The simulator cleans up its part; the provider's finalizer stays.
    let left = eventually("simulator finalizer removed", Duration::from_secs(30), || async {
        let ar = ars.get(run).await.ok()?;
        (ar.finalizers() == [CLUSTER_ACCESS_FINALIZER.to_string()]).then_some(ar)
    })
    .await;
    assert!(left.metadata.deletion_timestamp.is_some());
    let secret = Api::<Secret>::namespaced(platform.clone(), &ns).get_opt(run).await.unwrap();
    assert!(secret.is_none(), "Secret deleted before the AR is released");
    // Playing the provider's cluster-access library: drop the last finalizer.
    let patch = json!({ "metadata": { "finalizers": null } });
    ars.patch(run, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
    eventually("AccessRequest to be gone", Duration::from_secs(10), || async {
        ars.get_opt(run).await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(sim.last_error(), None);
    sim.stop().await;
}

/// A watch that cannot list (no Flux CRDs on the onboarding cluster) is an
/// error of the simulator's rounds, not a silent wait.
#[tokio::test]
async fn flux_simulator_watching_reports_a_watch_that_cannot_list() {
    let env = testbed::shared().await.expect("test environment");
    let flux = FluxSimulator::start(&env.onboarding, FluxOptions::default());
    let error = eventually("the watch error to be reported", Duration::from_secs(20), || async {
        flux.last_error().filter(|e| e.contains("simulator watch failed"))
    })
    .await;
    assert!(error.contains("404") || error.contains("not found"), "names the cause: {error}");
    flux.stop().await;
}
