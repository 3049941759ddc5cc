//! Plugin upgrades on real API servers, with the next Kro version
//! (`tests/plugins/kro-next`): the fleet preview (`diff`) names exactly the
//! changes that fixture makes, per instance, and writes nothing anywhere;
//! a shadow of it records where it differs and acts on nothing; a canary
//! of it reconciles its cohort, and is halted when it fails there.

use std::collections::BTreeSet;
use std::time::Instant;

use host_test_support::plugins::{self, KRO_NEXT, planner};
use host_test_support::*;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};
use service_provider_host::clusters::{self, Writes};
use service_provider_host::controller::preview::{self, FleetPreview, PreviewOptions};
use service_provider_host::controller::{CanaryPlugin, Plugins};
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::sandbox::Limits;
use service_provider_host::reconcile::preview::{Action, Verdict};
use service_provider_host::reconcile::rollout::Cohort;
use service_provider_sdk::contract::Cluster;

/// Instances previewed; every tenth is of the version the next plugin's
/// plans are refused for.
const INSTANCES: usize = 50;

fn version_of(i: usize) -> &'static str {
    if i.is_multiple_of(10) { "v0.8.0" } else { "v0.9.1" }
}

/// Every object of every tenant namespace and every service object, with
/// its resourceVersion: what a write anywhere would change.
async fn versions(f: &Fixture, names: &[String]) -> BTreeSet<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut add = |list: Vec<DynamicObject>| {
        for o in list {
            let what = format!(
                "{} {}/{}",
                o.types.map(|t| t.kind).unwrap_or_default(),
                o.metadata.namespace.unwrap_or_default(),
                o.metadata.name.unwrap_or_default()
            );
            seen.insert((what, o.metadata.resource_version.unwrap_or_default()));
        }
    };
    add(f.kroes().list(&ListParams::default()).await.unwrap().items);
    for name in names {
        for kind in ["OCIRepository", "HelmRelease"] {
            add(f.flux_objects(kind, name).list(&ListParams::default()).await.unwrap().items);
        }
        add(f.access_requests(name).list(&ListParams::default()).await.unwrap().items);
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.control_plane.clone());
    for ns in namespaces.list(&ListParams::default()).await.unwrap().items {
        seen.insert((
            format!("Namespace {}", ns.metadata.name.unwrap_or_default()),
            ns.metadata.resource_version.unwrap_or_default(),
        ));
    }
    seen
}

/// The preview, in process, with clients that refuse writes and count
/// their requests in `metrics`.
async fn fleet_preview(f: &Fixture, next: bool, metrics: &std::sync::Arc<Metrics>) -> FleetPreview {
    let candidate = match next {
        true => planner(plugins::load(KRO_NEXT, Limits::default())),
        false => planner(plugin()),
    };
    preview_of(f, candidate, metrics).await.expect("the preview")
}

/// The preview of `candidate` against guest-kro, in process.
async fn preview_of(
    f: &Fixture,
    candidate: service_provider_host::plugin::plan::Planner,
    metrics: &std::sync::Arc<Metrics>,
) -> Result<FleetPreview, service_provider_host::Error> {
    let onboarding = std::env::temp_dir().join(format!("{}.kubeconfig", unique("onboarding")));
    std::fs::write(&onboarding, f.env.onboarding.kubeconfig_yaml()).unwrap();
    let settings =
        service_provider_host::controller::Settings { onboarding_kubeconfig: Some(onboarding), ..f.settings() };
    let platform = clusters::client_from_kubeconfig_with(
        f.env.platform.kubeconfig_yaml(),
        Cluster::Platform,
        metrics,
        Writes::Refused,
    )
    .await
    .unwrap();
    // Pages of 7: the fleet is previewed page by page.
    let options = PreviewOptions {
        selector: None,
        concurrency: preview::CONCURRENCY,
        candidate_provider_config: None,
        page: 7,
        tenant_clusters: true,
    };
    preview::preview(planner(plugin()), candidate, &settings, platform, metrics.clone(), &options, |_, _| {}).await
}

/// A candidate whose identity its grant pins and whose grant lets it read
/// ConfigMaps in the tenant namespace, but which observes them through the
/// plural `secrets`: `diff` refuses it against discovery, as `run` does,
/// before it reads anything, and the Secret planted where it looks appears
/// nowhere.
#[tokio::test]
async fn a_preview_refuses_a_candidate_that_reads_secrets_through_another_kinds_plural() {
    use k8s_openapi::api::core::v1::Secret;
    let mut f = Fixture::new(Options { instances: vec!["thief-00".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("thief-00", "v0.9.1").await;
    f.wait_ready("thief-00").await;
    f.stop_operator().await;
    let planted = "planted-secret-value";
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tenant-credentials"}, "stringData": {"token": planted},
    }))
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), &f.tenant("thief-00"));
    secrets.create(&Default::default(), &secret).await.expect("the planted Secret");

    let thief = planner(plugins::load(plugins::PLURAL_THIEF, Limits::default()));
    let metrics = Metrics::new("kro");
    let err = preview_of(&f, thief, &metrics).await.expect_err("the thief is previewed").to_string();
    assert!(err.contains("\"secrets\" is the plural of Secret") && err.contains("plural-of-kind"), "{err}");
    assert!(!err.contains(planted), "{err}");
    let lists = metrics.requests("platform", &["GET"]);
    println!("refused after {lists} reads of the platform: {err}");
}

fn names(keys: impl IntoIterator<Item = (Action, String)>) -> Vec<(Action, String)> {
    let mut keys: Vec<_> = keys.into_iter().collect();
    keys.sort_by(|a, b| a.1.cmp(&b.1));
    keys
}

#[tokio::test]
async fn a_fleet_preview_names_exactly_what_the_next_version_changes_and_writes_nothing() {
    let names_: Vec<String> = (0..INSTANCES).map(|i| format!("up-{i:02}")).collect();
    let mut f = Fixture::new(Options { instances: names_.clone(), flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1"), version("v0.8.0", "0.8.0")])).await;
    f.start_operator().await;
    for (i, name) in names_.iter().enumerate() {
        f.create_kro(name, version_of(i)).await;
    }
    for name in &names_ {
        f.wait_ready(name).await;
    }
    f.stop_operator().await;
    let before = versions(&f, &names_).await;

    // The same plugin: nothing to report, not even noise of the API server.
    let metrics = Metrics::new("kro");
    let same = fleet_preview(&f, false, &metrics).await;
    assert!(!same.changes(), "{}", preview::text(&same));
    assert_eq!(same.counts.unchanged, INSTANCES, "{}", preview::text(&same));

    // The next version: exactly the fixture's changes.
    let metrics = Metrics::new("kro");
    let started = Instant::now();
    let next = fleet_preview(&f, true, &metrics).await;
    println!("previewed {INSTANCES} instances in {:?}\n{}", started.elapsed(), preview::text(&next));
    assert!(next.changes());
    assert_eq!((next.counts.changed, next.counts.newly_refused), (45, 5), "{}", preview::text(&next));
    let rule = r#"ControlPlane token rule [""] ["configmaps"] ["get", "list"]"#;
    assert!(next.grant.more.iter().any(|m| m == rule), "{:?}", next.grant);
    assert!(next.grant.more.iter().any(|m| m.contains("named kro-oci-repository, kro-chart")), "{:?}", next.grant);
    assert!(next.grant.ungranted.is_empty(), "{:?}", next.grant);
    for (i, name) in names_.iter().enumerate() {
        let instance = format!("{}/{name}", f.ns);
        let p = next.instances.iter().find(|p| p.instance == instance).expect("every instance previewed");
        assert_eq!(p.token_rules.added, [rule], "{instance}");
        assert!(p.token_rules.removed.is_empty(), "{instance}");
        assert!(p.copies_added.is_empty() && p.copies_removed.is_empty(), "{instance}");
        if version_of(i) == "v0.8.0" {
            assert_eq!(p.verdict, Verdict::NewlyRefused, "{instance}: {p:#?}");
            let refusal = p.candidate.as_deref().unwrap_or_default();
            assert!(refusal.starts_with("refused: ") && refusal.contains("/spec/interval"), "{refusal}");
            assert!(p.objects.is_empty(), "a refused plan changes nothing: {p:#?}");
            continue;
        }
        assert_eq!(p.verdict, Verdict::Changed, "{instance}: {p:#?}");
        let objects = names(p.objects.iter().map(|o| (o.action, format!("{} {}", o.object.kind, o.object.name))));
        assert_eq!(
            objects,
            [
                (Action::Update, "HelmRelease kro-helm-release".to_string()),
                (Action::Create, "OCIRepository kro-chart".to_string()),
                (Action::Prune, "OCIRepository kro-oci-repository".to_string()),
            ],
            "{instance}: {p:#?}"
        );
        let release = p.objects.iter().find(|o| o.object.kind == "HelmRelease").unwrap();
        let fields: Vec<(&str, Option<&Value>, Option<&Value>)> =
            release.fields.iter().map(|c| (c.path.as_str(), c.before.as_ref(), c.after.as_ref())).collect();
        assert_eq!(
            fields,
            [
                ("/spec/chartRef/name", Some(&json!("kro-oci-repository")), Some(&json!("kro-chart"))),
                ("/spec/values", None, Some(&json!({"next": true}))),
            ],
            "{instance}"
        );
        // Its status would be read from the renamed source, which Flux
        // has not made yet.
        let status = p.status.as_ref().expect("a status change");
        assert_eq!(status.phase_before, "Ready", "{instance}");
        assert_ne!(status.phase_after, "Ready", "{instance}");
    }

    // Nothing was written: no request but reads and dry runs, and every
    // object as it was.
    for cluster in ["platform", "onboarding", "control-plane"] {
        assert_eq!(metrics.requests(cluster, &["POST", "PUT", "DELETE"]), 0, "{cluster}: {}", metrics.encode());
    }
    assert!(metrics.requests("platform", &["PATCH"]) >= 45 * 2, "the dry runs: {}", metrics.encode());

    // The command: its exit code for CI, its JSON for scripts.
    let (code, json) = diff_command(&f, plugins::KRO_NEXT);
    assert_eq!(code, Some(2), "changes: {json:#}");
    assert_eq!((json["counts"]["changed"].as_u64(), json["counts"]["newlyRefused"].as_u64()), (Some(45), Some(5)));
    let (code, json) = diff_command(&f, plugins::KRO);
    assert_eq!(code, Some(0), "no change: {json:#}");
    assert_eq!(json["counts"]["unchanged"].as_u64(), Some(INSTANCES as u64));
    assert_eq!(versions(&f, &names_).await, before, "an object changed");
}

/// `service-provider-host diff --exit-code -o json` with `candidate` against
/// guest-kro: its exit code and report.
fn diff_command(f: &Fixture, candidate: plugins::Component) -> (Option<i32>, Value) {
    let dir = std::env::temp_dir().join(unique("diff"));
    std::fs::create_dir_all(&dir).unwrap();
    let (platform, onboarding) = (dir.join("platform.kubeconfig"), dir.join("onboarding.kubeconfig"));
    std::fs::write(&platform, f.env.platform.kubeconfig_yaml()).unwrap();
    std::fs::write(&onboarding, f.env.onboarding.kubeconfig_yaml()).unwrap();
    let path = |c: plugins::Component| plugins::plugin_path(c).display().to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .env("KUBECONFIG", &platform)
        .env("POD_NAMESPACE", &f.pod_ns)
        .args(["diff", "--provider-name", &f.provider, "--watch-namespace", &f.ns, "--exit-code", "-o", "json"])
        .args(["--onboarding-kubeconfig", &onboarding.display().to_string()])
        .args(["--plugin", &path(candidate), "--current-plugin", &path(plugins::KRO)])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), json)
}

/// A shadow of the next version on 20 instances: it plans along, nothing of
/// its plans exists anywhere, and the difference counter and the
/// `ShadowDiffers` Events name exactly the instances where it answers
/// differently (those of the versions it changes, not those it agrees on).
#[tokio::test]
async fn a_shadow_plugin_records_its_differences_and_acts_on_nothing() {
    let names_: Vec<String> = (0..20).map(|i| format!("sh-{i:02}")).collect();
    // Half agree (v0.9.0), eight differ in objects (v0.9.1), two in a refusal (v0.8.0).
    let version = |i: usize| match i {
        0..10 => "v0.9.0",
        10..18 => "v0.9.1",
        _ => "v0.8.0",
    };
    let mut f = Fixture::new(Options { instances: names_.clone(), flux_ready: true, workload: false }).await;
    let versions_ = json!([version_entry("v0.9.0"), version_entry("v0.9.1"), version_entry("v0.8.0")]);
    f.provider_config(versions_).await;
    let shadow = planner(plugins::load(KRO_NEXT, Limits::default()));
    let digest = shadow.plugin.digest().to_string();
    let plugins = Plugins { plugin: planner(plugin()), shadow: Some(shadow), canary: None };
    let ctx = f.context_for(plugins, |_| {}).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    for (i, name) in names_.iter().enumerate() {
        f.create_kro(name, version(i)).await;
    }
    for name in &names_ {
        f.wait_ready(name).await;
    }
    let differing: Vec<&String> = names_.iter().skip(10).collect();
    for name in &differing {
        f.wait_event(name, "Normal", "ShadowDiffers").await;
    }
    // A few more rounds: the same differences are not counted again.
    for name in &names_ {
        f.patch_kro(name, json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}})).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(f.metrics.shadow_differences(&digest), differing.len() as u64, "{}", f.metrics.encode());
    for name in &names_ {
        let events: Vec<_> =
            f.events(name).await.into_iter().filter(|e| e.reason.as_deref() == Some("ShadowDiffers")).collect();
        let expected = usize::from(differing.contains(&name));
        assert_eq!(events.len(), expected, "{name}: {events:?}");
        if let Some(event) = events.first() {
            let note = event.note.clone().unwrap_or_default();
            assert!(note.contains(&digest), "{note}");
            let refused = name.as_str() >= "sh-18";
            let said = if refused { "planned → refused:" } else { "objects: 1 added, 1 removed, 1 changed" };
            assert!(note.contains(said), "{name}: {note}");
        }
        // Nothing of the shadow's plans exists.
        let sources = f.flux_objects("OCIRepository", name).list(&ListParams::default()).await.unwrap().items;
        let sources: Vec<String> = sources.into_iter().filter_map(|o| o.metadata.name).collect();
        assert_eq!(sources, ["kro-oci-repository"], "{name}");
        let release = f.flux_objects("HelmRelease", name).get("kro-helm-release").await.unwrap();
        assert!(release.data["spec"].get("values").is_none(), "{name}: {:#}", release.data["spec"]);
        for request in f.access_requests(name).list(&ListParams::default()).await.unwrap().items {
            let rules = request.data.pointer("/spec/token/permissions/0/rules").cloned().unwrap_or_default();
            assert!(!rules.to_string().contains(r#"["get","list"]"#), "{name}: the shadow's token rule: {rules}");
        }
    }
    f.stop_operator().await;
}

fn version_entry(version: &str) -> Value {
    let chart = version.trim_start_matches('v');
    json!({"version": version, "chartVersion": chart})
}

/// Creates a `Kro` with labels.
async fn create_labelled(f: &Fixture, name: &str, version: &str, labels: Value) {
    let kro: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kro.services.open-control-plane.io/v1alpha1",
        "kind": "Kro",
        "metadata": {"name": name, "namespace": f.ns, "labels": labels},
        "spec": {"version": version},
    }))
    .unwrap();
    f.kroes().create(&kube::api::PostParams::default(), &kro).await.expect("Kro created");
}

/// The OCIRepositories of an instance, and whether its HelmRelease has the
/// next version's Helm value.
async fn flux_of(f: &Fixture, name: &str) -> (Vec<String>, bool) {
    let sources = f.flux_objects("OCIRepository", name).list(&ListParams::default()).await.unwrap().items;
    let mut sources: Vec<String> = sources
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .filter_map(|o| o.metadata.name)
        .collect();
    sources.sort();
    let release = f.flux_objects("HelmRelease", name).get("kro-helm-release").await.unwrap();
    (sources, release.data.pointer("/spec/values/next") == Some(&json!(true)))
}

/// A canary of the next version for a cohort of 10 of 30 instances: their
/// objects are the canary's, the other 20's the plugin's, all Ready. Then
/// the cohort moves to a version the canary's plans are refused for: the
/// canary is halted (an Event, a metric, a log line say why), and the
/// cohort is reconciled with the plugin again, all 30 Ready.
#[tokio::test]
async fn a_canary_reconciles_its_cohort_and_is_halted_when_it_fails() {
    let names_: Vec<String> = (0..30).map(|i| format!("ca-{i:02}")).collect();
    let cohort: Vec<&String> = names_.iter().step_by(3).collect();
    let mut f = Fixture::new(Options { instances: names_.clone(), flux_ready: true, workload: false }).await;
    f.provider_config(json!([version_entry("v0.9.1"), version_entry("v0.8.0")])).await;
    let next = planner(plugins::load(KRO_NEXT, Limits::default()));
    let digest = next.plugin.digest().to_string();
    let canary = CanaryPlugin {
        planner: next,
        cohort: Cohort::selector("rollout=canary").unwrap(),
        allowed_failures: 0,
        halt: Default::default(),
    };
    let plugins = Plugins { plugin: planner(plugin()), shadow: None, canary: Some(canary) };
    let ctx = f.context_for(plugins, |_| {}).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    for name in &names_ {
        let labels = match cohort.contains(&name) {
            true => json!({"rollout": "canary"}),
            false => json!({}),
        };
        create_labelled(&f, name, "v0.9.1", labels).await;
    }
    for name in &names_ {
        f.wait_ready(name).await;
    }
    for name in &names_ {
        let expected = match cohort.contains(&name) {
            true => (vec!["kro-chart".to_string()], true),
            false => (vec!["kro-oci-repository".to_string()], false),
        };
        let what = format!("{name}'s objects");
        eventually(&what, f.wait, || async { (flux_of(&f, name).await == expected).then_some(()) }).await;
    }
    let running = format!(
        "service_provider_host_plugin_halted{{provider=\"{}\",plugin=\"kro\",digest=\"{digest}\",role=\"canary\"}} 0",
        f.provider
    );
    assert!(f.metrics.encode().contains(&running), "{}", f.metrics.encode());

    // The cohort moves to the version the canary's plans are refused for.
    for name in &cohort {
        f.patch_kro(name, json!({"spec": {"version": "v0.8.0"}})).await;
    }
    let halted = running.replace("} 0", "} 1");
    eventually("the canary halted", f.wait, || async { f.metrics.encode().contains(&halted).then_some(()) }).await;
    for name in &names_ {
        f.wait_kro(name, "Ready with the plugin", |k| {
            ready(k)["status"] == "True" && k["status"]["observedGeneration"] == k["metadata"]["generation"]
        })
        .await;
        let expected = (vec!["kro-oci-repository".to_string()], false);
        let what = format!("{name}'s objects back with the plugin");
        eventually(&what, f.wait, || async { (flux_of(&f, name).await == expected).then_some(()) }).await;
    }
    let mut events = Vec::new();
    for name in &cohort {
        events.extend(f.events(name).await.into_iter().filter(|e| e.reason.as_deref() == Some("CanaryHalted")));
    }
    assert_eq!(events.len(), 1, "one instance tipped it: {events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains(&digest) && note.contains("/spec/interval"), "{note}");
    f.stop_operator().await;
}
