//! The desired state of one Flux instance: the flux namespace on the
//! ControlPlane (when copies go there), the Flux objects on the platform
//! cluster that install Flux onto the ControlPlane, and the copies the host
//! performs.

use serde_json::{Value, json};
use service_provider_sdk::contract::{Cluster, DesiredObject, KubeconfigRef, ObjectCopy};
use service_provider_sdk::names;

use crate::config::{self, CA_BUNDLE, Values};

/// Name of the Flux OCIRepository and HelmRelease in the tenant namespace.
pub const NAME: &str = "flux";
/// Provider name used in the prefix of copied Secrets (`sp-flux-...`).
pub const PROVIDER: &str = "flux";
/// The only Secret type registries and Flux accept for pull credentials.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";

pub const SOURCE_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
pub const HELM_API_VERSION: &str = "helm.toolkit.fluxcd.io/v2";

/// Everything one version needs, read from the ProviderConfig.
pub struct Request<'a> {
    pub chart_url: String,
    pub chart_version: &'a str,
    pub chart_pull_secret: Option<&'a str>,
    /// The values as the chart gets them (with the CA bundle wired in).
    pub values: Option<Value>,
    pub parsed: Values,
    /// Name of the CA bundle ConfigMap in the pod namespace, if any.
    pub ca_bundle: Option<&'a str>,
    /// The Flux objects' interval (the poll interval as written).
    pub interval: &'a str,
}

/// Name of the chart-pull-secret copy in the tenant namespace, prefixed so
/// it cannot collide with another provider's copy of a same-named Secret.
pub fn chart_pull_secret_copy_name(source: &str) -> String {
    names::prefixed_copy_name(PROVIDER, source)
}

/// The copies: the chart pull secret into the tenant namespace, every image
/// pull secret and the CA bundle into the flux namespace on the ControlPlane.
pub fn copies(request: &Request, tenant_namespace: &str) -> Vec<ObjectCopy> {
    let flux_namespace = request.parsed.namespace.as_str();
    let chart = request.chart_pull_secret.map(|source| {
        let target = chart_pull_secret_copy_name(source);
        ObjectCopy::secret(source, DOCKER_CONFIG_JSON, Cluster::Platform, tenant_namespace, &target)
    });
    let images =
        request.parsed.image_pull_secrets.iter().map(|source| {
            ObjectCopy::secret(source, DOCKER_CONFIG_JSON, Cluster::ControlPlane, flux_namespace, source)
        });
    let ca = request
        .ca_bundle
        .map(|source| ObjectCopy::config_map(source, Cluster::ControlPlane, flux_namespace, CA_BUNDLE));
    chart.into_iter().chain(images).chain(ca).collect()
}

/// The objects to apply: the flux namespace on the ControlPlane when copies
/// go there (the HelmRelease would create it only later), then the
/// OCIRepository and the HelmRelease.
pub fn objects(request: &Request, tenant_namespace: &str, kubeconfig: &KubeconfigRef) -> Vec<DesiredObject> {
    let mut objects = Vec::new();
    if !request.parsed.image_pull_secrets.is_empty() || request.ca_bundle.is_some() {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": request.parsed.namespace}});
        objects.push(DesiredObject { cluster: Cluster::ControlPlane, manifest: namespace.to_string() });
    }
    for object in [oci_repository(request, tenant_namespace), helm_release(request, tenant_namespace, kubeconfig)] {
        objects.push(DesiredObject { cluster: Cluster::Platform, manifest: object.to_string() });
    }
    objects
}

/// The OCIRepository that pulls the Flux chart.
pub fn oci_repository(request: &Request, tenant_namespace: &str) -> Value {
    let mut spec =
        json!({"interval": request.interval, "url": request.chart_url, "ref": {"tag": request.chart_version}});
    if let Some(source) = request.chart_pull_secret {
        spec["secretRef"] = json!({"name": chart_pull_secret_copy_name(source)});
    }
    json!({
        "apiVersion": SOURCE_API_VERSION,
        "kind": "OCIRepository",
        "metadata": {"name": NAME, "namespace": tenant_namespace},
        "spec": spec,
    })
}

/// The HelmRelease that installs Flux into the flux namespace on the
/// ControlPlane through the AccessRequest's kubeconfig, keeps it as released
/// (drift detection) and removes it without history on deletion.
pub fn helm_release(request: &Request, tenant_namespace: &str, kubeconfig: &KubeconfigRef) -> Value {
    let namespace = &request.parsed.namespace;
    let mut spec = json!({
        "interval": request.interval,
        "targetNamespace": namespace,
        "storageNamespace": namespace,
        "chartRef": {"kind": "OCIRepository", "name": NAME, "namespace": tenant_namespace},
        "kubeConfig": {"secretRef": {"name": kubeconfig.name, "key": kubeconfig.key}},
        "install": {"crds": "Create", "createNamespace": true, "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3, "strategy": "rollback"}},
        "uninstall": {"keepHistory": false, "timeout": "5m"},
        "driftDetection": {"mode": "enabled"},
    });
    if let Some(values) = &request.values {
        spec["values"] = values.clone();
    }
    json!({
        "apiVersion": HELM_API_VERSION,
        "kind": "HelmRelease",
        "metadata": {"name": NAME, "namespace": tenant_namespace},
        "spec": spec,
    })
}

/// Reads what one offered version needs.
pub fn request<'a>(
    version: &'a crate::api::FluxVersion,
    config: &'a crate::api::ProviderConfigSpec,
    interval: &'a str,
) -> Result<Request<'a>, crate::Error> {
    let parsed = config::values(version.values.as_ref())?;
    let ca_bundle = config.ca_bundle_ref.as_ref();
    let values = match ca_bundle {
        Some(reference) => Some(config::with_ca_bundle(version.values.as_ref(), reference)?),
        None => version.values.clone().filter(|v| !v.is_null()),
    };
    Ok(Request {
        chart_url: config::chart_url(version)?,
        chart_version: &version.chart_version,
        chart_pull_secret: version.chart_pull_secret.as_deref().filter(|s| !s.is_empty()),
        values,
        parsed,
        ca_bundle: ca_bundle.map(|r| r.name.as_str()),
        interval,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CaBundleRef, FluxVersion, ProviderConfigSpec};

    const TENANT: &str = "mcp--t";

    fn kubeconfig() -> KubeconfigRef {
        KubeconfigRef { namespace: TENANT.into(), name: "flux--mcp-01--mcp".into(), key: "kubeconfig".into() }
    }

    fn version(values: Option<Value>, pull: Option<&str>) -> FluxVersion {
        FluxVersion {
            version: "2.8.3".into(),
            chart_version: "2.18.2".into(),
            chart_url: None,
            chart_pull_secret: pull.map(str::to_string),
            values,
        }
    }

    fn config(ca: bool) -> ProviderConfigSpec {
        let ca_bundle_ref =
            ca.then(|| CaBundleRef { name: "flux-ca-bundle".into(), key: "ca.crt".into(), optional: None });
        ProviderConfigSpec { versions: vec![], poll_interval: None, ca_bundle_ref }
    }

    #[test]
    fn the_helm_release_matches_the_go_provider_and_installs_through_the_access_request() {
        let v = version(Some(json!({"namespaceOverride": "gitops"})), None);
        let c = config(false);
        let r = request(&v, &c, "1m").unwrap();
        let release = helm_release(&r, TENANT, &kubeconfig());
        assert_eq!(release["metadata"], json!({"name": "flux", "namespace": TENANT}));
        let spec = &release["spec"];
        assert_eq!(spec["targetNamespace"], "gitops");
        assert_eq!(spec["storageNamespace"], "gitops");
        assert_eq!(spec["kubeConfig"]["secretRef"], json!({"name": "flux--mcp-01--mcp", "key": "kubeconfig"}));
        assert_eq!(spec["chartRef"], json!({"kind": "OCIRepository", "name": "flux", "namespace": TENANT}));
        assert_eq!(
            spec["upgrade"],
            json!({"crds": "CreateReplace", "remediation": {"retries": 3, "strategy": "rollback"}})
        );
        assert_eq!(spec["uninstall"], json!({"keepHistory": false, "timeout": "5m"}));
        assert_eq!(spec["driftDetection"], json!({"mode": "enabled"}));
        assert!(spec.get("releaseName").is_none(), "helm-controller's default, as the Go provider");
        assert_eq!(spec["interval"], "1m");
    }

    #[test]
    fn the_oci_repository_uses_the_prefixed_pull_secret_copy() {
        let v = version(None, Some("flux-registry-credentials"));
        let c = config(false);
        let r = request(&v, &c, "5m").unwrap();
        let repo = oci_repository(&r, TENANT);
        assert_eq!(repo["spec"]["url"], "oci://ghcr.io/fluxcd-community/charts/flux2");
        assert_eq!(repo["spec"]["ref"]["tag"], "2.18.2");
        assert_eq!(repo["spec"]["interval"], "5m");
        assert_eq!(repo["spec"]["secretRef"]["name"], "sp-flux-flux-registry-credentials");
        let no_secret = version(None, None);
        assert!(oci_repository(&request(&no_secret, &c, "1m").unwrap(), TENANT)["spec"].get("secretRef").is_none());
    }

    #[test]
    fn copies_go_where_flux_runs() {
        let v =
            version(Some(json!({"imagePullSecrets": [{"name": "img"}], "namespaceOverride": "gitops"})), Some("chart"));
        let c = config(true);
        let r = request(&v, &c, "1m").unwrap();
        let copies = copies(&r, TENANT);
        assert_eq!(
            copies[0],
            ObjectCopy::secret("chart", DOCKER_CONFIG_JSON, Cluster::Platform, TENANT, "sp-flux-chart")
        );
        assert_eq!(copies[1], ObjectCopy::secret("img", DOCKER_CONFIG_JSON, Cluster::ControlPlane, "gitops", "img"));
        assert_eq!(
            copies[2],
            ObjectCopy::config_map("flux-ca-bundle", Cluster::ControlPlane, "gitops", "custom-ca-bundle")
        );
        let objects = objects(&r, TENANT, &kubeconfig());
        let namespace: Value = serde_json::from_str(&objects[0].manifest).unwrap();
        assert_eq!(
            (objects[0].cluster, namespace["metadata"]["name"].as_str()),
            (Cluster::ControlPlane, Some("gitops"))
        );
        let release: Value = serde_json::from_str(&objects[2].manifest).unwrap();
        assert_eq!(release["spec"]["values"]["sourceController"]["extraEnv"][0]["name"], "SSL_CERT_DIR");
        assert_eq!(release["spec"]["values"]["imagePullSecrets"][0]["name"], "img", "values reach the chart");
    }

    #[test]
    fn without_copies_on_the_control_plane_no_namespace_is_planned() {
        let v = version(None, None);
        let c = config(false);
        let objects = objects(&request(&v, &c, "1m").unwrap(), TENANT, &kubeconfig());
        assert_eq!(objects.len(), 2);
        assert!(objects.iter().all(|o| o.cluster == Cluster::Platform));
    }
}
