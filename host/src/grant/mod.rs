//! What a plugin may do: decided by the platform operator, enforced by the
//! host, never by the plugin itself.
//!
//! A plugin *requests* in its `describe()` (capabilities, observations,
//! token rules, a workload cluster). The operator *grants* with a
//! [`Grant`] file (`--plugin-grant`; without one the built-in
//! [`default.yaml`](../../src/grant/default.yaml) applies). The host acts on
//! the intersection, and on top of any grant it always refuses what no
//! service provider needs and every attacker wants ([`hard`]): Secret data
//! in the sandbox, plain Secrets as objects, RBAC, admission webhooks,
//! foreign CRDs, openmcp's own kinds, the service kind itself, the
//! onboarding cluster, the platform cluster outside the tenant namespace,
//! system namespaces.
//!
//! - [`identity`]: who the plugin is (service and ProviderConfig kinds,
//!   finalizer, CRDs), pinned by the grant; a plugin claiming anything
//!   else does not load.
//! - [`effective`]: at load, what of the descriptor is granted; the rest is
//!   reported and not given.
//! - [`check`]: per call, every object, copy and deletion of a plan, with
//!   the field conditions of `fields`.

pub mod check;
pub mod effective;
mod fields;
pub mod hard;
pub mod identity;

use std::path::Path;

use std::path::PathBuf;

use serde::Deserialize;
use service_provider_sdk::contract::{Cluster, PolicyRule};

pub use check::Denial;
pub use effective::Effective;
pub use identity::Identity;

/// A grant that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("reading the plugin grant {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the plugin grant {} is not valid: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the plugin grant is for plugin {granted:?}, but the plugin is {plugin:?}")]
    OtherPlugin { granted: String, plugin: String },
    #[error(
        "the plugin grant pins no identity for plugin {plugin:?} (it pins {pinned:?}): a plugin is refused until \
         the platform operator's grant names its service kind, ProviderConfig kind, finalizer and CRDs \
         (identities in --plugin-grant)"
    )]
    NoIdentity { plugin: String, pinned: Vec<String> },
    #[error("plugin {plugin:?} is not what the plugin grant pins: {}", found.join("; "))]
    Identity { plugin: String, found: Vec<String> },
}

/// The built-in grant.
pub const DEFAULT: &str = include_str!("default.yaml");

/// The operator's grant for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    /// If set, the name the plugin must have (its `describe().name`): a
    /// grant written for one plugin is not silently used for another.
    #[serde(default)]
    pub plugin: Option<String>,
    /// Who each plugin this grant serves is (by name); a plugin without
    /// one is refused.
    #[serde(default)]
    pub identities: Vec<Identity>,
    /// Objects the host may apply and delete for the plugin.
    #[serde(default)]
    pub write: Vec<WriteRule>,
    /// Objects the host may read for the plugin.
    #[serde(default)]
    pub observe: Vec<ObserveRule>,
    /// Copies of Secrets and ConfigMaps from the pod namespace.
    #[serde(default)]
    pub copy: CopyRules,
    /// The most the per-instance tokens may allow.
    #[serde(default)]
    pub token_rules: TokenRules,
}

/// Where a rule applies: namespaces (`{tenant}` is the instance's tenant
/// namespace, `*` any namespace) and/or cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Place {
    pub cluster: Cluster,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub cluster_scoped: bool,
}

/// Objects of some kinds, in some places, that the host may write.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteRule {
    pub cluster: Cluster,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub cluster_scoped: bool,
    /// API groups (`""` is the core group, `*` any).
    pub groups: Vec<String>,
    /// Kinds (`*` any).
    pub kinds: Vec<String>,
    /// Conditions on fields of every object this rule allows.
    #[serde(default)]
    pub fields: Vec<FieldRule>,
    /// If not empty, the only fields an object may set besides `apiVersion`,
    /// `kind` and `metadata` (JSON pointers; each allows its whole subtree):
    /// a field nobody reviewed, such as one a new API version adds, is
    /// refused until the grant names it.
    #[serde(default)]
    pub only_fields: Vec<String>,
}

/// A condition on one field (a JSON pointer) of a written object. Values
/// may use the placeholders of [`PLACEHOLDERS`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldRule {
    pub path: String,
    /// The field must be present.
    #[serde(default)]
    pub required: bool,
    /// The field must not be present.
    #[serde(default)]
    pub absent: bool,
    /// If present, the field must be a string with one of these values.
    #[serde(default)]
    pub one_of: Vec<String>,
    /// If present, the field must be a reference `{kind, name}` (with, if
    /// set, the object's own `namespace`) to an object the same plan
    /// applies on the same cluster in the same namespace: never to
    /// another provider's object that happens to be there.
    #[serde(default)]
    pub planned: bool,
}

/// What a `oneOf` value may stand for:
/// - `{tenant}`: the instance's tenant namespace;
/// - `{controlPlaneSecret}`, `{workloadSecret}`: the kubeconfig Secret of
///   the instance's AccessRequest;
/// - `{secretCopies}`, `{configMapCopies}`: the names of the Secret (or
///   ConfigMap) copies the same plan makes into the object's namespace on
///   its cluster. A copy of one kind never makes a name acceptable where the
///   other kind is read.
pub const PLACEHOLDERS: &[&str] =
    &["{tenant}", "{controlPlaneSecret}", "{workloadSecret}", "{secretCopies}", "{configMapCopies}"];

/// How much of an object an observation may see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Detail {
    #[default]
    Metadata,
    Full,
}

/// Objects of some kinds, in some places, that the host may read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObserveRule {
    pub cluster: Cluster,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub cluster_scoped: bool,
    pub groups: Vec<String>,
    pub kinds: Vec<String>,
    /// The most the observation may see (`metadata` or `full`).
    #[serde(default)]
    pub detail: Detail,
    /// Annotation keys the observation may see. None by default: an
    /// annotation may carry anything (`kubectl apply` keeps a Secret's
    /// data in one).
    #[serde(default)]
    pub annotations: Vec<String>,
}

/// Where copies may go, and which sources they may come from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopyRules {
    #[serde(default)]
    pub targets: Vec<Place>,
    #[serde(default)]
    pub sources: CopySources,
}

/// Which objects in the pod namespace may be copied.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopySources {
    /// Objects whose name appears as a value anywhere in the ProviderConfig's
    /// `spec` (only the platform operator writes it).
    #[serde(default)]
    pub provider_config: bool,
    /// Objects labelled [`COPY_SOURCE_LABEL`] with the provider name.
    #[serde(default)]
    pub labelled: bool,
    /// Objects with exactly these names.
    #[serde(default)]
    pub names: Vec<String>,
}

/// The label that marks an object in the pod namespace as a copy source
/// for the provider named in its value.
pub const COPY_SOURCE_LABEL: &str = "service-provider.open-control-plane.io/copy-source";

/// Bounds of the per-instance tokens.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRules {
    #[serde(default)]
    pub control_plane: Vec<PolicyRule>,
    /// Empty: the plugin gets no workload cluster.
    #[serde(default)]
    pub workload: Vec<PolicyRule>,
}

impl Grant {
    /// The built-in grant.
    pub fn default_grant() -> Grant {
        Grant::parse(DEFAULT).expect("the built-in grant parses")
    }

    pub fn parse(text: &str) -> Result<Grant, String> {
        let grant: Grant = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        grant.check()?;
        Ok(grant)
    }

    /// What serde cannot say: placeholders are known ones, paths are JSON
    /// pointers.
    fn check(&self) -> Result<(), String> {
        for identity in &self.identities {
            if let Some(why) = identity.invalid() {
                return Err(format!("the identity of plugin {:?} cannot be granted: {why}", identity.plugin));
            }
        }
        for rule in &self.write {
            for field in &rule.fields {
                if !field.path.starts_with('/') {
                    return Err(format!("field path {:?} is not a JSON pointer", field.path));
                }
                let unknown = field.one_of.iter().find(|v| v.starts_with('{') && !PLACEHOLDERS.contains(&v.as_str()));
                if let Some(value) = unknown {
                    return Err(format!(
                        "field {}: {value} is not a placeholder; use one of {}",
                        field.path,
                        PLACEHOLDERS.join(", ")
                    ));
                }
            }
            if let Some(path) = rule.only_fields.iter().find(|p| !p.starts_with('/')) {
                return Err(format!("onlyFields: {path:?} is not a JSON pointer"));
            }
        }
        Ok(())
    }

    /// This grant, also pinning the identity `descriptor` claims (what an
    /// operator does who accepts a plugin as it describes itself).
    pub fn pinning(mut self, descriptor: &service_provider_sdk::contract::Descriptor) -> Grant {
        self.identities.retain(|i| i.plugin != descriptor.name);
        self.identities.push(Identity::of(descriptor));
        self
    }

    /// Reads a grant file, or the built-in grant when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Grant, GrantError> {
        let Some(path) = path else { return Ok(Grant::default_grant()) };
        let text =
            std::fs::read_to_string(path).map_err(|source| GrantError::Read { path: path.to_path_buf(), source })?;
        Grant::parse(&text).map_err(|message| GrantError::Parse { path: path.to_path_buf(), message })
    }
}

impl WriteRule {
    pub fn place(&self) -> Place {
        Place { cluster: self.cluster, namespaces: self.namespaces.clone(), cluster_scoped: self.cluster_scoped }
    }
}

impl ObserveRule {
    pub fn place(&self) -> Place {
        Place { cluster: self.cluster, namespaces: self.namespaces.clone(), cluster_scoped: self.cluster_scoped }
    }
}

/// Whether `item` is in `list`, with `*` matching anything.
pub(crate) fn listed(list: &[String], item: &str) -> bool {
    list.iter().any(|l| l == "*" || l == item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_grant_parses_and_is_narrow() {
        let grant = Grant::default_grant();
        assert!(grant.write.iter().all(|w| w.cluster != Cluster::Onboarding));
        assert!(grant.token_rules.workload.is_empty(), "no workload cluster by default");
        let platform_writes: Vec<_> = grant.write.iter().filter(|w| w.cluster == Cluster::Platform).collect();
        assert!(platform_writes.iter().all(|w| w.namespaces == ["{tenant}"] && !w.cluster_scoped));
        let release = platform_writes.iter().find(|w| w.kinds.contains(&"HelmRelease".to_string())).unwrap();
        assert!(release.fields.iter().any(|f| f.path == "/spec/kubeConfig/secretRef/name" && f.required));
    }

    #[test]
    fn unknown_fields_are_errors_not_silently_ignored() {
        let err = Grant::parse("write:\n  - cluster: platform\n    groups: []\n    kinds: []\n    namespace: x\n")
            .unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
        assert!(Grant::parse("writes: []\n").is_err());
    }

    #[test]
    fn placeholders_are_known_ones() {
        let rule = |value: &str| {
            format!(
                "write:\n  - cluster: platform\n    groups: [g]\n    kinds: [K]\n    fields:\n      - path: /spec/secretRef/name\n        oneOf: [\"{value}\"]\n"
            )
        };
        assert!(Grant::parse(&rule("{secretCopies}")).is_ok());
        let err = Grant::parse(&rule("{copies}")).unwrap_err();
        assert!(err.contains("{copies} is not a placeholder") && err.contains("{secretCopies}"), "{err}");
    }

    #[test]
    fn a_missing_grant_file_is_a_clear_error() {
        let err = Grant::load(Some(Path::new("/nonexistent/grant.yaml"))).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/grant.yaml"), "{err}");
    }
}
