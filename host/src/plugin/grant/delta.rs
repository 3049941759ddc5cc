//! What one component asks for that another does not: the requests of a
//! plugin upgrade, named before it is rolled out (`diff`), and what a
//! grant would have to give it.
//!
//! Requests are compared as the descriptors state them (capabilities,
//! observations, token rules, a workload cluster, CRDs); what the grant
//! then refuses of the candidate is [`Effective::refused`], which `run`
//! turns into a refusal at load (see `crate::plugin::load`).

use serde::Serialize;
use service_provider_sdk::contract::{Capability, Descriptor, NamespaceScope, Observation, PolicyRule};

use super::Effective;
use super::identity::crd_name_and_group;

/// The requests of a candidate component against the current one's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    /// What the candidate asks for that the current component does not,
    /// one phrase each.
    pub more: Vec<String>,
    /// What the current component asks for that the candidate no longer does.
    pub fewer: Vec<String>,
    /// What of the candidate's requests its grant does not give (the
    /// candidate is refused at `run` unless the grant is widened).
    pub ungranted: Vec<String>,
}

impl Delta {
    /// Whether the candidate asks for exactly what the current one does.
    pub fn is_empty(&self) -> bool {
        self.more.is_empty() && self.fewer.is_empty() && self.ungranted.is_empty()
    }
}

/// The requests `candidate` adds and drops against `current`, and what its
/// grant (`granted`, the candidate intersected with its grant) refuses.
pub fn between(current: &Descriptor, candidate: &Descriptor, granted: &Effective) -> Delta {
    let mut delta = Delta { ungranted: granted.refused.clone(), ..Delta::default() };
    let mut compare = |was: Vec<String>, now: Vec<String>| {
        delta.more.extend(now.iter().filter(|n| !was.contains(n)).cloned());
        delta.fewer.extend(was.iter().filter(|w| !now.contains(w)).cloned());
    };
    compare(capabilities(current), capabilities(candidate));
    compare(observations(current), observations(candidate));
    compare(
        rules("ControlPlane", &current.access.control_plane_rules),
        rules("ControlPlane", &candidate.access.control_plane_rules),
    );
    compare(workload(current), workload(candidate));
    compare(crds(current), crds(candidate));
    delta
}

pub(super) fn scope(scope: &NamespaceScope) -> String {
    match scope {
        NamespaceScope::Tenant => "the tenant namespace".into(),
        NamespaceScope::Named(ns) => format!("namespace {ns}"),
        NamespaceScope::ClusterScoped => "cluster scope".into(),
        NamespaceScope::Any => "any namespace".into(),
    }
}

fn capabilities(d: &Descriptor) -> Vec<String> {
    d.capabilities
        .iter()
        .map(|Capability { cluster, api, scope: s, names }| {
            let names = match names.as_slice() {
                [] => "any name".to_string(),
                names => format!("named {}", names.join(", ")),
            };
            format!("to write {} {} on the {cluster} cluster in {}, {names}", api.api_version(), api.kind, scope(s))
        })
        .collect()
}

fn observations(d: &Descriptor) -> Vec<String> {
    d.observations
        .iter()
        .map(|o: &Observation| {
            let name = o.name.as_ref().map_or(String::new(), |n| format!(" named {n}"));
            format!(
                "observation {:?}: {} {}{name} on the {} cluster in {}, {:?} detail, {:?} stage",
                o.id,
                o.api.api_version(),
                o.api.kind,
                o.cluster,
                scope(&o.scope),
                o.detail,
                o.stage
            )
        })
        .collect()
}

/// Token rules as RBAC reads them.
pub fn rules(cluster: &str, rules: &[PolicyRule]) -> Vec<String> {
    rules.iter().map(|r| token_rule(cluster, r)).collect()
}

/// One token rule of `cluster`'s, as the preview and the delta name it.
pub fn token_rule(cluster: &str, r: &PolicyRule) -> String {
    format!("{cluster} token rule {}", rule(r))
}

/// One RBAC rule on one line: groups, resources, names, verbs.
pub fn rule(r: &PolicyRule) -> String {
    let names = match r.resource_names.as_slice() {
        [] => String::new(),
        names => format!(" {names:?}"),
    };
    format!("{:?} {:?}{names} {:?}", r.api_groups, r.resources, r.verbs)
}

fn workload(d: &Descriptor) -> Vec<String> {
    let mut asked = rules("workload", &d.access.workload_rules);
    if d.access.workload_cluster {
        asked.push("a workload cluster".into());
    }
    asked
}

fn crds(d: &Descriptor) -> Vec<String> {
    d.crds.iter().map(|c| format!("CRD {} on the {} cluster", crd_name_and_group(&c.manifest).0, c.cluster)).collect()
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::{ApiKind, Cluster, Detail, Stage};

    use super::*;
    use crate::plugin::grant::{Grant, Identity};

    fn descriptor() -> Descriptor {
        let kind = ApiKind::new("test.example", "v1", "Test", "tests", true);
        Descriptor::new("test", kind.clone(), kind, "test.example/finalizer")
    }

    fn granted(d: &Descriptor) -> Effective {
        let grant = Grant { identities: vec![Identity::of(d)], ..Grant::default() };
        Effective::new(d, grant).expect("the identity is the descriptor's")
    }

    #[test]
    fn the_same_requests_are_no_delta() {
        let d = descriptor();
        assert!(between(&d, &d, &granted(&d)).is_empty());
    }

    #[test]
    fn added_and_dropped_requests_are_named_and_ungranted_ones_too() {
        let current = descriptor();
        let mut candidate = descriptor();
        candidate.access.control_plane_rules.push(PolicyRule::new(&[""], &["configmaps"], &["get"]));
        candidate.observations.push(Observation {
            id: "sources".into(),
            cluster: Cluster::Platform,
            api: ApiKind::new("source.toolkit.fluxcd.io", "v1", "OCIRepository", "ocirepositories", true),
            scope: NamespaceScope::Tenant,
            name: None,
            stage: Stage::Reconcile,
            detail: Detail::Full,
        });
        let delta = between(&current, &candidate, &granted(&candidate));
        assert_eq!(delta.more.len(), 2, "{delta:?}");
        assert!(delta.more[0].starts_with("observation \"sources\""), "{delta:?}");
        assert_eq!(delta.more[1], r#"ControlPlane token rule [""] ["configmaps"] ["get"]"#);
        assert!(delta.fewer.is_empty());
        // The empty grant gives neither.
        assert_eq!(delta.ungranted.len(), 2, "{delta:?}");
        let back = between(&candidate, &current, &granted(&current));
        assert_eq!((back.more.len(), back.fewer.len()), (0, 2));
    }
}
