//! Running the host as someone other than the cluster admin: ServiceAccount
//! tokens from the TokenRequest API (the test API servers have a signing
//! key), and a platform cluster that writes an audit log of what each
//! ServiceAccount did, for least-privilege checks.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::Value;
use testbed::crds::{self, Purpose};
use testbed::{Cluster, ClusterOptions, TestEnv};

/// A kubeconfig for `namespace/service_account` on `cluster` with a fresh
/// token (one hour). Creates the namespace and the ServiceAccount when
/// missing; `cluster_admin` also binds it to `cluster-admin`.
pub async fn service_account_kubeconfig(
    cluster: &Cluster,
    namespace: &str,
    service_account: &str,
    cluster_admin: bool,
) -> String {
    let client = cluster.client().await.expect("admin client");
    let params = PatchParams::apply("host-test-support").force();
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(namespace.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).patch(namespace, &params, &Patch::Apply(&ns)).await.expect("namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(service_account.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts.patch(service_account, &params, &Patch::Apply(&sa)).await.expect("ServiceAccount");
    if cluster_admin {
        let name = format!("{namespace}-{service_account}-admin");
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: "cluster-admin".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: service_account.into(),
                namespace: Some(namespace.into()),
                ..Default::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(client.clone())
            .patch(&name, &params, &Patch::Apply(&binding))
            .await
            .expect("ClusterRoleBinding");
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .and_then(|s| s.token)
        .expect("a token");
    token_kubeconfig(cluster, service_account, &token)
}

/// Kubeconfig text for `server` with the cluster's CA and a bearer token.
pub fn token_kubeconfig(cluster: &Cluster, user: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(cluster.ca_pem());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: {user}\ncurrent-context: c\n",
        server = cluster.server_url()
    )
}

/// Deletes a ServiceAccount: every token it was given stops working.
pub async fn revoke(cluster: &Cluster, namespace: &str, service_account: &str) {
    let client = cluster.client().await.expect("admin client");
    Api::<ServiceAccount>::namespaced(client, namespace)
        .delete(service_account, &Default::default())
        .await
        .expect("ServiceAccount deleted");
}

/// A [`TestEnv`] whose platform cluster logs every request of every
/// ServiceAccount (`Metadata` level) to [`AuditedEnv::audit_log`]. Only the
/// third-party CRDs are installed on the platform (openmcp, Flux), none of
/// the project's: `init` has to install those. Started once per test binary.
pub struct AuditedEnv {
    pub env: TestEnv,
    pub audit_log: PathBuf,
}

pub async fn audited_env() -> &'static AuditedEnv {
    static ENV: tokio::sync::OnceCell<AuditedEnv> = tokio::sync::OnceCell::const_new();
    ENV.get_or_init(|| async { testbed::runtime().spawn(start_audited()).await.expect("start-up task") }).await
}

async fn start_audited() -> AuditedEnv {
    let dir = std::env::temp_dir().join(format!("sph-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("audit directory");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  userGroups: [\"system:serviceaccounts\"]\n- level: None\n",
    )
    .expect("audit policy");
    let audit_log = dir.join("audit.log");
    let mut platform = ClusterOptions::new("platform");
    platform.extra_apiserver_args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit_log.display()),
        "--audit-log-mode=blocking".into(),
    ];
    let (third_party, control_plane_crds) = tokio::task::spawn_blocking(|| {
        (crds::third_party_crds().expect("CRDs"), crds::crds_for(Purpose::ControlPlane).expect("CRDs"))
    })
    .await
    .expect("CRD resolution");
    let (platform, onboarding, control_plane) = tokio::try_join!(
        Cluster::start(platform),
        Cluster::start(ClusterOptions::new("onboarding")),
        Cluster::start(ClusterOptions::new("control-plane")),
    )
    .expect("clusters");
    let platform_crds: Vec<_> = third_party.into_iter().filter(|c| c.purpose == Some(Purpose::Platform)).collect();
    let timeout = Duration::from_secs(60);
    crds::install(&platform.client().await.unwrap(), &platform_crds, timeout).await.expect("platform CRDs");
    crds::install(&control_plane.client().await.unwrap(), &control_plane_crds, timeout).await.expect("RGD CRD");
    let timings = testbed::env::Timings { clusters_ready: Duration::ZERO, crds_ready: Duration::ZERO };
    AuditedEnv { env: TestEnv { platform, onboarding, control_plane, timings }, audit_log }
}

/// One request in the audit log.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub user: String,
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
    /// A server-side dry run (`dryRun=All`).
    pub dry_run: bool,
}

/// The requests of `user` in the audit log (every stage collapsed into one).
pub fn requests_of(audit_log: &std::path::Path, user: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
        if event["user"]["username"] != user || event["objectRef"].is_null() {
            continue;
        }
        let text = |v: &Value| v.as_str().map(str::to_string);
        let object = &event["objectRef"];
        let resource = match text(&object["subresource"]) {
            Some(sub) => format!("{}/{sub}", object["resource"].as_str().unwrap_or_default()),
            None => text(&object["resource"]).unwrap_or_default(),
        };
        let request = Request {
            user: user.to_string(),
            verb: text(&event["verb"]).unwrap_or_default(),
            group: text(&object["apiGroup"]).unwrap_or_default(),
            resource,
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            code: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
            dry_run: event["requestURI"].as_str().is_some_and(|uri| uri.contains("dryRun=All")),
        };
        seen.insert(event["auditID"].as_str().unwrap_or(line).to_string(), request);
    }
    let mut requests: Vec<Request> = seen.into_values().collect();
    requests.sort();
    requests
}
