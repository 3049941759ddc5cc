//! Onboarding access that survives rotation: openmcp hands out the
//! onboarding credentials as a token in the `…--onboarding-run` Secret and
//! renews them there. Here the tokens are real ServiceAccount tokens of the
//! onboarding cluster, so revoking one (deleting its ServiceAccount) makes
//! the API server answer 401 to it, as it would for an expired token.

use std::time::Duration;

use host_test_support::identity::{self, service_account_kubeconfig};
use host_test_support::process::{Launcher, Replica, ReplicaOptions};
use host_test_support::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const ONBOARDING_SECRET: &str = "kro.services.open-control-plane.io--onboarding-run";
/// kube-apiserver remembers a token's successful authentication for 10 s:
/// a revoked token works that much longer.
const TOKEN_CACHE: Duration = Duration::from_secs(11);

/// Puts `kubeconfig` into the onboarding Secret, as openmcp does when it
/// renews the credentials.
async fn rotate(f: &Fixture, kubeconfig: &str) {
    let patch = json!({"data": {"kubeconfig": ByteString(kubeconfig.as_bytes().to_vec())}});
    Api::<Secret>::namespaced(f.platform.clone(), &f.pod_ns)
        .patch(ONBOARDING_SECRET, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("onboarding Secret rotated");
}

#[tokio::test]
async fn onboarding_credentials_are_followed_through_rotation_and_revocation() {
    let env = testbed::shared().await.unwrap();
    let accounts = unique("onboarding-access");
    let (a, b, c) = (
        service_account_kubeconfig(&env.onboarding, &accounts, "provider-a", true).await,
        service_account_kubeconfig(&env.onboarding, &accounts, "provider-b", true).await,
        service_account_kubeconfig(&env.onboarding, &accounts, "provider-c", true).await,
    );

    // openmcp grants the onboarding access with token A.
    let setup = Setup { onboarding_kubeconfig: Some(a), ..Setup::default() };
    let instances = ["mcp-01", "mcp-02", "mcp-03"].map(String::from).to_vec();
    let f = Fixture::new_with(Options { instances, flux_ready: true, workload: false }, setup).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let launcher = Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into());
    let replica = Replica::start(&launcher, &f, ReplicaOptions::new("replica-0"));
    assert!(replica.wait_ready(WAIT).await, "{:?}", replica.readyz());
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;

    // Rotation: openmcp puts token B into the Secret and A is revoked. A
    // client built once would now get 401 for every request.
    rotate(&f, &b).await;
    identity::revoke(&env.onboarding, &accounts, "provider-a").await;
    tokio::time::sleep(TOKEN_CACHE).await;
    f.create_kro("mcp-02", "v0.9.1").await;
    f.wait_ready("mcp-02").await;
    assert!(replica.wait_ready(WAIT).await, "Ready with the new credentials: {:?}", replica.readyz());

    // Revocation without a new token yet: the next write is refused, and the
    // replica says so instead of staying Ready.
    identity::revoke(&env.onboarding, &accounts, "provider-b").await;
    tokio::time::sleep(TOKEN_CACHE).await;
    f.patch_kro("mcp-01", json!({"spec": {"version": "v0.9.0"}})).await;
    assert!(
        replica.wait_readyz(WAIT, |code, body| code == 503 && body.contains("rejects the credentials")).await,
        "not Ready while the onboarding cluster refuses the credentials: {:?}",
        replica.readyz()
    );

    // openmcp renews them: Ready again, and the refused change goes through.
    rotate(&f, &c).await;
    assert!(replica.wait_ready(WAIT).await, "Ready after the renewal: {:?}", replica.readyz());
    f.wait_kro("mcp-01", "the change refused before is reconciled", |k| ready(k)["reason"] == "ReconcileError").await;
    f.create_kro("mcp-03", "v0.9.1").await;
    f.wait_ready("mcp-03").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(replica.terminate().success());
}
