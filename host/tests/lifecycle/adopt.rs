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

use host_test_support::*;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use service_provider_host::adopt::Adoption;
use service_provider_host::owner::LABEL_INSTANCE_NAME;

const GO_PROVIDER: &str = "service-provider-kro";
const DOCKER: &str = "kubernetes.io/dockerconfigjson";
const PULL: &str = "my-registry-secret";
const FINALIZER: &str = "kro.services.open-control-plane.io/finalizer";
/// When the Go provider said the instance became Ready.
const GO_READY_SINCE: &str = "2026-01-01T00:00:00Z";
const FLUX: [(&str, &str); 2] = [("OCIRepository", "kro-oci-repository"), ("HelmRelease", "kro-helm-release")];

/// The ProviderConfig of the reference: v0.9.3 with a chart pull secret and
/// image pull secrets, v0.9.1 without.
async fn go_config(f: &Fixture) {
    f.source_secret(PULL, DOCKER, "{\"auths\":{\"registry.k8s.io\":{}}}").await;
    f.provider_config(json!([
        version("v0.9.1", "0.9.1"),
        {"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": PULL,
         "helmValues": {"imagePullSecrets": [{"name": PULL}]}},
    ]))
    .await;
}

fn params(manager: &str) -> PostParams {
    PostParams { field_manager: Some(manager.into()), ..Default::default() }
}

async fn create(api: &Api<DynamicObject>, object: Value, manager: &str) -> String {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&params(manager), &object).await.expect("created as the Go provider").uid().unwrap()
}

fn pull_secret(namespace: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": PULL, "namespace": namespace}, "type": DOCKER,
        "stringData": {".dockerconfigjson": "{\"auths\":{\"registry.k8s.io\":{}}}"}
    }))
    .unwrap()
}

/// What the Go provider leaves on the ControlPlane for v0.9.3: `kro-system`
/// and the image pull secret in it (shared by this fixture's instances,
/// whose ControlPlanes are one cluster).
async fn go_control_plane(f: &Fixture) -> String {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "kro-system"}})).unwrap();
    Api::<Namespace>::all(f.control_plane.clone()).create(&params(GO_PROVIDER), &namespace).await.unwrap();
    let secrets = Api::<Secret>::namespaced(f.control_plane.clone(), "kro-system");
    secrets.create(&params(GO_PROVIDER), &pull_secret("kro-system")).await.unwrap().uid().unwrap()
}

/// Everything the Go provider leaves on the platform for `instance` (its
/// Flux objects written by `manager`); returns the UIDs of the
/// AccessRequest, OCIRepository and HelmRelease.
async fn go_platform(f: &Fixture, instance: &str, version: &str, manager: &str) -> Vec<String> {
    let ns = f.tenant(instance);
    let ar_name = format!("kro.services.open-control-plane.io--{instance}--mcp");
    let ar = json!({
        "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "AccessRequest",
        "metadata": {"name": ar_name, "namespace": ns, "finalizers": ["clusters.openmcp.cloud/clusteraccess"],
                     "labels": {"openmcp.cloud/managed-by": GROUP,
                                "openmcp.cloud/managed-purpose": format!("{}.{instance}.mcp", f.ns),
                                "openmcp.cloud/onboarding-name": instance,
                                "openmcp.cloud/onboarding-namespace": f.ns}},
        "spec": {"requestRef": {"name": instance, "namespace": ns},
                 "token": {"permissions": [{"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}],
                           "roleRefs": [{"kind": "ClusterRole", "name": "cluster-admin"}]}},
    });
    let mut uids = vec![create(&f.access_requests(instance), ar, GO_PROVIDER).await];
    let with_secret = version == "v0.9.3";
    let chart = &version[1..];
    let mut oci = json!({"interval": "1m0s", "provider": "generic", "ref": {"tag": chart}, "timeout": "60s",
                         "url": "oci://registry.k8s.io/kro/charts/kro"});
    let mut helm = json!({
        "chartRef": {"kind": "OCIRepository", "name": "kro-oci-repository", "namespace": ns},
        "install": {"crds": "Create", "createNamespace": true, "remediation": {"retries": 3}},
        "interval": "1m0s",
        "kubeConfig": {"secretRef": {"key": "kubeconfig", "name": ar_name}},
        "releaseName": "kro", "storageNamespace": "kro-system", "targetNamespace": "kro-system",
        "upgrade": {"cleanupOnFail": true, "crds": "CreateReplace", "remediation": {"retries": 3, "strategy": "rollback"}},
    });
    if with_secret {
        let secrets = Api::<Secret>::namespaced(f.platform.clone(), &ns);
        secrets.create(&params(GO_PROVIDER), &pull_secret(&ns)).await.unwrap();
        oci["secretRef"] = json!({"name": PULL});
        helm["values"] = json!({"imagePullSecrets": [{"name": PULL}]});
    }
    for ((kind, name), spec) in FLUX.into_iter().zip([oci, helm]) {
        let api_version = match kind {
            "OCIRepository" => "source.toolkit.fluxcd.io/v1",
            _ => "helm.toolkit.fluxcd.io/v2",
        };
        let object =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec});
        uids.push(create(&f.flux_objects(kind, instance), object, manager).await);
    }
    uids
}

/// The Kro object as a tenant creates it and the Go provider finalizes and
/// reports it Ready.
async fn go_kro(f: &Fixture, instance: &str, version: &str) {
    f.create_kro(instance, version).await;
    let go = PatchParams { field_manager: Some(GO_PROVIDER.into()), ..Default::default() };
    let kroes = f.kroes();
    kroes.patch(instance, &go, &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}}))).await.unwrap();
    let tenant = f.tenant(instance);
    let resource = |group: &str, kind: &str, name: &str| {
        json!({"apiGroup": group, "kind": kind, "name": name, "namespace": tenant, "phase": "Ready",
               "location": "PlatformCluster"})
    };
    let status = json!({"status": {
        "phase": "Ready", "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": 1,
                        "message": "Domain Service is ready", "lastTransitionTime": GO_READY_SINCE}],
        "resources": [resource("source.toolkit.fluxcd.io", "OCIRepository", "kro-oci-repository"),
                      resource("helm.toolkit.fluxcd.io", "HelmRelease", "kro-helm-release")],
    }});
    kroes.patch_status(instance, &go, &Patch::Merge(status)).await.unwrap();
}

/// Waits until openmcp granted the Go provider's AccessRequest and Flux
/// reported both objects Ready, as on a live platform.
async fn settled(f: &Fixture, instance: &str) {
    let ar = format!("kro.services.open-control-plane.io--{instance}--mcp");
    let ars = f.access_requests(instance);
    eventually("the Go AccessRequest granted", f.wait, || async {
        ars.get(&ar).await.ok().filter(|a| a.data["status"]["phase"] == "Granted")
    })
    .await;
    for (kind, name) in FLUX {
        let api = f.flux_objects(kind, instance);
        eventually(&format!("{kind} Ready"), f.wait, || async {
            api.get(name).await.ok().filter(|o| {
                o.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["status"] == "True"))
            })
        })
        .await;
    }
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
fn adopting(ctx: &mut service_provider_host::reconcile::Context) {
    ctx.adoption = Adoption::new(&[GO_PROVIDER.to_string()]).unwrap();
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
    let cp_uid = go_control_plane(&f).await;
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
    assert_eq!(f.metrics.encode().matches("adopted_objects_total 4").count(), 1, "{}", f.metrics.encode());

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
    go_control_plane(&f).await;
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
            assert_eq!(ready(&kro)["lastTransitionTime"], GO_READY_SINCE, "{name} never left Ready");
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
