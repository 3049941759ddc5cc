//! What of a plugin's requests is granted, worked out once when it is
//! loaded. Requests that are not granted are not given (an observation is
//! not made, a token rule is not asked for, no workload cluster is
//! requested) and are reported, so the platform operator sees exactly what
//! the plugin wanted and did not get.

use std::collections::BTreeMap;

use service_provider_sdk::contract::{
    Capability, Cluster, Descriptor, Detail as ObservedDetail, NamespaceScope, Observation, PolicyRule,
};

use super::hard::{self, Own};
use super::{Detail, Grant, GrantError, ObserveRule, listed};

/// A plugin's requests intersected with the operator's grant.
#[derive(Debug, Clone)]
pub struct Effective {
    pub grant: Grant,
    pub own: Own,
    /// The observations the host makes: requested and granted.
    pub observations: Vec<Observation>,
    /// The annotation keys each observation (by id) may see.
    pub annotations: BTreeMap<String, Vec<String>>,
    /// The token rules the host asks for: requested and granted.
    pub control_plane_rules: Vec<PolicyRule>,
    pub workload_rules: Vec<PolicyRule>,
    /// Whether the host obtains a workload cluster: requested and granted.
    pub workload_cluster: bool,
    /// What was requested and not granted, one sentence each.
    pub refused: Vec<String>,
}

impl Effective {
    /// Intersects the descriptor of the component with digest `digest`
    /// (`sha256:<hex>`) with a grant: what the host does for a loaded
    /// plugin. Fails when the grant names another plugin, pins no identity
    /// for it, or one it does not match.
    pub fn for_component(descriptor: &Descriptor, digest: &str, grant: Grant) -> Result<Effective, GrantError> {
        Effective::checked(descriptor, Some(digest), grant)
    }

    /// Like [`Effective::for_component`], for a descriptor whose component
    /// is not at hand: an identity that pins a digest is then refused.
    pub fn new(descriptor: &Descriptor, grant: Grant) -> Result<Effective, GrantError> {
        Effective::checked(descriptor, None, grant)
    }

    fn checked(descriptor: &Descriptor, digest: Option<&str>, grant: Grant) -> Result<Effective, GrantError> {
        if let Some(name) = grant.plugin.as_deref().filter(|n| *n != descriptor.name) {
            return Err(GrantError::OtherPlugin { granted: name.to_string(), plugin: descriptor.name.clone() });
        }
        let plugin = || descriptor.name.clone();
        let identity =
            grant.identities.iter().find(|i| i.plugin == descriptor.name).ok_or_else(|| GrantError::NoIdentity {
                plugin: plugin(),
                pinned: grant.identities.iter().map(|i| i.plugin.clone()).collect(),
            })?;
        if let Some(why) = identity.invalid() {
            return Err(GrantError::Identity { plugin: plugin(), found: vec![format!("the grant's identity: {why}")] });
        }
        let mut found = identity.mismatches(descriptor);
        let pinned = identity.pinned_digests();
        match digest {
            Some(actual) if !pinned.is_empty() && !pinned.contains(&actual) => found.push(format!(
                "its digest is {actual}, the grant pins {}: only those components are this plugin; run any other \
                 with a grant that pins its digest",
                pinned.join(", ")
            )),
            None if !pinned.is_empty() => {
                found.push(format!("the grant pins digest {}, which cannot be checked here", pinned.join(", ")))
            }
            _ => {}
        }
        if !found.is_empty() {
            return Err(GrantError::Identity { plugin: plugin(), found });
        }
        let mut refused = Vec::new();
        for c in &descriptor.capabilities {
            if let Some(why) = capability_refusal(c, &grant) {
                let scope = super::delta::scope(&c.scope);
                refused.push(format!("writing {} in {scope} on the {} cluster: {why}", c.api.kind, c.cluster));
            }
        }
        let observations = descriptor
            .observations
            .iter()
            .filter(|o| match observation_refusal(o, &grant) {
                Some(why) => {
                    refused
                        .push(format!("observation {:?} ({} on the {} cluster): {why}", o.id, o.api.kind, o.cluster));
                    false
                }
                None => true,
            })
            .cloned()
            .collect::<Vec<_>>();
        let annotations = observations
            .iter()
            .map(|o| {
                let keys = grant.observe.iter().filter(|rule| covers(rule, o)).flat_map(|r| r.annotations.clone());
                (o.id.clone(), keys.collect())
            })
            .collect();
        // The identity's own ceiling, else the grant's for every plugin.
        let ceiling = identity.token_rules.as_ref().unwrap_or(&grant.token_rules).clone();
        let mut control_plane_rules =
            granted_rules("ControlPlane", &descriptor.access.control_plane_rules, &ceiling.control_plane, &mut refused);
        control_plane_rules.extend(crd_rule(descriptor, Cluster::ControlPlane, &identity.crds));
        let mut workload_rules = Vec::new();
        let mut workload_cluster = descriptor.access.workload_cluster;
        if workload_cluster && ceiling.workload.is_empty() {
            refused.push("a workload cluster: the grant gives none (tokenRules.workload is empty)".into());
            workload_cluster = false;
        } else if workload_cluster {
            workload_rules =
                granted_rules("workload", &descriptor.access.workload_rules, &ceiling.workload, &mut refused);
            workload_rules.extend(crd_rule(descriptor, Cluster::Workload, &identity.crds));
        }
        let own = Own::of(descriptor, &identity.crds);
        Ok(Effective {
            grant,
            own,
            observations,
            annotations,
            control_plane_rules,
            workload_rules,
            workload_cluster,
            refused,
        })
    }

    /// The annotation keys observation `id` may see.
    pub fn annotations(&self, id: &str) -> &[String] {
        self.annotations.get(id).map_or(&[], Vec::as_slice)
    }

    /// What granting exactly `observations` (and nothing else) comes to: for
    /// tests of what is done with observations.
    #[cfg(test)]
    pub fn granting(observations: Vec<Observation>) -> Effective {
        let kind = service_provider_sdk::contract::ApiKind::new("test.example", "v1", "Test", "tests", true);
        let descriptor = Descriptor::new("test", kind.clone(), kind, "test.example/finalizer");
        let grant = Grant { identities: vec![super::Identity::of(&descriptor)], ..Grant::default() };
        Effective { observations, ..Effective::new(&descriptor, grant).expect("the identity is the descriptor's") }
    }
}

fn observation_refusal(o: &Observation, grant: &Grant) -> Option<String> {
    if let Some(r) = hard::observe(o.cluster, &o.api, o.detail, &o.scope) {
        return Some(format!("{} (rule {})", r.reason, r.rule));
    }
    let detail = match o.detail {
        ObservedDetail::Full => Detail::Full,
        ObservedDetail::Metadata => Detail::Metadata,
    };
    let covered = grant.observe.iter().any(|rule| covers(rule, o) && rule.detail >= detail);
    (!covered).then(|| "no observe rule of the grant allows it (rule not-granted)".to_string())
}

fn covers(rule: &ObserveRule, o: &Observation) -> bool {
    rule.cluster == o.cluster
        && listed(&rule.groups, &o.api.group)
        && listed(&rule.kinds, &o.api.kind)
        && scope_covered(&rule.namespaces, rule.cluster_scoped, &o.scope, o.api.namespaced)
}

/// Whether a capability is covered by the grant: by a write rule, or, for
/// the kinds copies make (Secrets, ConfigMaps), by a copy target. A
/// capability no rule covers is refused at load like an observation,
/// naming it, rather than at the first plan that uses it. One covered
/// only by a copy target serves copies; a plan's object of it is refused
/// with that said (`Effective::check_write`).
fn capability_refusal(c: &Capability, grant: &Grant) -> Option<String> {
    let written = grant.write.iter().any(|rule| {
        rule.cluster == c.cluster
            && listed(&rule.groups, &c.api.group)
            && listed(&rule.kinds, &c.api.kind)
            && scope_covered(&rule.namespaces, rule.cluster_scoped, &c.scope, c.api.namespaced)
    });
    let copied = super::copied_kind(&c.api.group, &c.api.kind)
        && grant.copy.targets.iter().any(|place| {
            place.cluster == c.cluster && scope_covered(&place.namespaces, place.cluster_scoped, &c.scope, true)
        });
    (!written && !copied).then(|| "no write rule or copy target of the grant allows it (rule not-granted)".to_string())
}

/// Whether a rule's places (`namespaces`, `clusterScoped`) cover a
/// request's scope.
fn scope_covered(namespaces: &[String], cluster_scoped: bool, scope: &NamespaceScope, namespaced: bool) -> bool {
    let any_namespace = namespaces.iter().any(|n| n == "*");
    match scope {
        NamespaceScope::Tenant => any_namespace || namespaces.iter().any(|n| n == "{tenant}"),
        NamespaceScope::Named(ns) => any_namespace || namespaces.contains(ns),
        // Every namespace of a namespaced kind, or a cluster-scoped kind.
        NamespaceScope::ClusterScoped if namespaced => any_namespace,
        NamespaceScope::Any => any_namespace,
        NamespaceScope::ClusterScoped => cluster_scoped,
    }
}

/// What the host itself does with an instance's token on a tenant cluster:
/// install the plugin's CRDs for that cluster (`run`, see `crate::reconcile::apply::crds`)
/// and wait for them to be established. Named CRDs only, and only those
/// the grant's identity lists (its consent to their installation); none
/// when the plugin brings no CRD there.
fn crd_rule(descriptor: &Descriptor, cluster: Cluster, granted: &[String]) -> Option<PolicyRule> {
    let mut names: Vec<String> = descriptor
        .crds
        .iter()
        .filter(|c| c.cluster == cluster)
        .map(|c| super::identity::crd_name_and_group(&c.manifest).0)
        .filter(|name| !name.is_empty() && granted.contains(name))
        .collect();
    names.sort();
    names.dedup();
    (!names.is_empty()).then(|| PolicyRule {
        api_groups: vec!["apiextensions.k8s.io".into()],
        resources: vec!["customresourcedefinitions".into()],
        resource_names: names,
        verbs: ["get", "list", "watch", "create", "patch", "update"].map(String::from).to_vec(),
    })
}

/// The requested rules a grant covers; the others are reported.
fn granted_rules(
    cluster: &str,
    requested: &[PolicyRule],
    granted: &[PolicyRule],
    refused: &mut Vec<String>,
) -> Vec<PolicyRule> {
    requested
        .iter()
        .filter(|rule| {
            let powers = hard::powers(rule);
            let why = match hard::token_rule(rule) {
                Some(r) => Some(format!("{} (rule {})", r.reason, r.rule)),
                None if !granted.iter().any(|g| rule_covers(g, rule)) => {
                    Some("no token rule of the grant covers it (rule not-granted)".to_string())
                }
                None if !granted.iter().any(|g| rule_covers(g, rule) && hard::powers_covered(g, &powers)) => {
                    let named: Vec<String> = powers.iter().map(ToString::to_string).collect();
                    Some(format!(
                        "it gives {}, which only a token rule of the grant that names it literally gives, never \
                         one with * (rule named-cluster-powers)",
                        named.join(", ")
                    ))
                }
                None => None,
            };
            if let Some(why) = &why {
                refused.push(format!(
                    "{cluster} token rule {:?} {:?} {:?}: {why}",
                    rule.api_groups, rule.resources, rule.verbs
                ));
            }
            why.is_none()
        })
        .cloned()
        .collect()
}

/// Whether granted RBAC rule `g` allows everything requested rule `r` does.
pub fn rule_covers(g: &PolicyRule, r: &PolicyRule) -> bool {
    let all = |granted: &[String], requested: &[String]| requested.iter().all(|x| listed(granted, x));
    let names = g.resource_names.is_empty()
        || (!r.resource_names.is_empty() && r.resource_names.iter().all(|n| g.resource_names.contains(n)));
    all(&g.api_groups, &r.api_groups) && all(&g.resources, &r.resources) && all(&g.verbs, &r.verbs) && names
}

#[cfg(test)]
mod tests;
