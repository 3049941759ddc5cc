//! Holding a plan to the plugin's word: every object it asks the host to
//! write or delete must be well formed, on a cluster the instance reaches,
//! and covered by a capability.

use serde_json::Value;
use service_provider_sdk::contract::{Capability, Cluster, Context, Descriptor, ObjectRef, Plan, Teardown};

use super::Manifest;
use crate::Error;
use crate::instance::{reachable, scope_namespace};
use crate::resource::group_of;

fn violation(descriptor: &Descriptor, message: String) -> Error {
    Error::Contract { plugin: descriptor.name.clone(), message }
}

/// What a plugin asks the host to write to or delete.
struct Target<'a> {
    cluster: Cluster,
    group: &'a str,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
}

impl Target<'_> {
    fn describe(&self) -> String {
        match self.namespace {
            Some(ns) => format!("{} {ns}/{} on the {} cluster", self.kind, self.name, self.cluster),
            None => format!("{} {} on the {} cluster", self.kind, self.name, self.cluster),
        }
    }
}

/// The allow-list entry that covers the target, if any.
fn allowed<'d>(descriptor: &'d Descriptor, context: &Context, t: &Target) -> Option<&'d Capability> {
    descriptor.capabilities.iter().find(|c| {
        c.cluster == t.cluster
            && c.api.group == t.group
            && c.api.kind == t.kind
            && scope_namespace(&c.scope, context) == t.namespace
            && (c.names.is_empty() || c.names.iter().any(|n| n == t.name))
    })
}

/// `what` names the request in the error (an object, or a Secret copy).
/// Writes need the cluster to be reachable; a deletion on a cluster the
/// instance no longer reaches is just skipped by the host, so it is allowed.
fn check_target<'d>(
    descriptor: &'d Descriptor,
    context: &Context,
    target: Target,
    what: &str,
    write: bool,
) -> Result<&'d Capability, Error> {
    if write && !reachable(target.cluster, context) {
        return Err(violation(
            descriptor,
            format!("{what} targets the {} cluster, which this instance has no access to", target.cluster),
        ));
    }
    allowed(descriptor, context, &target)
        .ok_or_else(|| violation(descriptor, format!("{what} is not covered by its capability allow-list")))
}

pub fn check_ref(descriptor: &Descriptor, context: &Context, r: &ObjectRef) -> Result<(), Error> {
    let target = Target {
        cluster: r.cluster,
        group: group_of(&r.api_version),
        kind: &r.kind,
        namespace: r.namespace.as_deref(),
        name: &r.name,
    };
    let what = target.describe();
    check_target(descriptor, context, target, &what, false).map(drop)
}

/// Checks a teardown: every deletion covered, copies are v1 Secrets.
pub fn check_teardown(descriptor: &Descriptor, context: &Context, teardown: &Teardown) -> Result<(), Error> {
    for r in teardown.objects.iter().chain(&teardown.secret_copies) {
        check_ref(descriptor, context, r)?;
    }
    for r in &teardown.secret_copies {
        if r.kind != "Secret" || r.api_version != "v1" {
            return Err(violation(descriptor, format!("secret copy {} {} is not a v1 Secret", r.kind, r.name)));
        }
    }
    Ok(())
}

/// Parses a desired object and pulls out its identity.
pub fn manifest(descriptor: &Descriptor, cluster: Cluster, text: &str) -> Result<Manifest, Error> {
    let object: Value = serde_json::from_str(text)
        .map_err(|e| violation(descriptor, format!("a desired object is not valid JSON: {e}")))?;
    let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(api_version), Some(kind), Some(name)) = (field("/apiVersion"), field("/kind"), field("/metadata/name"))
    else {
        return Err(violation(descriptor, "a desired object lacks apiVersion, kind or metadata.name".into()));
    };
    Ok(Manifest {
        cluster,
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: String::new(),
        name: name.to_string(),
        namespace: field("/metadata/namespace").map(str::to_string),
        object: object.clone(),
    })
}

/// Checks every object and copy of a plan.
pub fn check_plan(descriptor: &Descriptor, context: &Context, plan: &Plan) -> Result<Vec<Manifest>, Error> {
    let mut manifests =
        plan.objects.iter().map(|o| manifest(descriptor, o.cluster, &o.manifest)).collect::<Result<Vec<_>, _>>()?;
    for m in &mut manifests {
        let target = Target {
            cluster: m.cluster,
            group: m.group(),
            kind: &m.kind,
            namespace: m.namespace.as_deref(),
            name: &m.name,
        };
        let what = target.describe();
        let plural = check_target(descriptor, context, target, &what, true)?.api.plural.clone();
        m.plural = plural;
    }
    for copy in &plan.secret_copies {
        if copy.source_name.is_empty() || copy.target_name.is_empty() {
            return Err(violation(descriptor, "a secret copy has an empty source or target name".into()));
        }
        let what = format!(
            "copy of Secret {} to {}/{} on the {} cluster",
            copy.source_name, copy.target_namespace, copy.target_name, copy.target_cluster
        );
        let target = Target {
            cluster: copy.target_cluster,
            group: "",
            kind: "Secret",
            namespace: Some(&copy.target_namespace),
            name: &copy.target_name,
        };
        check_target(descriptor, context, target, &what, true)?;
    }
    Ok(manifests)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_provider_sdk::contract::{
        ApiKind, DesiredObject, KubeconfigRef, NamespaceScope, SecretCopy, ServiceStatus,
    };

    use super::*;
    use crate::plan::{CheckedPlan, Step};

    fn descriptor() -> Descriptor {
        let kind = ApiKind::new("g", "v1", "S", "s", true);
        let capability = |cluster, api, scope, names: &[&str]| Capability {
            cluster,
            api,
            scope,
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        Descriptor {
            capabilities: vec![
                capability(
                    Cluster::Platform,
                    ApiKind::new("apps", "v1", "Deployment", "deployments", true),
                    NamespaceScope::Tenant,
                    &["web"],
                ),
                capability(
                    Cluster::Platform,
                    ApiKind::new("", "v1", "Secret", "secrets", true),
                    NamespaceScope::Tenant,
                    &[],
                ),
                capability(
                    Cluster::ControlPlane,
                    ApiKind::new("", "v1", "Namespace", "namespaces", false),
                    NamespaceScope::ClusterScoped,
                    &[],
                ),
            ],
            ..Descriptor::new("demo", kind.clone(), kind, "f")
        }
    }

    fn context(control_plane: bool) -> Context {
        Context {
            provider_name: "demo".into(),
            tenant_namespace: "mcp--t".into(),
            pod_namespace: "pods".into(),
            control_plane: control_plane.then(|| KubeconfigRef {
                namespace: "mcp--t".into(),
                name: "k".into(),
                key: "kubeconfig".into(),
            }),
            workload: None,
        }
    }

    fn plan(objects: Vec<(Cluster, Value)>, copies: Vec<SecretCopy>) -> Plan {
        Plan {
            objects: objects
                .into_iter()
                .map(|(cluster, v)| DesiredObject { cluster, manifest: v.to_string() })
                .collect(),
            secret_copies: copies,
            status: ServiceStatus { phase: "Ready".into(), conditions: vec![], resources: None },
            requeue_after_seconds: 60,
        }
    }

    fn deployment(name: &str, ns: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns}})
    }

    fn copy(cluster: Cluster, ns: &str) -> SecretCopy {
        SecretCopy {
            source_name: "src".into(),
            target_cluster: cluster,
            target_namespace: ns.into(),
            target_name: "dst".into(),
            required_type: None,
        }
    }

    #[test]
    fn allowed_objects_pass_and_are_parsed() {
        let p = plan(
            vec![
                (Cluster::Platform, deployment("web", "mcp--t")),
                (Cluster::ControlPlane, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})),
            ],
            vec![copy(Cluster::Platform, "mcp--t")],
        );
        let manifests = check_plan(&descriptor(), &context(true), &p).unwrap();
        assert_eq!(manifests[0].group(), "apps");
        assert_eq!(manifests[0].plural, "deployments");
        assert_eq!(manifests[1].group(), "");
        assert_eq!(manifests[1].namespace, None);
    }

    #[test]
    fn objects_outside_the_allow_list_are_refused() {
        let d = descriptor();
        let c = context(true);
        for (cluster, obj) in [
            (Cluster::Platform, deployment("other", "mcp--t")),
            (Cluster::Platform, deployment("web", "kube-system")),
            (Cluster::Onboarding, deployment("web", "mcp--t")),
            (
                Cluster::Platform,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "mcp--t"}}),
            ),
        ] {
            let err = check_plan(&d, &c, &plan(vec![(cluster, obj.clone())], vec![])).unwrap_err();
            assert!(err.to_string().contains("capability allow-list"), "{obj}: {err}");
            assert!(err.to_string().starts_with("plugin demo violated its contract"), "{err}");
        }
    }

    #[test]
    fn copies_are_checked_like_objects() {
        let err = check_plan(&descriptor(), &context(true), &plan(vec![], vec![copy(Cluster::Platform, "default")]))
            .unwrap_err();
        assert!(err.to_string().contains("copy of Secret src to default/dst"), "{err}");
    }

    #[test]
    fn unreachable_clusters_are_refused() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        let err =
            check_plan(&descriptor(), &context(false), &plan(vec![(Cluster::ControlPlane, ns)], vec![])).unwrap_err();
        assert!(err.to_string().contains("no access"), "{err}");
    }

    #[test]
    fn deletions_on_unreachable_clusters_are_allowed_but_still_checked() {
        let d = descriptor();
        let ns_ref = |name: &str| ObjectRef {
            cluster: Cluster::ControlPlane,
            api_version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespace: None,
            name: name.into(),
        };
        assert!(check_ref(&d, &context(false), &ns_ref("x")).is_ok());
        let mut secret = ns_ref("x");
        secret.kind = "Secret".into();
        secret.namespace = Some("elsewhere".into());
        assert!(check_ref(&d, &context(false), &secret).is_err(), "allow-list still applies");
    }

    #[test]
    fn malformed_manifests_are_refused() {
        for bad in ["not json", "{}", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{}}"#] {
            let p = Plan {
                objects: vec![DesiredObject { cluster: Cluster::Platform, manifest: bad.into() }],
                ..plan(vec![], vec![])
            };
            assert!(check_plan(&descriptor(), &context(true), &p).is_err(), "{bad}");
        }
    }

    #[test]
    fn namespaces_come_first_then_copies_then_the_rest() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        let p = plan(
            vec![(Cluster::Platform, deployment("web", "mcp--t")), (Cluster::ControlPlane, ns)],
            vec![copy(Cluster::Platform, "mcp--t")],
        );
        let checked = CheckedPlan {
            manifests: check_plan(&descriptor(), &context(true), &p).unwrap(),
            secret_copies: p.secret_copies.clone(),
            status: p.status.clone(),
            requeue_after_seconds: 60,
        };
        let order: Vec<String> = checked
            .steps()
            .map(|s| match s {
                Step::Apply(m) => m.kind.clone(),
                Step::Copy(c) => format!("copy {}", c.source_name),
            })
            .collect();
        assert_eq!(order, ["Namespace", "copy src", "Deployment"]);
    }
}
