//! `service-provider-host init` as openmcp runs it: the real binary against
//! fresh API servers (no project CRDs yet), with onboarding access granted
//! through the openmcp simulator.

use std::process::{Command, Output};

use host_test_support::{plugin_path, plugins, unique};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use testbed::crds::{self, Purpose};
use testbed::{Cluster, ClusterOptions, OpenMcpSimulator, SimulatorOptions, eventually};

use service_provider_sdk::contract::Cluster as ContractCluster;

fn plugin() -> std::path::PathBuf {
    plugin_path(plugins::KRO)
}

/// Runs `service-provider-host init` (off the async threads) as openmcp's
/// init Job would: platform cluster from KUBECONFIG, `POD_NAMESPACE` set.
async fn run_init(platform: &Cluster, pod_ns: &str, provider: &str) -> Output {
    run_init_with(platform, pod_ns, provider, &[]).await
}

async fn run_init_with(platform: &Cluster, pod_ns: &str, provider: &str, args: &[&str]) -> Output {
    run_init_at(&platform.kubeconfig_path(), pod_ns, provider, args).await
}

async fn run_init_at(kubeconfig: &std::path::Path, pod_ns: &str, provider: &str, args: &[&str]) -> Output {
    let mut cmd = init_command(kubeconfig, pod_ns, provider, args);
    tokio::task::spawn_blocking(move || cmd.output().expect("runs")).await.expect("joined")
}

fn init_command(kubeconfig: &std::path::Path, pod_ns: &str, provider: &str, args: &[&str]) -> Command {
    init_command_for(&plugin(), kubeconfig, pod_ns, provider, args)
}

fn init_command_for(
    plugin: &std::path::Path,
    kubeconfig: &std::path::Path,
    pod_ns: &str,
    provider: &str,
    args: &[&str],
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_service-provider-host"));
    cmd.args(["init", "--environment", "test", "--provider-name", provider, "-v", "DEBUG"])
        .args(["--onboarding-timeout-seconds", "60"])
        .args(args)
        .arg("--plugin")
        .arg(plugin)
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", pod_ns)
        .env_remove("ONBOARDING_KUBECONFIG");
    cmd
}

/// A fresh platform cluster with openmcp's and Flux's CRDs (no project
/// CRDs yet), a fresh onboarding cluster, and a client for each.
async fn fresh_clusters() -> (Cluster, Cluster, kube::Client, kube::Client) {
    let (platform, onboarding, third_party) = tokio::join!(
        Cluster::start(ClusterOptions::new("platform")),
        Cluster::start(ClusterOptions::new("onboarding")),
        tokio::task::spawn_blocking(crds::third_party_crds),
    );
    let (platform, onboarding) = (platform.expect("platform"), onboarding.expect("onboarding"));
    let platform_client = platform.client().await.unwrap();
    let onboarding_client = onboarding.client().await.unwrap();
    let platform_crds: Vec<_> =
        third_party.unwrap().expect("CRDs").into_iter().filter(|c| c.purpose == Some(Purpose::Platform)).collect();
    crds::install(&platform_client, &platform_crds, Duration::from_secs(60)).await.expect("openmcp and Flux CRDs");
    (platform, onboarding, platform_client, onboarding_client)
}

#[tokio::test]
async fn init_installs_the_crds_by_label_and_registers_the_service_kind() {
    let (platform, onboarding, platform_client, onboarding_client) = fresh_clusters().await;

    let pod_ns = unique("provider");
    let provider = unique("kro");
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(pod_ns.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(platform_client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let providers: Api<DynamicObject> =
        Api::all_with(platform_client.clone(), &service_provider_host::controller::init::service_provider_resource());
    let sp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
        "metadata": {"name": provider}, "spec": {"image": "service-provider-host:test"}
    }))
    .unwrap();
    providers.create(&PostParams::default(), &sp).await.expect("ServiceProvider");
    let simulator = OpenMcpSimulator::start(
        &platform,
        &onboarding,
        SimulatorOptions { provider_namespaces: vec![pod_ns.clone()], ..Default::default() },
    );

    // openmcp-operator has not given the ServiceProvider a status yet: init
    // waits for it, saying so, and gives up with a clear message.
    let out = run_init_with(&platform, &pod_ns, &provider, &["--service-provider-timeout-seconds", "2"]).await;
    assert!(!out.status.success(), "init must not register before openmcp reconciled the ServiceProvider");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("has no status yet") && last.contains("gave up registering Kro"),
        "last line {last:?} of:\n{stderr}"
    );
    assert!(!last.contains("422") && !stderr.contains("Required value"), "no raw API error: {last}");

    // Once openmcp reconciles it, a waiting init goes on.
    let mut cmd = init_command(&platform.kubeconfig_path(), &pod_ns, &provider, &[]);
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().expect("init starts");
    let (said, waits) = tokio::sync::oneshot::channel();
    let reader = std::thread::spawn({
        let stderr = child.stderr.take().unwrap();
        move || {
            let mut said = Some(said);
            let mut text = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                if line.contains("waiting for openmcp before registering Kro") {
                    said.take().map(|s| s.send(()));
                }
                text.push_str(&line);
                text.push('\n');
            }
            text
        }
    });
    tokio::time::timeout(Duration::from_secs(60), waits).await.expect("init says it waits").unwrap();
    providers
        .patch_status(
            &provider,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"observedGeneration": 1, "phase": "Progressing"}})),
        )
        .await
        .expect("ServiceProvider status");
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    let stderr = reader.join().unwrap();
    assert!(status.success(), "init failed: {stderr}");
    assert!(stderr.contains("service kind registered"), "{stderr}");

    let crd = |client: &kube::Client, name: &str| {
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let name = name.to_string();
        async move { api.get_opt(&name).await.unwrap() }
    };
    let kroes =
        crd(&onboarding_client, "kroes.kro.services.open-control-plane.io").await.expect("Kro CRD on onboarding");
    assert_eq!(kroes.metadata.labels.unwrap()["openmcp.cloud/cluster"], "onboarding");
    assert!(crd(&platform_client, "kroes.kro.services.open-control-plane.io").await.is_none(), "not on platform");
    let pcs = crd(&platform_client, "providerconfigs.kro.services.open-control-plane.io")
        .await
        .expect("ProviderConfig CRD on platform");
    assert_eq!(pcs.metadata.labels.unwrap()["openmcp.cloud/cluster"], "platform");
    assert!(
        crd(&onboarding_client, "providerconfigs.kro.services.open-control-plane.io").await.is_none(),
        "not on onboarding"
    );

    let sp = serde_json::to_value(providers.get(&provider).await.unwrap()).unwrap();
    assert_eq!(
        sp["status"]["resources"],
        json!([{"group": "kro.services.open-control-plane.io", "version": "v1alpha1", "kind": "Kro"}])
    );
    // Onboarding access for init asked only for CRDs.
    let ars: Api<DynamicObject> = Api::namespaced_with(
        platform_client.clone(),
        &pod_ns,
        &service_provider_host::reconcile::access::access_request_resource(),
    );
    let ar = serde_json::to_value(
        ars.get("kro.services.open-control-plane.io--onboarding-init").await.expect("init AccessRequest"),
    )
    .unwrap();
    assert_eq!(ar["spec"]["token"]["permissions"][0]["rules"][0]["resources"], json!(["customresourcedefinitions"]));

    // A second run (a new provider version) updates in place and succeeds.
    let again = run_init(&platform, &pod_ns, &provider).await;
    assert!(again.status.success(), "second init failed: {}", String::from_utf8_lossy(&again.stderr));

    // A rollback: the Go provider's `init` writes its own schema over the
    // host's CRD (its field manager owns `.spec.versions` now). Going
    // forward again, with or without --adopt-from, `init` takes it back.
    let kroes_api = Api::<CustomResourceDefinition>::all(onboarding_client.clone());
    let ours = kroes_api.get("kroes.kro.services.open-control-plane.io").await.unwrap();
    for args in [&[][..], &["--adopt-from", "service-provider-kro"][..]] {
        let mut theirs = ours.clone();
        theirs.metadata = ObjectMeta { name: theirs.metadata.name.clone(), ..Default::default() };
        theirs.status = None;
        let schema = theirs.spec.versions[0].schema.as_mut().unwrap().open_api_v3_schema.as_mut().unwrap();
        schema.description = Some("the Go provider's schema".into());
        let force = PatchParams::apply("service-provider-kro").force();
        kroes_api.patch("kroes.kro.services.open-control-plane.io", &force, &Patch::Apply(&theirs)).await.unwrap();
        let forward = run_init_with(&platform, &pod_ns, &provider, args).await;
        let stderr = String::from_utf8_lossy(&forward.stderr);
        assert!(forward.status.success(), "init {args:?} after a rollback failed: {stderr}");
        let back = kroes_api.get("kroes.kro.services.open-control-plane.io").await.unwrap();
        let schema = back.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
        assert_ne!(schema.description.as_deref(), Some("the Go provider's schema"), "init {args:?}: not taken back");
        assert!(stderr.contains("service-provider-kro"), "init {args:?} names whom it took the CRD from: {stderr}");
    }

    // Failures are failures: an unknown ServiceProvider exits non-zero.
    let missing = run_init(&platform, &pod_ns, "no-such-provider").await;
    assert!(!missing.status.success(), "init must fail without its ServiceProvider");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("ServiceProvider no-such-provider"), "{stderr}");
    simulator.stop().await;
}

/// A CRD as the project ships it (`crds/<file>`), applied as openmcp's
/// bootstrapper's Flux applies it: server-side, forced, by
/// `kustomize-controller`, with its owner labels; `edit` changes it first
/// (another release's CRD).
async fn applied_by_flux(api: &Api<CustomResourceDefinition>, file: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let text = std::fs::read_to_string(plugins::root().join("crds").join(file)).unwrap();
    let mut crd: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    crd["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] = json!("bootstrap");
    crd["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/namespace"] = json!("flux-system");
    edit(&mut crd);
    let name = crd["metadata"]["name"].as_str().unwrap().to_string();
    let params = PatchParams::apply("kustomize-controller").force();
    api.patch(&name, &params, &Patch::Apply(&crd)).await.expect("Flux applies the CRD");
}

/// openmcp's bootstrapper commits a provider component's platform CRDs to
/// git, and Flux applies them before openmcp-operator runs `init`: `init`
/// co-owns the one of its own release, refuses another release's (git and
/// the image disagree), and on a migrating platform, where the Go
/// provider's `init` wrote too, takes over from it with `--adopt-from` its
/// field manager alone.
#[tokio::test]
async fn init_co_owns_the_crds_flux_applied_from_its_component_and_refuses_another_release() {
    let (platform, onboarding, platform_client, onboarding_client) = fresh_clusters().await;
    let pod_ns = unique("provider");
    let provider = unique("kro");
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(pod_ns.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(platform_client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let simulator = OpenMcpSimulator::start(
        &platform,
        &onboarding,
        SimulatorOptions { provider_namespaces: vec![pod_ns.clone()], ..Default::default() },
    );
    let platform_crds = Api::<CustomResourceDefinition>::all(platform_client.clone());
    let file = "kro.services.open-control-plane.io_providerconfigs.yaml";
    let name = "providerconfigs.kro.services.open-control-plane.io";
    let init = |args: &'static [&'static str]| {
        let mut all = vec!["--register-service-kind=false"];
        all.extend(args);
        let (platform, pod_ns, provider) = (&platform, &pod_ns, &provider);
        async move { run_init_with(platform, pod_ns, provider, &all).await }
    };

    // A migrating platform: Flux applied this release's Kro CRD and the Go
    // provider's init wrote beside it (an Update of its own). Refused without
    // the opt-in, naming the Go provider; taken over with --adopt-from it.
    let onboarding_crds = Api::<CustomResourceDefinition>::all(onboarding_client.clone());
    let kroes = "kroes.kro.services.open-control-plane.io";
    applied_by_flux(&onboarding_crds, "kro.services.open-control-plane.io_kroes.yaml", |_| {}).await;
    let update = PostParams { field_manager: Some("service-provider-kro".into()), ..Default::default() };
    eventually("the Go provider's Update", Duration::from_secs(30), || async {
        // Read, change, write, as controller-runtime's CreateOrUpdate does;
        // again when the API server's status write came in between.
        let mut go = onboarding_crds.get(kroes).await.unwrap();
        go.metadata.labels.get_or_insert_default().insert("app.kubernetes.io/managed-by".into(), "go".into());
        go.metadata.managed_fields = None;
        onboarding_crds.replace(kroes, &update, &go).await.ok()
    })
    .await;
    // And another release's ProviderConfig CRD in git.
    applied_by_flux(&platform_crds, file, |crd| {
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("another release");
    })
    .await;

    let out = init(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--adopt-from \"service-provider-kro\""), "{stderr}");
    let out = init(&["--adopt-from", "service-provider-kro"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CRD adopted"), "the Go provider's CRD taken over: {stderr}");
    assert!(!out.status.success(), "another release's CRD is not the Go provider's to give: {stderr}");

    // Another release's CRD in git: refused, nothing written, saying what to do.
    let out = init(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "init over another release's CRD: {stderr}");
    assert!(
        stderr.contains("other content than this plugin declares") && stderr.contains("commit this release"),
        "{stderr}"
    );
    assert_eq!(host_test_support::crd_writers(&platform_client, name).await, ["kustomize-controller"]);

    // This release's CRD: co-owned, and a second run writes nothing.
    applied_by_flux(&platform_crds, file, |_| {}).await;
    let out = init(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("CRD co-owned"), "{stderr}");
    let host = format!("service-provider-host/{provider}");
    assert_eq!(host_test_support::crd_writers(&platform_client, name).await, ["kustomize-controller", host.as_str()]);
    let version = platform_crds.get(name).await.unwrap().metadata.resource_version;
    applied_by_flux(&platform_crds, file, |_| {}).await; // Flux's next reconcile
    assert!(init(&[]).await.status.success());
    assert_eq!(platform_crds.get(name).await.unwrap().metadata.resource_version, version, "nothing written");
    simulator.stop().await;
}

async fn output(mut cmd: Command) -> (bool, String) {
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("runs")).await.expect("joined");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
}

/// A plugin that claims kro's name, Flux's group and a CRD over Flux's (with
/// a conversion webhook) is refused before it touches a cluster, under the
/// built-in grant and under a grant that pins exactly what it claims; Flux's
/// CRD stays Flux's; its kind read through another kind's plural is
/// refused against discovery; and `init` of the real kro plugin never takes
/// over a CRD another field manager installed.
#[tokio::test]
async fn init_refuses_an_impostor_and_never_takes_over_a_crd() {
    let (platform, onboarding, platform_client, onboarding_client) = fresh_clusters().await;
    let crd_api = Api::<CustomResourceDefinition>::all(platform_client.clone());
    let flux_before = crd_api.get(impostor_plugin::FLUX_CRD_NAME).await.expect("Flux's CRD");
    let pod_ns = unique("provider");
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(pod_ns.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(platform_client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let impostor = plugin_path(plugins::IMPOSTOR);
    let kubeconfig = platform.kubeconfig_path();

    // The built-in grant pins kro's identity for the name "kro".
    let (ok, stderr) = output(init_command_for(&impostor, &kubeconfig, &pod_ns, "kro", &[])).await;
    assert!(!ok, "the impostor was loaded: {stderr}");
    for words in ["is not what the plugin grant pins", "ProviderConfig kind", impostor_plugin::FLUX_CRD_NAME] {
        assert!(stderr.contains(words), "{words:?} in {stderr}");
    }
    // A grant that pins exactly what it claims is itself refused.
    let claimed = plugins::load(plugins::IMPOSTOR, service_provider_host::plugin::sandbox::Limits::default());
    let mut grant: serde_json::Value = serde_saphyr::from_str(service_provider_host::plugin::grant::DEFAULT).unwrap();
    grant["identities"] = json!([{
        "plugin": "kro",
        "service": {"group": claimed.descriptor().service.group, "kind": "Kro"},
        "providerConfig": {"group": claimed.descriptor().provider_config.group, "kind": "ProviderConfig"},
        "finalizer": claimed.descriptor().finalizer,
        "crds": [impostor_plugin::FLUX_CRD_NAME],
    }]);
    let grant_file = std::env::temp_dir().join(unique("impostor-grant.json"));
    std::fs::write(&grant_file, grant.to_string()).unwrap();
    let args = ["--plugin-grant", grant_file.to_str().unwrap()];
    let (ok, stderr) = output(init_command_for(&impostor, &kubeconfig, &pod_ns, "kro", &args)).await;
    assert!(!ok && stderr.contains("belongs to Kubernetes, Flux or openmcp"), "{stderr}");
    let flux_after = crd_api.get(impostor_plugin::FLUX_CRD_NAME).await.unwrap();
    assert_eq!(flux_after.metadata.resource_version, flux_before.metadata.resource_version, "Flux's CRD untouched");
    assert!(flux_after.spec.conversion.is_none_or(|c| c.strategy != "Webhook"));

    // Its ConfigMaps read through `secrets`, checked against discovery.
    let err = service_provider_host::clusters::kinds::check(claimed.descriptor(), &platform_client, &onboarding_client)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"secrets\" is the plural of Secret") && err.contains("plural-of-kind"), "{err}");

    // The real kro plugin: its Kro CRD is already there, installed by
    // someone else. init refuses to take it over, and leaves it as it was.
    let kro_crd = crds::project_crds()
        .unwrap()
        .into_iter()
        .find(|c| c.name == "kroes.kro.services.open-control-plane.io")
        .expect("the project's Kro CRD");
    let onboarding_crds = Api::<CustomResourceDefinition>::all(onboarding_client.clone());
    let params = PatchParams::apply("someone-else");
    onboarding_crds.patch(&kro_crd.name, &params, &Patch::Apply(&kro_crd.manifest)).await.expect("someone's CRD");
    let simulator = OpenMcpSimulator::start(
        &platform,
        &onboarding,
        SimulatorOptions { provider_namespaces: vec![pod_ns.clone()], ..Default::default() },
    );
    let provider = unique("kro");
    let args = ["--register-service-kind=false"];
    let (ok, stderr) = output(init_command_for(&plugin(), &kubeconfig, &pod_ns, &provider, &args)).await;
    assert!(!ok && stderr.contains("was installed by someone-else") && stderr.contains("never taken over"), "{stderr}");
    let after = onboarding_crds.get(&kro_crd.name).await.unwrap();
    let managers: Vec<String> =
        after.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(!managers.iter().any(|m| m.starts_with("service-provider-host")), "their CRD untouched: {managers:?}");
    // Nor when a writer's name only begins like the host's.
    let lookalike = PatchParams::apply("service-provider-hostile");
    onboarding_crds.patch(&kro_crd.name, &lookalike, &Patch::Apply(&kro_crd.manifest)).await.expect("a lookalike");
    let (ok, stderr) = output(init_command_for(&plugin(), &kubeconfig, &pod_ns, &provider, &args)).await;
    assert!(!ok && stderr.contains("service-provider-hostile") && stderr.contains("never taken over"), "{stderr}");
    // Not even when told to take over from the Go provider: it did not write it.
    let adopting = ["--register-service-kind=false", "--adopt-from", "service-provider-kro"];
    let (ok, stderr) = output(init_command_for(&plugin(), &kubeconfig, &pod_ns, &provider, &adopting)).await;
    assert!(!ok && stderr.contains("wrote more than status"), "{stderr}");

    // The Go provider's CRD (its init writes with `Update`): named in the
    // refusal, taken over with --adopt-from.
    onboarding_crds.delete(&kro_crd.name, &Default::default()).await.unwrap();
    eventually("the CRD gone", Duration::from_secs(60), || async {
        onboarding_crds.get_opt(&kro_crd.name).await.unwrap().is_none().then_some(())
    })
    .await;
    // Generated by other tools: a field this host sets, with another value
    // (taking it over must force, or the apply conflicts).
    let mut go = kro_crd.manifest.clone();
    go["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
        json!("Kro is the Schema for the kroes API");
    let go: CustomResourceDefinition = serde_json::from_value(go).unwrap();
    let go_params = PostParams { field_manager: Some("service-provider-kro".into()), ..Default::default() };
    let uid = onboarding_crds.create(&go_params, &go).await.expect("the Go provider's CRD").metadata.uid;
    let (ok, stderr) = output(init_command_for(&plugin(), &kubeconfig, &pod_ns, &provider, &args)).await;
    assert!(!ok && stderr.contains("--adopt-from \"service-provider-kro\""), "{stderr}");
    let (ok, stderr) = output(init_command_for(&plugin(), &kubeconfig, &pod_ns, &provider, &adopting)).await;
    assert!(ok, "{stderr}");
    let after = onboarding_crds.get(&kro_crd.name).await.unwrap();
    assert_eq!(after.metadata.uid, uid, "updated in place");
    let managers: Vec<String> =
        after.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m.starts_with("service-provider-host")), "now the host's: {managers:?}");
    let description = after.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
    assert!(description.and_then(|s| s.description.as_deref()).is_some_and(|d| d.starts_with("A tenant's request")));

    // A kind only a tenant's cluster serves is checked against that
    // cluster's discovery (this onboarding cluster stands in for one).
    let kro = "kro.services.open-control-plane.io/v1alpha1";
    let wrong = service_provider_sdk::contract::ApiKind::new(
        "kro.services.open-control-plane.io",
        "v1alpha1",
        "Kro",
        "providerconfigs",
        true,
    );
    let verify = service_provider_host::clusters::kinds::verify;
    let err = verify(&onboarding_client, ContractCluster::ControlPlane, kro, &[&wrong]).await.unwrap_err().to_string();
    assert!(err.contains("its plural is \"kroes\", not \"providerconfigs\""), "{err}");
    let right = service_provider_sdk::contract::ApiKind { plural: "kroes".into(), ..wrong.clone() };
    assert!(verify(&onboarding_client, ContractCluster::ControlPlane, kro, &[&right]).await.unwrap());
    assert!(!verify(&onboarding_client, ContractCluster::ControlPlane, "kro.run/v1alpha1", &[&right]).await.unwrap());
    simulator.stop().await;
}

#[test]
fn a_missing_pod_namespace_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .args(["init", "--provider-name", "kro"])
        .arg("--plugin")
        .arg(plugin())
        .env_remove("POD_NAMESPACE")
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("POD_NAMESPACE is not set"), "{stderr}");
}
