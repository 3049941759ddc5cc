//! What a plugin may do: decided by the platform operator, enforced by the
//! host, never by the plugin itself.
//!
//! A plugin *requests* in its `describe()` (capabilities, observations,
//! token rules, a workload cluster). The operator *grants* with a
//! [`Grant`] file (`--plugin-grant`; without one the built-in
//! [`default.yaml`](default.yaml) applies). The host acts on
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
//! - [`delta`]: what a candidate component asks for beyond the current one
//!   and beyond its grant (a plugin upgrade, before it is rolled out).

pub mod check;
pub mod delta;
pub mod effective;
mod fields;
mod floor;
pub mod hard;
pub mod identity;

use std::path::Path;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
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

/// The plugin components a release build ships, as `<plugin>=sha256:<hex>`
/// separated by spaces: `scripts/build-host-binary.sh` sets it from the
/// components it puts into the image, and the built-in grant gives its
/// identities to exactly those bytes. `None` in a development build, whose
/// built-in grant trusts a plugin by its name (and says so at start).
pub const SHIPPED: Option<&str> = option_env!("SERVICE_PROVIDER_HOST_SHIPPED_PLUGINS");

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
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldRule {
    pub path: String,
    /// The field must be present.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// The field must not be present.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub absent: bool,
    /// If present, the field must be a string with one of these values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<String>,
    /// If present, the field must be a reference `{kind, name}` (with, if
    /// set, the object's own `namespace`) to an object the same plan
    /// applies on the same cluster in the same namespace: never to
    /// another provider's object that happens to be there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
    /// If present, the field must be a duration (Go's syntax, `1m30s`) of
    /// at least this (`30s`): how often a Flux controller acts for the
    /// instance is a cost to every tenant of that controller. A whole
    /// number (`"0"`) bounds an integer field instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<String>,
    /// If present, the field must be a duration of at most this: a Helm
    /// action's timeout holds one of helm-controller's workers. A whole
    /// number (`"5"`) bounds an integer field (Helm's retries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<String>,
}

/// What a `oneOf` value may stand for:
/// - `{tenant}`: the instance's tenant namespace;
/// - `{controlPlaneSecret}`, `{workloadSecret}`: the kubeconfig Secret of
///   the instance's AccessRequest;
/// - `{secretCopies}`, `{configMapCopies}`: the names of the Secret (or
///   ConfigMap) copies the same plan makes into the object's namespace on
///   its cluster. A copy of one kind never makes a name acceptable where the
///   other kind is read;
/// - `{providerConfigURLs}`: every string the ProviderConfig's `spec`
///   holds (only the platform operator writes it), and each that has no
///   scheme also with `oci://` in front: the registries and repositories
///   the operator named.
pub const PLACEHOLDERS: &[&str] = &[
    "{tenant}",
    "{controlPlaneSecret}",
    "{workloadSecret}",
    "{secretCopies}",
    "{configMapCopies}",
    "{providerConfigURLs}",
];

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

/// The annotation with which a copy source says where its copies may go:
/// cluster names (`platform`, `control-plane`, `workload`) separated by
/// commas. A registry credential the platform's source-controller needs is
/// annotated `platform`, so no plan copies it onto a tenant's ControlPlane,
/// where the tenant could read it. Without it, a source goes wherever the
/// grant's copy targets allow.
pub const COPY_TO_ANNOTATION: &str = "service-provider.open-control-plane.io/copy-to";

/// Bounds of the per-instance tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRules {
    #[serde(default)]
    pub control_plane: Vec<PolicyRule>,
    /// Empty: the plugin gets no workload cluster.
    #[serde(default)]
    pub workload: Vec<PolicyRule>,
}

impl Grant {
    /// The built-in grant, its identities pinned to the components this
    /// build ships ([`SHIPPED`]).
    pub fn default_grant() -> Grant {
        let grant = Grant::parse(DEFAULT).expect("the built-in grant parses");
        match SHIPPED {
            Some(shipped) => grant.pinned_to(shipped),
            None => grant,
        }
    }

    /// The built-in grant as a file: each identity pinned to the components
    /// this build ships, and `plugin`'s also to `digest` (a new build of a
    /// shipped plugin, which the built-in grant refuses by identity). What
    /// a platform runs that build with (`diff`, a shadow, a canary, then the
    /// promotion): `plugin grant --built-in <component>`.
    pub fn built_in_admitting(plugin: &str, digest: &str) -> Result<String, String> {
        Grant::built_in_admitting_with(SHIPPED, plugin, digest)
    }

    /// [`Grant::built_in_admitting`] for a build that ships `shipped`
    /// (`None`: a development build, whose built-in grant gives identities
    /// by name, and so admits any build of a plugin already: it pins
    /// nothing).
    fn built_in_admitting_with(shipped: Option<&str>, plugin: &str, digest: &str) -> Result<String, String> {
        let mut pins: Vec<(String, String)> = shipped
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pin| pin.split_once('='))
            .map(|(p, d)| (p.to_string(), d.to_string()))
            .collect();
        if shipped.is_some() && !pins.iter().any(|(p, d)| p == plugin && d == digest) {
            pins.push((plugin.to_string(), digest.to_string()));
        }
        let mut text = match shipped {
            Some(_) => format!(
                "# The built-in grant of service-provider-host {}, each identity given to the\n\
                 # components this build ships, and {plugin}'s also to {digest}\n\
                 # (`service-provider-host plugin grant --built-in`). Review what the new\n\
                 # component asks for first: `service-provider-host diff` shows the delta.\n",
                env!("CARGO_PKG_VERSION"),
            ),
            None => format!(
                "# The built-in grant of a development build of service-provider-host {}: it\n\
                 # gives identities by name, so it admits {digest} as {plugin} already\n\
                 # (`service-provider-host plugin grant --built-in`; a release build pins digests).\n",
                env!("CARGO_PKG_VERSION"),
            ),
        };
        let mut found = false;
        for line in DEFAULT.lines() {
            text.push_str(line);
            text.push('\n');
            let Some(name) = line.strip_prefix("  - plugin: ") else { continue };
            let digests: Vec<&str> = pins.iter().filter(|(p, _)| p == name.trim()).map(|(_, d)| d.as_str()).collect();
            found |= name.trim() == plugin;
            if !digests.is_empty() {
                text.push_str(&format!("    digests: [{}]\n", digests.join(", ")));
            }
        }
        if !found {
            return Err(format!(
                "the built-in grant has no identity {plugin:?}: give the component a grant of its own"
            ));
        }
        let grant = Grant::parse(&text)?;
        if shipped.is_some() && grant.identities.iter().any(|i| i.pinned_digests().is_empty()) {
            return Err("an identity of the built-in grant would be given by name".into());
        }
        Ok(text)
    }

    /// This grant with each identity given to exactly the components
    /// `shipped` names for its plugin (`<plugin>=sha256:<hex> …`); an
    /// identity no shipped component has is dropped.
    pub fn pinned_to(mut self, shipped: &str) -> Grant {
        let pins: Vec<(&str, &str)> = shipped.split_whitespace().filter_map(|pin| pin.split_once('=')).collect();
        self.identities.retain_mut(|identity| {
            identity.digest = None;
            identity.digests =
                pins.iter().filter(|(plugin, _)| *plugin == identity.plugin).map(|(_, d)| d.to_string()).collect();
            !identity.digests.is_empty()
        });
        self
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
                let bounds: Vec<&String> = [&field.at_least, &field.at_most].into_iter().flatten().collect();
                let numbers = bounds.iter().filter(|b| b.parse::<i64>().is_ok()).count();
                if numbers > 0 && numbers < bounds.len() {
                    return Err(format!("field {}: bounds are both whole numbers or both durations", field.path));
                }
                for bound in bounds.into_iter().filter(|_| numbers == 0) {
                    if crate::syntax::go_duration(bound).is_none() {
                        return Err(format!(
                            "field {}: {bound:?} is not a duration such as 30s or 1h, nor a whole number",
                            field.path
                        ));
                    }
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

/// Whether objects of `group`/`kind` are what copies make (Secrets,
/// ConfigMaps), which a copy target covers as well as a write rule.
pub(crate) fn copied_kind(group: &str, kind: &str) -> bool {
    group.is_empty() && matches!(kind, "Secret" | "ConfigMap")
}

/// Whether `item` is in `list`, with `*` matching anything.
pub(crate) fn listed(list: &[String], item: &str) -> bool {
    list.iter().any(|l| l == "*" || l == item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_grant_admits_a_new_build_of_a_shipped_plugin_by_its_digest() {
        let digest = |b: &str| format!("sha256:{}", b.repeat(32));
        let (old_kro, flux, new) = (digest("01"), digest("02"), digest("ab"));
        let shipped = format!("kro={old_kro} flux={flux}");
        let text = Grant::built_in_admitting_with(Some(&shipped), "kro", &new).unwrap();
        let grant = Grant::parse(&text).unwrap();
        let pins = |plugin: &str| {
            let identity = grant.identities.iter().find(|i| i.plugin == plugin).unwrap();
            identity.pinned_digests().into_iter().map(str::to_string).collect::<Vec<_>>()
        };
        assert_eq!(pins("kro"), [old_kro.clone(), new.clone()], "{text}");
        assert_eq!(pins("flux"), [flux], "only kro's identity is widened");
        assert_eq!(grant.write, Grant::default_grant().write, "the rules are the built-in ones");
        let other = Grant::built_in_admitting_with(Some(&shipped), "greeter", &new).unwrap_err();
        assert!(other.contains("no identity \"greeter\""), "{other}");
        // A development build gives identities by name: nothing to pin.
        let development = Grant::parse(&Grant::built_in_admitting_with(None, "kro", &new).unwrap()).unwrap();
        assert!(development.identities.iter().all(|i| i.pinned_digests().is_empty()));
    }

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
    fn the_built_in_identities_have_exactly_their_plugins_token_ceilings() {
        let grant = Grant::parse(DEFAULT).unwrap();
        assert!(grant.token_rules.control_plane.is_empty(), "no ceiling for any other plugin");
        for identity in &grant.identities {
            let ceiling = identity.token_rules.as_ref().expect("each built-in identity has its own ceiling");
            assert!(!ceiling.control_plane.is_empty(), "{}", identity.plugin);
            for rule in &ceiling.control_plane {
                assert!(
                    !rule.api_groups.iter().chain(&rule.resources).chain(&rule.verbs).any(|x| x.contains('*')),
                    "{rule:?}"
                );
            }
        }
    }

    #[test]
    fn the_built_in_grant_is_pinned_to_the_shipped_components() {
        let kro = format!("sha256:{}", "a".repeat(64));
        let other = format!("sha256:{}", "b".repeat(64));
        let grant = Grant::parse(DEFAULT).unwrap().pinned_to(&format!("kro={kro} kro={other}"));
        let plugins: Vec<&str> = grant.identities.iter().map(|i| i.plugin.as_str()).collect();
        assert_eq!(plugins, ["kro"], "an identity nothing shipped has is gone");
        assert_eq!(grant.identities[0].pinned_digests(), [kro.as_str(), other.as_str()]);
    }

    #[test]
    fn duration_bounds_are_durations() {
        let rule = |bound: &str| {
            format!(
                "write:\n  - cluster: platform\n    groups: [g]\n    kinds: [K]\n    fields:\n      - {{path: /spec/interval, atLeast: \"{bound}\"}}\n"
            )
        };
        assert!(Grant::parse(&rule("30s")).is_ok());
        assert!(Grant::parse(&rule("a while")).unwrap_err().contains("not a duration"));
        assert!(Grant::parse(&rule("5")).is_ok(), "a whole number bounds an integer field");
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
