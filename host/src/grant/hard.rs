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

/// Rules for the token rules a plugin asks for on a cluster of its tenant.
pub fn token_rule(rule: &PolicyRule) -> Option<Refusal> {
    if rule.api_groups.iter().chain(&rule.resources).any(|x| x == "*") {
        return refuse("no-wildcard-tokens", "token rules name their API groups and resources; no wildcards");
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
    fn tokens_and_crds() {
        assert!(token_rule(&PolicyRule::new(&["*"], &["pods"], &["get"])).is_some());
        assert!(token_rule(&PolicyRule::new(&[""], &["*"], &["get"])).is_some());
        assert!(token_rule(&PolicyRule::new(&["rbac.authorization.k8s.io"], &["clusterroles"], &["*"])).is_none());
        assert!(crd("things.kro.example", "kro.example", &own()).is_none());
        assert!(crd("others.kro.example", "kro.example", &own()).is_some(), "not listed in the identity");
        assert!(crd("things.evil.io", "evil.io", &own()).is_some());
        assert_eq!(copy_target(Cluster::Platform, "pods", "mcp--t").unwrap().rule, "tenant-namespace-only");
        assert_eq!(copy_target(Cluster::ControlPlane, "kube-system", "mcp--t").unwrap().rule, "no-system-namespaces");
        assert!(copy_target(Cluster::ControlPlane, "kro-system", "mcp--t").is_none());
    }
}
