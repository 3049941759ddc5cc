//! `init`: install the plugin's CRDs on the cluster each belongs on
//! ([`crate::reconcile::apply::crds`]), and register the service kind at the ServiceProvider. Any failure is an error
//! (the Go provider logs and exits 0, hiding broken installs).

use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use service_provider_sdk::contract::{Cluster, Descriptor};
use tracing::info;

use crate::Error;
use crate::adopt::Adoption;
use crate::plugin::grant::Effective;
use crate::reconcile::apply::crds;

pub fn service_provider_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("openmcp.cloud", "v1alpha1", "ServiceProvider"),
        "serviceproviders",
    )
}

/// Brings the CRDs of the onboarding and platform clusters to what the
/// plugin declares ([`crds::ensure`]); those of the tenants' clusters are
/// `run`'s, on each instance's cluster before its first plan.
pub async fn install_crds(
    descriptor: &Descriptor,
    granted: &Effective,
    platform: &Client,
    onboarding: &Client,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<(), Error> {
    for (cluster, client) in [(Cluster::Onboarding, onboarding), (Cluster::Platform, platform)] {
        crds::ensure(client, cluster, descriptor, &granted.own, field_manager, adoption).await?;
    }
    Ok(())
}

/// Registers the service kind in `ServiceProvider/<name>.status.resources`,
/// which openmcp uses to delete service objects with their ControlPlane.
pub async fn register_service_kind(
    descriptor: &Descriptor,
    platform: &Client,
    provider_name: &str,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::all_with(platform.clone(), &service_provider_resource());
    let s = &descriptor.service;
    let patch = json!({"status": {"resources": [{"group": s.group, "version": s.version, "kind": s.kind}]}});
    api.patch_status(provider_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("registering {} at ServiceProvider {provider_name}", s.kind), e))?;
    info!(provider = %provider_name, kind = %s.kind, "service kind registered");
    Ok(())
}

/// Whether openmcp has reconciled the ServiceProvider: its status carries
/// `observedGeneration` and `phase`, which the CRD requires of every status
/// write (a status patch before that fails with 422).
pub fn reconciled_by_openmcp(service_provider: &DynamicObject) -> bool {
    let status = service_provider.data.get("status");
    let has = |field: &str| status.and_then(|s| s.get(field)).is_some_and(|v| !v.is_null());
    has("observedGeneration") && has("phase")
}

/// [`register_service_kind`] once openmcp has given the ServiceProvider a
/// status, waiting (with a log line saying so) up to `timeout`. A missing
/// ServiceProvider is an error at once: openmcp creates it before `init`.
pub async fn register_when_reconciled(
    descriptor: &Descriptor,
    platform: &Client,
    provider_name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::all_with(platform.clone(), &service_provider_resource());
    let kind = &descriptor.service.kind;
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(500);
    let mut waiting = false;
    loop {
        let sp = api
            .get(provider_name)
            .await
            .map_err(|e| Error::kube(format!("registering {kind} at ServiceProvider {provider_name}"), e))?;
        let why = if reconciled_by_openmcp(&sp) {
            match register_service_kind(descriptor, platform, provider_name).await {
                Err(Error::Kube { source: kube::Error::Api(e), .. }) if e.code == 422 => {
                    format!("openmcp's status does not accept the registration yet ({})", e.message)
                }
                other => return other,
            }
        } else {
            "it has no status yet (openmcp has not reconciled it)".to_string()
        };
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                doing: format!("registering {kind} at ServiceProvider {provider_name}"),
                after: timeout,
                last_seen: Some(format!("{why}; is openmcp-operator running?")),
            });
        }
        if !waiting {
            info!(provider = %provider_name, "waiting for openmcp before registering {kind} at ServiceProvider {provider_name}: {why}");
            waiting = true;
        }
        tokio::time::sleep(delay.min(deadline - Instant::now())).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_provider_counts_as_reconciled_once_its_status_has_generation_and_phase() {
        let sp = |status: serde_json::Value| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
                "metadata": {"name": "kro"}, "status": status}))
            .unwrap()
        };
        assert!(!reconciled_by_openmcp(&sp(serde_json::Value::Null)));
        assert!(!reconciled_by_openmcp(&sp(json!({"phase": "Progressing"}))));
        assert!(reconciled_by_openmcp(&sp(json!({"observedGeneration": 1, "phase": "Progressing"}))));
    }
}
