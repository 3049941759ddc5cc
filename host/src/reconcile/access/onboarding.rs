//! Onboarding access at start-up: the provider's own ClusterRequest and
//! AccessRequest for the onboarding cluster, as the openmcp library makes
//! them.

use std::time::{Duration, Instant};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use service_provider_sdk::contract::{KubeconfigRef, PolicyRule};
use service_provider_sdk::names;

use super::{Answer, GROUP, LABEL_MANAGED_BY, access_request_resource, answer, cluster_request_resource, rules_json};
use crate::error::{AccessFailure, Error};

/// The preview's onboarding access (AccessRequest `<controller>--preview`
/// in the pod namespace, which `run` asks for), if granted.
pub async fn granted_preview_access(
    platform: &Client,
    pod_namespace: &str,
    controller: &str,
) -> Result<KubeconfigRef, Error> {
    let name = preview_request_name(controller);
    let api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &access_request_resource());
    let place = format!("AccessRequest {pod_namespace}/{name}");
    let live = api.get_opt(&name).await.map_err(|e| Error::kube(format!("reading {place}"), e))?;
    match live.as_ref().map(answer) {
        Some(Answer::Granted(at)) if !at.name.is_empty() => Ok(at),
        _ => Err(AccessFailure::NotGranted {
            what: format!("the preview's read-only onboarding access ({place})"),
            hint: "start the provider first (`run` asks for it), or give --onboarding-kubeconfig".into(),
        }
        .into()),
    }
}

/// Onboarding access at start-up: the ClusterRequest and AccessRequest
/// `<controller>--<local_name>` in the pod namespace; waits for both to be
/// granted and returns the kubeconfig Secret reference.
pub async fn request_onboarding_access(
    platform: &Client,
    pod_namespace: &str,
    controller: &str,
    local_name: &str,
    rules: &[PolicyRule],
    timeout: Duration,
    field_manager: &str,
) -> Result<KubeconfigRef, Error> {
    let name = request_name(controller, local_name);
    let labels = json!({LABEL_MANAGED_BY: names::label_value(controller)});
    let params = PatchParams::apply(field_manager).force();
    let deadline = Instant::now() + timeout;

    let cr_api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &cluster_request_resource());
    let cr = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterRequest",
        "metadata": {"name": name, "namespace": pod_namespace, "labels": labels},
        "spec": {"purpose": "onboarding"},
    });
    cr_api
        .patch(&name, &params, &Patch::Apply(&cr))
        .await
        .map_err(|e| Error::kube(format!("applying ClusterRequest {pod_namespace}/{name}"), e))?;
    wait_for_grant(&cr_api, &name, "ClusterRequest", (deadline, timeout)).await?;

    let ar_api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &access_request_resource());
    let ar = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "AccessRequest",
        "metadata": {"name": name, "namespace": pod_namespace, "labels": labels},
        "spec": {
            "requestRef": {"name": name, "namespace": pod_namespace},
            "token": {"permissions": [{"rules": rules_json(rules)}]},
        },
    });
    ar_api
        .patch(&name, &params, &Patch::Apply(&ar))
        .await
        .map_err(|e| Error::kube(format!("applying AccessRequest {pod_namespace}/{name}"), e))?;
    match wait_for_grant(&ar_api, &name, "AccessRequest", (deadline, timeout)).await? {
        at if at.name.is_empty() => {
            Err(AccessFailure::NoSecretRef { request: format!("AccessRequest {pod_namespace}/{name}") }.into())
        }
        at => Ok(at),
    }
}

/// The preview's own onboarding access: AccessRequest `<controller>--preview`
/// in the pod namespace, on the ClusterRequest of `run`'s access
/// (`<controller>--<run_local_name>`), with read-only `rules`. Applied, not
/// waited for: `run` asks for it at start so that `diff` can list the
/// service objects without the token `run` writes with.
pub async fn request_preview_access(
    platform: &Client,
    pod_namespace: &str,
    controller: &str,
    run_local_name: &str,
    rules: &[PolicyRule],
    field_manager: &str,
) -> Result<(), Error> {
    let name = preview_request_name(controller);
    let cluster_request = request_name(controller, run_local_name);
    let ar = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "AccessRequest",
        "metadata": {
            "name": name, "namespace": pod_namespace,
            "labels": {LABEL_MANAGED_BY: names::label_value(controller)},
        },
        "spec": {
            "requestRef": {"name": cluster_request, "namespace": pod_namespace},
            "token": {"permissions": [{"rules": rules_json(rules)}]},
        },
    });
    let api: Api<DynamicObject> = Api::namespaced_with(platform.clone(), pod_namespace, &access_request_resource());
    api.patch(&name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&ar))
        .await
        .map_err(|e| Error::kube(format!("applying AccessRequest {pod_namespace}/{name}"), e))?;
    Ok(())
}

/// The name of the preview's onboarding AccessRequest.
pub fn preview_request_name(controller: &str) -> String {
    request_name(controller, PREVIEW)
}

/// The name of an onboarding ClusterRequest or AccessRequest of
/// `controller`: `<controller>--<local_name>`, as openmcp's library makes it.
fn request_name(controller: &str, local_name: &str) -> String {
    names::shorten(&format!("{}--{}", controller.to_lowercase(), local_name.to_lowercase()), names::MAX_NAME_LEN)
}

/// The local name of the preview's onboarding access.
pub const PREVIEW: &str = "preview";

async fn wait_for_grant(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    (deadline, timeout): (Instant, Duration),
) -> Result<KubeconfigRef, Error> {
    let mut delay = Duration::from_millis(200);
    loop {
        let live = api.get(name).await.map_err(|e| Error::kube(format!("reading {kind} {name}"), e))?;
        match answer(&live) {
            Answer::Granted(at) => return Ok(at),
            Answer::Denied => {
                return Err(AccessFailure::Denied {
                    what: "onboarding access".into(),
                    request: format!("{kind} {name}"),
                }
                .into());
            }
            Answer::Pending if Instant::now() >= deadline => {
                return Err(Error::Timeout {
                    doing: format!("waiting for {kind} {name} to be granted"),
                    after: timeout,
                    last_seen: None,
                });
            }
            Answer::Pending => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}
