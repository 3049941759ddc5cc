//! Switching from the Go service-provider-kro (`--adopt-from`): Flux
//! objects at the places this host's plan puts them, written the way the Go
//! provider writes them (controller-runtime `Create`, field manager
//! `service-provider-kro`, no labels), are left alone without the opt-in
//! (a `Conflict` that names the flag) and taken over with it: same UIDs,
//! our owner labels, an `Adopted` Event each. One written by someone else
//! is never taken over.

use host_test_support::*;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use service_provider_host::adopt::Adoption;
use service_provider_host::owner::LABEL_INSTANCE_NAME;

const GO_PROVIDER: &str = "service-provider-kro";

/// The two Flux objects as the Go provider leaves them for `instance`,
/// created by `manager`; returns their UIDs.
async fn go_objects(f: &Fixture, instance: &str, manager: &str) -> Vec<String> {
    let ns = f.tenant(instance);
    let oci = json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
        "metadata": {"name": "kro-oci-repository", "namespace": ns},
        "spec": {"interval": "1m0s", "url": "oci://registry.k8s.io/kro/charts/kro", "ref": {"tag": "0.9.1"}},
    });
    let helm = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "kro-helm-release", "namespace": ns},
        "spec": {"interval": "1m0s", "releaseName": "kro", "targetNamespace": "kro-system",
                 "chartRef": {"kind": "OCIRepository", "name": "kro-oci-repository", "namespace": ns}},
    });
    let params = PostParams { field_manager: Some(manager.into()), ..Default::default() };
    let mut uids = Vec::new();
    for (kind, object) in [("OCIRepository", oci), ("HelmRelease", helm)] {
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let created =
            f.flux_objects(kind, instance).create(&params, &object).await.expect("created as the Go provider");
        uids.push(created.uid().unwrap());
    }
    uids
}

async fn flux(f: &Fixture, instance: &str) -> Vec<DynamicObject> {
    let mut found = Vec::new();
    for (kind, name) in [("OCIRepository", "kro-oci-repository"), ("HelmRelease", "kro-helm-release")] {
        let api: Api<DynamicObject> = f.flux_objects(kind, instance);
        found.push(api.get(name).await.expect("still there"));
    }
    found
}

fn reason(kro: &Value) -> (String, String) {
    let ready = ready(kro);
    (ready["reason"].as_str().unwrap_or_default().into(), ready["message"].as_str().unwrap_or_default().into())
}

#[tokio::test]
async fn objects_the_go_provider_wrote_are_taken_over_only_with_the_opt_in() {
    let mut f = Fixture::new(Options {
        instances: vec!["switched".into(), "foreign".into()],
        flux_ready: true,
        workload: false,
    })
    .await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let uids = go_objects(&f, "switched", GO_PROVIDER).await;
    go_objects(&f, "foreign", "kubectl-create").await;

    // Without the opt-in: Conflict naming the flag, nothing changed.
    // (The Flux simulator writes status; the spec's generation and the
    // labels are what the host would change.)
    let seen = |objects: Vec<DynamicObject>| -> Vec<(Option<i64>, bool)> {
        objects.iter().map(|o| (o.metadata.generation, o.labels().contains_key(LABEL_INSTANCE_NAME))).collect()
    };
    let before = seen(flux(&f, "switched").await);
    f.start_operator().await;
    f.create_kro("switched", "v0.9.1").await;
    let kro = f.wait_kro("switched", "a Conflict", |k| reason(k).0 == "Conflict").await;
    let (_, message) = reason(&kro);
    assert!(message.contains("--adopt-from \"service-provider-kro\""), "{message}");
    assert_eq!(seen(flux(&f, "switched").await), before, "nothing is written without the opt-in");
    assert!(before.iter().all(|(_, labelled)| !labelled));
    f.stop_operator().await;

    // With it: taken over in place.
    let ctx = f.context_tuned(plugin(), |ctx| ctx.adoption = Adoption::new(&[GO_PROVIDER.to_string()]).unwrap()).await;
    f.start_operator_on(std::sync::Arc::new(ctx));
    f.wait_ready("switched").await;
    let taken = flux(&f, "switched").await;
    assert_eq!(taken.iter().map(|o| o.uid().unwrap()).collect::<Vec<_>>(), uids, "same objects, no recreate");
    for object in &taken {
        assert_eq!(object.labels().get(LABEL_INSTANCE_NAME).map(String::as_str), Some("switched"), "{object:?}");
    }
    let event = f.wait_event("switched", "Normal", "Adopted").await;
    assert!(event.note.unwrap_or_default().contains(GO_PROVIDER));
    assert_eq!(f.metrics.encode().matches("adopted_objects_total 2").count(), 1, "{}", f.metrics.encode());

    // Written by another manager: never taken, whatever the opt-in.
    f.create_kro("foreign", "v0.9.1").await;
    let kro = f.wait_kro("foreign", "a Conflict", |k| reason(k).0 == "Conflict").await;
    let (_, message) = reason(&kro);
    assert!(
        message.contains("\"kubectl-create\" wrote more than status") || message.contains("not written by"),
        "{message}"
    );
    assert!(flux(&f, "foreign").await.iter().all(|o| o.labels().get(LABEL_INSTANCE_NAME).is_none()));
}
