//! Tests of the plan checks against the requests and the grant.

use serde_json::{Value, json};
use service_provider_sdk::contract::{
    ApiKind, DesiredObject, KubeconfigRef, NamespaceScope, ObjectCopy, ResourceStatus, ServiceStatus,
};

use super::*;
use crate::plugin::grant::{Grant, WriteRule};
use crate::plugin::plan::{CheckedPlan, Step};

fn descriptor() -> Descriptor {
    let kind = ApiKind::new("g.example", "v1", "S", "s", true);
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
            capability(
                Cluster::ControlPlane,
                ApiKind::new("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false),
                NamespaceScope::ClusterScoped,
                &[],
            ),
        ],
        ..Descriptor::new("demo", kind.clone(), kind, "f")
    }
}

/// The default grant, plus Deployments in the tenant namespace.
fn granted() -> Effective {
    let mut grant = Grant::default_grant();
    grant.write.push(WriteRule {
        cluster: Cluster::Platform,
        namespaces: vec!["{tenant}".into()],
        cluster_scoped: false,
        groups: vec!["apps".into()],
        kinds: vec!["Deployment".into()],
        fields: vec![],
        only_fields: vec![],
    });
    Effective::new(&descriptor(), grant.pinning(&descriptor())).unwrap()
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

fn plan(objects: Vec<(Cluster, Value)>, copies: Vec<ObjectCopy>) -> Plan {
    Plan {
        objects: objects.into_iter().map(|(cluster, v)| DesiredObject { cluster, manifest: v.to_string() }).collect(),
        copies,
        status: ServiceStatus { phase: "Ready".into(), conditions: vec![], resources: None },
        requeue_after_seconds: 60,
    }
}

fn check(p: &Plan) -> Result<Vec<Manifest>, Error> {
    check_plan(&descriptor(), &granted(), &context(true), None, p)
}

fn deployment(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns}})
}

fn copy(cluster: Cluster, ns: &str) -> ObjectCopy {
    ObjectCopy::secret("src", "kubernetes.io/dockerconfigjson", cluster, ns, "dst")
}

fn denial(err: Error) -> Denial {
    match err {
        Error::Denied(d) => d,
        other => panic!("expected a denial, got {other}"),
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
    let manifests = check(&p).unwrap();
    assert_eq!(manifests[0].group(), "apps");
    assert_eq!(manifests[0].plural, "deployments");
    assert_eq!(manifests[1].group(), "");
    assert_eq!(manifests[1].namespace, None);
}

#[test]
fn what_is_not_requested_granted_or_allowed_at_all_is_refused_by_name() {
    for (cluster, obj, rule) in [
        (Cluster::Platform, deployment("other", "mcp--t"), "not-requested"),
        (Cluster::Platform, deployment("web", "kube-system"), "no-system-namespaces"),
        (Cluster::Onboarding, deployment("web", "mcp--t"), "no-onboarding-writes"),
        (
            Cluster::Platform,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web", "namespace": "mcp--t"}}),
            "no-secret-objects",
        ),
        (
            Cluster::ControlPlane,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
            "no-cluster-power",
        ),
        (
            Cluster::Platform,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "mcp--t"}}),
            "not-requested",
        ),
    ] {
        let d = denial(check(&plan(vec![(cluster, obj.clone())], vec![])).unwrap_err());
        assert_eq!(d.rule, rule, "{obj}: {d}");
    }
}

#[test]
fn copies_are_checked_like_objects_and_must_state_a_type() {
    let d = denial(check(&plan(vec![], vec![copy(Cluster::Platform, "default")])).unwrap_err());
    assert!(d.to_string().contains("copy of Secret src to default/dst"), "{d}");
    assert_eq!(d.rule, "tenant-namespace-only");
    let untyped = ObjectCopy::secret("src", "", Cluster::Platform, "mcp--t", "dst");
    let err = check(&plan(vec![], vec![untyped])).unwrap_err();
    assert!(err.to_string().contains("must state the Secret type"), "{err}");
    assert!(matches!(err, Error::InvalidPlan { .. }), "{err:?}");
}

#[test]
fn a_source_is_copied_at_most_once_to_each_cluster() {
    let to = |source: &str, name: &str| {
        ObjectCopy::secret(source, "kubernetes.io/dockerconfigjson", Cluster::Platform, "mcp--t", name)
    };
    check(&plan(vec![], vec![to("src", "a"), to("other", "b")])).expect("two sources, once each");
    let twice = vec![to("src", "a"), to("src", "b")];
    let err = check(&plan(vec![], twice)).unwrap_err();
    assert!(matches!(err, Error::InvalidPlan { .. }), "{err:?}");
    assert!(err.to_string().contains("Secret src is copied to the platform cluster more than once"), "{err}");
}

#[test]
fn a_plan_names_a_bounded_number_of_namespaces_per_cluster() {
    let namespace = |i: usize| {
        (Cluster::ControlPlane, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("n{i}")}}))
    };
    check(&plan((0..NAMESPACES_PER_INSTANCE).map(namespace).collect(), vec![])).expect("at the bound");
    let err = check(&plan((0..=NAMESPACES_PER_INSTANCE).map(namespace).collect(), vec![])).unwrap_err();
    assert!(matches!(err, Error::InvalidPlan { .. }), "{err:?}");
    assert!(err.to_string().contains("9 Namespaces on the control-plane cluster"), "{err}");
}

#[test]
fn unreachable_clusters_are_refused() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    let err =
        check_plan(&descriptor(), &granted(), &context(false), None, &plan(vec![(Cluster::ControlPlane, ns)], vec![]))
            .unwrap_err();
    assert!(err.to_string().contains("no access"), "{err}");
}

#[test]
fn deletions_on_unreachable_clusters_are_allowed_but_still_checked() {
    let ns_ref = |name: &str| ObjectRef {
        cluster: Cluster::ControlPlane,
        api_version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
        namespace: None,
        name: name.into(),
    };
    assert!(check_ref(&descriptor(), &granted(), &context(false), &ns_ref("x")).is_ok());
    let mut secret = ns_ref("x");
    secret.kind = "Secret".into();
    secret.namespace = Some("elsewhere".into());
    assert!(check_ref(&descriptor(), &granted(), &context(false), &secret).is_err(), "still checked");
}

#[test]
fn malformed_manifests_are_refused() {
    for bad in ["not json", "{}", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{}}"#] {
        let p = Plan {
            objects: vec![DesiredObject { cluster: Cluster::Platform, manifest: bad.into() }],
            ..plan(vec![], vec![])
        };
        let err = check(&p).unwrap_err();
        assert!(matches!(err, Error::InvalidPlan { .. }), "{bad}: {err}");
    }
}

#[test]
fn what_a_plan_or_a_cleanup_reports_is_checked_too() {
    let forged = ResourceStatus {
        api_group: None,
        kind: "Namespace".into(),
        name: "x\ny".into(),
        namespace: None,
        phase: "Ready".into(),
        message: None,
        location: None,
    };
    let expected = "status.resources[0].name \"x y\" is not an object name";
    let mut p = plan(vec![], vec![]);
    p.status.resources = Some(vec![forged.clone()]);
    let teardown = Teardown { objects: vec![], copies: vec![], resources: Some(vec![forged.clone()]) };
    let blocked = Blocked { message: "m".into(), requeue_after_seconds: 1, resources: Some(vec![forged]) };
    for err in [
        check(&p).unwrap_err(),
        check_teardown(&descriptor(), &granted(), &context(true), &teardown).unwrap_err(),
        check_blocked(&descriptor(), &blocked).unwrap_err(),
    ] {
        assert!(matches!(err, Error::InvalidPlan { .. }) && err.to_string().contains(expected), "{err}");
    }
    assert!(check_blocked(&descriptor(), &Blocked { resources: None, ..blocked }).is_ok());
}

#[test]
fn a_crd_in_a_plan_is_never_converted_by_a_webhook() {
    use service_provider_sdk::contract::Crd;
    let crd_kind =
        ApiKind::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false);
    let mut d = descriptor();
    d.capabilities.push(Capability {
        cluster: Cluster::ControlPlane,
        api: crd_kind,
        scope: NamespaceScope::ClusterScoped,
        names: vec![],
    });
    d.crds = vec![Crd {
        cluster: Cluster::ControlPlane,
        manifest: "metadata: {name: things.g.example}\nspec: {group: g.example}\n".into(),
    }];
    let mut grant = Grant::default_grant().pinning(&d);
    grant.write.push(WriteRule {
        cluster: Cluster::ControlPlane,
        namespaces: vec![],
        cluster_scoped: true,
        groups: vec!["apiextensions.k8s.io".into()],
        kinds: vec!["CustomResourceDefinition".into()],
        fields: vec![],
        only_fields: vec![],
    });
    let granted = Effective::new(&d, grant).unwrap();
    let crd = |conversion: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.g.example"}, "spec": {"group": "g.example", "conversion": conversion}})
    };
    let plan_with = |conversion| plan(vec![(Cluster::ControlPlane, crd(conversion))], vec![]);
    assert!(check_plan(&d, &granted, &context(true), None, &plan_with(json!({"strategy": "None"}))).is_ok());
    let webhook = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x"}}});
    let d2 = denial(check_plan(&d, &granted, &context(true), None, &plan_with(webhook)).unwrap_err());
    assert_eq!(d2.rule, "no-conversion-webhooks");
}

#[test]
fn an_object_comes_after_the_siblings_it_refers_to() {
    let deployment = |name: &str, refers: Option<&str>| {
        let mut d =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "mcp--t"}});
        if let Some(other) = refers {
            d["spec"] = json!({"sourceRef": {"kind": "Deployment", "name": other}});
        }
        d
    };
    let manifests: Vec<Manifest> = [deployment("a", Some("c")), deployment("b", None), deployment("c", Some("b"))]
        .iter()
        .map(|v| validate::manifest(Cluster::Platform, &v.to_string()).unwrap())
        .collect();
    let plan = CheckedPlan {
        manifests,
        copies: vec![],
        status: ServiceStatus { phase: "Ready".into(), conditions: vec![], resources: None },
        requeue_after_seconds: 60,
    };
    let order: Vec<&str> = plan
        .steps()
        .map(|s| match s {
            Step::Apply(m) => m.name.as_str(),
            Step::Copy(_) => "copy",
        })
        .collect();
    assert_eq!(order, ["b", "c", "a"]);
}

#[test]
fn namespaces_come_first_then_copies_then_the_rest() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    let p = plan(
        vec![(Cluster::Platform, deployment("web", "mcp--t")), (Cluster::ControlPlane, ns)],
        vec![copy(Cluster::Platform, "mcp--t")],
    );
    let checked = CheckedPlan {
        manifests: check(&p).unwrap(),
        copies: p.copies.clone(),
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

#[test]
fn a_long_chain_of_references_is_ordered_from_its_end() {
    // 256 objects, the most a plan has, each referring to the next one and
    // carrying 4 KB of other fields: the last comes first.
    let manifests: Vec<Manifest> = (0..256)
        .map(|i| {
            let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("o{i}"), "namespace": "mcp--t"},
                "spec": {"filler": (0..400).map(|j| format!("v{j}")).collect::<Vec<_>>()}});
            if i < 255 {
                d["spec"]["sourceRef"] = json!({"kind": "Deployment", "name": format!("o{}", i + 1)});
            }
            validate::manifest(Cluster::Platform, &d.to_string()).unwrap()
        })
        .collect();
    let plan = CheckedPlan {
        manifests,
        copies: vec![],
        status: ServiceStatus { phase: "Ready".into(), conditions: vec![], resources: None },
        requeue_after_seconds: 60,
    };
    let order: Vec<String> = plan
        .steps()
        .map(|s| match s {
            Step::Apply(m) => m.name.clone(),
            Step::Copy(_) => "copy".into(),
        })
        .collect();
    let expected: Vec<String> = (0..256).rev().map(|i| format!("o{i}")).collect();
    assert_eq!(order, expected);
}
