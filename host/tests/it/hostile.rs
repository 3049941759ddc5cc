//! A hostile plugin in the real host on real API servers: every attack of
//! `tests/plugins/hostile` is refused for its own instance (a condition that
//! names the rule, a Warning Event, nothing written or copied), while a
//! healthy instance served by the same host gets Ready and the controller
//! keeps running.

use std::time::Duration;

use host_test_support::plugins::{self, HOSTILE};
use host_test_support::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use service_provider_host::plugin::grant::{COPY_SOURCE_LABEL, COPY_TO_ANNOTATION, Effective, Grant};
use service_provider_host::plugin::plan::Planner;
use service_provider_host::plugin::sandbox::Limits;

const DOCKER: &str = "kubernetes.io/dockerconfigjson";

pub(super) fn options(instances: &[&str]) -> Options {
    Options { instances: instances.iter().map(|s| s.to_string()).collect(), flux_ready: false, workload: false }
}

/// The sources the attacks reach for, next to the one the ProviderConfig
/// allows, and the ProviderConfig (which names the chart registry the
/// attacks' own sources pull from).
pub(super) async fn source_secrets(f: &Fixture) {
    f.source_secret("registry", DOCKER, "{\"auths\":{}}").await;
    f.source_secret("unlisted", DOCKER, "{\"auths\":{\"private\":{}}}").await;
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.pod_ns);
    for (name, type_, key, annotations) in [
        ("onboarding-kubeconfig", "Opaque", "kubeconfig", None),
        (
            "sa-token",
            "kubernetes.io/service-account-token",
            "token",
            Some([("kubernetes.io/service-account.name".to_string(), "default".to_string())].into()),
        ),
    ] {
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), annotations, ..Default::default() },
            type_: Some(type_.into()),
            data: Some([(key.to_string(), ByteString(b"platform-secret-material".to_vec()))].into()),
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &secret).await.expect("source Secret");
    }
    // A registry credential for the platform's source-controller only.
    let platform_only = Secret {
        metadata: ObjectMeta {
            name: Some(hostile_plugin::PLATFORM_ONLY_SOURCE.into()),
            labels: Some([(COPY_SOURCE_LABEL.to_string(), f.provider.clone())].into()),
            annotations: Some([(COPY_TO_ANNOTATION.to_string(), "platform".to_string())].into()),
            ..Default::default()
        },
        type_: Some(DOCKER.into()),
        data: Some([(".dockerconfigjson".to_string(), ByteString(b"{\"auths\":{}}".to_vec()))].into()),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &platform_only).await.expect("a platform-only source");
    f.provider_config(json!([{"version": "v1", "chartVersion": "1", "chartPullSecret": "registry",
        "chartURL": "oci://registry.example/charts/x"}]))
        .await;
}

/// The large copy sources of the copy attacks: 700 KB each (933 KB as the
/// API sends them, base64), labelled as
/// sources of this provider.
pub(super) async fn burst_sources(f: &Fixture) {
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.pod_ns);
    let auths = format!("{{\"auths\":{{}},\"pad\":\"{}\"}}", "x".repeat(700_000));
    for name in hostile_plugin::BURST_SOURCES {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(COPY_SOURCE_LABEL.to_string(), f.provider.clone())].into()),
                ..Default::default()
            },
            type_: Some(DOCKER.into()),
            data: Some([(".dockerconfigjson".to_string(), ByteString(auths.clone().into_bytes()))].into()),
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &secret).await.expect("a large copy source");
    }
}

async fn ready_condition(f: &Fixture, name: &str, reason: &str) -> Value {
    let kro = f.wait_kro(name, &format!("Ready=False {reason}"), |k| ready(k)["reason"] == reason).await;
    ready(&kro).clone()
}

#[tokio::test]
async fn hostile_instances_are_refused_while_a_healthy_one_gets_ready() {
    // (instance, Ready reason, words the message must contain)
    let attacks: &[(&str, &str, &str)] = &[
        ("copy-kubeconfig", "CapabilityDenied", "no-credential-copies"),
        ("copy-token", "CapabilityDenied", "no-credential-copies"),
        ("copy-unlisted", "CapabilityDenied", "not an allowed copy source"),
        ("copy-untyped", "PluginError", "must state the Secret type"),
        ("copy-platform-only", "CapabilityDenied", "allows copies only to platform (rule copy-to)"),
        ("exec-kubeconfig", "CapabilityDenied", "no-secret-objects"),
        ("grant-crb", "CapabilityDenied", "no-cluster-power"),
        ("grant-kube-system", "CapabilityDenied", "no-system-namespaces"),
        ("grant-access-request", "CapabilityDenied", "no-openmcp-objects"),
        ("grant-crd", "CapabilityDenied", "no-foreign-crds"),
        ("grant-onboarding", "CapabilityDenied", "no-onboarding-writes"),
        ("grant-release-platform", "CapabilityDenied", "/spec/kubeConfig/secretRef/name must be set"),
        ("bad-labels", "PluginError", "metadata.labels is not an object"),
        ("hoard", "PluginError", "memory limit of 64 MiB"),
        ("huge-output", "PluginError", "exceeded its output limit of 4194304 bytes"),
        ("many-objects", "PluginError", "limit of 256 objects"),
        ("adopt", "Conflict", "does not take over objects it did not create"),
        ("flux-cloud-identity", "CapabilityDenied", "field /spec/provider must be one of [\"generic\"]"),
        ("flux-service-account", "CapabilityDenied", "field /spec/serviceAccountName must not be set"),
        ("flux-values-from", "CapabilityDenied", "field /spec/valuesFrom must not be set (rule flux-no-platform-data)"),
        ("flux-foreign-source", "CapabilityDenied", "field /spec/chartRef must refer to an object of the same plan"),
        ("copy-kind", "CapabilityDenied", "field /spec/secretRef/name must be one of []"),
        ("status-too-many", "PluginError", "status has 17 conditions, more than 16"),
        ("status-forged", "PluginError", "status.conditions[0].reason \"Fine Ready: True (ReconcileSuccess)\" is not"),
        ("flood-values-huge", "PluginError", "more than the limit of 1048576 bytes per plan"),
        ("forge-transient", "PluginError", "upstream failed ERROR service_provider_host: forged line"),
        ("transient-huge", "PluginError", "upstream said: xxxxxxxx"),
        ("flux-foreign-url", "CapabilityDenied", "field /spec/url must be one of"),
        ("flux-fast-poll", "CapabilityDenied", "field /spec/interval must be at least 30s"),
        ("copy-twice", "PluginError", "Secret registry is copied to the platform cluster more than once"),
        ("copy-heavy", "PluginError", "more than the limit of 2097152 bytes per plan"),
    ];
    let mut names: Vec<&str> = attacks.iter().map(|a| a.0).collect();
    names.extend([
        "healthy-1",
        "read-secrets",
        "read-annotations",
        "url-delete-collection",
        "status-pileup",
        "status-long",
        "forge-message",
        "read-foreign-release",
    ]);
    let mut f = Fixture::new(options(&names)).await;
    source_secrets(&f).await;
    burst_sources(&f).await;

    // An admin's own HelmRelease where the `adopt` attack plans one.
    // (The openmcp simulator made its tenant namespace when it registered
    // the ControlPlane.)
    let adopt_tenant = f.tenant("adopt");
    let admins: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "admin-release", "namespace": adopt_tenant, "labels": {"owner": "admin"}},
        "spec": {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "mine"}},
    }))
    .unwrap();
    f.flux_objects("HelmRelease", "adopt").create(&PostParams::default(), &admins).await.expect("admin's release");

    // A Secret an admin keeps in a tenant namespace, whose name a ConfigMap
    // copy takes; the ConfigMap source is allowed (labelled).
    let foreign = Secret {
        metadata: ObjectMeta { name: Some(hostile_plugin::FOREIGN_SECRET.into()), ..Default::default() },
        string_data: Some([("password".to_string(), "platform-secret-material".to_string())].into()),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.tenant("copy-kind"));
    secrets.create(&PostParams::default(), &foreign).await.expect("the admin's Secret");
    let settings = ConfigMap {
        metadata: ObjectMeta {
            name: Some(hostile_plugin::CONFIG_MAP_SOURCE.into()),
            labels: Some([(COPY_SOURCE_LABEL.to_string(), f.provider.clone())].into()),
            ..Default::default()
        },
        data: Some([("a".to_string(), "b".to_string())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(f.platform.clone(), &f.pod_ns)
        .create(&PostParams::default(), &settings)
        .await
        .expect("a ConfigMap copy source");
    // A Secret on the ControlPlane applied with kubectl: its
    // last-applied-configuration annotation holds its data.
    let applied = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied","namespace":"default"},"stringData":{"token":"s3cr3t-token"}}"#;
    let applied_secret = Secret {
        metadata: ObjectMeta {
            name: Some("applied".into()),
            annotations: Some(
                [("kubectl.kubernetes.io/last-applied-configuration".to_string(), applied.to_string())].into(),
            ),
            ..Default::default()
        },
        string_data: Some([("token".to_string(), "s3cr3t-token".to_string())].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(f.control_plane.clone(), "default")
        .create(&PostParams::default(), &applied_secret)
        .await
        .expect("a kubectl-applied Secret on the ControlPlane");

    // Another provider's HelmRelease in a tenant namespace, with a value
    // that is none of this plugin's business.
    let foreign_release: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "other-release", "namespace": f.tenant("read-foreign-release"),
            "labels": {"service-provider.open-control-plane.io/provider": "another-provider"}},
        "spec": {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "theirs"},
            "values": {"password": "other-providers-secret"}},
    }))
    .unwrap();
    let releases = f.flux_objects("HelmRelease", "read-foreign-release");
    releases.create(&PostParams::default(), &foreign_release).await.expect("another provider's release");

    let hostile = plugins::load(HOSTILE, Limits::default());
    // What the plugin asked for and the default grant does not give: never
    // made or requested, and said so at start-up.
    let err = Effective::new(hostile.descriptor(), Grant::default_grant()).unwrap_err();
    assert!(err.to_string().contains("pins no identity for plugin \"hostile\""), "{err}");
    let granted = Effective::new(hostile.descriptor(), plugins::grant_for(&hostile)).unwrap();
    let refused = granted.refused.join("\n");
    for expected in ["\"all-secrets\"", "no-secret-data", "no-wildcard-tokens", "a workload cluster"] {
        assert!(refused.contains(expected), "{expected} not reported in: {refused}");
    }
    let observed: Vec<&str> = granted.observations.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(
        observed,
        ["releases", "cp-secrets"],
        "HelmReleases in its tenant namespace, metadata on the ControlPlane"
    );
    assert!(!granted.workload_cluster);

    f.start_operator_with(hostile).await;
    for name in &names {
        f.create_kro(name, "v1").await;
    }
    let healthy = f.wait_ready("healthy-1").await;
    assert_eq!(ready(&healthy)["message"], "healthy");

    // Every attack is looked at (all of them at once, for as long as the
    // slowest needs), and every one not refused as it must be is named.
    let deadline = std::time::Instant::now() + f.wait;
    let mut unrefused = Vec::new();
    for (name, reason, words) in attacks {
        let refused = |k: &Value| {
            ready(k)["reason"] == *reason && ready(k)["message"].as_str().unwrap_or_default().contains(words)
        };
        loop {
            let now = f.kro(name).await.unwrap_or_default();
            if refused(&now) {
                f.wait_event(name, "Warning", reason).await;
                break;
            }
            if std::time::Instant::now() > deadline {
                unrefused.push(format!("{name}: expected {reason} with {words:?}, its Ready is {}", ready(&now)));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert!(unrefused.is_empty(), "attacks not refused as they must be:\n{}", unrefused.join("\n"));
    // Secret data never reached the sandbox, so it cannot be in a status:
    // neither as an observation of Secrets nor through an annotation.
    let seen = f.wait_kro("read-secrets", "its report", |k| ready(k)["reason"] == "Observed").await;
    assert_eq!(ready(&seen)["message"], "observed secrets: none (not observed)");
    let seen = f.wait_kro("read-annotations", "its report", |k| ready(k)["reason"] == "Observed").await;
    let message = ready(&seen)["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("\"applied\""), "the Secret's metadata was observed: {message}");
    assert!(!message.contains("s3cr3t") && !message.contains("last-applied"), "no annotation data: {message}");
    // Of another provider's objects in the tenant namespace, only metadata.
    let seen = f.wait_kro("read-foreign-release", "its report", |k| ready(k)["reason"] == "Observed").await;
    let message = ready(&seen)["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("\"other-release\""), "the release was observed: {message}");
    assert!(!message.contains("other-providers-secret"), "another provider's values: {message}");

    // What a plugin reports stays a status: new condition types on every
    // reconcile do not pile up (the ones no longer named go, oldest first),
    // and a message is cut to metav1.Condition's 32 KiB without the
    // terminal escapes it came with.
    let types = |k: &Value| -> Vec<String> {
        let conditions = k["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.iter().map(|c| c["type"].as_str().unwrap_or_default().to_string()).collect()
    };
    let piled = f.wait_kro("status-pileup", "its second report", |k| types(k).contains(&"Pile16x1".into())).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let piled = f.kro("status-pileup").await.unwrap_or(piled);
    let kept = types(&piled);
    assert_eq!(kept.len(), 16, "{kept:?}");
    assert!(kept.iter().all(|t| t == "Ready" || t.starts_with("Pile16x")), "{kept:?}");
    let long = f.wait_ready("status-long").await;
    let message = ready(&long)["message"].as_str().unwrap_or_default().to_string();
    assert!(message.len() <= 32 << 10 && message.ends_with('…'), "{} bytes", message.len());
    assert!(message.starts_with(" [2J [31mcleared") && !message.contains('\u{1b}'), "{}", &message[..40]);
    // Text from the plugin forges no row in `kubectl describe` or `kubectl
    // get events`: no line break reaches a condition or an Event note.
    let forged = f.wait_ready("forge-message").await;
    let message = ready(&forged)["message"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with("fine ") && !message.contains(['\n', '\r', '\u{1b}']), "{message:?}");
    for name in ["forge-message", "forge-transient"] {
        for event in f.events(name).await {
            let note = event.note.unwrap_or_default();
            assert!(!note.contains(['\n', '\r', '\u{1b}']), "{name}: Event note {note:?}");
        }
    }
    let transient = ready(&f.kro("forge-transient").await.unwrap()).clone();
    assert!(!transient["message"].as_str().unwrap_or_default().contains('\n'), "{transient}");
    // 3 MiB of a plugin's error text is cut to one line of 1,024
    // characters where the host takes it, before any log line, trace
    // event, condition or Event sees it.
    let huge = ready(&f.kro("transient-huge").await.unwrap())["message"].as_str().unwrap_or_default().to_string();
    assert!(huge.chars().count() <= 1025 && huge.ends_with('…'), "{} bytes", huge.len());

    // A plural that ends the path would have turned the deletion of the
    // plugin's own HelmRelease into a delete-collection of the namespace.
    let doomed_tenant = f.tenant("url-delete-collection");
    f.wait_ready("url-delete-collection").await;
    let admins_release = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "admin-release", "namespace": doomed_tenant},
        "spec": {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "mine"}},
    });
    let releases = f.flux_objects("HelmRelease", "url-delete-collection");
    releases.create(&PostParams::default(), &serde_json::from_value(admins_release).unwrap()).await.unwrap();
    f.delete_kro("url-delete-collection").await;
    let condition = ready_condition(&f, "url-delete-collection", "PluginError").await;
    assert!(condition["message"].as_str().unwrap().contains("plural \"helmreleases#\""), "{condition}");
    assert!(releases.get_opt("admin-release").await.unwrap().is_some(), "the admin's HelmRelease is still there");
    assert!(releases.get_opt(hostile_plugin::OWN_RELEASE).await.unwrap().is_some(), "nothing was deleted");

    // Nothing was written, copied or taken over anywhere.
    let cp = f.control_plane.clone();
    assert!(Api::<ClusterRoleBinding>::all(cp.clone()).get_opt("hostile-admin").await.unwrap().is_none());
    assert!(Api::<ConfigMap>::namespaced(cp.clone(), "kube-system").get_opt("hostile").await.unwrap().is_none());
    assert!(Api::<CustomResourceDefinition>::all(cp.clone()).get_opt("things.evil.example").await.unwrap().is_none());
    assert!(Api::<Namespace>::all(cp.clone()).get_opt("n0").await.unwrap().is_none());
    assert!(Api::<Secret>::namespaced(cp.clone(), "default").get_opt("stolen").await.unwrap().is_none());
    for name in ["copy-kubeconfig", "copy-unlisted", "copy-untyped"] {
        let copies: Api<Secret> = Api::namespaced(f.platform.clone(), &f.tenant(name));
        assert!(copies.get_opt("stolen").await.unwrap().is_none(), "{name}: nothing copied");
    }
    let ar_name = "kro.services.open-control-plane.io--exec-kubeconfig--mcp";
    let ar = f.access_requests("exec-kubeconfig").get(ar_name).await.unwrap();
    let kubeconfig_secret = ar.data["status"]["secretRef"]["name"].as_str().unwrap().to_string();
    let secret =
        Api::<Secret>::namespaced(f.platform.clone(), &f.tenant("exec-kubeconfig")).get(&kubeconfig_secret).await;
    let kubeconfig = String::from_utf8(secret.unwrap().data.unwrap()["kubeconfig"].0.clone()).unwrap();
    assert!(!kubeconfig.contains("exec"), "the AccessRequest's kubeconfig is untouched");
    assert!(!std::path::Path::new(hostile_plugin::EXEC_MARKER).exists(), "no command ran");
    let requests = f.access_requests("grant-access-request");
    assert!(requests.get_opt("hostile").await.unwrap().is_none(), "no AccessRequest of the plugin's");
    let releases = f.flux_objects("HelmRelease", "grant-release-platform");
    assert!(releases.get_opt("hostile").await.unwrap().is_none(), "no HelmRelease into the platform");
    assert!(f.kroes().get_opt("someone-elses").await.unwrap().is_none(), "no service object written");
    for name in ["flux-cloud-identity", "flux-service-account", "copy-kind"] {
        let sources = f.flux_objects("OCIRepository", name);
        assert!(sources.get_opt("x").await.unwrap().is_none(), "{name}: no OCIRepository applied");
    }
    let copies: Api<ConfigMap> = Api::namespaced(f.platform.clone(), &f.tenant("copy-kind"));
    assert!(copies.get_opt(hostile_plugin::FOREIGN_SECRET).await.unwrap().is_none(), "no ConfigMap copy made");
    let admins = f.flux_objects("HelmRelease", "adopt").get("admin-release").await.unwrap();
    assert_eq!(admins.metadata.labels.unwrap_or_default().len(), 1, "the admin's release was not taken over");
    assert_eq!(admins.data["spec"]["interval"], "5m");

    assert_eq!(ready(&f.kro("healthy-1").await.unwrap())["status"], "True", "the healthy instance stayed Ready");
    assert!(f.operator_running(), "the controller never stopped");
    f.stop_operator().await;
}

/// The Flux floor holds under a grant with no field rules, as `plugin
/// grant` writes one: every kind the plugin asks to write, nothing about
/// the fields. Without it, a HelmRelease without `kubeConfig` went to
/// helm-controller, to be installed into the platform cluster with its
/// rights, and one whose `valuesFrom` named the instance's kubeconfig
/// Secret would have handed the ControlPlane's token to the chart.
#[tokio::test]
async fn a_grant_without_field_rules_is_held_to_the_flux_floor() {
    // (instance, the rule that refuses it, words of its reason)
    let attacks: &[(&str, &str, &str)] = &[
        ("grant-release-platform", "flux-acts-on-the-instance", "field /spec/kubeConfig/secretRef/name must be set"),
        ("flux-values-from", "flux-no-platform-data", "field /spec/valuesFrom must not be set"),
        ("flux-service-account", "flux-no-platform-identity", "field /spec/serviceAccountName must not be set"),
        ("flux-cloud-identity", "flux-no-platform-identity", "field /spec/provider must be one of [\"generic\"]"),
        ("flux-foreign-source", "flux-own-sources", "field /spec/chartRef must refer to an object of the same plan"),
    ];
    let mut names: Vec<&str> = attacks.iter().map(|a| a.0).collect();
    names.push("healthy-1");
    let mut f = Fixture::new(options(&names)).await;
    source_secrets(&f).await;

    // The test grant with every field rule and field list taken out.
    let mut grant: Value = serde_saphyr::from_str(&plugins::grant_text_for("hostile")).expect("the test grant");
    for rule in grant["write"].as_array_mut().expect("write rules") {
        let rule = rule.as_object_mut().expect("a rule");
        rule.remove("fields");
        rule.remove("onlyFields");
    }
    let grant = Grant::parse(&grant.to_string()).expect("the grant without field rules parses");
    let hostile = plugins::load(HOSTILE, Limits::default());
    let granted = Effective::for_component(hostile.descriptor(), hostile.digest(), grant).expect("granted");
    let planner = Planner { plugin: hostile, granted: std::sync::Arc::new(granted) };
    let ctx = f.context_for(planner, |_| {}).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    for name in &names {
        f.create_kro(name, "v1").await;
    }
    f.wait_ready("healthy-1").await;
    for (name, rule, words) in attacks {
        let condition = ready_condition(&f, name, "CapabilityDenied").await;
        let message = condition["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(words) && message.contains(&format!("(rule {rule})")),
            "{name}: expected rule {rule} with {words:?}: {message}"
        );
        f.wait_event(name, "Warning", "CapabilityDenied").await;
    }
    // Nothing of theirs reached the platform cluster.
    for name in ["grant-release-platform", "flux-values-from", "flux-foreign-source"] {
        let releases = f.flux_objects("HelmRelease", name);
        let applied = releases.list(&Default::default()).await.expect("HelmReleases");
        assert!(applied.items.is_empty(), "{name}: a HelmRelease was applied");
    }
    for name in ["flux-service-account", "flux-cloud-identity", "flux-values-from"] {
        let sources = f.flux_objects("OCIRepository", name);
        assert!(sources.get_opt("x").await.unwrap().is_none(), "{name}: an OCIRepository was applied");
    }
    assert!(f.operator_running(), "the controller never stopped");
    f.stop_operator().await;
}

/// Nine plugin calls that sleep in WASI do not hold the host: each is cut
/// at its deadline, and a healthy instance gets Ready meanwhile.
#[tokio::test]
async fn sleeping_plugin_calls_do_not_starve_a_healthy_instance() {
    let sleepers: Vec<String> = (1..=9).map(|i| format!("sleep-{i}")).collect();
    let mut names: Vec<&str> = sleepers.iter().map(String::as_str).collect();
    names.push("healthy-1");
    let mut f = Fixture::new(options(&names)).await;
    source_secrets(&f).await;
    f.start_operator_with(plugins::load(HOSTILE, Limits::default())).await;
    for name in &sleepers {
        f.create_kro(name, "v1").await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    f.create_kro("healthy-1", "v1").await;
    f.wait_ready("healthy-1").await;
    for name in &sleepers {
        let condition = ready_condition(&f, name, "PluginTimeout").await;
        assert!(condition["message"].as_str().unwrap().contains("exceeded its time budget of 2s"), "{condition}");
    }
    assert!(f.operator_running());
    f.stop_operator().await;
}

/// Whatever rewrites an AccessRequest's kubeconfig Secret, the host uses it
/// as data: an `exec` entry is refused with a clear message and never runs.
#[tokio::test]
async fn a_kubeconfig_that_would_run_a_command_is_refused() {
    let mut f = Fixture::new(options(&["healthy-1"])).await;
    source_secrets(&f).await;
    f.start_operator_with(plugins::load(HOSTILE, Limits::default())).await;
    f.create_kro("healthy-1", "v1").await;
    f.wait_ready("healthy-1").await;

    let marker = std::env::temp_dir().join(unique("sp-host-exec-marker"));
    let ar = f.access_requests("healthy-1").get("kro.services.open-control-plane.io--healthy-1--mcp").await.unwrap();
    let secret_name = ar.data["status"]["secretRef"]["name"].as_str().unwrap().to_string();
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.tenant("healthy-1"));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\nclusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:1'}}}}]\nusers: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: touch, args: ['{}']}}}}}}]\n",
        marker.display()
    );
    let patch = json!({"data": {"kubeconfig": ByteString(kubeconfig.into_bytes())}});
    secrets.patch(&secret_name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    f.patch_kro("healthy-1", json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}})).await;

    let condition = ready_condition(&f, "healthy-1", "ReconcileError").await;
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("refused") && message.contains("exec credential plugin"), "{message}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!marker.exists(), "the command never ran");
    f.stop_operator().await;
}
