//! Helpers for host tests on the real Flux chain ([`Fixture::with_real_flux`]):
//! source-controller pulls the kro chart from a local registry that requires
//! credentials, helm-controller installs it onto the fixture's ControlPlane
//! through the AccessRequest's kubeconfig Secret. The host and the plugin
//! are exactly as in production; only the ControlPlane's Deployments are
//! made Available by a simulator (no kubelet).

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams};
use serde_json::{Value, json};
use testbed::{PushedChart, RealFlux};

use crate::fixture::{Fixture, Flux};

/// Where the kro chart installs to on the ControlPlane.
pub const KRO_SYSTEM: &str = "kro-system";
/// The Deployment the kro chart creates for release `kro`.
pub const KRO_DEPLOYMENT: &str = "kro";
/// kro's main CRD, from the chart's `crds/`.
pub const RGD_CRD: &str = "resourcegraphdefinitions.kro.run";
/// The finalizer of both Flux controllers.
pub const FLUX_FINALIZER: &str = "finalizers.fluxcd.io";
/// The Secret type registries need.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";

/// Flux is done with the object's current generation and it succeeded:
/// `Ready=True` about that generation and `status.observedGeneration`
/// caught up.
pub fn flux_ready(object: &Value) -> bool {
    let generation = &object["metadata"]["generation"];
    let ready = object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .unwrap_or(&Value::Null);
    ready["status"] == "True"
        && &ready["observedGeneration"] == generation
        && &object["status"]["observedGeneration"] == generation
}

/// The chart version helm-controller records for a chart from an
/// OCIRepository: the first 12 hex digits of the manifest digest as SemVer
/// build metadata (`0.9.1+88e263f95b0c`).
pub fn chart_version_of(pushed: &PushedChart) -> String {
    let hex = pushed.digest.trim_start_matches("sha256:");
    format!("{}+{}", pushed.tag, &hex[..12])
}

/// The latest Helm release helm-controller records (`status.history[0]`).
pub fn latest_release(release: &Value) -> &Value {
    &release["status"]["history"][0]
}

impl Fixture {
    /// The real Flux chain of this fixture (panics with the simulator).
    pub fn chain(&self) -> &'static RealFlux {
        match &self.flux {
            Flux::Real { chain, .. } => chain,
            Flux::Simulated(_) => panic!("this fixture runs the Flux simulator, not the real chain"),
        }
    }

    /// The pushed kro chart of `version` (`0.9.1`, `0.9.3`).
    pub fn chart(&self, version: &str) -> &'static PushedChart {
        self.chain().chart(version).unwrap_or_else(|| panic!("chart {version} was not pushed"))
    }

    /// A ProviderConfig version entry for the kro chart in the local
    /// registry.
    pub fn registry_version(&self, version: &str, chart: &str) -> Value {
        json!({"version": version, "chartVersion": chart, "chartURL": self.chain().kro_chart_url()})
    }

    /// Puts a `kubernetes.io/dockerconfigjson` Secret `name` into the pod
    /// namespace: the registry's credentials, or with `password` others.
    pub async fn registry_credentials(&self, name: &str, password: Option<&str>) {
        let registry = self.chain().registry();
        let mut secret = registry.pull_secret(name, &self.pod_ns);
        if let Some(password) = password {
            let auth = base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{password}", testbed::registry::REGISTRY_USER));
            let config = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
            secret.data = Some([(".dockerconfigjson".to_string(), ByteString(config.into_bytes()))].into());
        }
        secret.metadata =
            ObjectMeta { name: Some(name.into()), namespace: Some(self.pod_ns.clone()), ..Default::default() };
        Api::<Secret>::namespaced(self.platform.clone(), &self.pod_ns)
            .patch(name, &PatchParams::apply("e2e-test").force(), &Patch::Apply(&secret))
            .await
            .expect("registry credentials applied");
    }

    /// A Flux object of `instance` (OCIRepository, HelmRelease) as JSON.
    pub async fn flux_object(&self, kind: &str, instance: &str) -> Option<Value> {
        let name = match kind {
            "OCIRepository" => "kro-oci-repository",
            _ => "kro-helm-release",
        };
        let object: Option<DynamicObject> = self.flux_objects(kind, instance).get_opt(name).await.expect("read");
        object.map(|o| serde_json::to_value(o).unwrap())
    }

    /// kro's Deployment on the ControlPlane.
    pub async fn kro_deployment(&self) -> Option<Deployment> {
        Api::<Deployment>::namespaced(self.control_plane.clone(), KRO_SYSTEM)
            .get_opt(KRO_DEPLOYMENT)
            .await
            .expect("read the kro Deployment")
    }

    /// A Secret on the ControlPlane.
    pub async fn control_plane_secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(self.control_plane.clone(), namespace).get_opt(name).await.expect("read Secret")
    }

    /// Names of the Secrets in `namespace` on the ControlPlane.
    pub async fn control_plane_secrets(&self, namespace: &str) -> Vec<String> {
        let list = Api::<Secret>::namespaced(self.control_plane.clone(), namespace)
            .list(&Default::default())
            .await
            .expect("list Secrets");
        list.items.into_iter().filter_map(|s| s.metadata.name).collect()
    }

    /// Names of the Secrets in `namespace` on the platform cluster.
    pub async fn platform_secrets(&self, namespace: &str) -> Vec<String> {
        let list =
            Api::<Secret>::namespaced(self.platform.clone(), namespace).list(&Default::default()).await.expect("list");
        list.items.into_iter().filter_map(|s| s.metadata.name).collect()
    }

    /// kro's CRD on the ControlPlane, if installed.
    pub async fn rgd_crd(&self) -> Option<CustomResourceDefinition> {
        Api::<CustomResourceDefinition>::all(self.control_plane.clone()).get_opt(RGD_CRD).await.expect("read CRD")
    }
}
