//! Switching from the Go service-provider-kro v1.3.0 (`--adopt-from`). The
//! objects are written as the Go provider leaves them for a Ready instance
//! (`../shared/reference/go-provider-objects.md`): controller-runtime
//! `Create`/`Update` with field manager `service-provider-kro`, no labels of
//! ours, its AccessRequest with openmcp's labels and cluster-admin, its
//! chart-pull-secret copy under the source's own name, the Kro object's
//! finalizer and status. Without the opt-in nothing changes and the
//! instance says how to take over; with it, everything is taken over in
//! place (same UIDs), the unused copy is retired, and deleting the
//! instance leaves nothing either provider made. What someone else wrote
//! is never taken.

use std::collections::BTreeMap;
use std::time::Instant;

use host_test_support::go_provider::{self, DOCKER, FINALIZER, FLUX, GO_PROVIDER, PULL, PULL_CONFIG, READY_SINCE};
use host_test_support::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use service_provider_host::controller::Settings;
use service_provider_host::owner::LABEL_INSTANCE_NAME;

/// The reference ProviderConfig and its pull secret.
async fn go_config(f: &Fixture) {
    f.source_secret(PULL, DOCKER, PULL_CONFIG).await;
    f.provider_config(go_provider::versions()).await;
}

/// What the Go provider leaves on the platform for `instance` (Flux objects
/// written by `manager`); the UIDs of its AccessRequest, OCIRepository and
/// HelmRelease.
async fn go_platform(f: &Fixture, instance: &str, version: &str, manager: &str) -> Vec<String> {
    let tenant = f.tenant(instance);
    let i = go_provider::Instance { name: instance, onboarding_namespace: &f.ns, tenant: &tenant, version };
    go_provider::platform(&f.platform, &i, manager).await.expect("written as the Go provider")
}

async fn go_kro(f: &Fixture, instance: &str, version: &str) {
    let tenant = f.tenant(instance);
    let i = go_provider::Instance { name: instance, onboarding_namespace: &f.ns, tenant: &tenant, version };
    go_provider::kro(&f.kroes(), &i).await.expect("the Go provider's Kro");
}

/// Waits until openmcp granted the Go AccessRequest and Flux reported Ready.
async fn settled(f: &Fixture, instance: &str) {
    let tenant = f.tenant(instance);
    let i = go_provider::Instance { name: instance, onboarding_namespace: &f.ns, tenant: &tenant, version: "" };
    eventually(&format!("{instance} settled"), f.wait, || async {
        go_provider::settled(&f.platform, &i).await.unwrap().then_some(())
    })
    .await;
}

/// What is at the instance's places on the platform: the AccessRequest,
/// OCIRepository and HelmRelease (missing ones left out).
async fn platform(f: &Fixture, instance: &str) -> Vec<DynamicObject> {
    let mut found = Vec::new();
    let ar = format!("kro.services.open-control-plane.io--{instance}--mcp");
    found.extend(f.access_requests(instance).get_opt(&ar).await.unwrap());
    for (kind, name) in FLUX {
        found.extend(f.flux_objects(kind, instance).get_opt(name).await.unwrap());
    }
    found
}

fn secrets(client: &Client, namespace: &str) -> Api<Secret> {
    Api::namespaced(client.clone(), namespace)
}

fn reason(kro: &Value) -> (String, String) {
    let ready = ready(kro);
    (ready["reason"].as_str().unwrap_or_default().into(), ready["message"].as_str().unwrap_or_default().into())
}

/// Whether every object carries this instance's owner label.
fn ours(objects: &[DynamicObject], instance: &str) -> bool {
    objects.iter().all(|o| o.labels().get(LABEL_INSTANCE_NAME).map(String::as_str) == Some(instance))
}

/// The host as run with `--adopt-from service-provider-kro`.
fn adopting(settings: &mut Settings) {
    settings.adoption = service_provider_host::adopt::Adoption::new(&[GO_PROVIDER.to_string()]).unwrap();
}

#[tokio::test]
async fn what_the_go_provider_left_is_taken_over_only_with_the_opt_in() {
    let mut f = Fixture::new(Options {
        instances: vec!["switched".into(), "foreign".into()],
        flux_ready: true,
        workload: false,
    })
    .await;
    go_config(&f).await;
    let cp_uid = go_provider::control_plane(&f.control_plane).await.unwrap();
    let uids = go_platform(&f, "switched", "v0.9.3", GO_PROVIDER).await;
    go_platform(&f, "foreign", "v0.9.1", "kubectl-create").await;
    go_kro(&f, "switched", "v0.9.3").await;
    settled(&f, "switched").await;
    let tenant = f.tenant("switched");

    // Without the opt-in: a Conflict that names the flag; nothing written.
    // (openmcp and Flux write status; generations, labels and the token
    // spec are what the host would change.)
    let seen = |objects: Vec<DynamicObject>| -> Vec<(Option<i64>, BTreeMap<String, String>, Value)> {
        objects.into_iter().map(|o| (o.metadata.generation, o.labels().clone(), o.data["spec"].clone())).collect()
    };
    let before = seen(platform(&f, "switched").await);
    f.start_operator().await;
    let kro = f.wait_kro("switched", "a Conflict", |k| reason(k).0 == "Conflict").await;
    let (_, message) = reason(&kro);
    assert!(message.contains("--adopt-from \"service-provider-kro\""), "{message}");
    assert_eq!(seen(platform(&f, "switched").await), before, "nothing is written without the opt-in");
    assert!(secrets(&f.platform, &tenant).get_opt(PULL).await.unwrap().is_some(), "the Go copy stays");
    let cp_copy = secrets(&f.control_plane, "kro-system").get(PULL).await.unwrap();
    assert!(cp_copy.labels().get(LABEL_INSTANCE_NAME).is_none(), "the ControlPlane copy is not taken");
    f.stop_operator().await;

    // With it: taken over in place, the unused Go copy retired.
    let ctx = f.context_tuned(plugin(), adopting).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    f.wait_ready("switched").await;
    let taken = platform(&f, "switched").await;
    assert_eq!(taken.iter().map(|o| o.uid().unwrap()).collect::<Vec<_>>(), uids, "same objects, no recreate");
    assert!(ours(&taken[1..], "switched"), "{taken:?}");
    let token = &taken[0].data["spec"]["token"];
    assert!(token.get("roleRefs").is_none() && token["permissions"][0]["rules"][0]["apiGroups"][0] != "*", "{token}");
    assert_eq!(taken[0].annotations()["service-provider.open-control-plane.io/instance"], format!("{}/switched", f.ns));
    assert_eq!(taken[1].data["spec"]["secretRef"]["name"], "sp-kro-my-registry-secret");
    let cp_copy = secrets(&f.control_plane, "kro-system").get(PULL).await.unwrap();
    assert_eq!((cp_copy.uid().unwrap(), cp_copy.labels()[LABEL_INSTANCE_NAME].as_str()), (cp_uid, "switched"));
    let tenant_secrets = secrets(&f.platform, &tenant);
    eventually("the Go copy retired", f.wait, || async {
        tenant_secrets.get_opt(PULL).await.unwrap().is_none().then_some(())
    })
    .await;
    let event = f.wait_event("switched", "Normal", "Retired").await;
    assert!(event.note.unwrap_or_default().contains(&format!("Secret {tenant}/{PULL} on the platform cluster")));
    let adopted = f.events("switched").await.into_iter().filter(|e| e.reason.as_deref() == Some("Adopted")).count();
    assert_eq!(adopted, 4, "AccessRequest, OCIRepository, HelmRelease, ControlPlane copy");
    let adopted = format!("adopted_objects_total{{provider=\"{}\"}} 4", f.provider);
    assert_eq!(f.metrics.encode().matches(&adopted).count(), 1, "{}", f.metrics.encode());

    // Written by another manager: never taken, whatever the opt-in.
    f.create_kro("foreign", "v0.9.1").await;
    let kro = f.wait_kro("foreign", "a Conflict", |k| reason(k).0 == "Conflict").await;
    let (_, message) = reason(&kro);
    assert!(message.contains("\"kubectl-create\" wrote more than status"), "{message}");
    assert!(platform(&f, "foreign").await[1..].iter().all(|o| o.labels().get(LABEL_INSTANCE_NAME).is_none()));

    // Deleting after the switch leaves nothing either provider made.
    f.delete_kro("switched").await;
    f.wait_gone("switched").await;
    assert!(platform(&f, "switched").await.is_empty(), "AccessRequest and Flux objects gone");
    let left: Vec<String> =
        tenant_secrets.list(&Default::default()).await.unwrap().iter().map(|s| s.name_any()).collect();
    assert!(!left.iter().any(|s| s == PULL || s == "sp-kro-my-registry-secret"), "{left:?}");
    assert!(secrets(&f.control_plane, "kro-system").get_opt(PULL).await.unwrap().is_none(), "ControlPlane copy gone");
    f.stop_operator().await;
}

/// 20 live instances, 10 on each version, switched in one start: all Ready
/// with the same objects; those whose spec nothing changes never leave
/// Ready (the Go provider's `lastTransitionTime` stays); then all deleted
/// without leftovers. Prints the time from start to all taken over.
#[tokio::test]
async fn twenty_live_instances_switch_in_place_and_delete_cleanly() {
    let names: Vec<String> = (0..20).map(|i| format!("mcp-{i:02}")).collect();
    let version = |i: usize| if i.is_multiple_of(2) { "v0.9.1" } else { "v0.9.3" };
    let mut f = Fixture::new(Options { instances: names.clone(), flux_ready: true, workload: false }).await;
    go_config(&f).await;
    go_provider::control_plane(&f.control_plane).await.unwrap();
    let mut uids = Vec::new();
    for (i, name) in names.iter().enumerate() {
        uids.push(go_platform(&f, name, version(i), GO_PROVIDER).await);
        go_kro(&f, name, version(i)).await;
    }
    for name in &names {
        settled(&f, name).await;
    }

    let started = Instant::now();
    let ctx = f.context_tuned(plugin(), adopting).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    for (i, name) in names.iter().enumerate() {
        let taken = eventually(&format!("{name} taken over"), f.wait, || async {
            let objects = platform(&f, name).await;
            ours(&objects[1..], name).then_some(objects)
        })
        .await;
        assert_eq!(taken.iter().map(|o| o.uid().unwrap()).collect::<Vec<_>>(), uids[i], "{name}: same objects");
        f.wait_ready(name).await;
    }
    let elapsed = started.elapsed();
    println!("adopt: 20 instances taken over and Ready {:.2} s after the host started", elapsed.as_secs_f64());

    for (i, name) in names.iter().enumerate() {
        let kro = f.kro(name).await.unwrap();
        assert_eq!(kro["metadata"]["finalizers"], json!([FINALIZER]), "{name}: one finalizer, the same");
        if version(i) == "v0.9.1" {
            assert_eq!(ready(&kro)["lastTransitionTime"], READY_SINCE, "{name} never left Ready");
        }
    }

    for name in &names {
        f.delete_kro(name).await;
    }
    for (i, name) in names.iter().enumerate() {
        f.wait_gone(name).await;
        assert!(platform(&f, name).await.is_empty(), "{name}: AccessRequest and Flux objects gone");
        let tenant = f.tenant(name);
        let left = secrets(&f.platform, &tenant).list(&Default::default()).await.unwrap();
        let left: Vec<String> = left.iter().map(|s| s.name_any()).filter(|s| s.contains(PULL)).collect();
        assert!(left.is_empty(), "{name} ({}): {left:?}", version(i));
    }
    assert!(secrets(&f.control_plane, "kro-system").get_opt(PULL).await.unwrap().is_none(), "ControlPlane copy gone");
    f.stop_operator().await;
}
