//! What the Go service-provider-kro v1.3.0 leaves for a Ready instance,
//! written the way it writes it: controller-runtime `Create`/`Update` with
//! field manager `service-provider-kro`, none of the host's labels, its
//! AccessRequest with openmcp's labels and cluster-admin, its chart pull
//! secret copied under the source's own name, the `Kro`'s finalizer and a
//! Ready status. For the take-over tests (`--adopt-from`) and
//! `task bench-adopt`; the objects follow the project's record of a Ready
//! instance of the Go provider on this harness.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::fixture::{GROUP, access_request_resource, flux_resource};

/// The Go provider's field manager.
pub const GO_PROVIDER: &str = "service-provider-kro";
/// The chart and image pull secret of the reference ProviderConfig.
pub const PULL: &str = "my-registry-secret";
pub const DOCKER: &str = "kubernetes.io/dockerconfigjson";
/// The `.dockerconfigjson` of [`PULL`], source and copies alike.
pub const PULL_CONFIG: &str = "{\"auths\":{\"registry.k8s.io\":{}}}";
/// The finalizer on the `Kro` (the Go provider's and guest-kro's).
pub const FINALIZER: &str = "kro.services.open-control-plane.io/finalizer";
/// When the Go provider's status says the instance became Ready.
pub const READY_SINCE: &str = "2026-01-01T00:00:00Z";
/// The Flux objects, by kind and name, in the tenant namespace.
pub const FLUX: [(&str, &str); 2] = [("OCIRepository", "kro-oci-repository"), ("HelmRelease", "kro-helm-release")];

/// The ProviderConfig versions of the reference: v0.9.3 with a chart pull
/// secret and image pull secrets, v0.9.1 without.
pub fn versions() -> Value {
    json!([
        {"version": "v0.9.1", "chartVersion": "0.9.1"},
        {"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": PULL,
         "helmValues": {"imagePullSecrets": [{"name": PULL}]}},
    ])
}

/// One instance as the Go provider knows it.
pub struct Instance<'a> {
    pub name: &'a str,
    pub onboarding_namespace: &'a str,
    /// `mcp--<uuid>` on the platform.
    pub tenant: &'a str,
    /// `v0.9.1` or `v0.9.3` (see [`versions`]).
    pub version: &'a str,
}

impl Instance<'_> {
    pub fn access_request(&self) -> String {
        format!("{GROUP}--{}--mcp", self.name)
    }

    fn with_pull_secret(&self) -> bool {
        self.version == "v0.9.3"
    }
}

fn params(manager: &str) -> PostParams {
    PostParams { field_manager: Some(manager.into()), ..Default::default() }
}

async fn create(api: &Api<DynamicObject>, object: Value, manager: &str) -> Result<String, kube::Error> {
    let object: DynamicObject = serde_json::from_value(object).expect("a Go provider object");
    Ok(api.create(&params(manager), &object).await?.uid().unwrap_or_default())
}

/// The pull secret as the Go provider copies it into `namespace`.
pub fn pull_secret(namespace: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": PULL, "namespace": namespace}, "type": DOCKER,
        "stringData": {".dockerconfigjson": PULL_CONFIG},
    }))
    .expect("a Secret")
}

/// What it leaves on a ControlPlane for v0.9.3: `kro-system` and the image
/// pull secret in it. Returns the Secret's UID.
pub async fn control_plane(cp: &Client) -> Result<String, kube::Error> {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "kro-system"}})).expect("a Namespace");
    Api::<Namespace>::all(cp.clone()).create(&params(GO_PROVIDER), &namespace).await?;
    let secrets = Api::<Secret>::namespaced(cp.clone(), "kro-system");
    Ok(secrets.create(&params(GO_PROVIDER), &pull_secret("kro-system")).await?.uid().unwrap_or_default())
}

/// What it leaves on the platform: the AccessRequest, the pull secret
/// copy (v0.9.3), the OCIRepository and the HelmRelease, the Flux objects
/// written by `flux_manager` (the Go provider's, or someone else's).
/// Returns the UIDs of the AccessRequest, OCIRepository and HelmRelease.
pub async fn platform(platform: &Client, i: &Instance<'_>, flux_manager: &str) -> Result<Vec<String>, kube::Error> {
    let (ns, ar_name) = (i.tenant, i.access_request());
    let ar = json!({
        "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "AccessRequest",
        "metadata": {"name": ar_name, "namespace": ns, "finalizers": ["clusters.openmcp.cloud/clusteraccess"],
                     "labels": {"openmcp.cloud/managed-by": GROUP,
                                "openmcp.cloud/managed-purpose": format!("{}.{}.mcp", i.onboarding_namespace, i.name),
                                "openmcp.cloud/onboarding-name": i.name,
                                "openmcp.cloud/onboarding-namespace": i.onboarding_namespace}},
        "spec": {"requestRef": {"name": i.name, "namespace": ns},
                 "token": {"permissions": [{"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}],
                           "roleRefs": [{"kind": "ClusterRole", "name": "cluster-admin"}]}},
    });
    let ars = Api::namespaced_with(platform.clone(), ns, &access_request_resource());
    let mut uids = vec![create(&ars, ar, GO_PROVIDER).await?];
    let chart = i.version.trim_start_matches('v');
    let mut oci = json!({"interval": "1m0s", "provider": "generic", "ref": {"tag": chart}, "timeout": "60s",
                         "url": "oci://registry.k8s.io/kro/charts/kro"});
    let mut helm = json!({
        "chartRef": {"kind": "OCIRepository", "name": FLUX[0].1, "namespace": ns},
        "install": {"crds": "Create", "createNamespace": true, "remediation": {"retries": 3}},
        "interval": "1m0s",
        "kubeConfig": {"secretRef": {"key": "kubeconfig", "name": ar_name}},
        "releaseName": "kro", "storageNamespace": "kro-system", "targetNamespace": "kro-system",
        "upgrade": {"cleanupOnFail": true, "crds": "CreateReplace", "remediation": {"retries": 3, "strategy": "rollback"}},
    });
    if i.with_pull_secret() {
        Api::<Secret>::namespaced(platform.clone(), ns).create(&params(GO_PROVIDER), &pull_secret(ns)).await?;
        oci["secretRef"] = json!({"name": PULL});
        helm["values"] = json!({"imagePullSecrets": [{"name": PULL}]});
    }
    for ((kind, name), spec) in FLUX.into_iter().zip([oci, helm]) {
        let resource = flux_resource(kind);
        let object = json!({"apiVersion": resource.api_version, "kind": kind,
                            "metadata": {"name": name, "namespace": ns}, "spec": spec});
        uids.push(create(&Api::namespaced_with(platform.clone(), ns, &resource), object, flux_manager).await?);
    }
    Ok(uids)
}

/// The `Kro` as a tenant creates it, then finalized and reported Ready by
/// the Go provider (its status since [`READY_SINCE`]).
pub async fn kro(kroes: &Api<DynamicObject>, i: &Instance<'_>) -> Result<(), kube::Error> {
    let object = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Kro",
        "metadata": {"name": i.name, "namespace": i.onboarding_namespace}, "spec": {"version": i.version},
    });
    create(kroes, object, "kubectl-create").await?;
    let go = PatchParams { field_manager: Some(GO_PROVIDER.into()), ..Default::default() };
    kroes.patch(i.name, &go, &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}}))).await?;
    let resource = |group: &str, kind: &str, name: &str| {
        json!({"apiGroup": group, "kind": kind, "name": name, "namespace": i.tenant, "phase": "Ready",
               "location": "PlatformCluster"})
    };
    let status = json!({"status": {
        "phase": "Ready", "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": 1,
                        "message": "Domain Service is ready", "lastTransitionTime": READY_SINCE}],
        "resources": [resource("source.toolkit.fluxcd.io", FLUX[0].0, FLUX[0].1),
                      resource("helm.toolkit.fluxcd.io", FLUX[1].0, FLUX[1].1)],
    }});
    kroes.patch_status(i.name, &go, &Patch::Merge(status)).await?;
    Ok(())
}

/// Whether openmcp granted the instance's AccessRequest and Flux reported
/// both objects Ready, as on a live platform.
pub async fn settled(platform: &Client, i: &Instance<'_>) -> Result<bool, kube::Error> {
    let ars = Api::<DynamicObject>::namespaced_with(platform.clone(), i.tenant, &access_request_resource());
    let granted = ars.get_opt(&i.access_request()).await?.is_some_and(|a| a.data["status"]["phase"] == "Granted");
    let mut ready = granted;
    for (kind, name) in FLUX {
        let api = Api::<DynamicObject>::namespaced_with(platform.clone(), i.tenant, &flux_resource(kind));
        ready &= api.get_opt(name).await?.is_some_and(|o| {
            o.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["status"] == "True"))
        });
    }
    Ok(ready)
}
