//! What of a plugin's requests is granted, worked out once when it is
//! loaded. Requests that are not granted are not given (an observation is
//! not made, a token rule is not asked for, no workload cluster is
//! requested) and are reported, so the platform operator sees exactly what
//! the plugin wanted and did not get.

use std::collections::BTreeMap;

use service_provider_sdk::contract::{Descriptor, Detail as ObservedDetail, NamespaceScope, Observation, PolicyRule};

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
        match (identity.digest.as_deref(), digest) {
            (Some(pinned), Some(actual)) if pinned != actual => {
                found.push(format!("its digest is {actual}, the grant pins {pinned}"));
            }
            (Some(pinned), None) => found.push(format!("the grant pins digest {pinned}, which cannot be checked here")),
            _ => {}
        }
        if !found.is_empty() {
            return Err(GrantError::Identity { plugin: plugin(), found });
        }
        let mut refused = Vec::new();
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
        let control_plane_rules = granted_rules(
            "ControlPlane",
            &descriptor.access.control_plane_rules,
            &grant.token_rules.control_plane,
            &mut refused,
        );
        let mut workload_rules = Vec::new();
        let mut workload_cluster = descriptor.access.workload_cluster;
        if workload_cluster && grant.token_rules.workload.is_empty() {
            refused.push("a workload cluster: the grant gives none (tokenRules.workload is empty)".into());
            workload_cluster = false;
        } else if workload_cluster {
            workload_rules =
                granted_rules("workload", &descriptor.access.workload_rules, &grant.token_rules.workload, &mut refused);
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
    if rule.cluster != o.cluster || !listed(&rule.groups, &o.api.group) || !listed(&rule.kinds, &o.api.kind) {
        return false;
    }
    let any_namespace = rule.namespaces.iter().any(|n| n == "*");
    match &o.scope {
        NamespaceScope::Tenant => any_namespace || rule.namespaces.iter().any(|n| n == "{tenant}"),
        NamespaceScope::Named(ns) => any_namespace || rule.namespaces.contains(ns),
        // Every namespace of a namespaced kind, or a cluster-scoped kind.
        NamespaceScope::ClusterScoped if o.api.namespaced => any_namespace,
        NamespaceScope::Any => any_namespace,
        NamespaceScope::ClusterScoped => rule.cluster_scoped,
    }
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
            let why = match hard::token_rule(rule) {
                Some(r) => Some(format!("{} (rule {})", r.reason, r.rule)),
                None if !granted.iter().any(|g| rule_covers(g, rule)) => {
                    Some("no token rule of the grant covers it (rule not-granted)".to_string())
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
mod tests {
    use service_provider_sdk::contract::{Access, ApiKind, Cluster, Crd, Stage};

    use super::*;

    fn kind(group: &str, k: &str, namespaced: bool) -> ApiKind {
        ApiKind::new(group, "v1", k, &format!("{}s", k.to_lowercase()), namespaced)
    }

    fn observation(
        id: &str,
        cluster: Cluster,
        api: ApiKind,
        scope: NamespaceScope,
        detail: ObservedDetail,
    ) -> Observation {
        Observation { id: id.into(), cluster, api, scope, name: None, stage: Stage::Always, detail }
    }

    fn descriptor() -> Descriptor {
        let service = kind("kro.example", "Kro", true);
        Descriptor {
            observations: vec![
                observation(
                    "flux",
                    Cluster::Platform,
                    kind("helm.toolkit.fluxcd.io", "HelmRelease", true),
                    NamespaceScope::Tenant,
                    ObservedDetail::Full,
                ),
                observation(
                    "rgds",
                    Cluster::ControlPlane,
                    kind("kro.run", "ResourceGraphDefinition", false),
                    NamespaceScope::ClusterScoped,
                    ObservedDetail::Metadata,
                ),
                observation(
                    "secrets",
                    Cluster::Platform,
                    kind("", "Secret", true),
                    NamespaceScope::Tenant,
                    ObservedDetail::Full,
                ),
                observation(
                    "all-releases",
                    Cluster::Platform,
                    kind("helm.toolkit.fluxcd.io", "HelmRelease", true),
                    NamespaceScope::ClusterScoped,
                    ObservedDetail::Full,
                ),
                observation(
                    "cp-configmaps",
                    Cluster::ControlPlane,
                    kind("", "ConfigMap", true),
                    NamespaceScope::ClusterScoped,
                    ObservedDetail::Full,
                ),
            ],
            access: Access {
                control_plane_rules: vec![
                    PolicyRule::new(&["apps"], &["deployments"], &["get", "create"]),
                    PolicyRule::new(&["*"], &["*"], &["*"]),
                ],
                workload_cluster: true,
                workload_rules: vec![PolicyRule::new(&[""], &["configmaps"], &["get"])],
            },
            ..Descriptor::new("kro", service.clone(), kind("kro.example", "ProviderConfig", false), "f")
        }
    }

    #[test]
    fn the_default_grant_gives_what_a_flux_provider_needs_and_nothing_more() {
        let e = Effective::new(&descriptor(), Grant::default_grant().pinning(&descriptor())).unwrap();
        let ids: Vec<&str> = e.observations.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["flux", "rgds"]);
        assert_eq!(e.control_plane_rules, [PolicyRule::new(&["apps"], &["deployments"], &["get", "create"])]);
        assert!(!e.workload_cluster, "no workload cluster by default");
        let refused = e.refused.join("\n");
        for expected in [
            "\"secrets\"",
            "no-secret-data",
            "\"all-releases\"",
            "tenant-namespace-only",
            "\"cp-configmaps\"",
            "no-wildcard-tokens",
            "workload cluster",
        ] {
            assert!(refused.contains(expected), "{expected} in {refused}");
        }
    }

    #[test]
    fn an_operator_can_grant_more_but_never_what_is_always_refused() {
        let mut grant = Grant::default_grant();
        grant.token_rules.workload = vec![PolicyRule::new(&[""], &["configmaps"], &["*"])];
        grant.observe.push(ObserveRule {
            cluster: Cluster::Platform,
            namespaces: vec!["*".into()],
            cluster_scoped: true,
            groups: vec!["*".into()],
            kinds: vec!["*".into()],
            detail: Detail::Full,
            annotations: vec![],
        });
        let e = Effective::new(&descriptor(), grant.pinning(&descriptor())).unwrap();
        assert!(e.workload_cluster);
        assert_eq!(e.workload_rules.len(), 1);
        let ids: Vec<&str> = e.observations.iter().map(|o| o.id.as_str()).collect();
        assert!(!ids.contains(&"secrets") && !ids.contains(&"all-releases"), "{ids:?}");
    }

    #[test]
    fn a_plugin_is_only_what_the_grant_pins() {
        // The built-in grant pins guest-kro's identity for "kro": this
        // descriptor claims another service group under that name.
        let err = Effective::new(&descriptor(), Grant::default_grant()).unwrap_err().to_string();
        assert!(err.contains("its service kind is Kro of \"kro.example\", the grant pins Kro of"), "{err}");
        assert!(err.contains("its finalizer is \"f\""), "{err}");
        let mut unknown = descriptor();
        unknown.name = "third-party".into();
        let err = Effective::new(&unknown, Grant::default_grant()).unwrap_err().to_string();
        assert!(
            err.contains("pins no identity for plugin \"third-party\"") && err.contains("\"kro\", \"flux\""),
            "{err}"
        );
        let mut crd = descriptor();
        crd.crds = vec![Crd {
            cluster: Cluster::Platform,
            manifest: "metadata: {name: things.evil.io}\nspec: {group: evil.io}\n".into(),
        }];
        let err = Effective::new(&crd, Grant::default_grant().pinning(&descriptor())).unwrap_err().to_string();
        assert!(err.contains("CRD \"things.evil.io\""), "{err}");
        let mut flux_group = descriptor();
        flux_group.provider_config.group = "source.toolkit.fluxcd.io".into();
        let grant = Grant::default_grant().pinning(&flux_group);
        let err = Effective::new(&flux_group, grant).unwrap_err().to_string();
        assert!(err.contains("belongs to Kubernetes, Flux or openmcp"), "{err}");
    }

    #[test]
    fn a_pinned_digest_gives_the_identity_to_exactly_those_bytes() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let mut grant = Grant::default_grant().pinning(&descriptor());
        grant.identities.iter_mut().for_each(|i| i.digest = Some(digest.clone()));
        assert!(Effective::for_component(&descriptor(), &digest, grant.clone()).is_ok());
        let other = format!("sha256:{}", "b".repeat(64));
        let err = Effective::for_component(&descriptor(), &other, grant.clone()).unwrap_err().to_string();
        assert!(err.contains(&format!("its digest is {other}")), "{err}");
        let err = Effective::new(&descriptor(), grant).unwrap_err().to_string();
        assert!(err.contains("cannot be checked here"), "{err}");
    }

    #[test]
    fn a_grant_for_another_plugin_is_refused() {
        let grant = Grant { plugin: Some("flux".into()), ..Grant::default_grant() };
        let err = Effective::new(&descriptor(), grant).unwrap_err();
        assert!(err.to_string().contains("\"flux\""), "{err}");
    }

    #[test]
    fn rbac_rule_coverage() {
        let g = PolicyRule::new(&["apps", ""], &["deployments", "configmaps"], &["get", "list"]);
        assert!(rule_covers(&g, &PolicyRule::new(&["apps"], &["deployments"], &["get"])));
        assert!(!rule_covers(&g, &PolicyRule::new(&["apps"], &["deployments"], &["delete"])));
        assert!(!rule_covers(&g, &PolicyRule::new(&["batch"], &["jobs"], &["get"])));
        let named = PolicyRule { resource_names: vec!["a".into()], ..g.clone() };
        let mut r = PolicyRule::new(&["apps"], &["deployments"], &["get"]);
        assert!(!rule_covers(&named, &r), "all names requested, only `a` granted");
        r.resource_names = vec!["a".into()];
        assert!(rule_covers(&named, &r));
    }
}
