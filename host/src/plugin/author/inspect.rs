//! `plugin inspect` and `plugin grant`: what a component is and asks for,
//! read from the component itself (its contract section, its digest, its
//! `describe()`), and the grant that gives it exactly that.
//!
//! The grant is what an author hands the platform team with the digest and
//! the signing key: its identity pinned to the component's digest, one
//! write rule per capability, one observe rule per observation, the token
//! rules as requested. It is checked before it is printed: intersected with
//! the descriptor it must refuse nothing, so what the platform reviews is
//! what the plugin runs with.

use serde::Serialize;
use service_provider_sdk::contract::{
    Capability, Cluster, Descriptor, Detail, NamespaceScope, Observation, PolicyRule,
};

use crate::plugin::grant::identity::crd_name_and_group;
use crate::plugin::grant::{Effective, Grant};
use crate::plugin::sandbox::Plugin;

/// What `plugin inspect` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// The contract version the component implements.
    pub contract: String,
    /// `sha256:` of the component's bytes (what a grant identity pins).
    pub component_digest: String,
    /// The digest-pinned registry reference, when pulled from one (its
    /// digest is the OCI manifest's, what `--plugin` and cosign name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    pub plugin: String,
    pub service: String,
    pub provider_config: String,
    pub finalizer: String,
    /// `<plural>.<group>` and the cluster `init`/`run` install it on.
    pub crds: Vec<CrdSummary>,
    pub capabilities: Vec<Capability>,
    pub observations: Vec<Observation>,
    pub token_rules: TokenRules,
}

#[derive(Debug, Clone, Serialize)]
pub struct CrdSummary {
    pub name: String,
    pub cluster: Cluster,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRules {
    pub control_plane: Vec<PolicyRule>,
    /// Only when the plugin asks for a workload cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<Vec<PolicyRule>>,
}

/// Reads a loaded component; `reference` is its pinned registry
/// reference, if it came from one.
pub fn inspect(plugin: &Plugin, reference: Option<String>) -> Inspection {
    let d = plugin.descriptor();
    Inspection {
        contract: plugin.contract_version().to_string(),
        component_digest: plugin.digest().to_string(),
        reference,
        plugin: d.name.clone(),
        service: format!("{} ({})", d.service.kind, d.service.api_version()),
        provider_config: format!("{} ({})", d.provider_config.kind, d.provider_config.api_version()),
        finalizer: d.finalizer.clone(),
        crds: d
            .crds
            .iter()
            .map(|c| CrdSummary { name: crd_name_and_group(&c.manifest).0, cluster: c.cluster })
            .collect(),
        capabilities: d.capabilities.clone(),
        observations: d.observations.clone(),
        token_rules: TokenRules {
            control_plane: d.access.control_plane_rules.clone(),
            workload: d.access.workload_cluster.then(|| d.access.workload_rules.clone()),
        },
    }
}

/// The grant as YAML: the field names of `--plugin-grant`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GrantDocument {
    plugin: String,
    identities: Vec<IdentityDocument>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    write: Vec<RuleDocument>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    observe: Vec<RuleDocument>,
    #[serde(skip_serializing_if = "Option::is_none")]
    copy: Option<CopyDocument>,
}

/// Where copies may go; where they may come from is the platform's to add.
#[derive(Debug, Serialize)]
struct CopyDocument {
    targets: Vec<PlaceDocument>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PlaceDocument {
    cluster: Cluster,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    namespaces: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cluster_scoped: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct IdentityDocument {
    plugin: String,
    service: KindDocument,
    provider_config: KindDocument,
    finalizer: String,
    crds: Vec<String>,
    digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_rules: Option<TokenRulesDocument>,
}

#[derive(Debug, Serialize)]
struct KindDocument {
    group: String,
    kind: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenRulesDocument {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    control_plane: Vec<PolicyRule>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    workload: Vec<PolicyRule>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RuleDocument {
    cluster: Cluster,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    namespaces: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cluster_scoped: bool,
    groups: Vec<String>,
    kinds: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'static str>,
}

/// The places of a grant rule (`namespaces`, `clusterScoped`) that cover
/// exactly a request's scope.
fn places(scope: &NamespaceScope) -> (Vec<String>, bool) {
    match scope {
        NamespaceScope::Tenant => (vec!["{tenant}".to_string()], false),
        NamespaceScope::Named(namespace) => (vec![namespace.clone()], false),
        NamespaceScope::Any => (vec!["*".to_string()], false),
        NamespaceScope::ClusterScoped => (vec![], true),
    }
}

impl RuleDocument {
    fn new(cluster: Cluster, scope: &NamespaceScope, group: &str, kind: &str, detail: Option<&'static str>) -> Self {
        let (namespaces, cluster_scoped) = places(scope);
        RuleDocument {
            cluster,
            namespaces,
            cluster_scoped,
            groups: vec![group.into()],
            kinds: vec![kind.into()],
            detail,
        }
    }
}

/// Why no grant could be written.
#[derive(Debug, thiserror::Error)]
pub enum GrantWriteError {
    #[error("writing the grant: {0}")]
    Yaml(String),
    /// The written grant does not give what the plugin asks (a request no
    /// grant can give, such as a reserved API group).
    #[error("plugin {plugin} asks for what no grant gives: {}", refused.join("; "))]
    Refused { plugin: String, refused: Vec<String> },
}

/// The grant that gives the component with this descriptor and digest
/// exactly what it asks for, as YAML with a header saying so.
pub fn grant_for(descriptor: &Descriptor, digest: &str) -> Result<String, GrantWriteError> {
    let kind =
        |k: &service_provider_sdk::contract::ApiKind| KindDocument { group: k.group.clone(), kind: k.kind.clone() };
    // Secrets are never written from a plan (no Secret data passes the
    // sandbox): a Secret capability is where its copies go.
    let (copied, written): (Vec<&Capability>, Vec<&Capability>) =
        descriptor.capabilities.iter().partition(|c| c.api.group.is_empty() && c.api.kind == "Secret");
    let access = &descriptor.access;
    let token_rules = TokenRulesDocument {
        control_plane: access.control_plane_rules.clone(),
        workload: if access.workload_cluster { access.workload_rules.clone() } else { Vec::new() },
    };
    let document = GrantDocument {
        plugin: descriptor.name.clone(),
        identities: vec![IdentityDocument {
            plugin: descriptor.name.clone(),
            service: kind(&descriptor.service),
            provider_config: kind(&descriptor.provider_config),
            finalizer: descriptor.finalizer.clone(),
            crds: descriptor.crds.iter().map(|c| crd_name_and_group(&c.manifest).0).collect(),
            digest: digest.to_string(),
            token_rules: (!token_rules.control_plane.is_empty() || !token_rules.workload.is_empty())
                .then_some(token_rules),
        }],
        write: written
            .iter()
            .map(|c| RuleDocument::new(c.cluster, &c.scope, &c.api.group, &c.api.kind, None))
            .collect(),
        observe: descriptor
            .observations
            .iter()
            .map(|o| {
                let detail = match o.detail {
                    Detail::Full => "full",
                    Detail::Metadata => "metadata",
                };
                RuleDocument::new(o.cluster, &o.scope, &o.api.group, &o.api.kind, Some(detail))
            })
            .collect(),
        copy: (!copied.is_empty()).then(|| CopyDocument {
            targets: copied
                .iter()
                .map(|c| {
                    let (namespaces, cluster_scoped) = places(&c.scope);
                    PlaceDocument { cluster: c.cluster, namespaces, cluster_scoped }
                })
                .collect(),
        }),
    };
    let yaml = serde_saphyr::to_string(&document).map_err(|e| GrantWriteError::Yaml(e.to_string()))?;
    let grant = Grant::parse(&yaml).map_err(GrantWriteError::Yaml)?;
    let refused = match Effective::for_component(descriptor, digest, grant) {
        Ok(granted) => granted.refused,
        Err(e) => vec![e.to_string()],
    };
    if !refused.is_empty() {
        return Err(GrantWriteError::Refused { plugin: descriptor.name.clone(), refused });
    }
    Ok(format!(
        "# The grant for plugin {name}, component {digest}: its identity pinned to\n\
         # those bytes, and exactly what it asks for. Which Secrets and ConfigMaps\n\
         # of the provider's namespace copies may come from (copy.sources) is the\n\
         # platform's to add, as are copy targets for ConfigMap copies and\n\
         # conditions on the fields of written objects (fields, onlyFields).\n{yaml}",
        name = descriptor.name
    ))
}
