//! `init`: install the plugin's CRDs on the cluster each belongs on, and
//! register the service kind at the ServiceProvider. Any failure is an error
//! (the Go provider logs and exits 0, hiding broken installs).

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde_json::json;
use service_provider_sdk::contract::{Cluster, Descriptor};
use tracing::info;

use crate::Error;
use crate::adopt::Adoption;
use crate::grant::{Denial, Effective, hard};

/// The label that says which cluster a CRD belongs on (openmcp).
pub const CLUSTER_LABEL: &str = "openmcp.cloud/cluster";

pub fn service_provider_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("openmcp.cloud", "v1alpha1", "ServiceProvider"),
        "serviceproviders",
    )
}

/// Parses a CRD manifest from the plugin and checks its cluster label.
pub fn parse_crd(manifest: &str, cluster: Cluster) -> Result<CustomResourceDefinition, Error> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(manifest)
        .map_err(|e| Error::Config(format!("a CRD of the plugin is not valid YAML/JSON: {e}")))?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let label = crd.metadata.labels.as_ref().and_then(|l| l.get(CLUSTER_LABEL)).map(String::as_str);
    let expected = match cluster {
        Cluster::ControlPlane => "mcp",
        other => other.as_str(),
    };
    if label != Some(expected) {
        return Err(Error::Config(format!(
            "CRD {name} is declared for the {cluster} cluster but is labelled {CLUSTER_LABEL}={}",
            label.unwrap_or("<none>")
        )));
    }
    Ok(crd)
}

/// Creates or updates the CRDs and waits until each is established.
pub async fn install_crds(
    descriptor: &Descriptor,
    granted: &Effective,
    platform: &Client,
    onboarding: &Client,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<(), Error> {
    for declared in &descriptor.crds {
        let client = match declared.cluster {
            Cluster::Platform => platform,
            Cluster::Onboarding => onboarding,
            // There is one per tenant: `run` installs these on each
            // instance's cluster before its first plan (crate::apply::crds).
            Cluster::ControlPlane | Cluster::Workload => continue,
        };
        let crd = parse_crd(&declared.manifest, declared.cluster)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        check_crd(&crd, &granted.own)?;
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let place = format!("CRD {name} on the {} cluster", declared.cluster);
        existing(&api, &name, &place, adoption).await?;
        install(&api, &crd, field_manager, &place).await?;
        info!(crd = %name, cluster = %declared.cluster, "CRD installed");
    }
    Ok(())
}

/// The field managers whose names mark the host's own writes (every
/// provider's: `service-provider-host/<provider>`).
pub const FIELD_MANAGER_PREFIX: &str = "service-provider-host";

/// Refuses a CRD the plugin may not install: not of its own groups or not
/// listed in its grant's identity ([`hard::crd`]), or converted by a
/// webhook ([`hard::crd_conversion`]).
pub fn check_crd(crd: &CustomResourceDefinition, own: &hard::Own) -> Result<(), Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let strategy = crd.spec.conversion.as_ref().map(|c| c.strategy.as_str());
    match hard::crd(&name, &crd.spec.group, own).or_else(|| hard::crd_conversion(strategy)) {
        Some(refusal) => {
            Err(Error::Denied(Denial::new(refusal.rule, format!("installing CRD {name}"), refusal.reason)))
        }
        None => Ok(()),
    }
}

/// Refuses to install over a CRD that exists and that no writer of the
/// host's ever wrote: the host never takes over what another field manager
/// installed (Flux's CRDs, say), nor what nobody can tell the writer of,
/// unless `adoption` (`--adopt-from`) names the provider it replaces and
/// nobody else wrote it ([`Adoption::judge`]). The API server's own status
/// writes do not count.
pub fn not_taken_over(live: &CustomResourceDefinition, place: &str, adoption: &Adoption) -> Result<(), Error> {
    let writers: Vec<&str> = live
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|m| m.manager.as_deref())
        .collect();
    if writers.iter().any(|m| m.starts_with(FIELD_MANAGER_PREFIX)) {
        return Ok(());
    }
    if adoption.is_enabled() {
        let by = adoption.judge(&live.metadata);
        let by = by.map_err(|why| Error::Conflict(format!("{place} exists and {why}: it is not taken over")))?;
        info!(crd = %place, field_manager = %by, "adopted");
        return Ok(());
    }
    let who = match writers.is_empty() {
        true => "a writer that left no record".to_string(),
        false => writers.join(", "),
    };
    let hint = match crate::adopt::writers(&live.metadata).first() {
        Some(first) => format!(" (if it is a provider's this one replaces: --adopt-from {first:?})"),
        None => String::new(),
    };
    Err(Error::Conflict(format!(
        "{place} exists and was installed by {who}, not by this host; it is never taken over unless named{hint}: remove it, or rename the plugin's"
    )))
}

/// The CRD `name` as it is at `place`, if it exists and this host may
/// update it ([`not_taken_over`]).
pub async fn existing(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    place: &str,
    adoption: &Adoption,
) -> Result<Option<CustomResourceDefinition>, Error> {
    let live = api.get_opt(name).await.map_err(|e| Error::kube(format!("reading {place}"), e))?;
    if let Some(live) = &live {
        not_taken_over(live, place, adoption)?;
    }
    Ok(live)
}

/// Server-side applies a CRD without forcing (a field another manager took
/// since is a conflict the operator must resolve, not something to take
/// from them), then waits until it is established.
pub async fn install(
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
    field_manager: &str,
    place: &str,
) -> Result<(), Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    match api.patch(&name, &PatchParams::apply(field_manager), &Patch::Apply(crd)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_conflict() => {
            let message = format!("installing {place}: another field manager owns what it sets: {}", s.message);
            return Err(Error::Conflict(message));
        }
        Err(e) => return Err(Error::kube(format!("installing {place}"), e)),
    }
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| Error::Timeout(format!("CRD {name} was not established within 60s")))?
    .map_err(|e| Error::Timeout(format!("waiting for CRD {name}: {e}")))?;
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
            return Err(Error::Timeout(format!(
                "ServiceProvider {provider_name}: {why}; gave up registering {kind} after {}s (is openmcp-operator running?)",
                timeout.as_secs()
            )));
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
    fn a_crd_must_be_listed_and_converted_without_a_webhook() {
        use service_provider_sdk::contract::ApiKind;
        let own = hard::Own {
            service: ApiKind::new("example.com", "v1", "Thing", "things", true),
            provider_config: ApiKind::new("example.com", "v1", "ProviderConfig", "providerconfigs", false),
            crds: vec!["things.example.com".into()],
        };
        let manifest = |name: &str, conversion: &str| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n  labels: {{openmcp.cloud/cluster: platform}}\nspec:\n  group: example.com\n  names: {{kind: Thing, plural: things}}\n  scope: Namespaced\n  versions: []\n{conversion}"
            )
        };
        let crd = |name: &str, conversion: &str| parse_crd(&manifest(name, conversion), Cluster::Platform).unwrap();
        assert!(check_crd(&crd("things.example.com", ""), &own).is_ok());
        let webhook = "  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {url: 'https://x'}}}\n";
        let err = check_crd(&crd("things.example.com", webhook), &own).unwrap_err().to_string();
        assert!(err.contains("no-conversion-webhooks"), "{err}");
        let err = check_crd(&crd("others.example.com", ""), &own).unwrap_err().to_string();
        assert!(err.contains("no-foreign-crds"), "{err}");
    }

    #[test]
    fn a_crd_is_updated_only_if_this_host_wrote_it() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let crd = |entries: &[(&str, Option<&str>)]| {
            let mut crd = CustomResourceDefinition::default();
            crd.metadata.managed_fields = Some(
                entries
                    .iter()
                    .map(|(manager, subresource)| ManagedFieldsEntry {
                        manager: Some(manager.to_string()),
                        subresource: subresource.map(str::to_string),
                        ..Default::default()
                    })
                    .collect(),
            );
            crd
        };
        let none = Adoption::default();
        assert!(not_taken_over(&crd(&[("service-provider-host/kro", None)]), "c", &none).is_ok());
        let both = crd(&[("kubectl-edit", None), ("service-provider-host/kro", None)]);
        assert!(not_taken_over(&both, "c", &none).is_ok(), "ours, edited since: the apply reports conflicts");
        let theirs =
            not_taken_over(&crd(&[("helm", None), ("kube-apiserver", Some("status"))]), "c", &none).unwrap_err();
        assert!(theirs.to_string().contains("installed by helm, not by this host"), "{theirs}");
        let unknown = not_taken_over(&crd(&[("kube-apiserver", Some("status"))]), "c", &none).unwrap_err();
        assert!(unknown.to_string().contains("a writer that left no record"), "{unknown}");

        let go = Adoption::new(&["service-provider-kro".into()]).unwrap();
        let gos = crd(&[("service-provider-kro", None), ("kube-apiserver", Some("status"))]);
        let hint = not_taken_over(&gos, "c", &none).unwrap_err().to_string();
        assert!(hint.contains("--adopt-from \"service-provider-kro\""), "{hint}");
        assert!(not_taken_over(&gos, "c", &go).is_ok(), "the predecessor's, named");
        let edited = crd(&[("service-provider-kro", None), ("kubectl-edit", None)]);
        assert!(not_taken_over(&edited, "c", &go).unwrap_err().to_string().contains("\"kubectl-edit\" wrote more"));
    }

    #[test]
    fn crds_must_be_labelled_for_their_cluster() {
        let crd = |label: &str| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n  labels:\n    openmcp.cloud/cluster: {label}\nspec:\n  group: example.com\n  names: {{kind: Thing, plural: things}}\n  scope: Namespaced\n  versions: []\n"
            )
        };
        assert!(parse_crd(&crd("platform"), Cluster::Platform).is_ok());
        let err = parse_crd(&crd("platform"), Cluster::Onboarding).unwrap_err();
        assert!(err.to_string().contains("labelled openmcp.cloud/cluster=platform"), "{err}");
        assert!(parse_crd("not: [yaml", Cluster::Platform).is_err());
    }

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
