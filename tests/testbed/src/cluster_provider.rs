//! A cluster provider for the test clusters, next to the real
//! openmcp-operator ([`crate::openmcp`]): what cluster-provider-kind does for
//! kind clusters, for API servers the harness already runs.
//!
//! - A `ClusterProfile` [`PROFILE`] of provider [`PROVIDER`].
//! - `Cluster` objects of that profile (the scheduler creates them) are
//!   marked `Ready`, with the provider's finalizer, removed on deletion.
//! - `AccessRequests` the operator handed to this provider (its
//!   `clusters.openmcp.cloud/provider` label, a `spec.clusterRef`, phase
//!   `Pending` or granted for an older generation) are granted as a real
//!   provider grants them: on the target cluster a ServiceAccount in
//!   `accessrequests`, a (Cluster)Role and binding **exactly from each
//!   requested permission** (a Role and RoleBinding when it names a
//!   namespace), a binding per `roleRefs` entry, a token from the
//!   TokenRequest API, and on the platform the Secret
//!   `<request>.kubeconfig` (keys `kubeconfig`, `creationTimestamp`,
//!   `expirationTimestamp`, owned by the request); every re-grant issues a
//!   new token and replaces the rules. On deletion the RBAC objects and the
//!   ServiceAccount go (its tokens stop working at once), then the Secret,
//!   then the provider's finalizer.
//!
//! Which API server backs a `Cluster`: one with purpose `onboarding` is the
//! environment's onboarding cluster; any other is found through the
//! ClusterRequest the scheduler assigned to it (its namespace and purpose),
//! registered with [`Targets::register`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams};
use kube::config::Kubeconfig;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::background::Background;
use crate::error::{Error, Result};
use crate::openmcp_sim::TargetCluster;
use crate::openmcp_sim::api::{AccessRequest, ClusterRequest};
use crate::process::lock_unpoisoned;

/// `spec.providerRef.name` of the profile, and the provider label value the
/// operator puts on AccessRequests for it.
pub const PROVIDER: &str = "envtest";
/// The `ClusterProfile` every scheduled `Cluster` gets.
pub const PROFILE: &str = "envtest";
/// The provider's finalizer on Clusters and AccessRequests.
pub const FINALIZER: &str = "clusters.openmcp.cloud/finalizer";
/// Namespace on the target cluster of the ServiceAccounts.
pub const ACCESS_NAMESPACE: &str = "accessrequests";
/// Label on every RBAC object of one grant: the request it is for.
const LABEL_REQUEST: &str = "envtest.openmcp.cloud/access-request";
const MANAGER: &str = "envtest-cluster-provider";
/// Lifetime asked for each token (the API server may shorten it).
const TOKEN_SECONDS: i64 = 30 * 24 * 3600;

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1alpha1".into(),
        api_version: format!("{group}/v1alpha1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn cluster_resource() -> ApiResource {
    resource("clusters.openmcp.cloud", "Cluster", "clusters")
}

fn profile_resource() -> ApiResource {
    resource("clusters.openmcp.cloud", "ClusterProfile", "clusterprofiles")
}

/// Which test cluster backs a tenant's cluster of a purpose.
#[derive(Clone, Default)]
pub struct Targets {
    onboarding: Option<TargetCluster>,
    /// (ClusterRequest namespace, purpose) → the cluster.
    by_request: Arc<Mutex<HashMap<(String, String), TargetCluster>>>,
}

impl Targets {
    pub fn new(onboarding: TargetCluster) -> Self {
        Self { onboarding: Some(onboarding), by_request: Arc::default() }
    }

    /// Says which test cluster serves the ClusterRequests of `purpose` in
    /// `namespace` (a tenant namespace: `mcp`, `workload`).
    pub fn register(&self, namespace: &str, purpose: &str, cluster: TargetCluster) {
        lock_unpoisoned(&self.by_request).insert((namespace.into(), purpose.into()), cluster);
    }

    pub fn unregister(&self, namespace: &str, purpose: &str) {
        lock_unpoisoned(&self.by_request).remove(&(namespace.to_string(), purpose.to_string()));
    }

    /// The test cluster behind `cluster`, if it is known yet.
    fn of(&self, cluster: &DynamicObject, requests: &[ClusterRequest]) -> Option<TargetCluster> {
        let purposes = cluster.data["spec"]["purposes"].as_array().cloned().unwrap_or_default();
        if purposes.iter().any(|p| p == "onboarding") {
            return self.onboarding.clone();
        }
        let (name, namespace) = (cluster.name_any(), cluster.namespace().unwrap_or_default());
        let request = requests.iter().find(|r| {
            r.status
                .as_ref()
                .and_then(|s| s.cluster.as_ref())
                .is_some_and(|c| c.name == name && c.namespace == namespace)
        })?;
        let key = (request.namespace().unwrap_or_default(), request.spec.purpose.clone());
        lock_unpoisoned(&self.by_request).get(&key).cloned()
    }
}

/// The running provider; stops when dropped.
pub struct ClusterProvider {
    background: Background,
}

impl ClusterProvider {
    /// Creates the profile, then reconciles every `interval`.
    pub async fn start(platform: Client, targets: Targets, interval: Duration) -> Result<Self> {
        let profile = json!({
            "apiVersion": "clusters.openmcp.cloud/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": PROFILE},
            "spec": {"providerRef": {"name": PROVIDER}, "providerConfigRef": {"name": PROVIDER}, "supportedVersions": []},
        });
        Api::<DynamicObject>::all_with(platform.clone(), &profile_resource())
            .patch(PROFILE, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&profile))
            .await?;
        let background = Background::spawn("cluster provider", interval, move || {
            let (platform, targets) = (platform.clone(), targets.clone());
            async move { round(&platform, &targets).await }
        });
        Ok(Self { background })
    }

    /// The error of the latest round, if any.
    pub fn last_error(&self) -> Option<String> {
        self.background.last_error()
    }
}

async fn round(platform: &Client, targets: &Targets) -> Result<()> {
    let clusters = Api::<DynamicObject>::all_with(platform.clone(), &cluster_resource());
    let requests: Vec<ClusterRequest> =
        Api::<ClusterRequest>::all(platform.clone()).list(&ListParams::default()).await?.items;
    let mut first_error = None;
    let mut backing = HashMap::new();
    for cluster in clusters.list(&ListParams::default()).await? {
        if cluster.data["spec"]["profile"] != PROFILE {
            continue;
        }
        let target = targets.of(&cluster, &requests);
        if let Some(target) = &target {
            backing.insert((cluster.namespace().unwrap_or_default(), cluster.name_any()), target.clone());
        }
        if let Err(e) = reconcile_cluster(platform, &cluster, target.is_some()).await {
            first_error.get_or_insert(e);
        }
    }
    let selector = format!("clusters.openmcp.cloud/provider={PROVIDER}");
    let access = Api::<AccessRequest>::all(platform.clone()).list(&ListParams::default().labels(&selector)).await?;
    for ar in access {
        let Some(cluster_ref) = &ar.spec.cluster_ref else { continue };
        let target = backing.get(&(cluster_ref.namespace.clone(), cluster_ref.name.clone()));
        if let Err(e) = reconcile_access(platform, &ar, target).await {
            first_error.get_or_insert(Error::Other(format!("AccessRequest {}: {e}", ar.name_any())));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Ready (with the finalizer) once the cluster behind it is known; the
/// finalizer goes when it is the last one of a deleted Cluster.
async fn reconcile_cluster(platform: &Client, cluster: &DynamicObject, known: bool) -> Result<()> {
    let api = Api::<DynamicObject>::namespaced_with(
        platform.clone(),
        &cluster.namespace().unwrap_or_default(),
        &cluster_resource(),
    );
    let name = cluster.name_any();
    let finalizers = cluster.finalizers();
    if cluster.metadata.deletion_timestamp.is_some() {
        if finalizers.iter().all(|f| f == FINALIZER) && !finalizers.is_empty() {
            set_finalizers(&api, cluster, &[]).await?;
        }
        return Ok(());
    }
    if !known {
        return Ok(());
    }
    if !finalizers.iter().any(|f| f == FINALIZER) {
        let mut with = finalizers.to_vec();
        with.push(FINALIZER.into());
        set_finalizers(&api, cluster, &with).await?;
    }
    let generation = cluster.metadata.generation.unwrap_or(0);
    let status = &cluster.data["status"];
    if status["phase"] == "Ready" && status["observedGeneration"] == generation {
        return Ok(());
    }
    let patch = json!({"status": {
        "phase": "Ready",
        "observedGeneration": generation,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Ready", "message": "a test API server",
            "lastTransitionTime": now(), "observedGeneration": generation,
        }],
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

async fn set_finalizers<K>(api: &Api<K>, object: &K, finalizers: &[String]) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.meta().resource_version,
    }});
    api.patch(&object.meta().name.clone().unwrap_or_default(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The name of a request's ServiceAccount and RBAC objects: stable per
/// request, a DNS label.
fn identity(ar: &AccessRequest) -> String {
    let digest = Sha256::digest(format!("{}/{}", ar.namespace().unwrap_or_default(), ar.name_any()));
    let hex: String = digest.iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("ar-{hex}")
}

/// `<request name, at most 52 characters>.kubeconfig`.
pub fn secret_name(request: &str) -> String {
    format!("{}.kubeconfig", &request[..request.len().min(52)])
}

async fn reconcile_access(platform: &Client, ar: &AccessRequest, target: Option<&TargetCluster>) -> Result<()> {
    let namespace = ar.namespace().unwrap_or_default();
    let api: Api<AccessRequest> = Api::namespaced(platform.clone(), &namespace);
    if ar.metadata.deletion_timestamp.is_some() {
        if !ar.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(());
        }
        if let Some(target) = target {
            revoke(&target_client(target).await?, &identity(ar)).await?;
        }
        let secrets: Api<Secret> = Api::namespaced(platform.clone(), &namespace);
        match secrets.delete(&secret_name(&ar.name_any()), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        let rest: Vec<String> = ar.finalizers().iter().filter(|f| *f != FINALIZER).cloned().collect();
        return set_finalizers(&api, ar, &rest).await;
    }
    let generation = ar.metadata.generation.unwrap_or(0);
    let status = ar.status.clone().unwrap_or_default();
    // Granted for this generation: nothing to do. (openmcp-operator sets
    // `Pending` on every spec change; the grant answers it.)
    if status.phase == "Granted" && status.observed_generation == generation {
        return Ok(());
    }
    let Some(target) = target else { return Ok(()) };
    if !ar.finalizers().iter().any(|f| f == FINALIZER) {
        let mut with = ar.finalizers().to_vec();
        with.push(FINALIZER.into());
        return set_finalizers(&api, ar, &with).await; // the next round grants
    }
    let kubeconfig = grant(&target_client(target).await?, target, ar).await?;
    let name = secret_name(&ar.name_any());
    let owner = OwnerReference {
        api_version: "clusters.openmcp.cloud/v1alpha1".into(),
        kind: "AccessRequest".into(),
        name: ar.name_any(),
        uid: ar.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let created = now();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "stringData": {
            "kubeconfig": kubeconfig.text,
            "creationTimestamp": created,
            "expirationTimestamp": kubeconfig.expires,
        },
    });
    Api::<Secret>::namespaced(platform.clone(), &namespace)
        .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&secret))
        .await?;
    let patch = json!({"status": {
        "phase": "Granted",
        "observedGeneration": generation,
        "secretRef": {"name": name},
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Granted", "message": "token issued",
            "lastTransitionTime": created, "observedGeneration": generation,
        }],
    }});
    api.patch_status(&ar.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

async fn target_client(target: &TargetCluster) -> Result<Client> {
    crate::cluster::client_from_kubeconfig(&target.kubeconfig).await
}

struct Issued {
    text: String,
    expires: String,
}

/// Creates or updates what `ar` asks for on the target cluster, and a new
/// token.
async fn grant(client: &Client, target: &TargetCluster, ar: &AccessRequest) -> Result<Issued> {
    let id = identity(ar);
    let apply = PatchParams::apply(MANAGER).force();
    ensure_namespace(client, ACCESS_NAMESPACE).await?;
    let labels = json!({LABEL_REQUEST: id});
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": id, "namespace": ACCESS_NAMESPACE, "labels": labels}});
    Api::<ServiceAccount>::namespaced(client.clone(), ACCESS_NAMESPACE).patch(&id, &apply, &Patch::Apply(&sa)).await?;
    let subject = json!([{"kind": "ServiceAccount", "name": id, "namespace": ACCESS_NAMESPACE}]);
    let token = ar.spec.token.clone().unwrap_or(Value::Null);

    // What this grant consists of; anything else of the request's is stale.
    let (mut cluster_roles, mut namespaced_roles) = (BTreeMap::new(), BTreeMap::new());
    for (i, permission) in token["permissions"].as_array().into_iter().flatten().enumerate() {
        let name = format!("{id}-{i}");
        let rules = permission["rules"].clone();
        match permission["namespace"].as_str().filter(|ns| !ns.is_empty()) {
            Some(ns) => {
                if permission["disableAutomaticNamespaceCreation"] != true {
                    ensure_namespace(client, ns).await?;
                }
                let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}, "rules": rules});
                Api::<Role>::namespaced(client.clone(), ns).patch(&name, &apply, &Patch::Apply(&role)).await?;
                let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}, "subjects": subject,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}});
                Api::<RoleBinding>::namespaced(client.clone(), ns)
                    .patch(&name, &apply, &Patch::Apply(&binding))
                    .await?;
                namespaced_roles.insert((ns.to_string(), name), ());
            }
            None => {
                let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": labels}, "rules": rules});
                Api::<ClusterRole>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&role)).await?;
                let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": labels}, "subjects": subject,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}});
                Api::<ClusterRoleBinding>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&binding)).await?;
                cluster_roles.insert(name, ());
            }
        }
    }
    for (i, role_ref) in token["roleRefs"].as_array().into_iter().flatten().enumerate() {
        let name = format!("{id}-ref-{i}");
        let (kind, role) = (role_ref["kind"].as_str().unwrap_or("ClusterRole"), role_ref["name"].clone());
        let reference = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role});
        match role_ref["namespace"].as_str().filter(|ns| !ns.is_empty()) {
            Some(ns) => {
                let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}, "subjects": subject, "roleRef": reference});
                Api::<RoleBinding>::namespaced(client.clone(), ns)
                    .patch(&name, &apply, &Patch::Apply(&binding))
                    .await?;
                namespaced_roles.insert((ns.to_string(), name), ());
            }
            None => {
                let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": labels}, "subjects": subject, "roleRef": reference});
                Api::<ClusterRoleBinding>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&binding)).await?;
                cluster_roles.insert(name, ());
            }
        }
    }
    remove_stale(client, &id, &cluster_roles, &namespaced_roles).await?;

    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(TOKEN_SECONDS), ..Default::default() }),
        ..Default::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), ACCESS_NAMESPACE)
        .create_token_request(&id, &Default::default(), &request)
        .await?;
    let status = issued.status.ok_or_else(|| Error::Other("TokenRequest without status".into()))?;
    let expires = status.expiration_timestamp.map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let token = status.token.ok_or_else(|| Error::Other("TokenRequest without a token".into()))?;
    Ok(Issued { text: token_kubeconfig(target, &token)?, expires: expires.unwrap_or_default() })
}

/// Deletes the RBAC objects of request `id` that the current grant does
/// not have (the permissions shrank).
async fn remove_stale(
    client: &Client,
    id: &str,
    cluster_roles: &BTreeMap<String, ()>,
    namespaced: &BTreeMap<(String, String), ()>,
) -> Result<()> {
    let selector = ListParams::default().labels(&format!("{LABEL_REQUEST}={id}"));
    let keep = |name: &str| cluster_roles.contains_key(name);
    for role in Api::<ClusterRole>::all(client.clone()).list(&selector).await? {
        if !keep(&role.name_any()) {
            Api::<ClusterRole>::all(client.clone()).delete(&role.name_any(), &DeleteParams::default()).await?;
        }
    }
    for binding in Api::<ClusterRoleBinding>::all(client.clone()).list(&selector).await? {
        if !keep(&binding.name_any()) {
            Api::<ClusterRoleBinding>::all(client.clone())
                .delete(&binding.name_any(), &DeleteParams::default())
                .await?;
        }
    }
    let keep = |o: &ObjectMeta| {
        namespaced.contains_key(&(o.namespace.clone().unwrap_or_default(), o.name.clone().unwrap_or_default()))
    };
    for role in Api::<Role>::all(client.clone()).list(&selector).await? {
        if !keep(&role.metadata) {
            Api::<Role>::namespaced(client.clone(), &role.namespace().unwrap_or_default())
                .delete(&role.name_any(), &DeleteParams::default())
                .await?;
        }
    }
    for binding in Api::<RoleBinding>::all(client.clone()).list(&selector).await? {
        if !keep(&binding.metadata) {
            Api::<RoleBinding>::namespaced(client.clone(), &binding.namespace().unwrap_or_default())
                .delete(&binding.name_any(), &DeleteParams::default())
                .await?;
        }
    }
    Ok(())
}

/// Everything of request `id` on the target cluster: its RBAC objects and
/// its ServiceAccount (whose tokens then stop working).
async fn revoke(client: &Client, id: &str) -> Result<()> {
    remove_stale(client, id, &BTreeMap::new(), &BTreeMap::new()).await?;
    match Api::<ServiceAccount>::namespaced(client.clone(), ACCESS_NAMESPACE).delete(id, &DeleteParams::default()).await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn ensure_namespace(client: &Client, name: &str) -> Result<()> {
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    match Api::<Namespace>::all(client.clone()).create(&Default::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A kubeconfig for `target`'s server and CA with `token` as the only
/// credential.
fn token_kubeconfig(target: &TargetCluster, token: &str) -> Result<String> {
    let admin = Kubeconfig::from_yaml(&target.kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let cluster = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| Error::Kubeconfig(format!("{}: no cluster", target.name)))?;
    let server = cluster.server.unwrap_or_default();
    let ca = cluster.certificate_authority_data.unwrap_or_default();
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n\
         current-context: {name}\n",
        name = target.name
    ))
}
