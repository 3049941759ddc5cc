//! The manifests under `deploy/`, against real API servers:
//!
//! - every object passes a strict server-side dry-run (unknown fields fail);
//! - the standalone install's RBAC is exactly what the host does: `init`
//!   and `run`, with the arguments and environment of the Job and the
//!   Deployment, complete the Kro lifecycle under the ServiceAccounts'
//!   tokens on a platform cluster that audits every request; no request is
//!   refused, and every verb of every rule was used. (Remove a verb and the
//!   lifecycle fails with its 403; add one and it shows up as unused.) So
//!   is `diff` under the preview's read-only ServiceAccount, whose only
//!   refused requests are server-side dry runs.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use host_test_support::identity::{self, Request};
use host_test_support::process::{Launcher, Replica, free_port, http_get};
use host_test_support::*;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

const NAMESPACE: &str = "service-provider-kro";
const PROVIDER: &str = "kro";

/// Every document of every YAML file in `deploy/<dir>`, with its file name.
fn manifests(dir: &str) -> Vec<(String, Value)> {
    let dir = plugins::root().join("deploy").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for doc in serde_saphyr::from_multiple::<Value>(&text).unwrap_or_else(|e| panic!("{name}: {e}")) {
            if !doc.is_null() {
                docs.push((name.clone(), doc));
            }
        }
    }
    assert!(!docs.is_empty(), "no manifests in {}", dir.display());
    docs
}

/// Server-side apply of `doc` (strict field validation), optionally as a dry-run.
async fn apply(client: &Client, file: &str, doc: &Value, dry_run: bool) {
    let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", doc["apiVersion"].as_str().unwrap()),
    };
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap_or_else(|e| panic!("{file}: {e}"));
    let name = doc["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().expect("a namespace"), &resource)
        }
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let mut params = PatchParams::apply("deploy-test").force().validation_strict();
    if dry_run {
        params = params.dry_run();
    }
    api.patch(name, &params, &Patch::Apply(doc))
        .await
        .unwrap_or_else(|e| panic!("{file}: {} {name} is refused by the API server: {e}", gvk.kind));
}

#[tokio::test]
async fn every_manifest_passes_a_strict_server_side_dry_run() {
    let env = &identity::audited_env().await.env;
    let client = env.platform.client().await.unwrap();
    // Namespaced objects need their namespace to exist, even for a dry-run.
    let standalone = manifests("standalone");
    let namespace = &standalone.iter().find(|(_, d)| d["kind"] == "Namespace").expect("a Namespace").1;
    apply(&client, "standalone", namespace, false).await;
    let all: Vec<(String, Value)> = standalone.into_iter().chain(manifests("openmcp")).collect();
    for (file, doc) in &all {
        apply(&client, file, doc, true).await;
    }
    // The pods they would create pass the namespace's Pod Security level
    // (`restricted`): a Pod from each template, dry-run.
    for (file, doc) in all.iter().filter(|(_, d)| d["kind"] == "Deployment" || d["kind"] == "Job") {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pod-security-check", "namespace": doc["metadata"]["namespace"]},
            "spec": doc["spec"]["template"]["spec"],
        });
        apply(&client, file, &pod, true).await;
    }
    // A plugin from a registry is pinned by digest: the reference parses
    // without the development opt-in.
    let plugins = all.iter().filter(|(_, d)| d["kind"] == "ServiceProvider").flat_map(|(file, d)| {
        let env = d["spec"]["env"].as_array().cloned().unwrap_or_default();
        env.into_iter().filter(|e| e["name"] == "PLUGIN").map(move |e| (file.clone(), e["value"].clone()))
    });
    let mut pinned = 0;
    for (file, value) in plugins.filter(|(_, v)| v.as_str().is_some_and(|v| v.starts_with("oci://"))) {
        let parsed = service_provider_host::plugin::oci::PluginRef::parse(value.as_str().unwrap(), false);
        assert!(parsed.is_ok_and(|r| r.digest().is_some()), "{file}: {value}");
        pinned += 1;
    }
    assert!(pinned > 0, "deploy/ shows a plugin pulled by digest");
    let kinds: BTreeSet<&str> = all.iter().filter_map(|(_, d)| d["kind"].as_str()).collect();
    for kind in [
        "ServiceProvider",
        "Deployment",
        "Job",
        "ClusterRole",
        "Role",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(kind), "deploy/ has a {kind}: {kinds:?}");
    }
    // The unauthenticated endpoints stay inside the cluster: the policy
    // selects the host's pods and opens nothing but the metrics port.
    let of = |kind: &str| &all.iter().find(|(_, d)| d["kind"] == kind).unwrap().1;
    let (policy, deployment) = (of("NetworkPolicy"), of("Deployment"));
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"].as_object().unwrap();
    let selected = policy["spec"]["podSelector"]["matchLabels"].as_object().unwrap();
    assert!(!selected.is_empty() && selected.iter().all(|(k, v)| pod_labels.get(k) == Some(v)), "{selected:?}");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    let ports: Vec<&Value> = policy["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["ports"].as_array().expect("every rule names its ports"))
        .map(|p| &p["port"])
        .collect();
    assert_eq!(ports, [&json!("metrics-http")], "only the metrics port is open");
    let container_ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(container_ports.as_array().unwrap().iter().any(|p| p["name"] == "metrics-http"), "{container_ports}");

    // A typo is caught: the check can fail.
    let mut broken = all.iter().find(|(_, d)| d["kind"] == "Deployment").unwrap().1.clone();
    broken["spec"]["replica"] = json!(2);
    let result = tokio::spawn({
        let client = client.clone();
        async move { apply(&client, "broken", &broken, true).await }
    })
    .await;
    assert!(result.is_err(), "an unknown field must fail the dry-run");
}

/// The container of a Job's or Deployment's pod template as `(args, env)`,
/// the environment resolved the way the kubelet would for this test.
fn container(doc: &Value, pod: &str, plugin: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let container = &doc["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let env = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            let value = match (name.as_str(), e["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
                ("PLUGIN", _) => plugin.display().to_string(),
                (_, Some("metadata.namespace")) => NAMESPACE.to_string(),
                (_, Some("metadata.name")) => pod.to_string(),
                (_, Some(other)) => panic!("unexpected fieldRef {other}"),
                (_, None) => e["value"].as_str().unwrap().to_string(),
            };
            (name, value)
        })
        .collect();
    (args, env)
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(unique(name));
    std::fs::write(&path, text).unwrap();
    path
}

/// What a rule grants, one verb at a time.
#[derive(Debug)]
struct Grant {
    verb: String,
    group: String,
    resource: String,
    names: Vec<String>,
    /// `Some(ns)` for a Role.
    namespace: Option<String>,
    from: String,
}

impl Grant {
    /// Whether this request used the grant. A server-side apply that
    /// created its object (201) needs `create` as well as `patch`. A
    /// watcher lists, then watches: whether the watch starts before a short
    /// wait ends (`init` waiting for its CRD) is timing, so its list counts
    /// for the watch.
    fn used_by(&self, r: &Request) -> bool {
        let verb = self.verb == r.verb
            || (self.verb == "create" && r.verb == "patch" && r.code == 201)
            || (self.verb == "watch" && r.verb == "list");
        verb && self.group == r.group
            && self.resource == r.resource
            && self.namespace.as_ref().is_none_or(|ns| r.namespace.as_ref() == Some(ns))
            && (self.names.is_empty() || r.name.as_ref().is_some_and(|n| self.names.contains(n)))
    }
}

/// The rules bound to `service_account` in these RBAC documents.
fn grants(docs: &[(String, Value)], service_account: &str) -> Vec<Grant> {
    let mut grants = Vec::new();
    for (_, binding) in docs.iter().filter(|(_, d)| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding") {
        let bound = binding["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == service_account && s["namespace"] == NAMESPACE);
        if !bound {
            continue;
        }
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap();
        let role_name = &binding["roleRef"]["name"];
        let role = &docs.iter().find(|(_, d)| d["kind"] == role_kind && d["metadata"]["name"] == *role_name).unwrap().1;
        let namespace = (binding["kind"] == "RoleBinding").then(|| NAMESPACE.to_string());
        for rule in role["rules"].as_array().unwrap() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        grants.push(Grant {
                            verb,
                            group: group.clone(),
                            resource: resource.clone(),
                            names: list("resourceNames"),
                            namespace: namespace.clone(),
                            from: format!("{role_kind} {}", role_name.as_str().unwrap()),
                        });
                    }
                }
            }
        }
    }
    assert!(!grants.is_empty(), "no rules bound to {service_account}");
    grants
}

/// Nothing refused (but a dry run: the preview's Role may only read, and
/// the test's own attempts on `attacked` resources), nothing granted that
/// was not used.
fn check(audit_log: &Path, docs: &[(String, Value)], service_account: &str, attacked: &[&str]) {
    let user = format!("system:serviceaccount:{NAMESPACE}:{service_account}");
    let requests = identity::requests_of(audit_log, &user);
    assert!(!requests.is_empty(), "no requests of {user} in the audit log");
    let refused: Vec<&Request> =
        requests.iter().filter(|r| r.code == 403 && !r.dry_run && !attacked.contains(&r.resource.as_str())).collect();
    assert!(refused.is_empty(), "{user} was refused (the RBAC lacks these):\n{refused:#?}");
    for resource in attacked {
        let tried = requests.iter().any(|r| r.resource == *resource && r.code == 403);
        assert!(tried, "the attempt on {resource} as {user} is not in the audit log as refused");
    }
    let unused: Vec<String> = grants(docs, service_account)
        .iter()
        .filter(|g| !requests.iter().any(|r| g.used_by(r)))
        .map(|g| {
            format!(
                "{} {} {}/{} {:?} ({})",
                g.from,
                g.verb,
                g.group,
                g.resource,
                g.names,
                g.namespace.as_deref().unwrap_or("cluster")
            )
        })
        .collect();
    let summary: BTreeSet<String> = requests
        .iter()
        .map(|r| format!("{} {}/{} {}", r.verb, r.group, r.resource, r.namespace.as_deref().unwrap_or("*")))
        .collect();
    assert!(unused.is_empty(), "granted to {service_account} but never used:\n{unused:#?}\nused:\n{summary:#?}");
    eprintln!("{service_account}: {} requests, all allowed; every rule used:\n{summary:#?}", requests.len());
}

#[tokio::test]
async fn the_standalone_rbac_is_exactly_what_init_and_run_do() {
    let audited = identity::audited_env().await;
    let admin = audited.env.platform.client().await.unwrap();
    let docs = manifests("standalone");
    for (file, doc) in &docs {
        apply(&admin, file, doc, false).await;
    }
    // A refused request fails the lifecycle; the audit log says which.
    let lifecycle = tokio::spawn(lifecycle(&audited.env, docs.clone())).await;
    check(&audited.audit_log, &docs, "service-provider-kro-init", &[]);
    check(&audited.audit_log, &docs, "service-provider-kro", &[]);
    let attacked = ["secrets", "configmaps", "helmreleases"];
    check(&audited.audit_log, &docs, "service-provider-kro-preview", &attacked);
    let _ = std::fs::remove_dir_all(audited.audit_log.parent().expect("the audit directory"));
    if let Err(failed) = lifecycle {
        std::panic::resume_unwind(failed.into_panic());
    }
}

/// The preview's token, used as an attacker holding it would: it reads no
/// tenant's kubeconfig, not the host's own onboarding credentials, no
/// Secret list; it writes nothing on the platform; and the onboarding
/// access it reads through asks for nothing but reading the service kind.
async fn the_preview_token_reads_no_credentials_and_writes_nothing(f: &Fixture, admin: &Client, kubeconfig: &str) {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let preview = testbed::client_from_kubeconfig(kubeconfig).await.unwrap();
    let forbidden = |what: &str, result: Result<(), kube::Error>| {
        assert!(matches!(result, Err(kube::Error::Api(ref e)) if e.code == 403), "{what}: {result:?}");
    };
    let secret_of = |namespace: String, request: String| {
        let admin = admin.clone();
        async move {
            let api: Api<DynamicObject> = Api::namespaced_with(admin, &namespace, &access_request_resource());
            let ar = api.get(&request).await.unwrap_or_else(|e| panic!("AccessRequest {namespace}/{request}: {e}"));
            ar.data["status"]["secretRef"]["name"].as_str().expect("a granted request").to_string()
        }
    };
    let tenant = f.tenant("mcp-01");
    let tenant_secret = secret_of(tenant.clone(), "kro.services.open-control-plane.io--mcp-01--mcp".into()).await;
    let run_secret = secret_of(NAMESPACE.into(), "kro.services.open-control-plane.io--onboarding-run".into()).await;
    let secrets = |namespace: &str| Api::<Secret>::namespaced(preview.clone(), namespace);
    forbidden("a tenant's kubeconfig", secrets(&tenant).get(&tenant_secret).await.map(drop));
    forbidden("run's onboarding kubeconfig", secrets(NAMESPACE).get(&run_secret).await.map(drop));
    forbidden("listing Secrets", Api::<Secret>::all(preview.clone()).list(&Default::default()).await.map(drop));
    let intruder: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "intruder"}})).unwrap();
    let configmaps = Api::<ConfigMap>::namespaced(preview.clone(), &tenant);
    forbidden("creating a ConfigMap", configmaps.create(&Default::default(), &intruder).await.map(drop));
    let gvk = GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease");
    let releases: Api<DynamicObject> =
        Api::namespaced_with(preview.clone(), &tenant, &kube::api::ApiResource::from_gvk(&gvk));
    let patch = Patch::Merge(json!({"spec": {"suspend": true}}));
    forbidden(
        "patching a HelmRelease",
        releases.patch("kro-helm-release", &PatchParams::default(), &patch).await.map(drop),
    );
    // The onboarding access it lists through: the read of the service kind.
    let requests: Api<DynamicObject> = Api::namespaced_with(admin.clone(), NAMESPACE, &access_request_resource());
    let ar = requests.get("kro.services.open-control-plane.io--preview").await.expect("the preview's AccessRequest");
    assert_eq!(
        ar.data["spec"]["token"]["permissions"][0]["rules"],
        json!([{"apiGroups": ["kro.services.open-control-plane.io"], "resources": ["kroes"], "verbs": ["get", "list"]}]),
        "{:?}",
        ar.data
    );
}

fn access_request_resource() -> kube::api::ApiResource {
    let gvk = GroupVersionKind::gvk("clusters.openmcp.cloud", "v1alpha1", "AccessRequest");
    kube::api::ApiResource::from_gvk_with_plural(&gvk, "accessrequests")
}

/// `init` and `run` as the Job and the Deployment run them, under their
/// ServiceAccounts, through the whole Kro lifecycle.
async fn lifecycle(env: &'static testbed::TestEnv, docs: Vec<(String, Value)>) {
    let admin = env.platform.client().await.unwrap();
    let setup = Setup {
        env: Some(env),
        pod_namespace: Some(NAMESPACE.into()),
        provider: Some(PROVIDER.into()),
        ..Setup::default()
    };
    let f =
        Fixture::new_with(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }, setup).await;
    let binary = Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into());
    let plugin = plugin_path(plugins::KRO);
    let doc = |kind: &str| &docs.iter().find(|(_, d)| d["kind"] == kind).unwrap().1;

    // init, as the Job runs it.
    let init_kubeconfig = write_temp(
        "init-kubeconfig",
        &identity::service_account_kubeconfig(&env.platform, NAMESPACE, "service-provider-kro-init", false).await,
    );
    let (args, pod_env) = container(doc("Job"), "init-pod", &plugin);
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let pod_env: Vec<(&str, &str)> = pod_env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = binary.command(&args, &init_kubeconfig, &pod_env).output().await;
    assert!(out.status.success(), "init under its ServiceAccount: {}", String::from_utf8_lossy(&out.stderr));

    // run, as the Deployment runs it: two replicas, leader election.
    f.source_secret("registry", "kubernetes.io/dockerconfigjson", "{}").await;
    f.provider_config(json!([{"version": "v0.9.1", "chartVersion": "0.9.1", "chartPullSecret": "registry"}])).await;
    let run_kubeconfig = write_temp(
        "run-kubeconfig",
        &identity::service_account_kubeconfig(&env.platform, NAMESPACE, "service-provider-kro", false).await,
    );
    let mut replicas = Vec::new();
    for pod in ["controller-a", "controller-b"] {
        let (args, pod_env) = container(doc("Deployment"), pod, &plugin);
        let (health, metrics) = (free_port(), free_port());
        let args: Vec<OsString> = args
            .into_iter()
            .map(|a| match a.split_once('=') {
                Some(("--metrics-bind-address", _)) => format!("--metrics-bind-address=127.0.0.1:{metrics}"),
                Some(("--health-probe-bind-address", _)) => format!("--health-probe-bind-address=127.0.0.1:{health}"),
                _ => a,
            })
            .map(Into::into)
            .collect();
        let pod_env: Vec<(&str, &str)> = pod_env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let process = binary.command(&args, &run_kubeconfig, &pod_env).spawn(None);
        replicas.push(Replica { process, health, metrics, started: std::time::Instant::now() });
    }
    for replica in &replicas {
        assert!(replica.wait_ready(WAIT).await, "a replica under its ServiceAccount: {:?}", replica.readyz());
    }

    // The Kro lifecycle, with a pull-secret copy, a reconcile requested on
    // the ProviderConfig, and an instance without a ControlPlane (no tenant
    // namespace), for which the host creates nothing.
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    // diff, under the preview's read-only ServiceAccount: the same plugin
    // changes nothing.
    let preview_text =
        identity::service_account_kubeconfig(&env.platform, NAMESPACE, "service-provider-kro-preview", false).await;
    let preview_kubeconfig = write_temp("preview-kubeconfig", &preview_text);
    let args: Vec<OsString> = ["diff", "--provider-name", PROVIDER, "--exit-code", "-o", "json", "--plugin"]
        .into_iter()
        .map(OsString::from)
        .chain([plugin.clone().into_os_string()])
        .collect();
    let out = binary.command(&args, &preview_kubeconfig, &[("POD_NAMESPACE", NAMESPACE)]).output().await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "diff under its ServiceAccount: {report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&report).unwrap_or_else(|e| panic!("diff's JSON ({e}): {report}"));
    assert_eq!(report["counts"]["unchanged"], 1, "{report:#}");
    assert_eq!(report["tenantClusters"], false, "{report:#}");
    the_preview_token_reads_no_credentials_and_writes_nothing(&f, &admin, &preview_text).await;

    f.provider_config_with(
        json!({"pollInterval": "1m", "versions": [{"version": "v0.9.1", "chartVersion": "0.9.1", "chartPullSecret": "registry"}]}),
        Some(json!({"openmcp.cloud/operation": "reconcile"})),
    )
    .await;
    eventually("the reconcile annotation is consumed", WAIT, || async {
        let pc = f.provider_configs().get(PROVIDER).await.unwrap();
        (!pc.metadata.annotations.unwrap_or_default().contains_key("openmcp.cloud/operation")).then_some(())
    })
    .await;
    f.create_kro("no-cp", "v0.9.1").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let tenant = f.tenant("no-cp");
    let wanted = format!("no ControlPlane for this instance: its namespace {tenant} does not exist");
    let said = |kro: &Value| {
        let conditions = kro["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.iter().any(|c| c["type"] == "Ready" && c["message"].as_str().is_some_and(|m| m.contains(&wanted)))
    };
    f.wait_kro("no-cp", "Ready=False: no ControlPlane", said).await;
    assert!(namespaces.get_opt(&tenant).await.unwrap().is_none(), "the host made a tenant namespace");
    for name in ["mcp-01", "no-cp"] {
        f.delete_kro(name).await;
    }
    for name in ["mcp-01", "no-cp"] {
        f.wait_gone(name).await;
    }
    for replica in replicas {
        assert_eq!(http_get(replica.health, "/healthz").map(|r| r.0), Some(200));
        assert!(replica.terminate().success());
    }
    for kubeconfig in [init_kubeconfig, run_kubeconfig, preview_kubeconfig] {
        let _ = std::fs::remove_file(kubeconfig);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}
