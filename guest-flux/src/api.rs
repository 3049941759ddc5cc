//! The Flux service API (`Flux`, on the onboarding cluster) and its
//! `ProviderConfig` (cluster-scoped, on the platform cluster), field for
//! field compatible with service-provider-flux.
//!
//! These types are the single source of truth for `crds/flux.*.yaml`: with
//! the `crd` feature, kube's derive turns them into CustomResourceDefinitions
//! (`task generate`). Without it they are plain serde types.

use serde::{Deserialize, Serialize};

pub use guest_kro::api::{Condition, ManagedResource, Metadata, Object, ProviderConfigStatus};

pub const GROUP: &str = "flux.services.open-control-plane.io";
pub const VERSION: &str = "v1alpha1";

/// Default chart location when a version does not name one.
pub const DEFAULT_CHART_URL: &str = "oci://ghcr.io/fluxcd-community/charts/flux2";

/// A tenant's request for Flux on its ControlPlane. The object's name and
/// namespace must equal those of the ControlPlane it is for.
// Several `printcolumn(type_ = ...)` entries are not duplicates.
#[cfg_attr(feature = "crd", allow(clippy::duplicated_attributes))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    feature = "crd",
    kube(
        group = "flux.services.open-control-plane.io",
        version = "v1alpha1",
        kind = "Flux",
        plural = "fluxes",
        singular = "flux",
        namespaced,
        doc = "A tenant's request for Flux on its ControlPlane (name and namespace equal the ControlPlane's).",
        status = "FluxStatus",
        label("openmcp.cloud/cluster", "onboarding"),
        printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
        printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
        printcolumn(
            name = "Message",
            type_ = "string",
            description = "Message of the Ready condition",
            json_path = ".status.conditions[?(@.type==\"Ready\")].message"
        ),
        printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FluxSpec {
    /// The Flux version to install. Must be one of the versions offered by
    /// `spec.versions` of the ProviderConfig; compared verbatim. At most
    /// 64 characters: the API server refuses a longer one, so a tenant
    /// cannot make the object megabytes large through it.
    #[cfg_attr(feature = "crd", schemars(length(max = 64)))]
    pub version: String,
}

/// Observed state of a Flux instance, written by the service provider.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FluxStatus {
    /// The generation the status was computed for.
    pub observed_generation: i64,
    /// Ready, Progressing or Terminating.
    pub phase: String,
    /// Conditions; `Ready` summarises the instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "crd",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
    /// The objects the provider manages for this instance, and their state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ManagedResource>>,
}

/// Operator-facing configuration of the Flux service provider: which Flux
/// versions tenants may order, what each installs, and an optional CA bundle
/// for Flux's controllers. Only the ProviderConfig named like the provider
/// (`--provider-name`) is used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    feature = "crd",
    kube(
        group = "flux.services.open-control-plane.io",
        version = "v1alpha1",
        kind = "ProviderConfig",
        plural = "providerconfigs",
        doc = "Configuration of the Flux service provider: the Flux versions tenants may order.",
        status = "ProviderConfigStatus",
        label("openmcp.cloud/cluster", "platform"),
        printcolumn(name = "Poll", type_ = "string", json_path = ".spec.pollInterval"),
        printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The Flux versions tenants may install.
    pub versions: Vec<FluxVersion>,
    /// How often each instance is reconciled when nothing changes, and the
    /// interval of its Flux objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "crd", schemars(extend("default" = "1m", "format" = "duration")))]
    pub poll_interval: Option<String>,
    /// A ConfigMap in the provider's namespace with a CA bundle Flux's
    /// controllers must trust; copied onto the ControlPlane as
    /// `custom-ca-bundle` and mounted into every controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_ref: Option<CaBundleRef>,
}

/// A key of a ConfigMap in the provider's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CaBundleRef {
    /// Name of the ConfigMap.
    #[serde(default)]
    pub name: String,
    /// The key holding the bundle (PEM).
    pub key: String,
    /// Accepted for compatibility; the bundle is always required when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// One offered Flux version and the artifacts it maps to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FluxVersion {
    /// The tenant-facing version, compared verbatim with `Flux.spec.version`.
    pub version: String,
    /// The Helm chart version to install.
    pub chart_version: String,
    /// OCI URL of the Flux chart, used as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "crd",
        schemars(extend("default" = "oci://ghcr.io/fluxcd-community/charts/flux2"))
    )]
    pub chart_url: Option<String>,
    /// Secret in the provider's namespace with registry credentials for the
    /// chart (type kubernetes.io/dockerconfigjson); copied into the tenant
    /// namespace as `sp-flux-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_pull_secret: Option<String>,
    /// Helm values for the chart. `imagePullSecrets` are copied onto the
    /// ControlPlane; `namespaceOverride` moves Flux out of `flux-system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "crd", schemars(schema_with = "guest_kro::api::preserve_unknown_object"))]
    pub values: Option<serde_json::Value>,
}
