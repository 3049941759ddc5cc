//! `plugin inspect` and `plugin grant`: what a component is and asks for,
//! read from the component itself (its contract section, its digest, its
//! `describe()`), and the grant that gives it exactly that.
//!
//! The grant is what an author hands the platform team with the digest and
//! the signing key: its identity pinned to the component's digest, one
//! write rule per capability (with the built-in grant's reviewed field
//! rules where it has a rule for the kind), one observe rule per
//! observation, the token rules as requested. It is checked before it is
//! printed: intersected with the descriptor it must refuse nothing, so what
//! the platform reviews is what the plugin runs with. What nobody reviewed
//! (a named cluster power in a token rule, a Flux kind the built-in grant
//! has no rule for, a core kind observed whole) is printed only when the
//! author says so, and then the file's header names each.

use serde::Serialize;
use service_provider_sdk::contract::{
    Capability, Cluster, Descriptor, Detail, NamespaceScope, Observation, PolicyRule,
};

use crate::plugin::grant::identity::crd_name_and_group;
use crate::plugin::grant::{Effective, FieldRule, Grant, WriteRule, hard, listed};
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    only_fields: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fields: Vec<FieldRule>,
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
            only_fields: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// With the field rules of the built-in grant's rule for this kind on
    /// this cluster, if it has one.
    fn reviewed(mut self, reviewed: &[WriteRule]) -> Self {
        let (group, kind) = (&self.groups[0], &self.kinds[0]);
        if let Some(rule) = reviewed.iter().find(|r| {
            r.place().cluster == self.cluster
                && listed(&r.groups, group)
                && listed(&r.kinds, kind)
                && !(r.fields.is_empty() && r.only_fields.is_empty())
        }) {
            self.only_fields = rule.only_fields.clone();
            self.fields = rule.fields.clone();
        }
        self
    }
}

/// What of a descriptor no review covers: printed only with
/// `--allow-unreviewed`, and then named in the grant's header.
fn unreviewed(descriptor: &Descriptor, write: &[RuleDocument]) -> Vec<String> {
    let access = &descriptor.access;
    let mut found: Vec<String> = access
        .control_plane_rules
        .iter()
        .chain(access.workload_cluster.then_some(&access.workload_rules).into_iter().flatten())
        .flat_map(hard::powers)
        .map(|power| format!("the token rule for {power}, a power over the cluster itself"))
        .collect();
    found.extend(
        write
            .iter()
            .filter(|r| r.groups[0].ends_with(".toolkit.fluxcd.io") && r.fields.is_empty() && r.only_fields.is_empty())
            .map(|r| {
                format!(
                    "writing {} ({}), a Flux kind the built-in grant has no reviewed rule for",
                    r.kinds[0], r.groups[0]
                )
            }),
    );
    found.extend(
        descriptor
            .observations
            .iter()
            .filter(|o| o.api.group.is_empty() && o.detail == Detail::Full)
            .map(|o| format!("observing {} whole (detail: full), a core kind", o.api.kind)),
    );
    found.sort();
    found.dedup();
    found
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
    /// The plugin asks for what nobody reviewed, and the author did not
    /// say to print it anyway.
    #[error(
        "plugin {plugin} asks for what no review covers: {}; review it, then run again with --allow-unreviewed \
         (the grant's header will name each)",
        unreviewed.join("; ")
    )]
    Unreviewed { plugin: String, unreviewed: Vec<String> },
}

/// The grant that gives the component with this descriptor and digest
/// exactly what it asks for, as YAML with a header saying so. What no
/// review covers ([`unreviewed`]) is refused unless `allow_unreviewed`.
pub fn grant_for(descriptor: &Descriptor, digest: &str, allow_unreviewed: bool) -> Result<String, GrantWriteError> {
    let kind =
        |k: &service_provider_sdk::contract::ApiKind| KindDocument { group: k.group.clone(), kind: k.kind.clone() };
    // Secrets are never written from a plan (no Secret data passes the
    // sandbox): a Secret capability is where its copies go.
    let (copied, written): (Vec<&Capability>, Vec<&Capability>) =
        descriptor.capabilities.iter().partition(|c| c.api.group.is_empty() && c.api.kind == "Secret");
    let access = &descriptor.access;
    let reviewed = Grant::default_grant().write;
    let write: Vec<RuleDocument> = written
        .iter()
        .map(|c| RuleDocument::new(c.cluster, &c.scope, &c.api.group, &c.api.kind, None).reviewed(&reviewed))
        .collect();
    let unreviewed = unreviewed(descriptor, &write);
    if !unreviewed.is_empty() && !allow_unreviewed {
        return Err(GrantWriteError::Unreviewed { plugin: descriptor.name.clone(), unreviewed });
    }
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
        write,
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
    let unreviewed: String =
        unreviewed.iter().map(|u| format!("#   - {}\n", crate::syntax::one_line(u, 200))).collect();
    let unreviewed = match unreviewed.is_empty() {
        true => String::new(),
        false => format!("# UNREVIEWED, printed with --allow-unreviewed; review each before granting:\n{unreviewed}"),
    };
    Ok(format!(
        "# The grant for plugin {name}, component {digest}: its identity pinned to\n\
         # those bytes, and exactly what it asks for. Flux kinds carry the built-in\n\
         # grant's reviewed field rules. Which Secrets and ConfigMaps of the\n\
         # provider's namespace copies may come from (copy.sources) is the\n\
         # platform's to add, as are copy targets for ConfigMap copies and\n\
         # conditions on the fields of other written objects (fields, onlyFields).\n{unreviewed}{yaml}",
        name = descriptor.name
    ))
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::{ApiKind, Stage};

    use super::*;

    fn descriptor(token_rules: Vec<PolicyRule>, observe_config_maps: bool) -> Descriptor {
        let service = ApiKind::new("greeter.example", "v1alpha1", "Greeter", "greeters", true);
        let release = ApiKind::new("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true);
        let mut d = Descriptor::new("greeter", service.clone(), service, "greeter.example/finalizer");
        d.capabilities =
            vec![Capability { cluster: Cluster::Platform, api: release, scope: NamespaceScope::Tenant, names: vec![] }];
        d.access.control_plane_rules = token_rules;
        if observe_config_maps {
            d.observations = vec![Observation {
                id: "settings".into(),
                cluster: Cluster::ControlPlane,
                api: ApiKind::new("", "v1", "ConfigMap", "configmaps", true),
                scope: NamespaceScope::Any,
                name: None,
                stage: Stage::Reconcile,
                detail: Detail::Full,
            }];
        }
        d
    }

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn a_flux_kind_carries_the_reviewed_field_rules() {
        let reads = PolicyRule::new(&[""], &["configmaps"], &["get"]);
        let text = grant_for(&descriptor(vec![reads], false), DIGEST, false).expect("nothing unreviewed");
        let grant = Grant::parse(&text).expect("the printed grant parses");
        let release = &grant.write[0];
        assert!(release.only_fields.iter().any(|f| f == "/spec/kubeConfig/secretRef"), "{text}");
        let kubeconfig = release.fields.iter().find(|f| f.path == "/spec/kubeConfig/secretRef/name").expect("{text}");
        assert!(kubeconfig.required && kubeconfig.one_of.contains(&"{controlPlaneSecret}".to_string()), "{text}");
        assert!(!text.contains("UNREVIEWED"), "{text}");
    }

    #[test]
    fn what_no_review_covers_is_printed_only_when_allowed_and_then_named() {
        let powers = PolicyRule::new(&["rbac.authorization.k8s.io"], &["clusterroles"], &["escalate", "bind"]);
        let d = descriptor(vec![powers], true);
        let refused = grant_for(&d, DIGEST, false).unwrap_err().to_string();
        for expected in
            ["escalate on clusterroles", "bind on clusterroles", "observing ConfigMap whole", "--allow-unreviewed"]
        {
            assert!(refused.contains(expected), "{expected}: {refused}");
        }
        let text = grant_for(&d, DIGEST, true).expect("printed when allowed");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(header.iter().any(|l| l.contains("UNREVIEWED")), "{text}");
        assert!(header.iter().any(|l| l.contains("escalate on clusterroles")), "{text}");
        assert!(header.iter().any(|l| l.contains("observing ConfigMap whole")), "{text}");
    }
}
