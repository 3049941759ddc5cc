//! The real Flux chain end to end (issue #11): the host's controller with the
//! Kro component, exactly as in production, against the real
//! source-controller and helm-controller. The chart comes from a local
//! registry that requires credentials; kro is installed onto each test's own
//! ControlPlane cluster through the AccessRequest's kubeconfig Secret. Only
//! openmcp (the simulator) and the ControlPlane's kubelet (Deployments are
//! marked Available) are stand-ins.
//!
//! A test binary of its own: the real controllers act on every namespace of
//! the platform cluster, so the Flux simulator must not run next to them.
//! `ignored` (with the reason) when the Flux binaries were not built;
//! `TESTBED_REQUIRE_FLUX=1` (CI, `task test`) makes that a failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use guest_kro::desired::chart_pull_secret_copy_name;
use host_test_support::real_flux::*;
use host_test_support::*;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use service_provider_host::owner::LABEL_PROVIDER;

/// The source Secret named as `chartPullSecret`.
const PULL: &str = "registry-credentials";
/// An image pull Secret named in `helmValues.imagePullSecrets`.
const IMAGE_PULL: &str = "kro-image-pull";
const AR_NAME: &str = "kro.services.open-control-plane.io--mcp-01--mcp";

/// The `status.resources` entry of `kind`.
fn resource<'a>(kro: &'a Value, kind: &str) -> &'a Value {
    kro["status"]["resources"].as_array().and_then(|r| r.iter().find(|r| r["kind"] == kind)).unwrap_or(&Value::Null)
}

fn message(value: &Value) -> &str {
    value["message"].as_str().unwrap_or_default()
}

/// A version of the kro chart in the local registry, pulled with [`PULL`].
fn pulled_with_secret(f: &Fixture, version: &str, chart: &str) -> Value {
    let mut entry = f.registry_version(version, chart);
    entry["chartPullSecret"] = json!(PULL);
    entry
}

/// The Kro `mcp-01` of `version` Ready (the operator started).
async fn ready_kro(f: &mut Fixture, versions: Value, version: &str) -> Value {
    f.provider_config(versions).await;
    if !f.operator_running() {
        f.start_operator().await;
    }
    f.create_kro("mcp-01", version).await;
    let started = Instant::now();
    let kro = f.wait_ready("mcp-01").await;
    eprintln!("real-flux: Kro Ready after {:?}", started.elapsed());
    kro
}

async fn secret(api: &Api<Secret>, name: &str) -> Secret {
    api.get(name).await.unwrap_or_else(|e| panic!("Secret {name}: {e}"))
}

fn rgd(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": name},
        "spec": {"schema": {"apiVersion": "v1alpha1", "kind": "WebApp", "spec": {"name": "string"}}}
    }))
    .unwrap()
}

testbed::real_flux_test! {
    /// Scenarios 2 and 1: the registry requires credentials. Without a pull
    /// secret, and with one the registry refuses, the pull fails and the Kro
    /// says what to fix; with the right credentials in the source Secret, the
    /// copy the host makes in the tenant namespace is what source-controller
    /// pulls with, and kro ends up installed on the ControlPlane.
    async fn the_pull_secret_copy_lets_flux_pull_and_kro_is_installed_on_the_control_plane() {
        let test_started = Instant::now();
        let mut f = Fixture::with_real_flux(&["mcp-01"]).await;
        let (url, tenant, copy) = (f.chain().kro_chart_url(), f.tenant("mcp-01"), chart_pull_secret_copy_name(PULL));
        f.provider_config(json!([f.registry_version("v0.9.1", "0.9.1")])).await;
        f.start_operator().await;
        f.create_kro("mcp-01", "v0.9.1").await;

        // No chartPullSecret: the registry refuses, the Kro says what to set.
        let hint = format!(
            "the registry refused to serve chart {url}:0.9.1 without credentials: set chartPullSecret of version \
             v0.9.1 of ProviderConfig {} to a Secret of type kubernetes.io/dockerconfigjson in namespace {} that \
             may pull it (Flux: failed to determine artifact digest: GET ",
            f.provider, f.pod_ns
        );
        let kro = f
            .wait_kro("mcp-01", "the refused pull explained", |k| message(resource(k, "OCIRepository")).starts_with(&hint))
            .await;
        let shown = message(resource(&kro, "OCIRepository")).to_string();
        eprintln!("real-flux: without a pull secret the Kro shows: {shown}");
        eprintln!("real-flux: ... and for the HelmRelease: {}", resource(&kro, "HelmRelease"));
        assert!(shown.contains("UNAUTHORIZED: authentication required"), "{shown}");
        assert_eq!(kro["status"]["phase"], "Progressing");
        assert_eq!(
            ready(&kro)["message"],
            format!("Waiting for managed resources to become ready: OCIRepository kro-oci-repository: {shown}")
        );
        // What the plugin used to misread: a failed reconcile leaves
        // status.observedGeneration at -1.
        let repo = f.flux_object("OCIRepository", "mcp-01").await.expect("OCIRepository");
        assert_eq!(repo["status"]["observedGeneration"], -1, "{}", repo["status"]);

        // Credentials the registry refuses: the Kro names the Secret to fix.
        f.registry_credentials(PULL, Some("not-the-password")).await;
        f.provider_config(json!([pulled_with_secret(&f, "v0.9.1", "0.9.1")])).await;
        let hint = format!(
            "the registry refused the credentials of Secret {}/{PULL} (chartPullSecret of version v0.9.1 of \
             ProviderConfig {}, copied to {tenant}/{copy}) for chart {url}:0.9.1: update that Secret with \
             credentials that may pull it (Flux: ",
            f.pod_ns, f.provider
        );
        let kro = f
            .wait_kro("mcp-01", "the refused credentials explained", |k| {
                message(resource(k, "OCIRepository")).starts_with(&hint)
            })
            .await;
        eprintln!("real-flux: with refused credentials the Kro shows: {}", message(resource(&kro, "OCIRepository")));

        // The right credentials, rotated into the source Secret: the host's
        // copy follows, and Flux pulls with it (its spec does not change).
        let rotated = Instant::now();
        f.registry_credentials(PULL, None).await;
        let kro = f.wait_ready("mcp-01").await;
        eprintln!("real-flux: Ready {:?} after the credentials were fixed", rotated.elapsed());

        // Scenario 1: everything Ready, on both clusters.
        assert_eq!(ready(&kro)["reason"], "ReconcileSuccess");
        assert_eq!(kro["status"]["observedGeneration"], kro["metadata"]["generation"]);
        assert!(kro["status"]["resources"].as_array().unwrap().iter().all(|r| r["phase"] == "Ready"), "{kro:#}");
        let source = secret(&Api::namespaced(f.platform.clone(), &f.pod_ns), PULL).await;
        let copied = secret(&Api::namespaced(f.platform.clone(), &tenant), &copy).await;
        assert_eq!(copied.type_.as_deref(), Some(DOCKER_CONFIG_JSON));
        assert_eq!(copied.data, source.data, "the copy holds the source's credentials");
        assert_eq!(copied.metadata.labels.unwrap_or_default().get(LABEL_PROVIDER), Some(&f.provider));

        let repo = f.flux_object("OCIRepository", "mcp-01").await.expect("OCIRepository");
        assert!(flux_ready(&repo), "{}", repo["status"]);
        assert_eq!(repo["spec"]["secretRef"]["name"], copy.as_str(), "Flux pulls with the host's copy");
        assert_eq!(repo["status"]["artifact"]["revision"], f.chart("0.9.1").revision(), "the pushed chart");
        assert!(repo["metadata"]["finalizers"].as_array().unwrap().iter().any(|x| x == FLUX_FINALIZER));

        let release = f.flux_object("HelmRelease", "mcp-01").await.expect("HelmRelease");
        assert!(flux_ready(&release), "{}", release["status"]);
        let ar = f.access_requests("mcp-01").get(AR_NAME).await.expect("AccessRequest");
        assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], ar.data["status"]["secretRef"]["name"]);
        assert_eq!(latest_release(&release)["chartVersion"], chart_version_of(f.chart("0.9.1")));
        assert_eq!(latest_release(&release)["status"], "deployed");

        let deployment = f.kro_deployment().await.expect("kro-system/kro on the ControlPlane");
        let image = deployment.spec.template.spec.unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("registry.k8s.io/kro/kro:0.9.1"));
        let crd = f.rgd_crd().await.expect("kro's CRD on the ControlPlane");
        assert!(testbed::crds::is_established(&crd), "{RGD_CRD} Established");
        let record = f.control_plane_secret(KRO_SYSTEM, "sh.helm.release.v1.kro.v1").await.expect("Helm's record");
        assert_eq!(record.type_.as_deref(), Some("helm.sh/release.v1"));

        f.stop_operator().await;
        eprintln!("real-flux: pull-secret test took {:?}", test_started.elapsed());
    }
}

testbed::real_flux_test! {
    /// Scenarios 3 and 4: `imagePullSecrets` from `helmValues` are copied
    /// into `kro-system` and kro's Deployment refers to them; then an
    /// upgrade to the other chart version, Ready again only with the new
    /// revision installed.
    async fn image_pull_secrets_land_in_kro_system_and_an_upgrade_is_ready_with_the_new_revision() {
        let test_started = Instant::now();
        let mut f = Fixture::with_real_flux(&["mcp-01"]).await;
        f.registry_credentials(PULL, None).await;
        f.source_secret(IMAGE_PULL, DOCKER_CONFIG_JSON, r#"{"auths":{"images.example":{"auth":"dXNlcjpwYXNz"}}}"#)
            .await;
        let with_image_pull = |version: &str, chart: &str| {
            let mut entry = pulled_with_secret(&f, version, chart);
            entry["helmValues"] = json!({"imagePullSecrets": [{"name": IMAGE_PULL}]});
            entry
        };
        let versions = json!([with_image_pull("v0.9.1", "0.9.1"), with_image_pull("v0.9.3", "0.9.3")]);
        ready_kro(&mut f, versions, "v0.9.1").await;

        // Scenario 3.
        let copy = f.control_plane_secret(KRO_SYSTEM, IMAGE_PULL).await.expect("the copy in kro-system");
        let source = secret(&Api::namespaced(f.platform.clone(), &f.pod_ns), IMAGE_PULL).await;
        assert_eq!(copy.type_.as_deref(), Some(DOCKER_CONFIG_JSON));
        assert_eq!(copy.data, source.data);
        assert_eq!(copy.metadata.labels.unwrap_or_default().get(LABEL_PROVIDER), Some(&f.provider));
        let pod_spec = |d: k8s_openapi::api::apps::v1::Deployment| d.spec.template.spec.unwrap();
        let pulls = |spec: &k8s_openapi::api::core::v1::PodSpec| {
            spec.image_pull_secrets.iter().flatten().map(|s| s.name.clone()).collect::<Vec<_>>()
        };
        let spec = pod_spec(f.kro_deployment().await.expect("kro Deployment"));
        assert_eq!(pulls(&spec), [IMAGE_PULL], "kro's Deployment refers to the copy");

        // Scenario 4: the tenant asks for the other version.
        let (old, new) = (f.chart("0.9.1"), f.chart("0.9.3"));
        let upgrade_started = Instant::now();
        f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.3"}})).await;
        let at_2 = |k: &Value| k["status"]["observedGeneration"] == 2;
        f.wait_kro("mcp-01", "Progressing for generation 2", |k| at_2(k) && k["status"]["phase"] == "Progressing")
            .await;
        let kro = f.wait_kro("mcp-01", "Ready for generation 2", |k| at_2(k) && k["status"]["phase"] == "Ready").await;
        // Read right after the Kro turned Ready: already the new revision.
        let repo = f.flux_object("OCIRepository", "mcp-01").await.expect("OCIRepository");
        let release = f.flux_object("HelmRelease", "mcp-01").await.expect("HelmRelease");
        eprintln!("real-flux: upgrade to Ready took {:?}", upgrade_started.elapsed());
        assert!(kro["status"]["resources"].as_array().unwrap().iter().all(|r| r["phase"] == "Ready"));
        assert!(flux_ready(&repo), "{}", repo["status"]);
        assert_eq!(repo["spec"]["ref"]["tag"], "0.9.3");
        assert_eq!(repo["status"]["artifact"]["revision"], new.revision());
        assert!(flux_ready(&release), "{}", release["status"]);
        assert_eq!(latest_release(&release)["chartVersion"], chart_version_of(new), "{}", release["status"]);
        // What the plugin compares with the OCIRepository's artifact revision.
        assert_eq!(release["status"]["lastAttemptedRevisionDigest"], new.digest.as_str());
        assert_eq!(latest_release(&release)["status"], "deployed");
        assert_eq!(release["status"]["history"][1]["chartVersion"], chart_version_of(old));
        let ready_condition = release["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready");
        assert_eq!(ready_condition.unwrap()["reason"], "UpgradeSucceeded");
        let deployment = f.kro_deployment().await.expect("kro Deployment");
        let spec = pod_spec(deployment);
        assert_eq!(spec.containers[0].image.as_deref(), Some("registry.k8s.io/kro/kro:0.9.3"));
        assert_eq!(pulls(&spec), [IMAGE_PULL], "still referred to after the upgrade");
        assert!(f.control_plane_secret(KRO_SYSTEM, "sh.helm.release.v1.kro.v2").await.is_some(), "second record");

        f.stop_operator().await;
        eprintln!("real-flux: image-pull/upgrade test took {:?}", test_started.elapsed());
    }
}

/// Scenario 5: deletion is blocked while a ResourceGraphDefinition (of the
/// CRD the chart installed) exists; then helm-controller uninstalls kro from
/// the ControlPlane while the host still grants access (had the access gone
/// first, helm-controller would have skipped the uninstall and kro's
/// Deployment would stay), and nothing is left behind. `which` names the
/// plugin in the output.
async fn install_block_and_uninstall(plugin: service_provider_host::plugin::sandbox::Plugin, which: &str) {
    let test_started = Instant::now();
    let mut f = Fixture::with_real_flux(&["mcp-01"]).await;
    f.start_operator_with(plugin).await;
    f.registry_credentials(PULL, None).await;
    let versions = json!([pulled_with_secret(&f, "v0.9.1", "0.9.1")]);
    ready_kro(&mut f, versions, "v0.9.1").await;
    let tenant = f.tenant("mcp-01");
    let rgds: Api<DynamicObject> = Api::all_with(f.control_plane.clone(), &rgd_resource());
    rgds.create(&PostParams::default(), &rgd("webapp")).await.expect("an RGD of the installed kro CRD");

    f.delete_kro("mcp-01").await;
    let kro = f
        .wait_kro("mcp-01", "deletion blocked", |k| {
            message(ready(k)).contains("waiting for 1 kro ResourceGraphDefinition(s) to be removed")
        })
        .await;
    assert_eq!(kro["status"]["phase"], "Terminating");
    let release = f.flux_object("HelmRelease", "mcp-01").await.expect("kro stays while an RGD exists");
    assert!(release["metadata"]["deletionTimestamp"].is_null());
    assert!(f.kro_deployment().await.is_some());

    let deleting = Instant::now();
    rgds.delete("webapp", &DeleteParams::default()).await.expect("RGD deleted");
    f.wait_gone("mcp-01").await;
    eprintln!("real-flux: deletion took {:?} after the RGD went", deleting.elapsed());

    // Uninstalled from the ControlPlane: the uninstall ran with access.
    assert!(f.kro_deployment().await.is_none(), "helm-controller uninstalled kro");
    assert_eq!(f.control_plane_secrets(KRO_SYSTEM).await, Vec::<String>::new(), "no Helm record, no copies");
    let cp = &f.control_plane;
    let account = Api::<ServiceAccount>::namespaced(cp.clone(), KRO_SYSTEM).get_opt("kro").await.unwrap();
    assert!(account.is_none(), "kro's ServiceAccount is uninstalled");
    let role = Api::<ClusterRole>::all(cp.clone()).get_opt("kro-cluster-role").await.unwrap();
    let binding = Api::<ClusterRoleBinding>::all(cp.clone()).get_opt("kro-cluster-role-binding").await.unwrap();
    assert!(role.is_none() && binding.is_none(), "kro's RBAC is uninstalled");
    // What Helm leaves by design (as with the Go provider): the CRDs of
    // the chart's crds/ directory, and the namespace it created.
    assert!(f.rgd_crd().await.is_some(), "Helm never deletes the CRDs of a chart's crds/ directory");
    assert!(Api::<Namespace>::all(cp.clone()).get_opt(KRO_SYSTEM).await.unwrap().is_some());
    // Nothing left on the platform either.
    assert!(f.flux_object("HelmRelease", "mcp-01").await.is_none());
    assert!(f.flux_object("OCIRepository", "mcp-01").await.is_none(), "source-controller's finalizer went too");
    assert!(f.access_requests("mcp-01").get_opt(AR_NAME).await.unwrap().is_none(), "access revoked");
    assert_eq!(f.platform_secrets(&tenant).await, Vec::<String>::new(), "no kubeconfig, no pull-secret copy");

    f.stop_operator().await;
    eprintln!("real-flux: deletion test with {which} took {:?}", test_started.elapsed());
}

testbed::real_flux_test! {
    /// Scenario 5 with guest-kro.
    async fn deletion_waits_for_rgds_then_kro_is_uninstalled_before_access_is_revoked() {
        install_block_and_uninstall(host_test_support::plugins::plugin(), "guest-kro").await;
    }
}

testbed::real_flux_test! {
    /// Scenario 5 with guest-kro's Go port (examples/go-kro): the same
    /// install, blocked deletion and uninstall through the real Flux chain.
    async fn the_go_port_installs_kro_and_uninstalls_it_after_the_rgds() {
        install_block_and_uninstall(host_test_support::plugins::go_kro_plugin(), "go-kro").await;
    }
}

testbed::real_flux_test! {
    /// Deletion while the ControlPlane does not answer: helm-controller can
    /// neither uninstall nor give up while the kubeconfig Secret exists, so
    /// waiting for the HelmRelease before revoking access would wait
    /// forever. The host waits a grace period for the cluster (saying so),
    /// then continues without it and revokes its access first; the
    /// HelmRelease then goes and the deletion completes.
    async fn deletion_with_an_unreachable_control_plane_completes_after_the_grace_period() {
        let test_started = Instant::now();
        let mut f = Fixture::with_real_flux(&["mcp-01"]).await;
        f.registry_credentials(PULL, None).await;
        let grace = Duration::from_secs(8);
        let ctx = f.context_tuned(plugin(), |settings| settings.unreachable_grace = grace).await;
        f.start_operator_on(Arc::new(ctx));
        let versions = json!([pulled_with_secret(&f, "v0.9.1", "0.9.1")]);
        ready_kro(&mut f, versions, "v0.9.1").await;
        let tenant = f.tenant("mcp-01");

        f.cp.stop();
        let deleting = Instant::now();
        f.delete_kro("mcp-01").await;
        let kro = f
            .wait_kro("mcp-01", "the unreachable ControlPlane reported", |k| {
                message(ready(k)).starts_with("the ControlPlane does not answer (")
            })
            .await;
        let shown = message(ready(&kro)).to_string();
        eprintln!("real-flux: the Kro shows: {shown}");
        assert!(shown.ends_with(&format!(
            "deletion waits up to {}s for it, then continues without it (whatever the service installed there is \
             then left behind)",
            grace.as_secs()
        )));
        assert_eq!(kro["status"]["phase"], "Terminating");
        assert!(f.access_requests("mcp-01").get_opt(AR_NAME).await.unwrap().is_some(), "access kept during the grace");

        f.wait_gone("mcp-01").await;
        let took = deleting.elapsed();
        eprintln!("real-flux: deletion with an unreachable ControlPlane took {took:?}");
        assert!(took >= grace, "not before the grace period ended");
        assert!(f.flux_object("HelmRelease", "mcp-01").await.is_none(), "the HelmRelease let go");
        assert!(f.flux_object("OCIRepository", "mcp-01").await.is_none());
        assert!(f.access_requests("mcp-01").get_opt(AR_NAME).await.unwrap().is_none());
        assert_eq!(f.platform_secrets(&tenant).await, Vec::<String>::new());

        f.stop_operator().await;
        eprintln!("real-flux: unreachable-ControlPlane test took {:?}", test_started.elapsed());
    }
}

testbed::real_flux_test! {
    /// On openmcp-operator v1.3.0 with the test cluster provider (#26):
    /// the kubeconfig helm-controller installs kro with is a ServiceAccount
    /// token with exactly the Kro plugin's ControlPlane rules, and that is
    /// enough for the whole chart (CRDs, RBAC, Deployment, Helm's release
    /// record) and for the uninstall.
    async fn on_openmcp_helm_installs_and_uninstalls_kro_with_the_scoped_token() {
        let mut f = Fixture::with_real_flux_on_openmcp(&["mcp-01"]).await;
        f.registry_credentials(PULL, None).await;
        let versions = json!([pulled_with_secret(&f, "v0.9.1", "0.9.1")]);
        let kro = ready_kro(&mut f, versions, "v0.9.1").await;
        assert_eq!(ready(&kro)["reason"], "ReconcileSuccess");

        let ar = f.access_requests("mcp-01").get(AR_NAME).await.expect("AccessRequest");
        assert_eq!(ar.metadata.labels.as_ref().unwrap()["clusters.openmcp.cloud/provider"], "envtest");
        let secret_name = ar.data["status"]["secretRef"]["name"].as_str().unwrap().to_string();
        let kubeconfig = secret(&Api::namespaced(f.platform.clone(), &f.tenant("mcp-01")), &secret_name).await;
        let text = String::from_utf8(kubeconfig.data.unwrap()["kubeconfig"].0.clone()).unwrap();
        assert!(text.contains("token:") && !text.contains("client-key"), "helm-controller installs with a token");
        let release = f.flux_object("HelmRelease", "mcp-01").await.expect("HelmRelease");
        assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], secret_name.as_str());
        assert_eq!(latest_release(&release)["status"], "deployed");
        assert!(f.kro_deployment().await.is_some(), "kro-system/kro on the ControlPlane");
        assert!(f.rgd_crd().await.is_some(), "kro's CRD on the ControlPlane");

        f.delete_kro("mcp-01").await;
        f.wait_gone("mcp-01").await;
        assert!(f.kro_deployment().await.is_none(), "kro uninstalled with the same token");
        assert!(f.control_plane_secret(KRO_SYSTEM, "sh.helm.release.v1.kro.v1").await.is_none(), "no Helm record");
        f.stop_operator().await;
    }
}

testbed::real_flux_test! {
    /// On openmcp-operator (#26), the proof that the token is what Helm
    /// installs with: the operator's grant takes the Deployment rule out of
    /// the Kro plugin's ControlPlane token, helm-controller's install of the
    /// kro chart is refused by RBAC, and the Kro's status says so in Helm's
    /// and the API server's words.
    async fn on_openmcp_a_token_rule_taken_away_fails_the_helm_install_clearly() {
        use service_provider_host::plugin::grant::Effective;
        use service_provider_host::plugin::plan::Planner;

        let mut f = Fixture::with_real_flux_on_openmcp(&["mcp-01"]).await;
        f.registry_credentials(PULL, None).await;
        f.provider_config(json!([pulled_with_secret(&f, "v0.9.1", "0.9.1")])).await;
        let kro = host_test_support::plugins::plugin();
        let (grant, _) = host_test_support::plugins::built_in_grant_without(&kro, "deployments");
        let granted = Effective::for_component(kro.descriptor(), kro.digest(), grant).expect("grant fits");
        let ctx = f.context_for(Planner { plugin: kro, granted: Arc::new(granted) }, |_| {}).await;
        f.start_operator_on(Arc::new(ctx));
        f.create_kro("mcp-01", "v0.9.1").await;

        let refused = |k: &Value| message(resource(k, "HelmRelease")).contains("forbidden");
        let kro = f.wait_kro("mcp-01", "Helm's install refused by RBAC", refused).await;
        let shown = message(resource(&kro, "HelmRelease")).to_string();
        eprintln!("real-flux on openmcp: without the Deployment rule the Kro shows: {shown}");
        assert!(shown.contains("deployments"), "{shown}");
        assert!(shown.contains("system:serviceaccount:accessrequests:"), "the token's identity: {shown}");
        assert!(f.kro_deployment().await.is_none(), "nothing of kro's Deployment on the ControlPlane");

        f.delete_kro("mcp-01").await;
        f.wait_gone("mcp-01").await;
        f.stop_operator().await;
    }
}
