//! Tests of what of a descriptor a grant gives, and of the identity it pins.

use service_provider_sdk::contract::{Access, ApiKind, Cluster, Crd, Stage};

use super::*;
use crate::plugin::grant::TokenRules;

fn kind(group: &str, k: &str, namespaced: bool) -> ApiKind {
    ApiKind::new(group, "v1", k, &format!("{}s", k.to_lowercase()), namespaced)
}

fn observation(id: &str, cluster: Cluster, api: ApiKind, scope: NamespaceScope, detail: ObservedDetail) -> Observation {
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
    assert!(e.control_plane_rules.is_empty(), "no token ceiling but an identity's own: {:?}", e.control_plane_rules);
    assert!(!e.workload_cluster, "no workload cluster by default");
    let refused = e.refused.join("\n");
    for expected in [
        "\"secrets\"",
        "no-secret-data",
        "\"all-releases\"",
        "tenant-namespace-only",
        "\"cp-configmaps\"",
        "no-wildcard-tokens",
        "[\"apps\"] [\"deployments\"] [\"get\", \"create\"]: no token rule of the grant covers it",
        "workload cluster",
    ] {
        assert!(refused.contains(expected), "{expected} in {refused}");
    }
}

#[test]
fn an_identity_carries_its_own_token_ceiling() {
    let mut grant = Grant::default_grant().pinning(&descriptor());
    let deployments = PolicyRule::new(&["apps"], &["deployments"], &["get", "list", "create"]);
    grant.identities.last_mut().unwrap().token_rules =
        Some(TokenRules { control_plane: vec![deployments], workload: Vec::new() });
    let e = Effective::new(&descriptor(), grant).unwrap();
    assert_eq!(e.control_plane_rules, [PolicyRule::new(&["apps"], &["deployments"], &["get", "create"])]);
    // The shipped plugins' ceilings cover exactly what they ask for.
    let kro = Grant::default_grant();
    let ceiling = kro.identities.iter().find(|i| i.plugin == "kro").unwrap().token_rules.clone().unwrap();
    assert!(ceiling.control_plane.iter().any(|r| r.verbs.contains(&"escalate".to_string())));
}

#[test]
fn cluster_power_is_given_only_where_a_ceiling_names_it() {
    let rbac = "rbac.authorization.k8s.io";
    let mut d = descriptor();
    d.access.control_plane_rules = vec![
        PolicyRule::new(&[rbac], &["clusterroles"], &["get", "create", "escalate", "bind"]),
        PolicyRule::new(&[""], &["pods/exec"], &["create"]),
        PolicyRule::new(&[""], &["users"], &["impersonate"]),
    ];
    let wide = |rules: Vec<PolicyRule>| {
        let mut grant = Grant::default_grant().pinning(&d);
        grant.token_rules.control_plane = rules;
        Effective::new(&d, grant).unwrap()
    };
    let e = wide(vec![PolicyRule::new(&["*"], &["*"], &["*"])]);
    assert!(e.control_plane_rules.is_empty(), "not through *: {:?}", e.control_plane_rules);
    let refused = e.refused.join("\n");
    for expected in ["escalate on clusterroles.rbac.authorization.k8s.io", "pods/exec", "impersonate on users"] {
        assert!(refused.contains(expected) && refused.contains("named-cluster-powers"), "{expected} in {refused}");
    }
    let named = wide(vec![
        PolicyRule::new(&[rbac], &["clusterroles"], &["get", "create", "escalate", "bind"]),
        PolicyRule::new(&[""], &["pods/exec"], &["*"]),
    ]);
    assert_eq!(named.control_plane_rules.len(), 2, "{:?}", named.refused);
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

/// The host installs a plugin's ControlPlane and workload CRDs with the
/// instance's token: the effective rules of that cluster end with one rule
/// for them, by name, and none where the plugin brings no CRD.
#[test]
fn tenant_tokens_get_the_hosts_rule_for_the_plugins_crds_there() {
    let crd = |cluster, name: &str| Crd {
        cluster,
        manifest: format!("metadata: {{name: {name}}}\nspec: {{group: kro.example}}\n"),
    };
    let mut d = descriptor();
    d.crds = vec![
        crd(Cluster::Workload, "pongs.kro.example"),
        crd(Cluster::Workload, "echoes.kro.example"),
        crd(Cluster::Onboarding, "kroes.kro.example"),
    ];
    let mut grant = Grant::default_grant();
    grant.token_rules.workload = vec![PolicyRule::new(&[""], &["configmaps"], &["*"])];
    let e = Effective::new(&d, grant.pinning(&d)).unwrap();
    let rule = e.workload_rules.last().expect("the CRD rule");
    assert_eq!(rule.resources, ["customresourcedefinitions"]);
    assert_eq!(rule.resource_names, ["echoes.kro.example", "pongs.kro.example"]);
    assert!(!rule.verbs.iter().any(|v| v == "*" || v == "delete"), "{rule:?}");
    assert!(
        !e.control_plane_rules.iter().any(|r| r.resources == ["customresourcedefinitions"]),
        "none on the ControlPlane"
    );
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
    assert!(err.contains("pins no identity for plugin \"third-party\"") && err.contains("\"kro\", \"flux\""), "{err}");
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

#[test]
fn a_capability_no_write_rule_or_copy_target_covers_is_refused_at_load() {
    let capability = |cluster, api, scope| Capability { cluster, api, scope, names: vec![] };
    let d = Descriptor {
        capabilities: vec![
            // The default grant writes HelmReleases in the tenant namespace,
            capability(Cluster::Platform, kind("helm.toolkit.fluxcd.io", "HelmRelease", true), NamespaceScope::Tenant),
            // and copies Secrets there,
            capability(Cluster::Platform, kind("", "Secret", true), NamespaceScope::Tenant),
            // but writes no ServiceAccount anywhere, nor HelmReleases elsewhere.
            capability(Cluster::Platform, kind("", "ServiceAccount", true), NamespaceScope::Tenant),
            capability(Cluster::Platform, kind("helm.toolkit.fluxcd.io", "HelmRelease", true), NamespaceScope::Any),
        ],
        ..Descriptor::new("kro", kind("kro.example", "Kro", true), kind("kro.example", "ProviderConfig", false), "f")
    };
    let e = Effective::new(&d, Grant::default_grant().pinning(&d)).unwrap();
    assert_eq!(
        e.refused,
        [
            "writing ServiceAccount in the tenant namespace on the platform cluster: no write rule or copy target of the grant allows it (rule not-granted)",
            "writing HelmRelease in any namespace on the platform cluster: no write rule or copy target of the grant allows it (rule not-granted)",
        ]
    );
}
