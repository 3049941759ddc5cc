//! The descriptor a plugin returns from `describe()`, held to what
//! Kubernetes accepts before the host uses any of it: its kinds become
//! request paths (watches, reads, applies, deletions), its names become
//! label values and RBAC rules, its namespaces and object names become path
//! segments. A string that does not pass [`crate::syntax`] fails the load,
//! naming the field, instead of reaching a URL; so does a descriptor larger
//! than the limits (size, capabilities, observations, CRDs, token rules).

use std::collections::{BTreeMap, BTreeSet};

use service_provider_sdk::contract::{ApiKind, Descriptor, NamespaceScope, PolicyRule};

use super::Limits;
use crate::syntax;

/// What is wrong with a descriptor, one sentence per finding.
pub(super) fn check(descriptor: &Descriptor, limits: &Limits) -> Result<(), String> {
    let mut found = Vec::new();
    let d = descriptor;
    if !syntax::dns_label(&d.name) {
        found.push(format!("name {:?} is not an RFC 1123 label", d.name));
    }
    kind_of("service", &d.service, &mut found);
    kind_of("providerConfig", &d.provider_config, &mut found);
    if !d.service.namespaced {
        found.push("the service kind must be namespaced".into());
    }
    if !syntax::qualified_name(&d.finalizer) || !d.finalizer.contains('/') {
        found.push(format!("finalizer {:?} is not a qualified name (<domain>/<name>)", d.finalizer));
    }
    count("CRDs", d.crds.len(), limits.descriptor_crds, &mut found);
    let rules = d.access.control_plane_rules.iter().chain(&d.access.workload_rules);
    count("token rules", rules.clone().count(), limits.descriptor_entries, &mut found);
    for (i, rule) in rules.enumerate() {
        policy_rule(&format!("token rule {i}"), rule, &mut found);
    }
    count("capabilities", d.capabilities.len(), limits.descriptor_entries, &mut found);
    for (i, c) in d.capabilities.iter().enumerate() {
        let at = format!("capability {i} ({} on the {} cluster)", c.api.kind, c.cluster);
        kind_of(&at, &c.api, &mut found);
        scope(&at, &c.scope, &mut found);
        for name in c.names.iter().filter(|n| !syntax::dns_subdomain(n)) {
            found.push(format!("{at}: name {name:?} is not a valid object name"));
        }
    }
    count("observations", d.observations.len(), limits.descriptor_entries, &mut found);
    let mut ids = BTreeSet::new();
    for o in &d.observations {
        let at = format!("observation {:?}", o.id);
        if !syntax::dns_label(&o.id) {
            found.push(format!("{at}: the id is not an RFC 1123 label"));
        }
        if !ids.insert(o.id.as_str()) {
            found.push(format!("{at}: the id is used twice"));
        }
        kind_of(&at, &o.api, &mut found);
        scope(&at, &o.scope, &mut found);
        if let Some(name) = o.name.as_ref().filter(|n| !syntax::dns_subdomain(n)) {
            found.push(format!("{at}: name {name:?} is not a valid object name"));
        }
    }
    consistent_kinds(d, &mut found);
    match found.is_empty() {
        true => Ok(()),
        false => Err(found.join("; ")),
    }
}

fn count(what: &str, n: usize, max: usize, found: &mut Vec<String>) {
    if n > max {
        found.push(format!("{n} {what}, more than the limit of {max}"));
    }
}

/// Every part of a kind that becomes a path segment or an RBAC resource.
fn kind_of(at: &str, api: &ApiKind, found: &mut Vec<String>) {
    if !syntax::api_group(&api.group) {
        found.push(format!("{at}: group {:?} is not an API group", api.group));
    }
    if !syntax::api_version_part(&api.version) {
        found.push(format!("{at}: version {:?} is not an API version", api.version));
    }
    if !syntax::kind(&api.kind) {
        found.push(format!("{at}: kind {:?} is not a Kubernetes kind", api.kind));
    }
    if !syntax::plural(&api.plural) {
        found.push(format!("{at}: plural {:?} is not a REST plural", api.plural));
    }
}

fn scope(at: &str, scope: &NamespaceScope, found: &mut Vec<String>) {
    if let NamespaceScope::Named(ns) = scope
        && !syntax::dns_label(ns)
    {
        found.push(format!("{at}: namespace {ns:?} is not a namespace name"));
    }
}

/// RBAC strings: they end up in AccessRequests, which a cluster provider
/// turns into Roles.
fn policy_rule(at: &str, rule: &PolicyRule, found: &mut Vec<String>) {
    let wildcard = |s: &str| s == "*";
    let resource = |s: &str| {
        let (name, sub) = s.split_once('/').map_or((s, None), |(n, sub)| (n, Some(sub)));
        syntax::plural(name) && sub.is_none_or(syntax::plural)
    };
    let verb = |s: &str| !s.is_empty() && s.len() <= 63 && s.chars().all(|c| c.is_ascii_lowercase());
    for (what, values, ok) in [
        ("API group", &rule.api_groups, &syntax::api_group as &dyn Fn(&str) -> bool),
        ("resource", &rule.resources, &resource),
        ("resource name", &rule.resource_names, &syntax::dns_subdomain),
        ("verb", &rule.verbs, &verb),
    ] {
        for value in values.iter().filter(|v| !(wildcard(v) || ok(v))) {
            found.push(format!("{at}: {what} {value:?} is not valid"));
        }
    }
}

/// One kind, one plural, in every version: the same group and kind named
/// with two plurals (or two kinds of a group with one plural) would let a
/// check made for one kind act on another, e.g. through a version nobody
/// serves.
fn consistent_kinds(d: &Descriptor, found: &mut Vec<String>) {
    let kinds = [&d.service, &d.provider_config]
        .into_iter()
        .chain(d.capabilities.iter().map(|c| &c.api))
        .chain(d.observations.iter().map(|o| &o.api));
    let mut plurals: BTreeMap<(&str, &str), (&str, bool)> = BTreeMap::new();
    let mut owners: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for api in kinds {
        let key = (api.group.as_str(), api.kind.as_str());
        let seen = *plurals.entry(key).or_insert((api.plural.as_str(), api.namespaced));
        if seen != (api.plural.as_str(), api.namespaced) {
            found.push(format!("kind {} of group {:?} is described with two plurals or scopes", api.kind, api.group));
        }
        let owner = *owners.entry((key.0, api.plural.as_str())).or_insert(api.kind.as_str());
        if owner != api.kind {
            found.push(format!("plural {} of group {:?} is given to two kinds", api.plural, api.group));
        }
    }
    found.dedup();
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::{Capability, Cluster, Detail, Observation, Stage};

    use super::*;

    fn descriptor() -> Descriptor {
        let service = ApiKind::new("kro.example", "v1", "Kro", "kroes", true);
        let config = ApiKind::new("kro.example", "v1", "ProviderConfig", "providerconfigs", false);
        Descriptor {
            capabilities: vec![Capability {
                cluster: Cluster::Platform,
                api: ApiKind::new("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true),
                scope: NamespaceScope::Tenant,
                names: vec!["release".into()],
            }],
            observations: vec![Observation {
                id: "release".into(),
                cluster: Cluster::Platform,
                api: ApiKind::new("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true),
                scope: NamespaceScope::Tenant,
                name: Some("release".into()),
                stage: Stage::Always,
                detail: Detail::Full,
            }],
            ..Descriptor::new("kro", service, config, "kro.example/finalizer")
        }
    }

    #[test]
    fn a_plain_descriptor_passes() {
        assert_eq!(check(&descriptor(), &Limits::default()), Ok(()));
    }

    #[test]
    fn strings_that_would_bend_a_path_fail_the_load_by_field() {
        type Change = Box<dyn Fn(&mut Descriptor)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|d| d.capabilities[0].api.plural = "helmreleases#".into()), "plural \"helmreleases#\""),
            (Box::new(|d| d.observations[0].api.version = "v2/helmreleases#".into()), "version \"v2/helmreleases#\""),
            (Box::new(|d| d.observations[0].scope = NamespaceScope::Named("a/b".into())), "namespace \"a/b\""),
            (Box::new(|d| d.observations[0].name = Some("x?watch=1".into())), "name \"x?watch=1\""),
            (Box::new(|d| d.capabilities[0].names = vec!["..".into()]), "name \"..\""),
            (Box::new(|d| d.service.group = "a/b".into()), "group \"a/b\""),
            (Box::new(|d| d.finalizer = "f".into()), "finalizer"),
            (Box::new(|d| d.name = "Kro!".into()), "name \"Kro!\""),
            (Box::new(|d| d.service.namespaced = false), "must be namespaced"),
            (Box::new(|d| d.access.control_plane_rules = vec![PolicyRule::new(&[""], &["a b"], &["get"])]), "resource"),
            (Box::new(|d| d.observations[0].api.plural = "ocirepositories".into()), "two plurals"),
            (
                Box::new(|d| {
                    let mut other_version = d.observations[0].clone();
                    other_version.id = "v7".into();
                    other_version.api.version = "v7".into();
                    other_version.api.plural = "helmcharts".into();
                    d.observations.push(other_version);
                }),
                "two plurals",
            ),
            (Box::new(|d| d.observations.push(d.observations[0].clone())), "used twice"),
        ];
        for (change, expected) in cases {
            let mut d = descriptor();
            change(&mut d);
            let err = check(&d, &Limits::default()).unwrap_err();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    #[test]
    fn descriptors_are_bounded() {
        let mut d = descriptor();
        d.capabilities = vec![d.capabilities[0].clone(); 65];
        let err = check(&d, &Limits::default()).unwrap_err();
        assert!(err.contains("65 capabilities, more than the limit of 64"), "{err}");
    }
}
