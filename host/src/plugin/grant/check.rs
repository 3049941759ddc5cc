//! The per-call checks: is this object, copy or deletion of a plan allowed
//! for this instance? The always-refused rules ([`super::hard`]) and the
//! Flux floor ([`super::floor`]) come first, then the grant; every refusal
//! names its rule.

use std::collections::BTreeMap;

use serde_json::Value;
use service_provider_sdk::contract::{Cluster, Context};
use service_provider_sdk::names;

pub use super::fields::{Facts, Sibling};
use super::fields::{field_denial, unreviewed_field};
use super::floor;
use super::hard::{self, Source, Target};
use super::{COPY_SOURCE_LABEL, COPY_TO_ANNOTATION, Effective, Place, listed};

/// A request of the plugin the host refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is refused: {reason} (rule {rule})")]
pub struct Denial {
    /// The rule's name: one of [`super::hard`]'s or [`super::floor`]'s, `not-granted`,
    /// `not-requested`, `grant-field`, `no-conversion-webhooks` or
    /// `plural-of-kind`.
    pub rule: String,
    /// The object, copy or observation, as an operator would name it.
    pub what: String,
    pub reason: String,
}

impl Denial {
    pub fn new(rule: impl Into<String>, what: impl Into<String>, reason: impl Into<String>) -> Self {
        Denial { rule: rule.into(), what: what.into(), reason: reason.into() }
    }

    fn hard(what: &str, refusal: hard::Refusal) -> Self {
        Denial::new(refusal.rule, what, refusal.reason)
    }
}

/// Whether a place of the grant covers a namespace (`None`: cluster-scoped).
fn place_covers(place: &Place, cluster: Cluster, namespace: Option<&str>, tenant: &str) -> bool {
    place.cluster == cluster
        && match namespace {
            None => place.cluster_scoped,
            Some(ns) => place.namespaces.iter().any(|n| n == "*" || n == ns || (n == "{tenant}" && ns == tenant)),
        }
}

impl Effective {
    /// Whether the rules no grant can lift allow writing or deleting `target`.
    pub fn check_always_refused(&self, context: &Context, target: &Target, what: &str) -> Result<(), Denial> {
        match hard::write(target, &self.own, &context.tenant_namespace) {
            Some(refusal) => Err(Denial::hard(what, refusal)),
            None => Ok(()),
        }
    }

    /// Whether the host may write (or, with `object` `None`, delete)
    /// `target` for the instance of `facts.context`; the plan's other
    /// objects and copies and the ProviderConfig in `facts` stand for the
    /// placeholders and `planned` references.
    pub fn check_write(
        &self,
        facts: &Facts<'_>,
        target: &Target,
        object: Option<&Value>,
        what: &str,
    ) -> Result<(), Denial> {
        let tenant = facts.context.tenant_namespace.as_str();
        if let Some(refusal) = hard::write(target, &self.own, tenant) {
            return Err(Denial::hard(what, refusal));
        }
        if let Some(object) = object {
            for (rule, field) in floor::conditions(target.group, target.kind) {
                if let Some(reason) = field_denial(field, object, facts, target) {
                    return Err(Denial::new(rule, what, reason));
                }
            }
        }
        let rules = self.grant.write.iter().filter(|rule| {
            place_covers(&rule.place(), target.cluster, target.namespace, tenant)
                && listed(&rule.groups, target.group)
                && listed(&rule.kinds, target.kind)
        });
        let mut first_field_denial = None;
        for rule in rules {
            let Some(object) = object else { return Ok(()) };
            let denial = unreviewed_field(&rule.only_fields, object)
                .or_else(|| rule.fields.iter().find_map(|f| field_denial(f, object, facts, target)));
            match denial {
                None => return Ok(()),
                Some(reason) => {
                    first_field_denial.get_or_insert(reason);
                }
            }
        }
        Err(match first_field_denial {
            Some(reason) => Denial::new("grant-field", what, reason),
            None => Denial::new("not-granted", what, self.not_written_reason(target, tenant)),
        })
    }

    /// Why no write rule allows `target`: said so where the load check
    /// counted the capability as covered, by a copy target (a Secret or
    /// ConfigMap there may be copied, not written as an object).
    fn not_written_reason(&self, target: &Target, tenant: &str) -> &'static str {
        if super::copied_kind(target.group, target.kind) && self.copies_to(target.cluster, target.namespace, tenant) {
            "no write rule of the plugin grant allows it; its copy targets let the plugin copy one here, not write one"
        } else {
            "no write rule of the plugin grant allows it"
        }
    }

    /// Whether a copy may go to `namespace` on `cluster`.
    pub fn check_copy_target(
        &self,
        context: &Context,
        cluster: Cluster,
        namespace: &str,
        what: &str,
    ) -> Result<(), Denial> {
        let tenant = context.tenant_namespace.as_str();
        if let Some(refusal) = hard::copy_target(cluster, namespace, tenant) {
            return Err(Denial::hard(what, refusal));
        }
        if !self.copies_to(cluster, Some(namespace), tenant) {
            return Err(Denial::new("not-granted", what, "no copy target of the plugin grant allows it"));
        }
        Ok(())
    }

    /// Whether a copy target of the grant covers `namespace` on `cluster`.
    fn copies_to(&self, cluster: Cluster, namespace: Option<&str>, tenant: &str) -> bool {
        self.grant.copy.targets.iter().any(|place| place_covers(place, cluster, namespace, tenant))
    }

    /// Whether the object `source` in the pod namespace may be copied.
    /// `reserved` names the host's own credentials.
    pub fn check_copy_source(
        &self,
        provider: &str,
        provider_config: Option<&Value>,
        source: &Source,
        labels: &BTreeMap<String, String>,
        reserved: &[String],
    ) -> Result<(), Denial> {
        let what = format!("copying {} {}", source.kind, source.name);
        if let Some(refusal) = hard::copy_source(source, reserved) {
            return Err(Denial::hard(&what, refusal));
        }
        let sources = &self.grant.copy.sources;
        let named_by_config = sources.provider_config
            && provider_config.and_then(|pc| pc.get("spec")).is_some_and(|spec| mentions(spec, source.name));
        let labelled = sources.labelled && labels.get(COPY_SOURCE_LABEL) == Some(&names::label_value(provider));
        let listed_by_name = sources.names.iter().any(|n| n == source.name);
        if !(named_by_config || labelled || listed_by_name) {
            let mut ways = Vec::new();
            if sources.provider_config {
                ways.push("name it in the ProviderConfig".to_string());
            }
            if sources.labelled {
                ways.push(format!("label it {COPY_SOURCE_LABEL}={}", names::label_value(provider)));
            }
            ways.push("list it in the plugin grant's copy.sources.names".to_string());
            let reason = format!("it is not an allowed copy source; to allow it, {}", ways.join(", or "));
            return Err(Denial::new("not-granted", what, reason));
        }
        Ok(())
    }
}

/// Whether a copy source's own word on where its copies may go
/// ([`COPY_TO_ANNOTATION`]) allows one on `target`.
pub fn copy_to(kind: &str, name: &str, annotations: &BTreeMap<String, String>, target: Cluster) -> Result<(), Denial> {
    let Some(allowed) = annotations.get(COPY_TO_ANNOTATION) else { return Ok(()) };
    if allowed.split(',').map(str::trim).any(|c| c == target.as_str()) {
        return Ok(());
    }
    let what = format!("copying {kind} {name} to the {target} cluster");
    let reason =
        format!("its annotation {COPY_TO_ANNOTATION} allows copies only to {}", crate::syntax::one_line(allowed, 80));
    Err(Denial::new("copy-to", what, reason))
}

/// Whether `value` contains the string `name` anywhere.
fn mentions(value: &Value, name: &str) -> bool {
    match value {
        Value::String(s) => s == name,
        Value::Array(items) => items.iter().any(|v| mentions(v, name)),
        Value::Object(map) => map.values().any(|v| mentions(v, name)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_provider_sdk::contract::{ApiKind, Descriptor, KubeconfigRef};

    use super::*;
    use crate::plugin::grant::Grant;

    fn effective() -> Effective {
        let kind = ApiKind::new("kro.example", "v1", "Kro", "kroes", true);
        let descriptor = Descriptor::new("kro", kind.clone(), kind, "f");
        Effective::new(&descriptor, Grant::default_grant().pinning(&descriptor)).unwrap()
    }

    fn context() -> Context {
        Context {
            provider_name: "kro".into(),
            tenant_namespace: "mcp--t".into(),
            pod_namespace: "pods".into(),
            control_plane: Some(KubeconfigRef {
                namespace: "mcp--t".into(),
                name: "cp-kubeconfig".into(),
                key: "kubeconfig".into(),
            }),
            workload: None,
        }
    }

    fn release(spec: Value) -> Value {
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "r", "namespace": "mcp--t"}, "spec": spec})
    }

    const RELEASE: Target = Target {
        cluster: Cluster::Platform,
        group: "helm.toolkit.fluxcd.io",
        kind: "HelmRelease",
        namespace: Some("mcp--t"),
        name: "r",
    };

    fn facts<'a>(context: &'a Context, siblings: &'a [Sibling]) -> Facts<'a> {
        Facts { context, siblings, provider_config: None }
    }

    fn check(object: &Value, siblings: &[Sibling]) -> Result<(), Denial> {
        effective().check_write(&facts(&context(), siblings), &RELEASE, Some(object), "HelmRelease mcp--t/r")
    }

    fn sibling(kind: &str, name: &str, copy: bool) -> Sibling {
        Sibling {
            cluster: Cluster::Platform,
            group: if copy { String::new() } else { "source.toolkit.fluxcd.io".into() },
            kind: kind.into(),
            namespace: Some("mcp--t".into()),
            name: name.into(),
            copy,
        }
    }

    #[test]
    fn a_helm_release_must_install_into_the_instances_own_cluster() {
        let chart_ref = json!({"kind": "OCIRepository", "name": "chart", "namespace": "mcp--t"});
        let good = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref}));
        let plan = [sibling("OCIRepository", "chart", false)];
        assert_eq!(check(&good, &plan), Ok(()));
        let other_group = json!({"apiVersion": "evil.example/v1", "kind": "OCIRepository", "name": "chart"});
        let other = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": other_group}));
        assert!(check(&other, &plan).is_err(), "same kind and name in another group");
        let same_group = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "name": "chart"});
        let same = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": same_group}));
        assert_eq!(check(&same, &plan), Ok(()));
        let foreign = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}},
            "chartRef": {"kind": "OCIRepository", "name": "someone-elses"}}));
        assert!(check(&foreign, &plan).unwrap_err().reason.contains("an object of the same plan"));
        let unreviewed = release(
            json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref, "newField": {"a": 1}}),
        );
        assert!(check(&unreviewed, &plan).unwrap_err().reason.contains("/spec/newField/a is not one"));
        for (bad, rule, text) in [
            (release(json!({})), "flux-acts-on-the-instance", "/spec/kubeConfig/secretRef/name must be set"),
            (
                release(json!({"kubeConfig": {"secretRef": {"name": "other"}}})),
                "flux-acts-on-the-instance",
                "must be one of [\"cp-kubeconfig\"]",
            ),
            (
                release(
                    json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": {"namespace": "mcp--other"}}),
                ),
                "flux-own-sources",
                "chartRef",
            ),
            (
                release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}},
                    "valuesFrom": [{"kind": "Secret", "name": "platform-credentials"}]})),
                "flux-no-platform-data",
                "/spec/valuesFrom must not be set",
            ),
            (
                release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "valuesFrom": []})),
                "flux-no-platform-data",
                "/spec/valuesFrom must not be set",
            ),
            (
                release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}},
                    "chartRef": {"apiVersion": "evil.example/v1", "kind": "OCIRepository", "name": "chart"}})),
                "flux-own-sources",
                "/spec/chartRef must refer to an object of the same plan",
            ),
        ] {
            let denial = check(&bad, &[]).unwrap_err();
            assert_eq!(denial.rule, rule, "{bad}");
            assert!(denial.to_string().contains(text), "{denial}");
            assert!(denial.to_string().starts_with("HelmRelease mcp--t/r is refused"), "{denial}");
        }
    }

    /// A grant with no field rules (as `plugin grant` writes one) is held
    /// to the Flux floor all the same, and allows what the floor allows.
    #[test]
    fn a_grant_without_field_rules_is_held_to_the_flux_floor() {
        let kind = ApiKind::new("kro.example", "v1", "Kro", "kroes", true);
        let descriptor = Descriptor::new("kro", kind.clone(), kind, "f");
        let mut grant = Grant::default_grant().pinning(&descriptor);
        for rule in &mut grant.write {
            rule.fields.clear();
            rule.only_fields.clear();
        }
        let e = Effective::new(&descriptor, grant).unwrap();
        let check = |object: &Value, siblings: &[Sibling]| {
            e.check_write(&facts(&context(), siblings), &RELEASE, Some(object), "HelmRelease mcp--t/r")
        };
        let chart_ref = json!({"kind": "OCIRepository", "name": "chart"});
        let plan = [sibling("OCIRepository", "chart", false)];
        let good = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref}));
        assert_eq!(check(&good, &plan), Ok(()));
        let unreviewed = release(
            json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref, "newField": 1}),
        );
        assert_eq!(check(&unreviewed, &plan), Ok(()), "no field list: a field nobody reviewed passes");
        for (bad, rule) in [
            (json!({"chartRef": chart_ref}), "flux-acts-on-the-instance"),
            (
                json!({"kubeConfig": {"configMapRef": {"name": "x"}}, "chartRef": chart_ref}),
                "flux-acts-on-the-instance",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "serviceAccountName": "admin",
                    "chartRef": chart_ref}),
                "flux-acts-on-the-instance",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref,
                    "valuesFrom": [{"kind": "Secret", "name": "cp-kubeconfig"}]}),
                "flux-no-platform-data",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}},
                    "chartRef": {"kind": "OCIRepository", "name": "someone-elses"}}),
                "flux-own-sources",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref,
                    "install": {"remediation": {"retries": -1}}}),
                "flux-bounded-work",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref,
                    "upgrade": {"remediation": {"retries": 1000}}}),
                "flux-bounded-work",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref,
                    "upgrade": {"remediation": {"retries": "3"}}}),
                "flux-bounded-work",
            ),
            (
                json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref, "maxHistory": 0}),
                "flux-bounded-work",
            ),
        ] {
            assert_eq!(check(&release(bad.clone()), &plan).unwrap_err().rule, rule, "{bad}");
        }
        let bounded = release(json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref,
            "install": {"remediation": {"retries": 3}}, "maxHistory": 5}));
        assert_eq!(check(&bounded, &plan), Ok(()), "kro's retries and a history within the bounds");
    }

    #[test]
    fn a_source_may_only_use_the_plans_own_copies() {
        let repo = Target { group: "source.toolkit.fluxcd.io", kind: "OCIRepository", ..RELEASE };
        let object = json!({"spec": {"url": KRO_CHART, "secretRef": {"name": "sp-kro-pull"}}});
        let e = effective();
        let copy = sibling("Secret", "sp-kro-pull", true);
        assert!(e.check_write(&facts(&context(), std::slice::from_ref(&copy)), &repo, Some(&object), "r").is_ok());
        let elsewhere =
            Sibling { namespace: Some("kro-system".into()), cluster: Cluster::ControlPlane, ..copy.clone() };
        assert_eq!(
            e.check_write(&facts(&context(), &[elsewhere]), &repo, Some(&object), "r").unwrap_err().rule,
            "flux-no-platform-credentials"
        );
        // A ConfigMap copy of that name does not make a Secret reference acceptable.
        let config_map = Sibling { kind: "ConfigMap".into(), ..copy };
        assert_eq!(
            e.check_write(&facts(&context(), &[config_map]), &repo, Some(&object), "r").unwrap_err().rule,
            "flux-no-platform-credentials"
        );
        for (credential, rule) in [
            (json!({"provider": "aws"}), "flux-no-platform-identity"),
            (json!({"serviceAccountName": "default"}), "flux-no-platform-identity"),
            (json!({"insecure": true}), "grant-field"),
        ] {
            let mut object = json!({"spec": {"url": KRO_CHART}});
            object["spec"].as_object_mut().unwrap().extend(credential.as_object().unwrap().clone());
            assert_eq!(
                e.check_write(&facts(&context(), &[]), &repo, Some(&object), "r").unwrap_err().rule,
                rule,
                "{object}"
            );
        }
        let kubeconfig = json!({"spec": {"secretRef": {"name": "cp-kubeconfig"}}});
        assert_eq!(
            e.check_write(&facts(&context(), &[]), &repo, Some(&kubeconfig), "r").unwrap_err().rule,
            "flux-no-platform-credentials"
        );
    }

    const KRO_CHART: &str = "oci://registry.k8s.io/kro/charts/kro";

    #[test]
    fn a_source_pulls_only_from_where_the_provider_config_says() {
        let repo = Target { group: "source.toolkit.fluxcd.io", kind: "OCIRepository", ..RELEASE };
        let e = effective();
        let url = |url: &str| json!({"spec": {"url": url}});
        let pc = json!({"spec": {"versions": [{"chartURL": "registry.example/charts/kro"},
            {"chartURL": "oci://mirror.example/kro"}], "pollInterval": "1m"}});
        let with_pc = |context| Facts { context, siblings: &[], provider_config: Some(&pc) };
        let context = context();
        for allowed in [
            KRO_CHART,
            "oci://ghcr.io/fluxcd-community/charts/flux2",
            "oci://registry.example/charts/kro",
            "oci://mirror.example/kro",
            "registry.example/charts/kro",
        ] {
            assert!(e.check_write(&with_pc(&context), &repo, Some(&url(allowed)), "r").is_ok(), "{allowed}");
        }
        let denial =
            e.check_write(&with_pc(&context), &repo, Some(&url("oci://evil.example/charts/x")), "r").unwrap_err();
        assert!(denial.reason.starts_with("field /spec/url must be one of"), "{denial}");
        assert!(denial.reason.contains("oci://mirror.example/kro"), "names what is allowed: {denial}");
        let missing = e.check_write(&with_pc(&context), &repo, Some(&json!({"spec": {}})), "r").unwrap_err();
        assert!(missing.reason.contains("/spec/url must be set"), "{missing}");
        let helm = Target { kind: "HelmRepository", ..repo };
        assert!(e.check_write(&with_pc(&context), &helm, Some(&url(KRO_CHART)), "r").is_err(), "no defaults there");
    }

    #[test]
    fn flux_intervals_and_timeouts_are_bounded() {
        let repo = Target { group: "source.toolkit.fluxcd.io", kind: "OCIRepository", ..RELEASE };
        let e = effective();
        let spec = |more: Value| {
            let mut object = json!({"spec": {"url": KRO_CHART}});
            object["spec"].as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
            object
        };
        let check = |more: Value| e.check_write(&facts(&context(), &[]), &repo, Some(&spec(more)), "r");
        assert!(check(json!({"interval": "1m0s", "timeout": "60s"})).is_ok());
        assert!(check(json!({"interval": "30s"})).is_ok());
        for (more, reason) in [
            (json!({"interval": "1s"}), "field /spec/interval must be at least 30s (it is 1s)"),
            (json!({"interval": "500ms"}), "must be at least 30s"),
            (json!({"interval": 60}), "field /spec/interval must be a duration such as 5m (it is 60)"),
            (json!({"interval": "soon"}), "must be a duration"),
            (json!({"timeout": "1h"}), "field /spec/timeout must be at most 10m (it is 1h)"),
        ] {
            let denial = check(more.clone()).unwrap_err();
            assert_eq!(denial.rule, "grant-field");
            assert!(denial.reason.contains(reason), "{more}: {denial}");
        }
        let chart_ref = json!({"kind": "OCIRepository", "name": "chart", "namespace": "mcp--t"});
        let plan = [sibling("OCIRepository", "chart", false)];
        let release = |more: Value| {
            let mut spec = json!({"kubeConfig": {"secretRef": {"name": "cp-kubeconfig"}}, "chartRef": chart_ref});
            spec.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
            release(spec)
        };
        assert!(check_release(&release(json!({"interval": "5m", "install": {"timeout": "10m"}})), &plan).is_ok());
        let slow = check_release(&release(json!({"upgrade": {"timeout": "2h"}})), &plan).unwrap_err();
        assert!(slow.reason.contains("/spec/upgrade/timeout must be at most 30m"), "{slow}");
    }

    fn check_release(object: &Value, siblings: &[Sibling]) -> Result<(), Denial> {
        check(object, siblings)
    }

    #[test]
    fn kinds_and_places_outside_the_grant_are_refused() {
        let e = effective();
        let deployment = Target { group: "apps", kind: "Deployment", ..RELEASE };
        assert_eq!(
            e.check_write(&facts(&context(), &[]), &deployment, Some(&json!({})), "d").unwrap_err().rule,
            "not-granted"
        );
        let cp_namespace = Target {
            cluster: Cluster::ControlPlane,
            group: "",
            kind: "Namespace",
            namespace: None,
            name: "kro-system",
        };
        assert!(e.check_write(&facts(&context(), &[]), &cp_namespace, Some(&json!({})), "ns").is_ok());
        // Deletions check the rules but no fields.
        assert!(e.check_write(&facts(&context(), &[]), &RELEASE, None, "r").is_ok());
        assert!(e.check_copy_target(&context(), Cluster::ControlPlane, "kro-system", "c").is_ok());
        // Where the load check counted a ConfigMap capability as covered by
        // a copy target, the plan check refuses an object and says why.
        let config_map = Target { kind: "ConfigMap", namespace: Some("kro-system"), name: "c", ..cp_namespace };
        let denial = e.check_write(&facts(&context(), &[]), &config_map, Some(&json!({})), "c").unwrap_err();
        assert_eq!(denial.rule, "not-granted");
        assert!(denial.reason.contains("copy one here, not write one"), "{denial}");
        let denial = e.check_write(&facts(&context(), &[]), &deployment, Some(&json!({})), "d").unwrap_err();
        assert!(!denial.reason.contains("copy"), "no copy target covers a Deployment: {denial}");
        assert_eq!(e.check_copy_target(&context(), Cluster::Workload, "default", "c").unwrap_err().rule, "not-granted");
        assert_eq!(
            e.check_copy_target(&context(), Cluster::Platform, "pods", "c").unwrap_err().rule,
            "tenant-namespace-only"
        );
    }

    #[test]
    fn copy_sources_must_be_allowed_by_the_operator() {
        let e = effective();
        let source = Source {
            kind: "Secret",
            name: "registry",
            type_: Some("kubernetes.io/dockerconfigjson"),
            owner_kinds: &[],
            data_keys: &[],
        };
        let config = json!({"spec": {"versions": [{"chartPullSecret": "registry"}]}});
        let none = BTreeMap::new();
        assert!(e.check_copy_source("kro", Some(&config), &source, &none, &[]).is_ok());
        let denial = e.check_copy_source("kro", Some(&json!({"spec": {}})), &source, &none, &[]).unwrap_err();
        assert_eq!(denial.rule, "not-granted");
        assert!(denial.reason.contains("name it in the ProviderConfig"), "{denial}");
        let labelled = BTreeMap::from([(COPY_SOURCE_LABEL.to_string(), "kro".to_string())]);
        assert!(e.check_copy_source("kro", None, &source, &labelled, &[]).is_ok());
        let kubeconfig = Source { data_keys: &["kubeconfig"], ..source };
        let denial =
            e.check_copy_source("kro", Some(&json!({"spec": {"x": "registry"}})), &kubeconfig, &none, &[]).unwrap_err();
        assert_eq!(denial.rule, "no-credential-copies");
    }

    #[test]
    fn a_source_says_where_its_copies_may_go() {
        let platform_only = BTreeMap::from([(COPY_TO_ANNOTATION.to_string(), "platform".to_string())]);
        assert!(copy_to("Secret", "registry", &platform_only, Cluster::Platform).is_ok());
        let denial = copy_to("Secret", "registry", &platform_only, Cluster::ControlPlane).unwrap_err();
        assert_eq!(denial.rule, "copy-to");
        assert!(denial.to_string().contains("copying Secret registry to the control-plane cluster"), "{denial}");
        let both = BTreeMap::from([(COPY_TO_ANNOTATION.to_string(), "platform, control-plane".to_string())]);
        assert!(copy_to("Secret", "registry", &both, Cluster::ControlPlane).is_ok());
        assert!(
            copy_to("Secret", "registry", &BTreeMap::new(), Cluster::Workload).is_ok(),
            "unsaid: the grant decides"
        );
    }
}
