//! The operators' pages' commands, run as written against test clusters
//! (`tests/support`'s `docs`): a command a page shows that fails, or that
//! does something else than the page says, fails here. The author's pages
//! (the plugin guide, the templates' READMEs) run in `authoring`.
//!
//! Substitutions, the same for every page: `KUBECONFIG` names the test's
//! cluster, and `kubectl` is the test bed's (`build-bins.sh`), first on
//! `PATH`.

use std::collections::BTreeMap;

use host_test_support::docs::{self, Substitutions};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use service_provider_host::owner::{LABEL_COPY_OF, LABEL_PROVIDER};
use testbed::{Cluster, ClusterOptions};

/// `PATH` with the test bed's kubectl first, and the rest of this process's.
fn path_with_kubectl() -> String {
    let kubectl = testbed::bins::kubectl().expect("kubectl is built (tests/testbed/scripts/build-bins.sh)");
    format!("{}:{}", kubectl.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default())
}

fn reader_env(cluster: &Cluster) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), path_with_kubectl()),
        ("HOME".into(), std::env::var("HOME").unwrap_or_default()),
        ("KUBECONFIG".into(), cluster.kubeconfig_path().display().to_string()),
    ]
}

/// `docs/migrating.md`'s way back to the Go provider removes the copies of
/// the kro provider the host made, and no other provider's (Flux's copies
/// in the same tenant namespace stay), nor a Secret that is no copy.
#[tokio::test]
async fn the_rollback_of_migrating_md_removes_only_kros_copies() {
    let cluster = Cluster::start(ClusterOptions::new("docs")).await.expect("a cluster");
    let client = cluster.client().await.unwrap();
    let tenant = "mcp--docs";
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(tenant.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), tenant);
    for (name, provider) in [("sp-kro-registry", Some("kro")), ("sp-flux-registry", Some("flux")), ("tenant-own", None)]
    {
        let mut labels = BTreeMap::new();
        if let Some(provider) = provider {
            labels.insert(LABEL_COPY_OF.to_string(), "registry".to_string());
            labels.insert(LABEL_PROVIDER.to_string(), provider.to_string());
        }
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &secret).await.unwrap();
    }

    let blocks = docs::page("docs/migrating.md");
    eprintln!("docs: migrating.md skips {:?}", docs::skipped(&blocks));
    let dir = docs::scratch("docs-migrating-");
    docs::run(&blocks, dir.path(), &reader_env(&cluster), &Substitutions::default());

    let left: Vec<String> =
        secrets.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|s| s.metadata.name).collect();
    assert_eq!(left, ["sp-flux-registry", "tenant-own"], "only kro's copies are removed");
}

/// `docs/operations.md`'s upgrade: the grant that admits the new build and
/// the preview, as written, on a running fleet. Its variables are the
/// reader's: `NEW` the next Kro build (`tests/plugins/kro-next`), `CURRENT`
/// the one running; `platform.kubeconfig` is the test's platform cluster.
#[tokio::test]
async fn the_upgrade_preview_of_operations_md_runs_on_a_live_fleet() {
    use host_test_support::plugins::{self, KRO, KRO_NEXT};
    use host_test_support::*;
    let setup =
        Setup { provider: Some("kro".into()), pod_namespace: Some("openmcp-system".into()), ..Setup::default() };
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::new_with(options, setup).await;
    f.provider_config(serde_json::json!([version("v0.9.1", "0.9.1")])).await;
    // `run` as deployed: its onboarding access requested through openmcp,
    // where `diff` finds it.
    let host = std::path::Path::new(env!("CARGO_BIN_EXE_service-provider-host"));
    let run = process::Replica::start(&process::Launcher::Binary(host.into()), &f, process::ReplicaOptions::new("run"));
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    let env = vec![
        ("PATH".to_string(), format!("{}:{}", host.parent().unwrap().display(), std::env::var("PATH").unwrap())),
        ("HOME".to_string(), std::env::var("HOME").unwrap_or_default()),
    ];
    let substitutions = Substitutions::default()
        .text("platform.kubeconfig", &f.env.platform.kubeconfig_path().display().to_string())
        .env("NEW", plugins::plugin_path(KRO_NEXT).display().to_string())
        .env("CURRENT", plugins::plugin_path(KRO).display().to_string());
    let blocks = docs::page("docs/operations.md");
    eprintln!("docs: operations.md skips {:?}", docs::skipped(&blocks));
    let dir = docs::scratch("docs-operations-");
    let out = docs::run(&blocks, dir.path(), &env, &substitutions);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("plugin kro ") && report.contains("instances:"), "{report}");
    let grant = std::fs::read_to_string(dir.path().join("grant.yaml")).expect("step 0 wrote the grant");
    service_provider_host::plugin::grant::Grant::parse(&grant).expect("a grant the host reads");
    assert!(run.terminate().success());
}

/// Where deploy/README.md's pages pull the image from: a local registry
/// holding this machine's image (`SERVICE_PROVIDER_HOST_IMAGE`, from
/// scripts/build-image.sh) as `registry.example.com/platform/service-provider-host:0.2.0`
/// would, as the page's first block pushes it. `None` (the test passes
/// with a note) without the image, unless CI requires it.
struct Published {
    registry: host_test_support::oci::PluginRegistry,
    /// The registry's credentials, a docker `config.json`.
    authfile: std::path::PathBuf,
    /// buildah's storage driver.
    storage: String,
}

async fn image_in_a_registry() -> Option<Published> {
    let Some(image) = std::env::var("SERVICE_PROVIDER_HOST_IMAGE").ok().filter(|s| !s.is_empty()) else {
        let required = std::env::var("SERVICE_PROVIDER_HOST_REQUIRE_IMAGE").is_ok_and(|v| v == "1");
        assert!(!required, "SERVICE_PROVIDER_HOST_IMAGE is not set: build it with scripts/build-image.sh");
        eprintln!("skipped: SERVICE_PROVIDER_HOST_IMAGE is not set (eval \"$(scripts/build-image.sh)\")");
        return None;
    };
    let storage = std::env::var("BUILDAH_STORAGE").unwrap_or_else(|_| "vfs".into());
    let registry = host_test_support::oci::PluginRegistry::start().await;
    let authfile = registry.docker_config().join("config.json");
    let target = format!("docker://{}/platform/service-provider-host:0.2.0", registry.host());
    let pushed = std::process::Command::new("buildah")
        .args(host_test_support::process::buildah_globals(&storage, None))
        .args(["push", "--quiet", "--tls-verify=false", "--authfile"])
        .arg(&authfile)
        .args([&image, &target])
        .output()
        .expect("buildah runs");
    assert!(pushed.status.success(), "pushing the image: {}", String::from_utf8_lossy(&pushed.stderr));
    Some(Published { registry, authfile, storage })
}

/// `deploy/README.md`'s standalone install, as written, on clusters of its
/// own (its ProviderConfig `kro` is the cluster's one): `kubectl apply` of
/// the namespace and RBAC, the init Job run to completion, the
/// ProviderConfig, the Deployment rolled out; the kubelet's part is played
/// by `tests/support`'s kubelet (the pods from the image, pulled from a
/// registry, with their ServiceAccounts' tokens). Then a Kro goes Ready
/// under the host it installed. The page's own substitutions: the image's
/// registry `registry.example.com` is a local one (the files the commands
/// apply are copied with it replaced), where the test pushed the image as
/// its first block would.
#[tokio::test]
async fn the_standalone_install_of_deploy_readme_runs_as_written() {
    use host_test_support::*;
    let Some(Published { registry, authfile, storage }) = image_in_a_registry().await else { return };

    let env: &'static testbed::TestEnv = Box::leak(Box::new(testbed::TestEnv::start().await.expect("clusters")));
    let setup = Setup {
        env: Some(env),
        provider: Some("kro".into()),
        pod_namespace: Some("service-provider-kro".into()),
        ..Setup::default()
    };
    let f =
        Fixture::new_with(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }, setup).await;
    let kubelet = host_test_support::kubelet::Kubelet::start(host_test_support::kubelet::Node {
        platform: f.platform.clone(),
        kubeconfig: env.platform.kubeconfig_yaml().to_string(),
        namespace: "service-provider-kro".into(),
        storage,
        dir: registry.dir().join("kubelet"),
        credentials: Some(authfile),
        only: Vec::new(),
    });

    let dir = docs::scratch("docs-deploy-");
    let substitutions = Substitutions::default().text("registry.example.com", registry.host());
    docs::copy_tree(&["deploy", "examples"], dir.path(), &substitutions);
    let mut blocks = docs::page("deploy/README.md");
    eprintln!("docs: deploy/README.md skips {:?}", docs::skipped(&blocks));
    // This test is the standalone section's; the openmcp section runs on
    // openmcp-operator's landscape.
    blocks.retain(|b| b.text.contains("deploy/standalone/"));
    assert_eq!(blocks.len(), 1, "the standalone section has one block");
    let reader = reader_env(&env.platform);
    let run = tokio::task::spawn_blocking({
        let (dir, substitutions) = (dir.path().to_path_buf(), substitutions.clone());
        move || std::panic::catch_unwind(|| docs::run(&blocks, &dir, &reader, &substitutions))
    });
    if run.await.unwrap().is_err() {
        panic!("the standalone install failed; {}", kubelet.diagnostics().await);
    }

    f.create_kro("mcp-01", "v0.9.4").await;
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    assert!(ready.is_ok(), "a Kro under the host the page installed: {}", kubelet.diagnostics().await);
}

/// `deploy/README.md`'s install through openmcp, as written, on
/// openmcp-operator v1.3.0: the ServiceProvider applied and waited for
/// until openmcp reports it Ready (its init Job and Deployment run by
/// `tests/support`'s kubelet, from the image in a registry, with openmcp's
/// own ServiceAccounts), the chart pull Secret and the ProviderConfig
/// created; then a Kro goes Ready under it. The substitution: the image's
/// registry `registry.example.com` is a local one.
#[tokio::test]
async fn the_openmcp_install_of_deploy_readme_runs_as_written() {
    use host_test_support::*;
    let Some(Published { registry, authfile, storage }) = image_in_a_registry().await else { return };

    // openmcp-operator on clusters of its own: the ServiceProvider's `run`
    // reconciles every Kro of its onboarding cluster.
    let openmcp = testbed::openmcp::OpenMcp::start().await.expect("openmcp-operator");
    let openmcp: &'static testbed::openmcp::OpenMcp = Box::leak(Box::new(openmcp));
    let setup = Setup {
        env: Some(&openmcp.env),
        openmcp: Some(openmcp),
        provider: Some("kro".into()),
        pod_namespace: Some(testbed::openmcp::SYSTEM_NAMESPACE.into()),
        ..Setup::default()
    };
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::new_with(options, setup).await;
    let kubelet = host_test_support::kubelet::Kubelet::start(host_test_support::kubelet::Node {
        platform: f.platform.clone(),
        kubeconfig: openmcp.env.platform.kubeconfig_yaml().to_string(),
        namespace: testbed::openmcp::SYSTEM_NAMESPACE.into(),
        storage,
        dir: registry.dir().join("kubelet"),
        credentials: Some(authfile),
        only: vec!["sp-kro-init".into(), "sp-kro".into()],
    });

    let dir = docs::scratch("docs-deploy-openmcp-");
    let substitutions = Substitutions::default().text("registry.example.com", registry.host());
    docs::copy_tree(&["deploy", "examples"], dir.path(), &substitutions);
    let mut blocks = docs::page("deploy/README.md");
    blocks.retain(|b| b.text.contains("deploy/openmcp/"));
    assert_eq!(blocks.len(), 1, "the openmcp section has one block");
    let reader = reader_env(&openmcp.env.platform);
    let run = tokio::task::spawn_blocking({
        let (dir, substitutions) = (dir.path().to_path_buf(), substitutions.clone());
        move || std::panic::catch_unwind(|| docs::run(&blocks, &dir, &reader, &substitutions))
    });
    if run.await.unwrap().is_err() {
        panic!("the install through openmcp failed; {}\n{}", kubelet.diagnostics().await, f.openmcp.diagnostics());
    }

    f.create_kro("mcp-01", "v0.9.4").await;
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    assert!(ready.is_ok(), "a Kro under the host openmcp deployed: {}", kubelet.diagnostics().await);
}
