//! Property tests: whatever a plugin returns, the host's validation and its
//! preparation for apply never panic, and every object validation accepts
//! can be prepared for apply; and no request built from strings that pass
//! the URL rule (`host/src/syntax.rs`) leaves the object's own path. Random JSON, and random damage to a valid
//! object (the shapes an attacker would try first), run through
//! `plan::check_plan` with a grant that lets every kind through, then
//! through `apply::decorate`.

use kube::Resource;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GetParams};
use proptest::prelude::*;
use serde_json::{Value, json};
use service_provider_host::owner::Owner;
use service_provider_host::plugin::grant::{Effective, Grant, WriteRule};
use service_provider_host::plugin::plan::check_plan;
use service_provider_host::reconcile::apply::decorate;
use service_provider_host::syntax;
use service_provider_sdk::contract::{
    ApiKind, Capability, Cluster, Context, CopyKind, Descriptor, DesiredObject, KubeconfigRef, NamespaceScope,
    ObjectCopy, Plan, ServiceStatus,
};

const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "Namespace", "namespaces", false),
    ("apps", "v1", "Deployment", "deployments", true),
    ("", "v1", "Secret", "secrets", true),
];

/// A plugin that requests every kind above everywhere, and a grant that
/// allows every kind everywhere (the always-refused rules still apply).
fn setup() -> (Descriptor, Effective, Context) {
    let service = ApiKind::new("fuzz.example", "v1", "Fuzz", "fuzzes", true);
    let mut capabilities = Vec::new();
    for cluster in [Cluster::Platform, Cluster::ControlPlane, Cluster::Onboarding] {
        for (group, version, kind, plural, namespaced) in KINDS {
            let api = ApiKind::new(group, version, kind, plural, *namespaced);
            for scope in [NamespaceScope::Tenant, NamespaceScope::Named("x".into()), NamespaceScope::ClusterScoped] {
                capabilities.push(Capability { cluster, api: api.clone(), scope, names: vec![] });
            }
        }
    }
    let descriptor = Descriptor { capabilities, ..Descriptor::new("fuzz", service.clone(), service, "f") };
    let mut grant = Grant::default_grant();
    for cluster in [Cluster::Platform, Cluster::ControlPlane, Cluster::Onboarding] {
        grant.write.push(WriteRule {
            cluster,
            namespaces: vec!["*".into()],
            cluster_scoped: true,
            groups: vec!["*".into()],
            kinds: vec!["*".into()],
            fields: vec![],
            only_fields: vec![],
        });
    }
    let context = Context {
        provider_name: "fuzz".into(),
        tenant_namespace: "x".into(),
        pod_namespace: "pods".into(),
        control_plane: Some(KubeconfigRef { namespace: "x".into(), name: "k".into(), key: "kubeconfig".into() }),
        workload: None,
    };
    let granted = Effective::new(&descriptor, grant.pinning(&descriptor)).expect("grant fits");
    (descriptor, granted, context)
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9./_ -]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("x"),
            Just("v1"),
            Just("ConfigMap"),
            Just("kube-system"),
            Just("service-provider.open-control-plane.io/provider")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            "[a-z/.]{0,8}",
            Just("apiVersion".to_string()),
            Just("kind".to_string()),
            Just("metadata".to_string()),
            Just("name".to_string()),
            Just("namespace".to_string()),
            Just("labels".to_string()),
            Just("annotations".to_string()),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid object of one of the kinds, with one part replaced by anything.
fn damaged_object() -> impl Strategy<Value = Value> {
    let paths = prop_oneof![
        Just("/metadata"),
        Just("/metadata/name"),
        Just("/metadata/namespace"),
        Just("/metadata/labels"),
        Just("/metadata/labels/app"),
        Just("/metadata/annotations"),
        Just("/apiVersion"),
        Just("/kind"),
        Just("/data"),
    ];
    (0..KINDS.len(), paths, any_json(), any::<bool>()).prop_map(|(k, path, value, namespaced)| {
        let (group, version, kind, _, _) = KINDS[k];
        let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        let mut object = json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": "obj", "labels": {"app": "a"}, "annotations": {"note": "n"}},
            "data": {"k": "v"},
        });
        if namespaced {
            object["metadata"]["namespace"] = json!("x");
        }
        if let Some(slot) = object.pointer_mut(path) {
            *slot = value;
        } else if let Some((parent, last)) = path.rsplit_once('/')
            && let Some(Value::Object(map)) = object.pointer_mut(if parent.is_empty() { "" } else { parent })
        {
            map.insert(last.to_string(), value);
        }
        object
    })
}

fn plan_of(objects: Vec<(Cluster, String)>, copies: Vec<ObjectCopy>) -> Plan {
    Plan {
        objects: objects.into_iter().map(|(cluster, manifest)| DesiredObject { cluster, manifest }).collect(),
        copies,
        status: ServiceStatus { phase: "Ready".into(), conditions: vec![], resources: None },
        requeue_after_seconds: 60,
    }
}

fn cluster() -> impl Strategy<Value = Cluster> {
    prop_oneof![
        Just(Cluster::Platform),
        Just(Cluster::ControlPlane),
        Just(Cluster::Onboarding),
        Just(Cluster::Workload)
    ]
}

/// Checks a plan; every accepted object must be preparable for apply.
fn holds(plan: &Plan) -> Result<(), TestCaseError> {
    let (descriptor, granted, context) = setup();
    let owner = Owner { provider: "fuzz".into(), name: "i".into(), namespace: "n".into() };
    if let Ok(manifests) = check_plan(&descriptor, &granted, &context, None, plan) {
        for m in manifests {
            let decorated = decorate(&m.object, &owner);
            prop_assert!(decorated.is_ok(), "accepted but not preparable: {}", m.object);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_json_never_panics(objects in prop::collection::vec((cluster(), any_json()), 0..4)) {
        let plan = plan_of(objects.into_iter().map(|(c, v)| (c, v.to_string())).collect(), vec![]);
        holds(&plan)?;
    }

    #[test]
    fn damaged_objects_never_panic(objects in prop::collection::vec((cluster(), damaged_object()), 1..4)) {
        let plan = plan_of(objects.into_iter().map(|(c, v)| (c, v.to_string())).collect(), vec![]);
        holds(&plan)?;
    }

    #[test]
    fn arbitrary_text_and_copies_never_panic(
        text in ".{0,64}",
        source in ".{0,20}",
        namespace in ".{0,20}",
        target in ".{0,20}",
        required in proptest::option::of(".{0,12}"),
        cluster in cluster(),
    ) {
        let kind = match required {
            Some(t) => CopyKind::Secret(t),
            None => CopyKind::ConfigMap,
        };
        let copy = ObjectCopy { kind, source_name: source, target_cluster: cluster, target_namespace: namespace, target_name: target };
        holds(&plan_of(vec![(cluster, text)], vec![copy]))?;
    }
}

/// Strings a plugin might send as a path segment: anything, or what bends
/// paths, or plausible names (so that accepted strings are common too).
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => ".{0,16}",
        2 => "[a-z0-9.#?/%-]{1,16}",
        8 => "[a-z][a-z0-9-]{0,10}[a-z0-9]",
        2 => "[a-z][a-z0-9-]{0,6}\\.[a-z]{2,5}",
        1 => Just("helmreleases#".to_string()),
        1 => Just("v2/helmreleases#".to_string()),
        1 => Just("x?dryRun=All".to_string()),
        1 => Just("..".to_string()),
    ]
}

/// The requests the host sends for one object: read and delete.
fn requests(resource: &ApiResource, namespace: Option<&str>, name: &str) -> Vec<http::Request<Vec<u8>>> {
    let request = kube::core::Request::new(DynamicObject::url_path(resource, namespace));
    vec![
        request.get(name, &GetParams::default()).expect("a request"),
        request.delete(name, &DeleteParams::default()).expect("a request"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn no_request_leaves_the_objects_own_path(
        group in prop_oneof![Just(String::new()), segment()],
        version in segment(),
        plural in segment(),
        namespace in proptest::option::of(segment()),
        name in segment(),
    ) {
        let accepted = syntax::api_group(&group)
            && syntax::api_version_part(&version)
            && syntax::plural(&plural)
            && namespace.as_deref().is_none_or(syntax::dns_label)
            && syntax::dns_subdomain(&name);
        if !accepted {
            return Ok(());
        }
        let api_version = if group.is_empty() { version.clone() } else { format!("{group}/{version}") };
        let resource = service_provider_host::resource::api_resource(&api_version, "Thing", &plural);
        let root = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
        let scope = namespace.as_ref().map(|ns| format!("/namespaces/{ns}")).unwrap_or_default();
        let expected = format!("{root}{scope}/{plural}/{name}");
        for request in requests(&resource, namespace.as_deref(), &name) {
            prop_assert_eq!(request.uri().path(), expected.as_str());
            prop_assert!(request.uri().query().is_none_or(str::is_empty), "{}", request.uri());
        }
    }

    #[test]
    fn nothing_that_bends_a_path_passes(text in ".{0,24}") {
        let bends = text.contains(['/', '?', '#', '%']) || text.split('.').any(|part| part.is_empty() || part == "..");
        if bends {
            prop_assert!(!syntax::plural(&text) && !syntax::dns_label(&text) && !syntax::api_version_part(&text));
            let versioned = format!("g.example/{text}");
            prop_assert!(!syntax::dns_subdomain(&text) && !syntax::api_version(&versioned));
        }
    }
}

#[test]
fn the_segment_generator_also_reaches_accepted_paths() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let accepted = (0..300).filter(|_| syntax::plural(&segment().new_tree(&mut runner).unwrap().current())).count();
    assert!(accepted > 30, "only {accepted} of 300 segments pass as a plural");
}

#[test]
fn the_damage_generator_also_reaches_accepted_objects() {
    // If the generator only ever produced objects the host refuses, the
    // "accepted objects can be prepared" half of the property would never
    // be exercised: count how many of a sample pass validation.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let (descriptor, granted, context) = setup();
    let mut runner = TestRunner::deterministic();
    let mut accepted = 0;
    for _ in 0..300 {
        let object = damaged_object().new_tree(&mut runner).unwrap().current();
        let plan = plan_of(vec![(Cluster::ControlPlane, object.to_string())], vec![]);
        accepted += check_plan(&descriptor, &granted, &context, None, &plan).map_or(0, |m| m.len());
    }
    assert!(accepted > 10, "only {accepted} of 300 damaged objects were accepted");
}
