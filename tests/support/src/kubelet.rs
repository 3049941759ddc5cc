//! The kubelet's part, for tests that install the host as its readers do
//! (`kubectl apply` of the standalone Job and Deployment, openmcp-operator's
//! init Job and Deployment): the pods of the Jobs and Deployments in one
//! namespace of a platform cluster run from their image with buildah, and
//! their status is what Kubernetes would report. A Job's pod that exits 0
//! completes the Job (one that fails, fails it); a Deployment's pods (as
//! many as its replicas), once started, make it available, and a new
//! template replaces them.
//!
//! A pod runs its first container: its image pulled with the pod's
//! `imagePullSecrets` (into storage of the kubelet's own, so every layer
//! comes from the registry), its arguments (the listening ports made free
//! ones: pods share the test machine's network), its environment (values,
//! and the downward API's namespace and name), its Secret, ConfigMap and
//! emptyDir volumes, and a kubeconfig with a token of its ServiceAccount
//! (what in-cluster configuration would give it), so RBAC holds it to what
//! the manifests grant.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::Mutex;

use crate::process::{Launcher, Running, buildah_globals, free_port};

/// Runs the pods of one namespace until dropped.
pub struct Kubelet {
    task: tokio::task::JoinHandle<()>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Jobs whose pod ran (by uid).
    jobs: BTreeMap<String, ()>,
    /// Deployments' running pods, by name: the generation they run.
    deployments: BTreeMap<String, (i64, Vec<Running>)>,
    /// What went wrong, for the test's failure message.
    errors: Vec<String>,
}

/// Where a kubelet runs pods.
#[derive(Clone)]
pub struct Node {
    pub platform: Client,
    /// The cluster's admin kubeconfig (its server and CA for the pods').
    pub kubeconfig: String,
    pub namespace: String,
    /// buildah's storage driver.
    pub storage: String,
    /// The kubelet's files: pulled images, volumes, logs.
    pub dir: PathBuf,
    /// The node's own registry credentials (a docker `config.json`), as a
    /// kubelet may have besides a pod's `imagePullSecrets`.
    pub credentials: Option<PathBuf>,
    /// Only the Jobs and Deployments of these names (none: all of the
    /// namespace), where other tests run pods of their own there.
    pub only: Vec<String>,
}

impl Kubelet {
    /// Starts running the pods of `node.namespace`.
    pub fn start(node: Node) -> Kubelet {
        std::fs::create_dir_all(&node.dir).expect("the kubelet's directory");
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                loop {
                    if let Err(e) = round(&node, &state).await {
                        state.lock().await.errors.push(e);
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        });
        Kubelet { task, state }
    }

    /// What went wrong running pods so far, and the logs' tails.
    pub async fn diagnostics(&self) -> String {
        let state = self.state.lock().await;
        format!("kubelet errors: {:#?}", state.errors)
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn round(node: &Node, state: &Arc<Mutex<State>>) -> Result<(), String> {
    let jobs: Api<Job> = Api::namespaced(node.platform.clone(), &node.namespace);
    let ours = |name: &str| node.only.is_empty() || node.only.iter().any(|n| n == name);
    for job in jobs.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
        if !ours(&job.name_any()) {
            continue;
        }
        let uid = job.uid().unwrap_or_default();
        let done = job.status.as_ref().is_some_and(|s| s.succeeded.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0);
        if done || state.lock().await.jobs.contains_key(&uid) {
            continue;
        }
        state.lock().await.jobs.insert(uid, ());
        let (node, name, spec) = (node.clone(), job.name_any(), job.spec.clone().and_then(|s| s.template.spec));
        let state = state.clone();
        tokio::spawn(async move {
            let result = run_job(&node, &name, spec).await;
            if let Err(e) = result {
                state.lock().await.errors.push(format!("Job {name}: {e}"));
            }
        });
    }
    let deployments: Api<Deployment> = Api::namespaced(node.platform.clone(), &node.namespace);
    for deployment in deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
        let name = deployment.name_any();
        if !ours(&name) {
            continue;
        }
        let generation = deployment.metadata.generation.unwrap_or(0);
        if state.lock().await.deployments.get(&name).is_some_and(|(g, _)| *g == generation) {
            continue;
        }
        // A new template: its old pods go first.
        state.lock().await.deployments.remove(&name);
        let spec = deployment.spec.template.spec.clone().ok_or("a Deployment without a pod template")?;
        let replicas = deployment.spec.replicas.unwrap_or(1);
        let mut pods = Vec::new();
        for replica in 0..replicas {
            let pod = format!("{name}-{generation}-{replica}");
            pods.push(start_pod(node, &pod, &spec).await?.spawn(Some(&node.dir.join(format!("{pod}.log")))));
        }
        state.lock().await.deployments.insert(name.clone(), (generation, pods));
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let condition = |kind: &str, reason: &str| json!({"type": kind, "status": "True", "reason": reason, "lastUpdateTime": now, "lastTransitionTime": now});
        let status = json!({"status": {
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [condition("Available", "MinimumReplicasAvailable"), condition("Progressing", "NewReplicaSetAvailable")],
        }});
        deployments
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| format!("Deployment {name}'s status: {e}"))?;
    }
    Ok(())
}

/// Runs a Job's pod to its end and reports it in the Job's status.
async fn run_job(node: &Node, name: &str, spec: Option<PodSpec>) -> Result<(), String> {
    let spec = spec.ok_or("a Job without a pod template")?;
    let started = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let pod = format!("{name}-{}", crate::unique("pod"));
    let launched = start_pod(node, &pod, &spec).await?;
    let log = node.dir.join(format!("{pod}.log"));
    let out = launched.output().await;
    std::fs::write(&log, &out.stderr).map_err(|e| e.to_string())?;
    let ended = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let condition =
        |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": ended, "lastTransitionTime": ended});
    let status = match out.status.success() {
        true => json!({"status": {
            "startTime": started, "completionTime": ended, "succeeded": 1, "active": 0,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        }}),
        false => json!({"status": {
            "startTime": started, "failed": 1, "active": 0,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        }}),
    };
    let jobs: Api<Job> = Api::namespaced(node.platform.clone(), &node.namespace);
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| format!("its status ({}): {e}", log.display()))?;
    Ok(())
}

/// The pod's first container, ready to run: its image pulled, its volumes
/// and ServiceAccount's kubeconfig written.
async fn start_pod(node: &Node, pod: &str, spec: &PodSpec) -> Result<crate::process::Launched, String> {
    let container = spec.containers.first().ok_or("a pod without containers")?;
    let image = container.image.clone().ok_or("a container without an image")?;
    let image_id = pull(node, spec, &image).await?;
    let kubeconfig = service_account_kubeconfig(node, pod, spec).await?;
    let mounts = volumes(node, pod, spec).await?;
    let args: Vec<OsString> = container
        .args
        .iter()
        .flatten()
        .map(|a| match a {
            a if a.starts_with("--metrics-bind-address") => {
                format!("--metrics-bind-address=127.0.0.1:{}", free_port())
            }
            a if a.starts_with("--health-probe-bind-address") => "--health-probe-bind-address=0".into(),
            a => a.clone(),
        })
        .map(Into::into)
        .collect();
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let field = var.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).map(|f| f.field_path.as_str());
        let value = match (var.value.clone(), field) {
            (Some(value), _) => value,
            (None, Some("metadata.namespace")) => node.namespace.clone(),
            (None, Some("metadata.name")) => pod.to_string(),
            (None, Some(_)) => "127.0.0.1".to_string(),
            (None, None) => continue,
        };
        env.push((var.name.clone(), value));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let root = node.dir.join("containers");
    let launcher = Launcher::Image { image: image_id, storage: node.storage.clone(), root: Some(root) };
    Ok(launcher.command_with(&args, &kubeconfig, &env, &mounts))
}

/// The image, pulled with the pod's `imagePullSecrets`; its id.
async fn pull(node: &Node, spec: &PodSpec, image: &str) -> Result<String, String> {
    let secrets: Api<Secret> = Api::namespaced(node.platform.clone(), &node.namespace);
    let authfile = node.dir.join("auth.json");
    let mut auths = serde_json::Map::new();
    if let Some(path) = &node.credentials {
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        auths.extend(config["auths"].as_object().cloned().unwrap_or_default());
    }
    for reference in spec.image_pull_secrets.iter().flatten() {
        let secret = secrets.get(&reference.name).await.map_err(|e| format!("pull Secret {}: {e}", reference.name))?;
        let data = secret.data.unwrap_or_default();
        let config = data.get(".dockerconfigjson").ok_or("a pull Secret without .dockerconfigjson")?;
        let config: serde_json::Value = serde_json::from_slice(&config.0).map_err(|e| e.to_string())?;
        auths.extend(config["auths"].as_object().cloned().unwrap_or_default());
    }
    std::fs::write(&authfile, json!({"auths": auths}).to_string()).map_err(|e| e.to_string())?;
    let globals = buildah_globals(&node.storage, Some(&node.dir.join("containers")));
    let out = tokio::process::Command::new("buildah")
        .args(&globals)
        .args(["pull", "--quiet", "--tls-verify=false", "--authfile"])
        .arg(&authfile)
        .arg(format!("docker://{image}"))
        .output()
        .await
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        false => Err(format!("pulling {image}: {}", String::from_utf8_lossy(&out.stderr))),
    }
}

/// A kubeconfig with a token of the pod's ServiceAccount (default:
/// `default`) for the cluster's server: what in-cluster configuration gives
/// a pod.
async fn service_account_kubeconfig(node: &Node, pod: &str, spec: &PodSpec) -> Result<PathBuf, String> {
    let account = spec.service_account_name.clone().unwrap_or_else(|| "default".into());
    let accounts: Api<ServiceAccount> = Api::namespaced(node.platform.clone(), &node.namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("a token of ServiceAccount {account}: {e}"))?
        .status
        .ok_or("a TokenRequest without status")?
        .token;
    let mut config: serde_json::Value = serde_saphyr::from_str(&node.kubeconfig).map_err(|e| e.to_string())?;
    config["users"] = json!([{"name": account, "user": {"token": token}}]);
    for context in config["contexts"].as_array_mut().into_iter().flatten() {
        context["context"]["user"] = json!(account);
        context["context"]["namespace"] = json!(node.namespace);
    }
    let path = node.dir.join(format!("{pod}.kubeconfig"));
    std::fs::write(&path, config.to_string()).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The pod's Secret, ConfigMap and emptyDir volumes as directories: (here,
/// the container's mount path).
async fn volumes(node: &Node, pod: &str, spec: &PodSpec) -> Result<Vec<(PathBuf, String)>, String> {
    let container = &spec.containers[0];
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| format!("no volume {}", mount.name))?;
        let here = node.dir.join(format!("{pod}-{}", volume.name));
        std::fs::create_dir_all(&here).map_err(|e| e.to_string())?;
        let write = |dir: &Path, key: &str, data: &[u8]| std::fs::write(dir.join(key), data).map_err(|e| e.to_string());
        if let Some(source) = &volume.secret {
            let name = source.secret_name.clone().unwrap_or_default();
            let secrets: Api<Secret> = Api::namespaced(node.platform.clone(), &node.namespace);
            let data = secrets.get(&name).await.map_err(|e| format!("Secret {name}: {e}"))?.data.unwrap_or_default();
            match &source.items {
                Some(items) => {
                    for item in items {
                        write(&here, &item.path, &data.get(&item.key).map(|d| d.0.clone()).unwrap_or_default())?;
                    }
                }
                None => {
                    for (key, value) in &data {
                        write(&here, key, &value.0)?;
                    }
                }
            }
        }
        if let Some(source) = &volume.config_map {
            let name = source.name.clone();
            let maps: Api<ConfigMap> = Api::namespaced(node.platform.clone(), &node.namespace);
            let data = maps.get(&name).await.map_err(|e| format!("ConfigMap {name}: {e}"))?.data.unwrap_or_default();
            for (key, value) in &data {
                write(&here, key, value.as_bytes())?;
            }
        }
        // The container runs as a user of its own: an emptyDir is its to write.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&here, std::fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
        mounts.push((here, mount.mount_path.clone()));
    }
    Ok(mounts)
}
