//! The lifecycle on openmcp-operator v1.3.0 itself (issue #26), not the
//! simulator: its scheduler gives each tenant's ControlPlane a `Cluster`,
//! its AccessRequest controller resolves the host's requests and hands them
//! to the test cluster provider (`testbed::cluster_provider`), which grants
//! a ServiceAccount token with exactly the requested rules. So every call
//! the host makes on a ControlPlane is checked by RBAC against the plugin's
//! token rules.

use std::sync::Arc;

use host_test_support::plugins::{self, plugin};
use host_test_support::*;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use kube::Api;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use service_provider_host::plugin::grant::Effective;
use service_provider_host::plugin::plan::Planner;
use testbed::cluster_provider::{ACCESS_NAMESPACE, PROFILE, PROVIDER};
use testbed::eventually;

const DOCKER: &str = "kubernetes.io/dockerconfigjson";
const AR: &str = "kro.services.open-control-plane.io--mcp-01--mcp";

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name).await.expect("read").map(|o| serde_json::to_value(o).unwrap())
}

/// The pull secret's name: the openmcp tests share one ControlPlane
/// cluster, so each test's copy in `kro-system` has a name of its own.
fn pull(f: &Fixture) -> String {
    format!("pull-{}", f.provider)
}

/// A ProviderConfig whose version has an image pull secret: the host then
/// creates `kro-system` on the ControlPlane and copies the Secret there,
/// with the instance's token.
async fn with_image_pull_secret(f: &Fixture) {
    f.source_secret(&pull(f), DOCKER, "{\"auths\":{\"img\":{}}}").await;
    f.provider_config(json!([{
        "version": "v0.9.3", "chartVersion": "0.9.3",
        "helmValues": {"imagePullSecrets": [{"name": pull(f)}]}
    }]))
    .await;
}

/// The kubeconfig of the instance's AccessRequest, as granted now.
async fn token(f: &Fixture) -> String {
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    let secret = secrets.get(&format!("{AR}.kubeconfig")).await.expect("kubeconfig Secret");
    String::from_utf8(secret.data.unwrap()["kubeconfig"].0.clone()).unwrap()
}

#[tokio::test]
async fn the_kro_lifecycle_runs_on_openmcp_operator_with_scoped_tokens() {
    let mut f =
        Fixture::with_openmcp(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    with_image_pull_secret(&f).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    assert!(ready.is_ok(), "not Ready on openmcp-operator: {:?}\n{}", f.kro("mcp-01").await, f.openmcp.diagnostics());

    // The request as openmcp-operator resolved it, granted by the provider.
    let ar = get(&f.access_requests("mcp-01"), AR).await.expect("AccessRequest");
    assert_eq!(ar["metadata"]["labels"]["clusters.openmcp.cloud/provider"], PROVIDER, "{ar}");
    assert_eq!(ar["metadata"]["labels"]["clusters.openmcp.cloud/profile"], PROFILE, "{ar}");
    assert!(ar["spec"]["clusterRef"]["name"].as_str().is_some_and(|n| n.starts_with("mcp-")), "{ar}");
    assert_eq!(ar["status"]["secretRef"]["name"], format!("{AR}.kubeconfig"));
    let on_cp: Api<Secret> = Api::namespaced(f.control_plane.clone(), "kro-system");
    on_cp.get(&pull(&f)).await.expect("the pull secret copied into kro-system with the token");

    // The kubeconfig holds a token bound to the plugin's rules, not admin:
    // Pods may be read (helm-controller's wait needs that) but not written,
    // and Nodes, which no rule names, are forbidden on the ControlPlane.
    let kubeconfig = token(&f).await;
    assert!(kubeconfig.contains("token:") && !kubeconfig.contains("client-key"), "a token kubeconfig");
    let scoped = testbed::client_from_kubeconfig(&kubeconfig).await.unwrap();
    let pods = Api::<Pod>::namespaced(scoped.clone(), "kube-system");
    pods.list(&Default::default()).await.expect("the plugin's rules let the token read Pods");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "intruder"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let written = pods.create(&Default::default(), &pod).await;
    assert!(matches!(written, Err(kube::Error::Api(ref e)) if e.code == 403), "{written:?}");
    let nodes = Api::<Node>::all(scoped).list(&Default::default()).await;
    assert!(matches!(nodes, Err(kube::Error::Api(ref e)) if e.code == 403), "{nodes:?}");

    // Deletion: the instance, its request and its token are gone.
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(get(&f.access_requests("mcp-01"), AR).await.is_none(), "the AccessRequest is gone");
    let accounts: Api<ServiceAccount> = Api::namespaced(f.control_plane.clone(), ACCESS_NAMESPACE);
    let left = accounts.list(&Default::default()).await.unwrap();
    assert!(left.items.is_empty(), "the token's ServiceAccount is revoked: {:?}", left.items);
    f.stop_operator().await;
}

/// Proof that the tokens are narrow: the operator's grant takes the
/// Namespace rule out of the Kro plugin's ControlPlane token, and creating
/// `kro-system` on the ControlPlane fails with RBAC's own words in the
/// status (with the simulator's admin kubeconfig it would succeed).
#[tokio::test]
async fn a_token_rule_taken_away_fails_the_install_clearly_and_a_re_grant_rotates_the_token() {
    let mut f =
        Fixture::with_openmcp(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    with_image_pull_secret(&f).await;
    let kro = plugin();
    let rules = kro.descriptor().access.control_plane_rules.len();
    let (grant, left) = host_test_support::plugins::built_in_grant_without(&kro, "namespaces");
    assert_eq!(left, rules - 1, "one rule less");
    let granted = Effective::for_component(kro.descriptor(), kro.digest(), grant).expect("grant fits");
    let ctx = f.context_for(Planner { plugin: kro, granted: Arc::new(granted) }, |_| {}).await;
    f.start_operator_on(Arc::new(ctx));
    f.create_kro("mcp-01", "v0.9.3").await;

    let failed = |k: &Value| {
        ready(k)["status"] == "False" && ready(k)["message"].as_str().is_some_and(|m| m.contains("forbidden"))
    };
    let kro = f.wait_kro("mcp-01", "a forbidden install", failed).await;
    let message = ready(&kro)["message"].as_str().unwrap().to_string();
    eprintln!("the status with the Namespace rule taken away: {message}");
    assert_eq!(ready(&kro)["reason"], "ReconcileError", "{message}");
    assert!(message.contains("namespaces") && message.contains("kro-system"), "{message}");
    assert!(message.contains("system:serviceaccount:accessrequests:"), "the token's own identity: {message}");
    let ar = get(&f.access_requests("mcp-01"), AR).await.expect("AccessRequest");
    let granted_rules = ar["spec"]["token"]["permissions"][0]["rules"].as_array().unwrap().clone();
    assert!(!granted_rules.iter().any(|r| r["resources"].as_array().unwrap().iter().any(|x| x == "namespaces")));

    // The built-in grant gives the rule back: the request's token rules
    // change, openmcp-operator sets it Pending, the provider re-grants with
    // a new token, and the host carries on with it to Ready.
    let before = (ar["metadata"]["generation"].as_i64().unwrap(), token(&f).await);
    f.stop_operator().await;
    f.start_operator().await;
    f.wait_ready("mcp-01").await;
    let ar = get(&f.access_requests("mcp-01"), AR).await.expect("AccessRequest");
    let after = (ar["metadata"]["generation"].as_i64().unwrap(), token(&f).await);
    assert!(after.0 > before.0, "the token rules changed: generation {} → {}", before.0, after.0);
    assert_ne!(after.1, before.1, "a re-grant issues a new token");
    let on_cp: Api<Secret> = Api::namespaced(f.control_plane.clone(), "kro-system");
    on_cp.get(&pull(&f)).await.expect("the copy made with the new token");

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    f.stop_operator().await;
}

/// The Flux plugin's lifecycle (copies into the tenant namespace and onto
/// the ControlPlane, a CA bundle, rotation, removal, deletion after the
/// version is withdrawn) with its own token rules enforced by RBAC.
#[tokio::test]
async fn the_flux_lifecycle_runs_on_openmcp_operator_with_scoped_tokens() {
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::with_openmcp_service(options, Service::FLUX).await;
    crate::flux::copies_follow_the_provider_config(f).await;
}

/// The container args of the first container of a pod template.
fn container_args(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<String> {
    let spec = template.spec.as_ref().expect("pod spec");
    spec.containers[0].args.clone().unwrap_or_default()
}

/// A ServiceProvider as openmcp deploys it: its deployment controller makes
/// the init Job, whose exact arguments run the host's `init` (onboarding
/// access through openmcp, a token with init's rules on the onboarding
/// cluster); the Job's success (the kubelet's part, played here) makes the
/// Deployment, whose exact arguments run the host's `run` (its own
/// onboarding token), which serves a Kro to Ready and through deletion; the
/// Deployment's status makes the ServiceProvider Ready, with the service
/// kind init registered kept.
#[tokio::test]
async fn a_service_provider_openmcp_deploys_runs_init_and_run_with_its_arguments() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::{Patch, PatchParams, PostParams};
    use std::time::Duration;
    use testbed::openmcp::SYSTEM_NAMESPACE;

    let provider = unique("kro");
    let setup =
        Setup { pod_namespace: Some(SYSTEM_NAMESPACE.into()), provider: Some(provider.clone()), ..Setup::default() };
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::with_openmcp_setup(options, Service::KRO, setup).await;
    let providers: Api<DynamicObject> =
        Api::all_with(f.platform.clone(), &service_provider_host::controller::init::service_provider_resource());
    let sp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
        "metadata": {"name": provider}, "spec": {"image": "example.org/service-provider-host:test"},
    }))
    .unwrap();
    providers.create(&PostParams::default(), &sp).await.expect("ServiceProvider");

    let jobs: Api<Job> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
    let job_name = format!("sp-{provider}-init");
    let job = eventually("the init Job", WAIT, || async { jobs.get_opt(&job_name).await.unwrap() }).await;
    let args = container_args(&job.spec.as_ref().unwrap().template);
    assert_eq!(args.first().map(String::as_str), Some("init"), "{args:?}");
    let launcher = host_test_support::process::Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into());
    let mut init_args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    init_args.extend(["--plugin".into(), plugins::plugin_path(plugins::KRO).into_os_string()]);
    let pod_env = [("POD_NAMESPACE", SYSTEM_NAMESPACE), ("POD_NAME", "init-pod")];
    let out = launcher.command(&init_args, &f.env.platform.kubeconfig_path(), &pod_env).output().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "init with openmcp's arguments {args:?} failed: {stderr}\n{}",
        f.openmcp.diagnostics()
    );
    assert!(stderr.contains("service kind registered"), "{stderr}");

    // The kubelet ran the Job to success.
    let done = json!({"status": {"succeeded": 1}});
    jobs.patch_status(&job_name, &PatchParams::default(), &Patch::Merge(&done)).await.expect("Job status");
    let deployments: Api<Deployment> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
    let name = format!("sp-{provider}");
    let deployment = eventually("the Deployment", WAIT, || async { deployments.get_opt(&name).await.unwrap() }).await;
    let args = container_args(&deployment.spec.template);
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");

    // `run` with those arguments; only the listening ports are the test's,
    // and the one namespace it watches: other tests' instances share the
    // onboarding cluster, and a host that watched them all would reconcile
    // them beside their own controllers (with its own grant).
    let metrics = host_test_support::process::free_port();
    let mut run_args: Vec<std::ffi::OsString> = args
        .iter()
        .filter(|a| !a.starts_with("--metrics-bind-address") && !a.starts_with("--health-probe-bind-address"))
        .map(Into::into)
        .collect();
    run_args.extend([
        format!("--metrics-bind-address=127.0.0.1:{metrics}").into(),
        "--health-probe-bind-address=0".into(),
        "--plugin".into(),
        plugins::plugin_path(plugins::KRO).into_os_string(),
    ]);
    let pod_env = [("POD_NAMESPACE", SYSTEM_NAMESPACE), ("POD_NAME", "run-pod"), ("WATCH_NAMESPACE", f.ns.as_str())];
    let log = std::env::temp_dir().join(format!("{provider}-run.log"));
    let _run = launcher.command(&run_args, &f.env.platform.kubeconfig_path(), &pod_env).spawn(Some(&log));
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(ready.is_ok(), "run with {args:?}: {}\n{}", log_text(), f.openmcp.diagnostics());

    // The kubelet made the Deployment available: the ServiceProvider is
    // Ready and still lists the service kind.
    let live = deployments.get(&name).await.unwrap();
    let replicas = live.spec.replicas.unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": live.metadata.generation, "replicas": replicas,
        "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
    }});
    deployments.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("Deployment status");
    let sp = eventually("the ServiceProvider Ready", WAIT, || async {
        let sp = serde_json::to_value(providers.get(&provider).await.unwrap()).unwrap();
        (sp["status"]["phase"] == "Ready").then_some(sp)
    })
    .await;
    assert_eq!(
        sp["status"]["resources"],
        json!([{"group": "kro.services.open-control-plane.io", "version": "v1alpha1", "kind": "Kro"}]),
        "{sp}"
    );

    f.delete_kro("mcp-01").await;
    let gone = tokio::time::timeout(f.wait + Duration::from_secs(5), f.wait_gone("mcp-01")).await;
    assert!(gone.is_ok(), "deletion: {}", log_text());
}

/// A plugin that asks for a workload cluster, on openmcp-operator: the
/// host's workload ClusterRequest is scheduled onto a `Cluster` of its own,
/// the AccessRequest for it granted as a token with the plugin's workload
/// rules; deletion releases both.
#[tokio::test]
async fn a_workload_cluster_is_granted_by_openmcp_operator() {
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true };
    let f = Fixture::with_openmcp(options).await;
    crate::lifecycle::access::workload_cluster_lifecycle(f, false).await;
}

/// A ControlPlane deleted through openmcp-operator's own `mcp run`: openmcp
/// deletes the service object named like the ControlPlane first, for every
/// kind a ServiceProvider registered, and waits for it; the host tears the
/// installation down (here: the pull secret copy in `kro-system`) while
/// its access is still granted; only then does openmcp delete the
/// ControlPlane's ClusterRequest.
#[tokio::test]
async fn a_control_plane_deleted_through_openmcp_takes_its_kro_first() {
    use service_provider_host::controller::init;
    use testbed::openmcp::control_plane_resource;

    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let mut f = Fixture::with_openmcp(options).await;
    let OpenMcp::Real(openmcp) = &f.openmcp else { unreachable!("an openmcp fixture") };
    openmcp.control_planes().await.expect("openmcp-operator mcp run");

    // The ServiceProvider with the kind init registers.
    let providers: Api<DynamicObject> = Api::all_with(f.platform.clone(), &init::service_provider_resource());
    let sp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
        "metadata": {"name": f.provider}, "spec": {"image": "example.org/service-provider-host:test"},
    }))
    .unwrap();
    providers.create(&Default::default(), &sp).await.expect("ServiceProvider");
    let kro = plugin();
    init::register_when_reconciled(kro.descriptor(), &f.platform, &f.provider, f.wait).await.expect("registered");

    // The tenant's ControlPlane, reconciled by `mcp run`.
    let control_planes: Api<DynamicObject> =
        Api::namespaced_with(f.onboarding.clone(), &f.ns, &control_plane_resource());
    let control_plane: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "core.open-control-plane.io/v2alpha1", "kind": "ControlPlane",
        "metadata": {"name": "mcp-01", "namespace": f.ns}, "spec": {"iam": {}},
    }))
    .unwrap();
    control_planes.create(&Default::default(), &control_plane).await.expect("ControlPlane");
    eventually("mcp run's finalizer on the ControlPlane", f.wait, || async {
        let live = control_planes.get("mcp-01").await.unwrap();
        live.metadata.finalizers.filter(|f| !f.is_empty()).map(|_| ())
    })
    .await;

    with_image_pull_secret(&f).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let on_cp: Api<Secret> = Api::namespaced(f.control_plane.clone(), "kro-system");
    on_cp.get(&pull(&f)).await.expect("the pull secret copy on the ControlPlane");

    control_planes.delete("mcp-01", &Default::default()).await.expect("ControlPlane deleted");
    let gone = tokio::time::timeout(f.wait * 2, f.wait_gone("mcp-01")).await;
    assert!(gone.is_ok(), "openmcp deletes the Kro first: {}", f.openmcp.diagnostics());
    assert!(on_cp.get_opt(&pull(&f)).await.unwrap().is_none(), "the host cleaned up while it had access");
    assert!(get(&f.access_requests("mcp-01"), AR).await.is_none(), "the host's request is gone");
    let requests: Api<DynamicObject> = Api::namespaced_with(
        f.platform.clone(),
        &f.tenant("mcp-01"),
        &service_provider_host::reconcile::access::cluster_request_resource(),
    );
    eventually("openmcp deletes the ControlPlane's ClusterRequest", f.wait, || async {
        requests.get_opt("mcp-01").await.unwrap().is_none().then_some(())
    })
    .await;
    f.stop_operator().await;
}
