//! The Kro service API (`Kro`, on the onboarding cluster) and its
//! `ProviderConfig` (cluster-scoped, on the platform cluster).
//!
//! These types are the single source of truth for `crds/*.yaml`: with the
//! `crd` feature, kube's derive turns them into CustomResourceDefinitions
//! (`task generate`). Without it they are plain serde types, which is all the
//! plugin needs inside the sandbox.

use serde::{Deserialize, Serialize};

pub const GROUP: &str = "kro.services.open-control-plane.io";
pub const VERSION: &str = "v1alpha1";

/// Default chart location when a version does not name one.
pub const DEFAULT_CHART_URL: &str = "oci://registry.k8s.io/kro/charts/kro";

/// A tenant's request for kro on its ControlPlane. The object's name and
/// namespace must equal those of the ControlPlane it is for.
// Several `printcolumn(type_ = ...)` entries are not duplicates.
#[cfg_attr(feature = "crd", allow(clippy::duplicated_attributes))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    feature = "crd",
    kube(
        group = "kro.services.open-control-plane.io",
        version = "v1alpha1",
        kind = "Kro",
        plural = "kroes",
        singular = "kro",
        namespaced,
        doc = "A tenant's request for kro on its ControlPlane (name and namespace equal the ControlPlane's).",
        status = "KroStatus",
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
pub struct KroSpec {
    /// The kro version to install. Must be one of the versions offered by
    /// `spec.versions` of the ProviderConfig; compared verbatim. At most
    /// 64 characters: the API server refuses a longer one, so a tenant
    /// cannot make the object megabytes large through it.
    #[cfg_attr(feature = "crd", schemars(length(max = 64)))]
    pub version: String,
}

/// Observed state of a Kro instance, written by the service provider.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KroStatus {
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

/// A status condition (same shape as metav1.Condition).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    #[cfg_attr(feature = "crd", schemars(extend("enum" = ["True", "False", "Unknown"])))]
    pub status: String,
    /// The generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    #[cfg_attr(feature = "crd", schemars(extend("format" = "date-time")))]
    pub last_transition_time: String,
    /// Machine-readable reason in CamelCase.
    pub reason: String,
    /// Human-readable details.
    pub message: String,
}

/// One object the provider manages for an instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ManagedResource {
    /// API group of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Ready, Progressing, Terminating, ...
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// ManagedControlPlane or PlatformCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Operator-facing configuration of the Kro service provider: which kro
/// versions tenants may order, and what each version installs. Only the
/// ProviderConfig named like the provider (`--provider-name`) is used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(kube::CustomResource, schemars::JsonSchema))]
#[cfg_attr(
    feature = "crd",
    kube(
        group = "kro.services.open-control-plane.io",
        version = "v1alpha1",
        kind = "ProviderConfig",
        plural = "providerconfigs",
        doc = "Configuration of the Kro service provider: the kro versions tenants may order.",
        status = "ProviderConfigStatus",
        label("openmcp.cloud/cluster", "platform"),
        printcolumn(name = "Poll", type_ = "string", json_path = ".spec.pollInterval"),
        printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The kro versions tenants may install. At least one; unique by `version`.
    #[cfg_attr(
        feature = "crd",
        schemars(
            length(min = 1),
            extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["version"])
        )
    )]
    pub versions: Vec<KroVersion>,
    /// How often each instance is reconciled when nothing changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "crd", schemars(extend("default" = "1m", "format" = "duration")))]
    pub poll_interval: Option<String>,
}

/// One offered kro version and the artifacts it maps to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KroVersion {
    /// The tenant-facing version, compared verbatim with `Kro.spec.version`.
    pub version: String,
    /// The Helm chart tag to install; need not equal `version`.
    pub chart_version: String,
    /// OCI URL of the chart; `oci://` is added when missing.
    #[serde(rename = "chartURL", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "crd",
        schemars(extend("default" = "oci://registry.k8s.io/kro/charts/kro"))
    )]
    pub chart_url: Option<String>,
    /// Secret in the provider's namespace with registry credentials for the
    /// chart. Must be of type kubernetes.io/dockerconfigjson. It is copied into
    /// the tenant namespace as `sp-kro-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_pull_secret: Option<String>,
    /// Helm values passed to the chart unchanged. Secrets listed under
    /// `imagePullSecrets` are copied into `kro-system` on the ControlPlane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "crd", schemars(schema_with = "crate::api::preserve_unknown_object"))]
    pub helm_values: Option<serde_json::Value>,
}

/// Observed state of the ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "crd", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "crd",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
}

/// A free-form object (Helm values): any keys, stored as given.
#[cfg(feature = "crd")]
pub fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The parts of a Kubernetes object's metadata the plugin reads.
#[derive(Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub generation: Option<i64>,
}

/// A Kubernetes object with a typed `spec`, as it arrives from the host.
#[derive(Deserialize, Clone, Debug, PartialEq)]
pub struct Object<S> {
    #[serde(default)]
    pub metadata: Metadata,
    pub spec: S,
}
