//! What the host refuses whatever a grant says: the things no service
//! provider needs and every attacker wants. Each rule has a name, which
//! every refusal carries, so an operator can look it up.

use service_provider_sdk::contract::{ApiKind, Cluster, Descriptor, Detail, NamespaceScope, PolicyRule};

/// Namespaces nobody's plugin writes to, on any cluster.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// API groups that grant power over a cluster itself (RBAC, admission
/// webhooks that see every request, certificates).
const POWER_GROUPS: &[&str] =
    &["rbac.authorization.k8s.io", "admissionregistration.k8s.io", "certificates.k8s.io", "apiregistration.k8s.io"];

/// A refusal by one of the rules below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule's name, e.g. `no-secret-objects`.
    pub rule: &'static str,
    pub reason: String,
}

fn refuse(rule: &'static str, reason: impl Into<String>) -> Option<Refusal> {
    Some(Refusal { rule, reason: reason.into() })
}

/// What is the plugin's own: the groups and kinds of its service and
/// ProviderConfig, and the CRDs its grant's identity lists.
#[derive(Debug, Clone, PartialEq)]
pub struct Own {
    pub service: ApiKind,
    pub provider_config: ApiKind,
    pub crds: Vec<String>,
}

impl Own {
    pub fn of(descriptor: &Descriptor, crds: &[String]) -> Own {
        Own {
            service: descriptor.service.clone(),
            provider_config: descriptor.provider_config.clone(),
            crds: crds.to_vec(),
        }
    }

    fn group(&self, group: &str) -> bool {
        group == self.service.group || group == self.provider_config.group
    }

    fn kind(&self, group: &str, kind: &str) -> bool {
        [&self.service, &self.provider_config].iter().any(|k| k.group == group && k.kind == kind)
    }
}

/// An object the plugin asks the host to write or delete.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub cluster: Cluster,
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

fn openmcp(group: &str) -> bool {
    group == "openmcp.cloud" || group.ends_with(".openmcp.cloud")
}

/// Rules for objects the host writes or deletes for a plugin.
pub fn write(target: &Target, own: &Own, tenant: &str) -> Option<Refusal> {
    let Target { cluster, group, kind, namespace, name } = *target;
    if cluster == Cluster::Onboarding {
        return refuse(
            "no-onboarding-writes",
            "the onboarding cluster holds tenants' service objects; the host alone writes them",
        );
    }
    if group.is_empty() && kind == "Secret" {
        return refuse(
            "no-secret-objects",
            "Secrets are never plugin objects: secret material moves only through copies the platform operator allowed",
        );
    }
    if POWER_GROUPS.contains(&group) {
        return refuse("no-cluster-power", format!("{group} objects would give power over the cluster itself"));
    }
    if openmcp(group) {
        return refuse(
            "no-openmcp-objects",
            "openmcp's own objects (cluster and access requests) are the host's to manage",
        );
    }
    if own.kind(group, kind) {
        return refuse(
            "no-service-objects",
            "the plugin's own service and ProviderConfig kinds are not plugin objects",
        );
    }
    if group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" {
        let crd_group = name.split_once('.').map_or("", |(_, g)| g);
        if let Some(refusal) = crd(name, crd_group, own) {
            return Some(refusal);
        }
    }
    if group.is_empty() && kind == "Namespace" && SYSTEM_NAMESPACES.contains(&name) {
        return refuse("no-system-namespaces", format!("{name} is a system namespace"));
    }
    placement(cluster, namespace, tenant)
}

/// Where anything the host writes for a plugin may go.
fn placement(cluster: Cluster, namespace: Option<&str>, tenant: &str) -> Option<Refusal> {
    if let Some(ns) = namespace.filter(|ns| SYSTEM_NAMESPACES.contains(ns)) {
        return refuse("no-system-namespaces", format!("{ns} is a system namespace"));
    }
    if cluster == Cluster::Onboarding {
        return refuse("no-onboarding-writes", "the onboarding cluster holds tenants' service objects");
    }
    if cluster == Cluster::Platform && namespace != Some(tenant) {
        return refuse(
            "tenant-namespace-only",
            format!("on the platform cluster a plugin writes only in the instance's tenant namespace {tenant}"),
        );
    }
    None
}

/// Rules for copy targets (the host writes the copy).
pub fn copy_target(cluster: Cluster, namespace: &str, tenant: &str) -> Option<Refusal> {
    placement(cluster, Some(namespace), tenant)
}

/// Rules for observations (what enters the sandbox).
pub fn observe(cluster: Cluster, api: &ApiKind, detail: Detail, scope: &NamespaceScope) -> Option<Refusal> {
    if api.group.is_empty() && api.kind == "Secret" && detail == Detail::Full {
        return refuse("no-secret-data", "Secret data never enters the sandbox");
    }
    if cluster == Cluster::Onboarding {
        return refuse("no-onboarding-observations", "the onboarding cluster holds every tenant's service objects");
    }
    if cluster == Cluster::Platform && *scope != NamespaceScope::Tenant {
        return refuse(
            "tenant-namespace-only",
            "on the platform cluster a plugin observes only the instance's tenant namespace",
        );
    }
    None
}

/// What the host knows about a copy source it read.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    /// A Secret's `type`.
    pub type_: Option<&'a str>,
    /// Kinds of the source's owner references.
    pub owner_kinds: &'a [&'a str],
    pub data_keys: &'a [&'a str],
}

/// Secret types that are credentials of a cluster, never payload.
const CREDENTIAL_TYPES: &[&str] = &["kubernetes.io/service-account-token", "bootstrap.kubernetes.io/token"];

/// Rules for copy sources: cluster credentials never leave the pod
/// namespace, even if allow-listed by mistake. `reserved` names the host's
/// own credentials (its onboarding kubeconfigs).
pub fn copy_source(source: &Source, reserved: &[String]) -> Option<Refusal> {
    let credential = source.type_.is_some_and(|t| CREDENTIAL_TYPES.contains(&t))
        || source.owner_kinds.iter().any(|k| *k == "AccessRequest" || *k == "ClusterRequest")
        || source.data_keys.contains(&"kubeconfig")
        || reserved.iter().any(|r| r == source.name);
    if credential {
        return refuse(
            "no-credential-copies",
            format!("{} {} holds cluster credentials, which are never copied", source.kind, source.name),
        );
    }
    None
}

/// Verbs that are power over a cluster itself, on the resources where they
/// mean something: impersonating anyone, creating roles with rights one
/// does not hold and binding them, approving and signing certificates.
const POWER_VERBS: &[(&str, &[&str], &[&str])] = &[
    ("impersonate", &["", "authentication.k8s.io"], &["users", "groups", "serviceaccounts", "uids", "userextras"]),
    ("escalate", &["rbac.authorization.k8s.io"], &["roles", "clusterroles"]),
    ("bind", &["rbac.authorization.k8s.io"], &["roles", "clusterroles"]),
    ("approve", &["certificates.k8s.io"], &["signers"]),
    ("sign", &["certificates.k8s.io"], &["signers"]),
];

/// Resources that are power over a cluster whatever the verb: minting a
/// ServiceAccount's tokens, approving certificates, the kubelet's and a
/// container's doors (proxy, exec, attach, port-forward, ephemeral
/// containers). Every resource of the admission and API registration
/// groups counts too ([`POWER_GROUPS_FOR_TOKENS`]).
const POWER_RESOURCES: &[(&str, &str)] = &[
    ("", "serviceaccounts/token"),
    ("", "nodes/proxy"),
    ("", "pods/exec"),
    ("", "pods/attach"),
    ("", "pods/portforward"),
    ("", "pods/proxy"),
    ("", "pods/ephemeralcontainers"),
    ("", "services/proxy"),
    ("certificates.k8s.io", "certificatesigningrequests/approval"),
    ("certificates.k8s.io", "certificatesigningrequests/status"),
    ("certificates.k8s.io", "signers"),
];

/// Groups whose every object is power over a cluster when a token may
/// write it: admission webhooks and policies see or change every request,
/// an API service takes over a whole API group.
const POWER_GROUPS_FOR_TOKENS: &[&str] = &["admissionregistration.k8s.io", "apiregistration.k8s.io"];

/// One piece of cluster power a token rule would give: a verb on a
/// resource, or a resource with any verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Power {
    pub group: String,
    pub resource: String,
    /// `None`: every verb of the rule on this resource is power.
    pub verb: Option<String>,
}

impl std::fmt::Display for Power {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resource = match self.group.as_str() {
            "" => self.resource.clone(),
            group => format!("{}.{group}", self.resource),
        };
        match &self.verb {
            Some(verb) => write!(f, "{verb} on {resource}"),
            None => write!(f, "{resource}"),
        }
    }
}

/// The cluster power a token rule names (literally: the rule for
/// tokens refuses wildcards first), each piece to be named as literally by
/// a rule of the grant ([`powers_covered`]).
pub fn powers(rule: &PolicyRule) -> Vec<Power> {
    let mut found = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            let power = |verb: Option<&str>| Power {
                group: group.clone(),
                resource: resource.clone(),
                verb: verb.map(str::to_string),
            };
            if POWER_GROUPS_FOR_TOKENS.contains(&group.as_str())
                || POWER_RESOURCES.iter().any(|(g, r)| g == group && r == resource)
            {
                found.push(power(None));
            }
            for (verb, groups, resources) in POWER_VERBS {
                let base = resource.split('/').next().unwrap_or_default();
                if groups.contains(&group.as_str()) && resources.contains(&base) && rule.verbs.iter().any(|v| v == verb)
                {
                    found.push(power(Some(verb)));
                }
            }
        }
    }
    found
}

/// Whether granted rule `g` names every piece of `powers` literally: the
/// group and the resource by name, and the verb by name where the power is
/// a verb (never through `*`).
pub fn powers_covered(g: &PolicyRule, powers: &[Power]) -> bool {
    let named = |list: &[String], item: &str| list.iter().any(|x| x == item);
    powers.iter().all(|p| {
        named(&g.api_groups, &p.group)
            && named(&g.resources, &p.resource)
            && p.verb.as_deref().is_none_or(|verb| named(&g.verbs, verb))
    })
}

/// Rules for the token rules a plugin asks for on a cluster of its tenant:
/// no wildcard in a group or a resource (`*`, `*/exec`, `pods/*`), and no
/// power verb through `*` (`verbs: ["*"]` on roles would give `escalate`
/// and `bind`); a plugin that needs such a verb names it, and then only a
/// grant that names it too gives it ([`powers_covered`]).
pub fn token_rule(rule: &PolicyRule) -> Option<Refusal> {
    if rule.api_groups.iter().chain(&rule.resources).any(|x| x.contains('*')) {
        return refuse("no-wildcard-tokens", "token rules name their API groups and resources; no wildcards");
    }
    if rule.verbs.iter().any(|v| v == "*") {
        let through_star =
            PolicyRule { verbs: POWER_VERBS.iter().map(|(v, _, _)| v.to_string()).collect(), ..rule.clone() };
        if let Some(power) = powers(&through_star).into_iter().find(|p| p.verb.is_some()) {
            return refuse(
                "named-cluster-powers",
                format!("verbs [\"*\"] would give {power}; a token rule names such a verb, and a grant names it too"),
            );
        }
    }
    None
}

/// The rule for a CRD's `spec.conversion.strategy`, wherever a CRD comes
/// from (`init`, a tenant cluster's CRDs, a plan): never a webhook, which
/// would see every object of the kind.
pub fn crd_conversion(strategy: Option<&str>) -> Option<Refusal> {
    if strategy == Some("Webhook") {
        return refuse("no-conversion-webhooks", "a conversion webhook would see every object of the kind");
    }
    None
}

/// Rules for the CRDs a plugin installs (`init`, or on a tenant's
/// cluster): of its own groups, and listed in its grant's identity.
pub fn crd(name: &str, group: &str, own: &Own) -> Option<Refusal> {
    if !own.group(group) || !name.ends_with(&format!(".{group}")) {
        return refuse("no-foreign-crds", format!("a plugin may only bring CRDs of its own groups, not of {group:?}"));
    }
    if !own.crds.iter().any(|c| c == name) {
        return refuse("no-foreign-crds", format!("CRD {name} is not one the plugin grant's identity lists"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> Own {
        Own {
            service: ApiKind::new("kro.example", "v1", "Kro", "kroes", true),
            provider_config: ApiKind::new("kro.example", "v1", "ProviderConfig", "providerconfigs", false),
            crds: vec!["things.kro.example".into()],
        }
    }

    fn target<'a>(
        cluster: Cluster,
        group: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> Target<'a> {
        Target { cluster, group, kind, namespace, name }
    }

    fn rule(t: Target) -> Option<&'static str> {
        write(&t, &own(), "mcp--t").map(|r| r.rule)
    }

    #[test]
    fn what_no_grant_can_allow() {
        use Cluster::*;
        let cases = [
            (target(Platform, "", "Secret", Some("mcp--t"), "kubeconfig"), "no-secret-objects"),
            (target(ControlPlane, "rbac.authorization.k8s.io", "ClusterRoleBinding", None, "x"), "no-cluster-power"),
            (
                target(ControlPlane, "admissionregistration.k8s.io", "MutatingWebhookConfiguration", None, "x"),
                "no-cluster-power",
            ),
            (target(Platform, "clusters.openmcp.cloud", "AccessRequest", Some("mcp--t"), "x"), "no-openmcp-objects"),
            (target(Platform, "kro.example", "Kro", Some("mcp--t"), "x"), "no-service-objects"),
            (target(Onboarding, "kro.example", "Kro", Some("default"), "other-tenant"), "no-onboarding-writes"),
            (
                target(ControlPlane, "apiextensions.k8s.io", "CustomResourceDefinition", None, "things.evil.io"),
                "no-foreign-crds",
            ),
            (target(ControlPlane, "", "ConfigMap", Some("kube-system"), "x"), "no-system-namespaces"),
            (target(ControlPlane, "", "Namespace", None, "kube-system"), "no-system-namespaces"),
            (
                target(Platform, "helm.toolkit.fluxcd.io", "HelmRelease", Some("mcp--other"), "x"),
                "tenant-namespace-only",
            ),
            (target(Platform, "", "Namespace", None, "x"), "tenant-namespace-only"),
        ];
        for (t, expected) in cases {
            assert_eq!(rule(t), Some(expected), "{t:?}");
        }
    }

    #[test]
    fn what_a_grant_may_allow() {
        use Cluster::*;
        for t in [
            target(Platform, "helm.toolkit.fluxcd.io", "HelmRelease", Some("mcp--t"), "x"),
            target(ControlPlane, "", "Namespace", None, "kro-system"),
            target(ControlPlane, "apiextensions.k8s.io", "CustomResourceDefinition", None, "things.kro.example"),
            target(Workload, "", "ConfigMap", Some("default"), "echo"),
        ] {
            assert_eq!(rule(t), None, "{t:?}");
        }
    }

    #[test]
    fn secret_data_and_other_tenants_never_enter_the_sandbox() {
        let secret = ApiKind::new("", "v1", "Secret", "secrets", true);
        let (tenant, all) = (NamespaceScope::Tenant, NamespaceScope::ClusterScoped);
        assert_eq!(observe(Cluster::Platform, &secret, Detail::Full, &tenant).unwrap().rule, "no-secret-data");
        assert_eq!(observe(Cluster::ControlPlane, &secret, Detail::Full, &tenant).unwrap().rule, "no-secret-data");
        let release = ApiKind::new("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true);
        assert_eq!(observe(Cluster::Platform, &release, Detail::Full, &all).unwrap().rule, "tenant-namespace-only");
        let pods = NamespaceScope::Named("openmcp-system".into());
        assert_eq!(observe(Cluster::Platform, &release, Detail::Full, &pods).unwrap().rule, "tenant-namespace-only");
        let rule = observe(Cluster::Onboarding, &release, Detail::Metadata, &tenant).unwrap().rule;
        assert_eq!(rule, "no-onboarding-observations");
        assert!(observe(Cluster::Platform, &release, Detail::Full, &tenant).is_none());
        assert!(observe(Cluster::ControlPlane, &secret, Detail::Metadata, &all).is_none());
    }

    #[test]
    fn credentials_are_never_copied() {
        let plain = Source {
            kind: "Secret",
            name: "pull",
            type_: Some("kubernetes.io/dockerconfigjson"),
            owner_kinds: &[],
            data_keys: &[".dockerconfigjson"],
        };
        assert!(copy_source(&plain, &[]).is_none());
        for bad in [
            Source { type_: Some("kubernetes.io/service-account-token"), ..plain },
            Source { owner_kinds: &["AccessRequest"], ..plain },
            Source { data_keys: &["kubeconfig"], ..plain },
        ] {
            assert_eq!(copy_source(&bad, &[]).unwrap().rule, "no-credential-copies", "{bad:?}");
        }
        assert!(copy_source(&plain, &["pull".to_string()]).is_some(), "the host's own credentials");
    }

    #[test]
    fn token_rules_name_what_they_give() {
        let rule = |g: &[&str], r: &[&str], v: &[&str]| token_rule(&PolicyRule::new(g, r, v)).map(|r| r.rule);
        assert_eq!(rule(&["*"], &["pods"], &["get"]), Some("no-wildcard-tokens"));
        assert_eq!(rule(&[""], &["*"], &["get"]), Some("no-wildcard-tokens"));
        assert_eq!(rule(&[""], &["*/exec"], &["create"]), Some("no-wildcard-tokens"));
        assert_eq!(rule(&[""], &["pods/*"], &["create"]), Some("no-wildcard-tokens"));
        let rbac = "rbac.authorization.k8s.io";
        assert_eq!(rule(&[rbac], &["clusterroles"], &["*"]), Some("named-cluster-powers"));
        assert_eq!(rule(&[""], &["serviceaccounts"], &["*"]), Some("named-cluster-powers"), "impersonate");
        assert_eq!(rule(&[rbac], &["clusterrolebindings"], &["*"]), None, "no power verb applies there");
        assert_eq!(rule(&[""], &["configmaps", "secrets"], &["*"]), None);
        assert_eq!(rule(&[rbac], &["clusterroles"], &["get", "create", "escalate", "bind"]), None, "named");
    }

    #[test]
    fn cluster_powers_are_given_only_by_name() {
        let rbac = "rbac.authorization.k8s.io";
        let asked = PolicyRule::new(&[rbac], &["clusterroles", "roles"], &["create", "escalate", "bind"]);
        let found = powers(&asked);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "escalate on clusterroles.rbac.authorization.k8s.io",
                "bind on clusterroles.rbac.authorization.k8s.io",
                "escalate on roles.rbac.authorization.k8s.io",
                "bind on roles.rbac.authorization.k8s.io"
            ]
        );
        assert!(!powers_covered(&PolicyRule::new(&["*"], &["*"], &["*"]), &found), "never through *");
        assert!(!powers_covered(&PolicyRule::new(&[rbac], &["clusterroles", "roles"], &["*"]), &found));
        let named = PolicyRule::new(&[rbac], &["clusterroles", "roles"], &["create", "escalate", "bind"]);
        assert!(powers_covered(&named, &found));
        for (group, resource) in [
            ("", "pods/exec"),
            ("", "serviceaccounts/token"),
            ("", "nodes/proxy"),
            ("certificates.k8s.io", "certificatesigningrequests/approval"),
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
            ("apiregistration.k8s.io", "apiservices"),
        ] {
            let asked = PolicyRule::new(&[group], &[resource], &["create"]);
            let found = powers(&asked);
            assert_eq!(found.len(), 1, "{resource}");
            assert!(!powers_covered(&PolicyRule::new(&[group], &["*"], &["*"]), &found), "{resource}");
            assert!(powers_covered(&PolicyRule::new(&[group], &[resource], &["*"]), &found), "{resource}: named");
        }
        assert!(powers(&PolicyRule::new(&[""], &["pods", "configmaps"], &["*"])).is_empty());
        assert_eq!(
            powers(&PolicyRule::new(&[""], &["users"], &["impersonate"]))[0].to_string(),
            "impersonate on users"
        );
    }

    #[test]
    fn tokens_and_crds() {
        assert!(crd("things.kro.example", "kro.example", &own()).is_none());
        assert!(crd("others.kro.example", "kro.example", &own()).is_some(), "not listed in the identity");
        assert!(crd("things.evil.io", "evil.io", &own()).is_some());
        assert_eq!(copy_target(Cluster::Platform, "pods", "mcp--t").unwrap().rule, "tenant-namespace-only");
        assert_eq!(copy_target(Cluster::ControlPlane, "kube-system", "mcp--t").unwrap().rule, "no-system-namespaces");
        assert!(copy_target(Cluster::ControlPlane, "kro-system", "mcp--t").is_none());
    }
}
