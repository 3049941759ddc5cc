//! The plugin contract as plain Rust types.
//!
//! One-to-one with the records of the newest contract version,
//! `wit/v0.2.0/service-provider.wit` (see there for the meaning of each
//! field; [`CONTRACT_VERSION`]). Plugins implement their logic against these
//! types so it runs natively in `cargo test`; the component glue and the host
//! convert from and to the generated bindings. Keeping both sides on the same
//! types is what lets the host test assert that a component and the native
//! library produce *identical* plans.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cluster {
    Platform,
    Onboarding,
    ControlPlane,
    Workload,
}

impl Cluster {
    pub fn as_str(self) -> &'static str {
        match self {
            Cluster::Platform => "platform",
            Cluster::Onboarding => "onboarding",
            Cluster::ControlPlane => "control-plane",
            Cluster::Workload => "workload",
        }
    }
}

impl std::fmt::Display for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl ApiKind {
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ApiKind { group: group.into(), version: version.into(), kind: kind.into(), plural: plural.into(), namespaced }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Crd {
    pub cluster: Cluster,
    pub manifest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    pub verbs: Vec<String>,
}

impl PolicyRule {
    /// A rule for all names of `resources` in `api_groups` (`""` is core).
    pub fn new(api_groups: &[&str], resources: &[&str], verbs: &[&str]) -> Self {
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        PolicyRule {
            api_groups: strings(api_groups),
            resources: strings(resources),
            resource_names: Vec::new(),
            verbs: strings(verbs),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    pub control_plane_rules: Vec<PolicyRule>,
    pub workload_cluster: bool,
    pub workload_rules: Vec<PolicyRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceScope {
    Tenant,
    Named(String),
    ClusterScoped,
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capability {
    pub cluster: Cluster,
    pub api: ApiKind,
    pub scope: NamespaceScope,
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    Reconcile,
    Cleanup,
    Always,
}

impl Stage {
    /// Whether an observation with this stage is needed for `cleanup`
    /// (`true`) or `plan` (`false`).
    pub fn applies(self, cleanup: bool) -> bool {
        matches!((self, cleanup), (Stage::Always, _) | (Stage::Cleanup, true) | (Stage::Reconcile, false))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Detail {
    Full,
    Metadata,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    pub id: String,
    pub cluster: Cluster,
    pub api: ApiKind,
    pub scope: NamespaceScope,
    pub name: Option<String>,
    pub stage: Stage,
    pub detail: Detail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub name: String,
    pub service: ApiKind,
    pub provider_config: ApiKind,
    pub finalizer: String,
    pub crds: Vec<Crd>,
    pub access: Access,
    pub capabilities: Vec<Capability>,
    pub observations: Vec<Observation>,
}

impl Descriptor {
    /// A descriptor with no CRDs, access rules, capabilities or observations
    /// yet; fill those in with struct update syntax or field by field.
    pub fn new(name: &str, service: ApiKind, provider_config: ApiKind, finalizer: &str) -> Self {
        Descriptor {
            name: name.into(),
            service,
            provider_config,
            finalizer: finalizer.into(),
            crds: Vec::new(),
            access: Access::default(),
            capabilities: Vec::new(),
            observations: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigRef {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    pub provider_name: String,
    pub tenant_namespace: String,
    pub pod_namespace: String,
    pub control_plane: Option<KubeconfigRef>,
    pub workload: Option<KubeconfigRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    pub id: String,
    pub objects: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    pub object: String,
    pub provider_config: Option<String>,
    pub context: Context,
    pub observed: Vec<Observed>,
}

impl Input {
    /// The objects observed under `id`, or `None` if the host could not make
    /// that observation.
    pub fn observed(&self, id: &str) -> Option<&[String]> {
        self.observed.iter().find(|o| o.id == id).map(|o| o.objects.as_slice())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredObject {
    pub cluster: Cluster,
    pub manifest: String,
}

/// What a copy carries: a Secret (whose source must have this `type`) or a
/// ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyKind {
    Secret(String),
    ConfigMap,
}

impl CopyKind {
    /// The Kubernetes kind of the copied object.
    pub fn kind(&self) -> &'static str {
        match self {
            CopyKind::Secret(_) => "Secret",
            CopyKind::ConfigMap => "ConfigMap",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectCopy {
    pub kind: CopyKind,
    pub source_name: String,
    pub target_cluster: Cluster,
    pub target_namespace: String,
    pub target_name: String,
}

impl ObjectCopy {
    /// The Kubernetes kind of the copied object.
    pub fn kind(&self) -> &'static str {
        self.kind.kind()
    }

    /// A copy of the Secret `source` that must have type `required_type`.
    pub fn secret(source: &str, required_type: &str, cluster: Cluster, namespace: &str, name: &str) -> ObjectCopy {
        ObjectCopy {
            kind: CopyKind::Secret(required_type.to_string()),
            source_name: source.to_string(),
            target_cluster: cluster,
            target_namespace: namespace.to_string(),
            target_name: name.to_string(),
        }
    }

    /// A copy of the ConfigMap `source`.
    pub fn config_map(source: &str, cluster: Cluster, namespace: &str, name: &str) -> ObjectCopy {
        ObjectCopy {
            kind: CopyKind::ConfigMap,
            source_name: source.to_string(),
            target_cluster: cluster,
            target_namespace: namespace.to_string(),
            target_name: name.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub cluster: Cluster,
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A status condition; the host adds the transition time and the observed
/// generation. A status holds at most 16.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// A qualified name (`Ready`, `example.com/Installed`).
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// One CamelCase word (letters, digits, `_`, `,`, `:`).
    pub reason: String,
    /// Any text; the host cuts it at 32 KiB and blanks control characters
    /// other than line breaks and tabs.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    pub phase: String,
    pub conditions: Vec<Condition>,
    pub resources: Option<Vec<ResourceStatus>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub objects: Vec<DesiredObject>,
    pub copies: Vec<ObjectCopy>,
    pub status: ServiceStatus,
    pub requeue_after_seconds: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvalidInput {
    pub message: String,
    pub requeue_after_seconds: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanError {
    InvalidInput(InvalidInput),
    Transient(String),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::InvalidInput(i) => f.write_str(&i.message),
            PlanError::Transient(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for PlanError {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    pub message: String,
    pub requeue_after_seconds: u32,
    pub resources: Option<Vec<ResourceStatus>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Teardown {
    pub objects: Vec<ObjectRef>,
    pub copies: Vec<ObjectRef>,
    pub resources: Option<Vec<ResourceStatus>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupPlan {
    Blocked(Blocked),
    Teardown(Teardown),
}

/// What a provider plugin implements. The component glue exports it through
/// the WIT world; tests call it directly.
pub trait Provider {
    fn describe() -> Descriptor;
    fn plan(input: &Input) -> Result<Plan, PlanError>;
    fn cleanup(input: &Input) -> Result<CleanupPlan, PlanError>;
}
