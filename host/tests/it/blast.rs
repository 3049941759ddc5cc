//! The blast radius of one plugin on real API servers: how much it can make
//! the host write to the clusters every tenant shares, and what the tokens
//! it asks for may do there. Each flood or request fails for its own
//! instance with a reason that names the bound, while a healthy instance of
//! the same host stays Ready.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use host_test_support::plugins::{self, HOSTILE};
use host_test_support::*;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use service_provider_host::owner::LABEL_PROVIDER;
use service_provider_host::plugin::grant::Grant;
use service_provider_host::plugin::sandbox::Limits;

use super::hostile::{burst_sources, options, source_secrets};

/// What the host may write per instance and minute, after the first apply
/// (the figures): to the onboarding cluster, and to the platform.
const ONBOARDING_PER_MINUTE: f64 = 2.0 * 1024.0 * 1024.0;
const PLATFORM_PER_MINUTE: f64 = 4.0 * 1024.0 * 1024.0;
/// How long the floods are measured.
const WINDOW: Duration = Duration::from_secs(60);

/// One revision of an object as a watch saw it.
#[derive(Debug, Clone)]
struct Revision {
    /// Where it is: namespace/name.
    key: String,
    generation: i64,
    /// Its size as the API server sent it (what etcd stores for it, near enough).
    bytes: usize,
    at: Instant,
}

/// Every revision a watch sees, from its start.
#[derive(Clone, Default)]
struct Revisions(Arc<Mutex<Vec<Revision>>>);

impl Revisions {
    fn watch(api: Api<DynamicObject>, config: watcher::Config) -> Revisions {
        let revisions = Revisions::default();
        let seen = revisions.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, config).default_backoff().applied_objects().boxed();
            while let Some(event) = events.next().await {
                let Ok(object) = event else { continue };
                let key = format!(
                    "{}/{}",
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default()
                );
                let bytes = serde_json::to_vec(&object).map_or(0, |b| b.len());
                let generation = object.metadata.generation.unwrap_or(0);
                seen.0.lock().unwrap().push(Revision { key, generation, bytes, at: Instant::now() });
            }
        });
        revisions
    }

    /// The bytes of the revisions of `key` seen after `since`; with
    /// `spec_only`, only those that changed the generation (the host's
    /// writes of a spec, not a controller's status updates).
    fn bytes_since(&self, key: &str, since: Instant, spec_only: bool) -> usize {
        let all = self.0.lock().unwrap();
        let mut last_generation = HashMap::new();
        let mut total = 0;
        for r in all.iter().filter(|r| r.key == key) {
            let previous = last_generation.insert(r.key.clone(), r.generation);
            if r.at > since && (!spec_only || previous != Some(r.generation)) {
                total += r.bytes;
            }
        }
        total
    }

    /// Every revision under `prefix` (a namespace and `/`) seen after
    /// `since`: when, and how many bytes.
    fn under(&self, prefix: &str, since: Instant) -> Vec<(Instant, usize)> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|r| r.key.starts_with(prefix) && r.at > since).map(|r| (r.at, r.bytes)).collect()
    }
}

/// The most bytes of `revisions` in any window of a minute.
fn worst_minute(revisions: &[(Instant, usize)]) -> usize {
    let in_window = |start: Instant| -> usize {
        revisions.iter().filter(|(at, _)| *at >= start && *at < start + WINDOW).map(|(_, b)| b).sum()
    };
    revisions.iter().map(|(start, _)| in_window(*start)).max().unwrap_or(0)
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / 1024.0 / 1024.0)
}

/// Five instances whose plugin reports a 1.2 MB status that changes every
/// second, and two whose HelmRelease's 900 KB `values` change on every
/// call: after the first apply the host writes at most 2 MiB per instance
/// and minute to the onboarding cluster and 4 MiB to the platform, says in
/// each status what it held back, and a healthy neighbour stays Ready.
#[tokio::test]
async fn write_floods_stay_within_the_write_budgets() {
    let status_floods: Vec<String> = (1..=5).map(|i| format!("flood-status-{i}")).collect();
    let value_floods: Vec<String> = (1..=2).map(|i| format!("flood-values-{i}")).collect();
    let mut names: Vec<&str> = status_floods.iter().chain(&value_floods).map(String::as_str).collect();
    names.push("healthy-1");
    let mut f = Fixture::new(options(&names)).await;
    source_secrets(&f).await;

    let onboarding = Revisions::watch(f.kroes(), watcher::Config::default());
    let releases = Api::all_with(f.platform.clone(), &flux_resource("HelmRelease"));
    let platform =
        Revisions::watch(releases, watcher::Config::default().labels(&format!("{LABEL_PROVIDER}={}", f.provider)));

    f.start_operator_with(plugins::load(HOSTILE, Limits::default())).await;
    for name in &names {
        f.create_kro(name, "v1").await;
    }
    f.wait_ready("healthy-1").await;
    for name in &status_floods {
        f.wait_kro(name, "its first status", |k| !k["status"]["resources"].is_null()).await;
    }
    for name in &value_floods {
        let releases = f.flux_objects("HelmRelease", name);
        eventually(&format!("{name}'s HelmRelease"), f.wait, || async {
            releases.get_opt("flood").await.ok().flatten()
        })
        .await;
    }

    let since = Instant::now();
    while since.elapsed() < WINDOW {
        let healthy = f.kro("healthy-1").await.unwrap();
        assert_eq!(ready(&healthy)["status"], "True", "the healthy neighbour stays Ready: {:#}", healthy["status"]);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let minutes = since.elapsed().as_secs_f64() / 60.0;

    let mut report = Vec::new();
    let mut onboarding_rates = Vec::new();
    for name in &status_floods {
        let bytes = onboarding.bytes_since(&format!("{}/{name}", f.ns), since, false) as f64;
        onboarding_rates.push(bytes / minutes);
        report.push(format!("{name}: {} per minute to the onboarding cluster", mib(bytes / minutes)));
    }
    let mut platform_rates = Vec::new();
    for name in &value_floods {
        let bytes = platform.bytes_since(&format!("{}/flood", f.tenant(name)), since, true) as f64;
        platform_rates.push(bytes / minutes);
        report.push(format!("{name}: {} per minute to the platform cluster", mib(bytes / minutes)));
    }
    println!("write floods over {:.0} s:\n  {}", since.elapsed().as_secs_f64(), report.join("\n  "));
    for (name, rate) in status_floods.iter().zip(&onboarding_rates) {
        assert!(*rate <= ONBOARDING_PER_MINUTE, "{name} wrote {} per minute to the onboarding cluster", mib(*rate));
    }
    for (name, rate) in value_floods.iter().zip(&platform_rates) {
        assert!(*rate <= PLATFORM_PER_MINUTE, "{name} wrote {} per minute to the platform cluster", mib(*rate));
    }

    // What was held back is said in each flooded instance's status.
    let limited = |k: &Value| {
        k["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Limited").cloned()
    };
    for name in status_floods.iter().chain(&value_floods) {
        let kro = f.wait_kro(name, "a Limited condition", |k| limited(k).is_some_and(|c| c["status"] == "True")).await;
        let size = serde_json::to_vec(&kro["status"]).unwrap().len();
        assert!(size <= 80 << 10, "{name}'s status is {size} bytes");
        println!("{name}: {}", limited(&kro).unwrap()["message"]);
    }
    assert!(f.operator_running());
    f.stop_operator().await;
}

/// Five instances that copy two 700 KB sources (933 KB as stored) under
/// names that change every 10 s, each change new copies and the old ones
/// pruned, while the host's budget for all instances together is 2 MiB a
/// minute: in no minute does an instance write more than 4 MiB to the
/// platform; all of them together write at most the host's budget, its
/// burst and one round each in flight; and a healthy neighbour stays Ready.
#[tokio::test]
async fn copy_bursts_stay_within_the_instance_and_host_budgets() {
    use k8s_openapi::api::core::v1::Secret;
    use service_provider_host::reconcile::budget::Rate;
    const RUN: Duration = Duration::from_secs(120);
    const HOST: Rate = Rate { per_minute: 2 << 20, burst: 2 << 20 };
    let bursts: Vec<String> = (1..=5).map(|i| format!("copy-burst-{i}")).collect();
    let mut names: Vec<&str> = bursts.iter().map(String::as_str).collect();
    names.push("healthy-1");
    let mut f = Fixture::new(options(&names)).await;
    source_secrets(&f).await;
    burst_sources(&f).await;
    let all_secrets = Api::all_with(f.platform.clone(), &kube::api::ApiResource::erase::<Secret>(&()));
    let copies =
        Revisions::watch(all_secrets, watcher::Config::default().labels(&format!("{LABEL_PROVIDER}={}", f.provider)));
    let hostile = plugins::planner(plugins::load(HOSTILE, Limits::default()));
    let ctx = f.context_for(hostile, |settings| settings.host_writes = HOST).await;
    f.start_operator_on(Arc::new(ctx));
    f.create_kro("healthy-1", "v1").await;
    f.wait_ready("healthy-1").await;

    let since = Instant::now();
    for name in &bursts {
        f.create_kro(name, "r0").await;
    }
    let mut round = 0;
    while since.elapsed() < RUN {
        let healthy = f.kro("healthy-1").await.unwrap();
        assert_eq!(ready(&healthy)["status"], "True", "the healthy neighbour stays Ready: {:#}", healthy["status"]);
        if since.elapsed() >= Duration::from_secs(10) * (round + 1) {
            round += 1;
            for name in &bursts {
                f.patch_kro(name, json!({"spec": {"version": format!("r{round}")}})).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let minutes = since.elapsed().as_secs_f64() / 60.0;

    let mut total = 0;
    let mut report = Vec::new();
    let mut worst = Vec::new();
    for name in &bursts {
        let revisions = copies.under(&format!("{}/", f.tenant(name)), since);
        let bytes: usize = revisions.iter().map(|(_, b)| b).sum();
        total += bytes;
        worst.push((name, worst_minute(&revisions)));
        report.push(format!(
            "{name}: {} in {} copies, {} in its worst minute",
            mib(bytes as f64),
            revisions.len(),
            mib(worst_minute(&revisions) as f64)
        ));
    }
    let bound = HOST.per_minute as f64 * minutes + HOST.burst as f64 + bursts.len() as f64 * 2_000_000.0;
    println!(
        "copy bursts over {:.0} s, {round} renames:\n  {}\n  all together: {} ({} per minute); the host's budget allows {}",
        since.elapsed().as_secs_f64(),
        report.join("\n  "),
        mib(total as f64),
        mib(total as f64 / minutes),
        mib(bound)
    );
    for (name, bytes) in worst {
        assert!(bytes as f64 <= PLATFORM_PER_MINUTE, "{name} wrote {} in a minute", mib(bytes as f64));
    }
    assert!(total as f64 <= bound, "all together: {} over {:.1} minutes", mib(total as f64), minutes);
    assert!(total > 0, "the bursts wrote nothing: the test measured nothing");
    let held = f.kro(&bursts[0]).await.unwrap();
    let limited = held["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Limited");
    println!("{}: {}", bursts[0], limited.map_or(json!(null), |c| c["message"].clone()));
    assert!(f.operator_running());
    f.stop_operator().await;
}

/// A plugin that names three new ControlPlane Namespaces on every round
/// (here: every new `spec.version`) makes the host create at most
/// `NAMESPACES_PER_INSTANCE` for the instance: the Namespace that would be
/// one more is refused by name, with the ones it holds, and the host
/// deletes none of them; a healthy neighbour stays Ready.
#[tokio::test]
async fn namespaces_a_plugin_names_anew_each_round_are_bounded() {
    use k8s_openapi::api::core::v1::Namespace;
    use service_provider_host::reconcile::apply::NAMESPACES_PER_INSTANCE;
    let mut f = Fixture::new(options(&["namespace-churn-1", "healthy-1"])).await;
    source_secrets(&f).await;
    f.start_operator_with(plugins::load(HOSTILE, Limits::default())).await;
    f.create_kro("healthy-1", "v1").await;
    f.create_kro("namespace-churn-1", "r0").await;
    let namespaces: Api<Namespace> = Api::all(f.control_plane.clone());
    let churned = || async {
        let all = namespaces.list(&Default::default()).await.expect("Namespaces listed");
        let mut names: Vec<String> =
            all.items.into_iter().filter_map(|n| n.metadata.name).filter(|n| n.starts_with("churn-")).collect();
        names.sort();
        names
    };
    let message = |k: &Value| ready(k)["message"].as_str().unwrap_or_default().to_string();
    for round in 0..4 {
        if round > 0 {
            f.patch_kro("namespace-churn-1", json!({"spec": {"version": format!("r{round}")}})).await;
        }
        // Rounds 0 and 1 create their three; round 2 the two up to the
        // bound; round 3 none.
        let refused = format!("churn-r{round}-{}", [3, 3, 2, 0][round]);
        eventually(&format!("round {round} of the churn"), f.wait, || async {
            let kro = f.kro("namespace-churn-1").await?;
            let names = churned().await;
            let done = if round < 2 {
                (0..3).all(|i| names.contains(&format!("churn-r{round}-{i}")))
            } else {
                message(&kro).contains(&format!("creating Namespace {refused} on the control-plane cluster"))
            };
            done.then_some(())
        })
        .await;
    }
    let names = churned().await;
    let kro = f.kro("namespace-churn-1").await.unwrap();
    println!("{} Namespaces after 4 rounds of 3: {names:?}\nrefusal: {}", names.len(), message(&kro));
    assert_eq!(names.len(), NAMESPACES_PER_INSTANCE, "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("churn-r3-")), "{names:?}");
    assert!(message(&kro).contains("never deletes a Namespace"), "{}", message(&kro));
    assert!(names.iter().all(|n| message(&kro).contains(n.as_str())), "the refusal names what the instance holds");
    let healthy = f.kro("healthy-1").await.unwrap();
    assert_eq!(ready(&healthy)["status"], "True", "the healthy neighbour stays Ready: {:#}", healthy["status"]);
    assert!(f.operator_running());
    f.stop_operator().await;
}

/// Token rules that give power over the ControlPlane itself
/// (impersonation, RBAC escalation through `*`, tokens, certificate
/// approval, the kubelet's and containers' proxies, admission, API
/// registration) never reach the AccessRequest, even under a grant whose
/// ceiling is `*/*/*`, and each is reported at start-up with its rule.
#[tokio::test]
async fn cluster_power_in_token_rules_is_refused_under_any_ceiling() {
    let mut f = Fixture::new(options(&["healthy-1"])).await;
    source_secrets(&f).await;
    let hostile = plugins::load(HOSTILE, Limits::default());
    let mut grant: Value = serde_json::from_str(&plugins::grant_text_for("hostile")).unwrap();
    grant["tokenRules"]["controlPlane"] = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
    let grant = Grant::parse(&grant.to_string()).unwrap();
    let granted =
        service_provider_host::plugin::grant::Effective::for_component(hostile.descriptor(), hostile.digest(), grant)
            .expect("the grant fits");
    let refused = granted.refused.join("\n");
    println!("refused at start-up:\n{refused}");
    for rule in hostile_plugin::cluster_power_rules() {
        let named = format!("{:?} {:?} {:?}", rule.api_groups, rule.resources, rule.verbs);
        assert!(refused.contains(&named), "{named} was not refused:\n{refused}");
    }
    let planner = service_provider_host::plugin::plan::Planner { plugin: hostile, granted: Arc::new(granted) };
    let ctx = Arc::new(f.context_for(planner, |_| {}).await);
    f.start_operator_on(ctx);
    f.create_kro("healthy-1", "v1").await;
    f.wait_ready("healthy-1").await;

    let ar = f.access_requests("healthy-1").get("kro.services.open-control-plane.io--healthy-1--mcp").await.unwrap();
    let rules: Vec<Value> = ar.data["spec"]["token"]["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["rules"].as_array().cloned().unwrap_or_default())
        .collect();
    let strings = |rule: &Value, key: &str| -> Vec<String> {
        rule[key].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
    };
    for rule in &rules {
        let (groups, resources, verbs) =
            (strings(rule, "apiGroups"), strings(rule, "resources"), strings(rule, "verbs"));
        assert!(!verbs.iter().any(|v| ["impersonate", "escalate", "bind", "approve"].contains(&v.as_str())), "{rule}");
        assert!(!resources.iter().any(|r| r.contains('*') || r.contains('/')), "{rule}");
        assert!(
            !groups.iter().any(|g| g == "*"
                || g.ends_with("admissionregistration.k8s.io")
                || g == "apiregistration.k8s.io"
                || g == "certificates.k8s.io"),
            "{rule}"
        );
        let rbac = groups.iter().any(|g| g == "rbac.authorization.k8s.io");
        assert!(!(rbac && verbs.iter().any(|v| v == "*")), "RBAC with every verb (escalate and bind): {rule}");
    }
    assert!(!rules.is_empty(), "the allowed rules are still asked for");
    f.stop_operator().await;
}

/// A store's view of an object of the instance's may be a moment old: the
/// object may have been deleted and made anew, by someone else, under the
/// same name. A write from that view carries the uid the host looked at,
/// so the API server refuses it instead of the host taking over the new
/// object; and the deletion of a copy the host judged by who wrote it
/// fails once anyone wrote it since.
#[tokio::test]
async fn a_write_from_a_stale_view_never_lands_on_a_replaced_object() {
    use service_provider_host::adopt::Adoption;
    use service_provider_host::owner::Owner;
    use service_provider_host::plugin::plan::Manifest;
    use service_provider_host::reconcile::apply::{self, Lookup};
    use service_provider_sdk::contract::Cluster;

    let f = Fixture::new(options(&["stale"])).await;
    let tenant = f.tenant("stale");
    let owner = Owner { provider: f.provider.clone(), name: "stale".into(), namespace: f.ns.clone() };
    let config_map = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": tenant}, "data": data});
    let manifest = |data: Value| Manifest {
        cluster: Cluster::Platform,
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        name: "settings".into(),
        namespace: Some(tenant.clone()),
        object: config_map(data),
    };
    let none = Adoption::default();
    let manager = format!("service-provider-host/{}", f.provider);
    let first = manifest(json!({"a": "1"}));
    let written = apply::apply(&f.platform, &first, Lookup::Unknown, &owner, &manager, &none);
    assert!(written.await.unwrap().bytes() > 0, "created");
    let resource = service_provider_host::resource::api_resource("v1", "ConfigMap", "configmaps");
    let api = service_provider_host::resource::dynamic_api(&f.platform, &resource, Some(&tenant));
    let ours = api.get("settings").await.unwrap();

    // Replaced by someone else's, without the instance's labels.
    api.delete("settings", &Default::default()).await.unwrap();
    let theirs: DynamicObject = serde_json::from_value(config_map(json!({"theirs": "yes"}))).unwrap();
    api.create(&Default::default(), &theirs).await.unwrap();

    // A write from the old view, as a store that has not caught up gives it.
    let second = manifest(json!({"a": "2"}));
    let stale = apply::apply(&f.platform, &second, Lookup::Found(Arc::new(ours)), &owner, &manager, &none).await;
    assert!(stale.is_err(), "written over the replacement: {stale:?}");
    let live = api.get("settings").await.unwrap();
    assert_eq!(live.data["data"], json!({"theirs": "yes"}), "their object is as they made it");
    assert!(live.metadata.labels.unwrap_or_default().is_empty(), "and not taken over");

    // A deletion that rests on who wrote an object fails once anyone wrote it.
    let judged = api.get("settings").await.unwrap();
    api.patch("settings", &PatchParams::apply("someone").force(), &Patch::Apply(config_map(json!({"more": "x"}))))
        .await
        .unwrap();
    let gone = api.delete("settings", &apply::unchanged(&judged.metadata)).await;
    assert!(gone.is_err(), "deleted after a change: {gone:?}");
    assert!(api.get_opt("settings").await.unwrap().is_some());
}
