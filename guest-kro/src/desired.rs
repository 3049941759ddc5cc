//! The desired state of one Kro instance: the Flux objects on the platform
//! cluster, the `kro-system` namespace on the ControlPlane and the Secret
//! copies the host performs.

use serde_json::{Value, json};
use service_provider_sdk::contract::{Cluster, DesiredObject, KubeconfigRef, ObjectCopy};
use service_provider_sdk::names;

use crate::api::KroVersion;
use crate::config;

/// Name of the Flux OCIRepository in the tenant namespace.
pub const OCI_REPOSITORY: &str = "kro-oci-repository";
/// Name of the Flux HelmRelease in the tenant namespace.
pub const HELM_RELEASE: &str = "kro-helm-release";
/// Namespace on the ControlPlane that kro is installed into.
pub const KRO_SYSTEM: &str = "kro-system";
/// The Helm release name on the ControlPlane.
pub const RELEASE_NAME: &str = "kro";
/// How often Flux reconciles the OCIRepository and HelmRelease: fixed, and
/// spelled as the Go provider's `metav1.Duration` serializes it, so that an
/// object taken over from it (`--adopt-from`) keeps its spec and its
/// generation.
pub const FLUX_INTERVAL: &str = "1m0s";
/// The only Secret type registries and Flux accept for pull credentials.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";

pub const SOURCE_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
pub const HELM_API_VERSION: &str = "helm.toolkit.fluxcd.io/v2";

/// Provider name used in the prefix of copied Secrets (`sp-kro-...`).
pub const PROVIDER: &str = "kro";

/// Name of the chart-pull-secret copy in the tenant namespace. Prefixed so it
/// cannot collide with another provider's copy of a same-named Secret.
pub fn chart_pull_secret_copy_name(source: &str) -> String {
    names::prefixed_copy_name(PROVIDER, source)
}

/// The Secret copies a version needs: the chart pull secret into the tenant
/// namespace, and every `imagePullSecrets` entry into `kro-system` on the
/// ControlPlane under its own name (the chart refers to it by that name).
pub fn secret_copies(version: &KroVersion, image_pull_secrets: &[String], tenant_namespace: &str) -> Vec<ObjectCopy> {
    let chart = version.chart_pull_secret.iter().filter(|s| !s.is_empty()).map(|source| {
        let target = chart_pull_secret_copy_name(source);
        ObjectCopy::secret(source, DOCKER_CONFIG_JSON, Cluster::Platform, tenant_namespace, &target)
    });
    let images = image_pull_secrets
        .iter()
        .map(|source| ObjectCopy::secret(source, DOCKER_CONFIG_JSON, Cluster::ControlPlane, KRO_SYSTEM, source));
    chart.chain(images).collect()
}

/// The Flux OCIRepository that pulls the chart.
pub fn oci_repository(version: &KroVersion, tenant_namespace: &str) -> Value {
    let mut spec = json!({
        "interval": FLUX_INTERVAL,
        "url": config::chart_url(version),
        "ref": { "tag": version.chart_version },
    });
    if let Some(source) = version.chart_pull_secret.as_deref().filter(|s| !s.is_empty()) {
        spec["secretRef"] = json!({ "name": chart_pull_secret_copy_name(source) });
    }
    json!({
        "apiVersion": SOURCE_API_VERSION,
        "kind": "OCIRepository",
        "metadata": { "name": OCI_REPOSITORY, "namespace": tenant_namespace },
        "spec": spec,
    })
}

/// The Flux HelmRelease that installs kro into `kro-system` on the
/// ControlPlane, through the kubeconfig Secret of the granted AccessRequest.
pub fn helm_release(version: &KroVersion, tenant_namespace: &str, kubeconfig: &KubeconfigRef) -> Value {
    let mut spec = json!({
        "releaseName": RELEASE_NAME,
        "interval": FLUX_INTERVAL,
        "targetNamespace": KRO_SYSTEM,
        "storageNamespace": KRO_SYSTEM,
        "install": {
            "crds": "Create",
            "createNamespace": true,
            "remediation": { "retries": 3 },
        },
        "upgrade": {
            "crds": "CreateReplace",
            "cleanupOnFail": true,
            "remediation": { "retries": 3, "strategy": "rollback" },
        },
        "chartRef": {
            "kind": "OCIRepository",
            "name": OCI_REPOSITORY,
            "namespace": tenant_namespace,
        },
        "kubeConfig": {
            "secretRef": { "name": kubeconfig.name, "key": kubeconfig.key },
        },
    });
    if let Some(values) = version.helm_values.as_ref().filter(|v| !v.is_null()) {
        spec["values"] = values.clone();
    }
    json!({
        "apiVersion": HELM_API_VERSION,
        "kind": "HelmRelease",
        "metadata": { "name": HELM_RELEASE, "namespace": tenant_namespace },
        "spec": spec,
    })
}

/// The `kro-system` namespace on the ControlPlane; needed before image pull
/// secrets can be copied there (the HelmRelease would create it only later).
pub fn kro_system_namespace() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": KRO_SYSTEM },
    })
}

/// All objects to apply, in apply order.
pub fn objects(
    version: &KroVersion,
    needs_kro_system: bool,
    tenant_namespace: &str,
    kubeconfig: &KubeconfigRef,
) -> Vec<DesiredObject> {
    let mut objects = Vec::with_capacity(3);
    if needs_kro_system {
        objects.push((Cluster::ControlPlane, kro_system_namespace()));
    }
    objects.push((Cluster::Platform, oci_repository(version, tenant_namespace)));
    objects.push((Cluster::Platform, helm_release(version, tenant_namespace, kubeconfig)));
    objects.into_iter().map(|(cluster, manifest)| DesiredObject { cluster, manifest: manifest.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT: &str = "mcp--2bcf790e-815e-8ea9-857b-15be429583a5";

    fn version() -> KroVersion {
        KroVersion {
            version: "v0.9.3".into(),
            chart_version: "0.9.3".into(),
            chart_url: None,
            chart_pull_secret: None,
            helm_values: None,
        }
    }

    fn kubeconfig() -> KubeconfigRef {
        KubeconfigRef { namespace: TENANT.into(), name: "granted-secret".into(), key: "kubeconfig".into() }
    }

    #[test]
    fn oci_repository_tag_comes_from_chart_version_not_version() {
        let repo = oci_repository(&version(), TENANT);
        assert_eq!(repo["spec"]["ref"]["tag"], "0.9.3");
        assert_eq!(repo["spec"]["url"], "oci://registry.k8s.io/kro/charts/kro");
        assert_eq!(repo["spec"]["interval"], "1m0s");
        assert_eq!(repo["metadata"]["name"], "kro-oci-repository");
        assert_eq!(repo["metadata"]["namespace"], TENANT);
    }

    #[test]
    fn oci_repository_secret_ref_only_with_a_pull_secret() {
        let mut v = version();
        assert!(oci_repository(&v, TENANT)["spec"].get("secretRef").is_none());
        v.chart_pull_secret = Some(String::new());
        assert!(oci_repository(&v, TENANT)["spec"].get("secretRef").is_none());
        v.chart_pull_secret = Some("my-registry-secret".into());
        assert_eq!(oci_repository(&v, TENANT)["spec"]["secretRef"]["name"], "sp-kro-my-registry-secret");
    }

    #[test]
    fn helm_release_matches_the_go_provider_spec() {
        let mut v = version();
        v.helm_values = Some(json!({"config": {"logLevel": "debug"}}));
        let hr = helm_release(&v, TENANT, &kubeconfig());
        let expected = json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "kro-helm-release", "namespace": TENANT},
            "spec": {
                "releaseName": "kro",
                "interval": "1m0s",
                "targetNamespace": "kro-system",
                "storageNamespace": "kro-system",
                "install": {"crds": "Create", "createNamespace": true, "remediation": {"retries": 3}},
                "upgrade": {"crds": "CreateReplace", "cleanupOnFail": true,
                            "remediation": {"retries": 3, "strategy": "rollback"}},
                "chartRef": {"kind": "OCIRepository", "name": "kro-oci-repository", "namespace": TENANT},
                "kubeConfig": {"secretRef": {"name": "granted-secret", "key": "kubeconfig"}},
                "values": {"config": {"logLevel": "debug"}}
            }
        });
        assert_eq!(hr, expected);
    }

    #[test]
    fn helm_release_without_values_has_no_values_key() {
        let hr = helm_release(&version(), TENANT, &kubeconfig());
        assert!(hr["spec"].get("values").is_none());
    }

    #[test]
    fn secret_copies_prefix_the_chart_secret_and_keep_image_secret_names() {
        let mut v = version();
        v.chart_pull_secret = Some("registry".into());
        let copies = secret_copies(&v, &["pull-a".into(), "pull-b".into()], TENANT);
        assert_eq!(copies.len(), 3);
        assert_eq!(copies[0].target_cluster, Cluster::Platform);
        assert_eq!(copies[0].target_namespace, TENANT);
        assert_eq!(copies[0].target_name, "sp-kro-registry");
        assert_eq!(copies[0].source_name, "registry");
        for (copy, name) in copies[1..].iter().zip(["pull-a", "pull-b"]) {
            assert_eq!(copy.target_cluster, Cluster::ControlPlane);
            assert_eq!(copy.target_namespace, "kro-system");
            assert_eq!(copy.target_name, name);
        }
        let secret = service_provider_sdk::contract::CopyKind::Secret(DOCKER_CONFIG_JSON.into());
        assert!(copies.iter().all(|c| c.kind == secret));
    }

    #[test]
    fn long_chart_secret_names_are_shortened_to_a_valid_name() {
        let name = chart_pull_secret_copy_name(&"s".repeat(63));
        assert!(name.len() <= 63);
        assert!(name.starts_with("sp-kro-"));
    }

    #[test]
    fn objects_are_ordered_namespace_first() {
        let objs = objects(&version(), true, TENANT, &kubeconfig());
        let kinds: Vec<(Cluster, String)> = objs
            .iter()
            .map(|o| {
                let v: Value = serde_json::from_str(&o.manifest).unwrap();
                (o.cluster, v["kind"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (Cluster::ControlPlane, "Namespace".to_string()),
                (Cluster::Platform, "OCIRepository".to_string()),
                (Cluster::Platform, "HelmRelease".to_string()),
            ]
        );
        assert_eq!(objects(&version(), false, TENANT, &kubeconfig()).len(), 2);
    }
}
