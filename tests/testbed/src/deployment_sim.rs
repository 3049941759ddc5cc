//! `DeploymentSimulator`: makes Deployments Available on a cluster that has
//! no kube-controller-manager, scheduler or kubelet.
//!
//! Helm, inside the real helm-controller, waits after an install or upgrade
//! until the release's workloads are ready (kstatus rules: a Deployment is
//! Current when `status.observedGeneration` matches, all replica counters
//! reach `spec.replicas` and the `Progressing` condition says
//! `NewReplicaSetAvailable` and `Available` is True). Without pods that never
//! happens, so the install would time out, be remediated and end Stalled.
//! This loop writes exactly that status through the `/status` subresource;
//! with no deployment controller running, nothing overwrites it.
//!
//! It stands in for the ControlPlane's own controllers, not for Flux: the
//! HelmRelease stays as production writes it (no `disableWait`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::background::Background;
use crate::cluster::{Cluster, client_from_kubeconfig};
use crate::error::Result;

/// The Deployment controller's reason for a finished rollout; kstatus only
/// counts a Deployment as Current with it.
pub const NEW_REPLICA_SET_AVAILABLE: &str = "NewReplicaSetAvailable";

/// Simulator settings.
#[derive(Debug, Clone)]
pub struct DeploymentOptions {
    pub poll_interval: Duration,
    /// Namespaces to act in; empty means all.
    pub namespaces: Vec<String>,
}

impl Default for DeploymentOptions {
    fn default() -> Self {
        Self { poll_interval: Duration::from_millis(200), namespaces: Vec::new() }
    }
}

/// The running simulator; stops when dropped or via [`Self::stop`].
pub struct DeploymentSimulator {
    background: Background,
}

impl DeploymentSimulator {
    /// Marks every Deployment in `namespaces` (all when empty) of `cluster`
    /// Available, now and whenever one is created or changed.
    pub fn start(cluster: &Cluster, namespaces: &[&str]) -> Self {
        let namespaces = namespaces.iter().map(|n| n.to_string()).collect();
        Self::start_with(cluster.kubeconfig_yaml(), DeploymentOptions { namespaces, ..Default::default() })
    }

    /// Like [`Self::start`], from kubeconfig text.
    pub fn start_with(kubeconfig: &str, options: DeploymentOptions) -> Self {
        let kubeconfig = Arc::new(kubeconfig.to_string());
        let options = Arc::new(options);
        let client = Arc::new(tokio::sync::OnceCell::<Client>::new());
        let interval = options.poll_interval;
        let background = Background::spawn("deployment simulator", interval, move || {
            let (kubeconfig, options, client) = (kubeconfig.clone(), options.clone(), client.clone());
            async move {
                let client = client.get_or_try_init(|| client_from_kubeconfig(&kubeconfig)).await?;
                round(client, &options).await
            }
        });
        Self { background }
    }

    /// The error of the latest round, if any.
    pub fn last_error(&self) -> Option<String> {
        self.background.last_error()
    }

    pub async fn stop(self) {
        self.background.stop().await;
    }
}

async fn round(client: &Client, options: &DeploymentOptions) -> Result<()> {
    let apis: Vec<Api<Deployment>> = if options.namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        options.namespaces.iter().map(|ns| Api::namespaced(client.clone(), ns)).collect()
    };
    for api in apis {
        for deployment in api.list(&ListParams::default()).await? {
            if deployment.metadata.deletion_timestamp.is_some() || is_available(&deployment) {
                continue;
            }
            let scoped: Api<Deployment> = Api::namespaced(client.clone(), &deployment.namespace().unwrap_or_default());
            scoped
                .patch_status(
                    &deployment.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&available_status(&deployment)),
                )
                .await?;
        }
    }
    Ok(())
}

fn replicas(deployment: &Deployment) -> i32 {
    deployment.spec.replicas.unwrap_or(1)
}

/// True when the status already says what the simulator writes: rolled out
/// for the current generation, all replicas available.
pub fn is_available(deployment: &Deployment) -> bool {
    let want = replicas(deployment);
    let Some(status) = &deployment.status else {
        return false;
    };
    let condition = |type_: &str, reason: Option<&str>| {
        status.conditions.iter().flatten().any(|c| {
            c.type_.as_deref() == Some(type_)
                && c.status.as_deref() == Some("True")
                && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
        })
    };
    status.observed_generation == deployment.metadata.generation
        && status.replicas == Some(want)
        && status.updated_replicas == Some(want)
        && status.ready_replicas == Some(want)
        && status.available_replicas == Some(want)
        && condition("Available", None)
        && condition("Progressing", Some(NEW_REPLICA_SET_AVAILABLE))
}

/// A status merge patch that says: rolled out, all replicas available.
fn available_status(deployment: &Deployment) -> serde_json::Value {
    let want = replicas(deployment);
    let now = crate::flux_sim::now_rfc3339();
    json!({
        "status": {
            "observedGeneration": deployment.metadata.generation,
            "replicas": want,
            "updatedReplicas": want,
            "readyReplicas": want,
            "availableReplicas": want,
            "unavailableReplicas": null,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "message": "Deployment has minimum availability (simulated: no kubelet).",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": NEW_REPLICA_SET_AVAILABLE,
                    "message": format!("Deployment \"{}\" has successfully progressed (simulated).", deployment.name_any()),
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
            ],
        }
    })
}
