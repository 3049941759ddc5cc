//! The plugin's CRDs, installed where each belongs: `init` for the
//! onboarding and platform clusters, `run` on each tenant's cluster (the
//! ControlPlane, a workload cluster) before an instance's first plan. Only
//! CRDs of the plugin's own groups, labelled for their cluster, converted
//! without a webhook, and never over a CRD another field manager installed
//! (unless `--adopt-from` names it). One writer besides the host's is
//! expected: Flux's kustomize-controller, which applies a provider
//! component's platform CRDs from openmcp's bootstrapper's GitOps
//! repository before openmcp-operator runs `init`. A CRD it applied that is
//! exactly the one the plugin declares (the component and the image are
//! one release) is co-owned; one with other content is not this release's,
//! and is refused like any other writer's.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use service_provider_sdk::contract::{Cluster, Descriptor};
use tracing::{info, warn};

use crate::adopt::Adoption;
use crate::error::{Conflicting, Error};
use crate::plugin::grant::{Denial, hard};
use crate::reconcile::apply::contains;

/// The label that says which cluster a CRD belongs on (openmcp).
pub const CLUSTER_LABEL: &str = "openmcp.cloud/cluster";

/// The field manager of Flux's kustomize-controller, with which openmcp's
/// bootstrapper's GitOps applies the platform CRDs of a provider's OCM
/// component (server-side apply, forced) before `init` runs.
pub const GITOPS_MANAGER: &str = "kustomize-controller";

/// Parses a CRD manifest from the plugin and checks its cluster label.
pub fn parse_crd(manifest: &str, cluster: Cluster) -> Result<CustomResourceDefinition, Error> {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(manifest)
        .map_err(|e| Error::config("a CRD of the plugin is not valid YAML/JSON", Some(e.into())))?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let label = crd.metadata.labels.as_ref().and_then(|l| l.get(CLUSTER_LABEL)).map(String::as_str);
    let expected = match cluster {
        Cluster::ControlPlane => "mcp",
        other => other.as_str(),
    };
    if label != Some(expected) {
        let what = format!(
            "CRD {name} is declared for the {cluster} cluster but is labelled {CLUSTER_LABEL}={}",
            label.unwrap_or("<none>")
        );
        return Err(Error::config(what, None));
    }
    Ok(crd)
}

/// Applies the plugin's CRDs for `cluster` unless they already are as
/// declared, and waits until each is established; whether any was written.
pub async fn ensure(
    client: &Client,
    cluster: Cluster,
    descriptor: &Descriptor,
    own: &hard::Own,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<bool, Error> {
    let mut written = false;
    for declared in descriptor.crds.iter().filter(|c| c.cluster == cluster) {
        let crd = parse_crd(&declared.manifest, cluster)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        check_crd(&crd, own)?;
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let place = format!("CRD {name} on the {cluster} cluster");
        let desired = serde_json::to_value(&crd).map_err(|e| Error::json(format!("encoding {place}"), e))?;
        let holder = match existing(&api, &name, &place, &desired, adoption).await? {
            None => None,
            Some((live, Holder::Ours)) => {
                if contains(&live, &desired) {
                    continue;
                }
                Some(Holder::Ours)
            }
            // Written even when equal: from now on it is the host's too.
            Some((_, other)) => Some(other),
        };
        match install(&api, &crd, field_manager, &place, holder.as_ref(), adoption).await? {
            Installed::Adopted(by) => info!(crd = %name, %cluster, field_manager = %by, "CRD adopted"),
            Installed::CoOwned => info!(
                crd = %name, %cluster, field_manager = GITOPS_MANAGER,
                "CRD co-owned: Flux applied the very CRD the plugin declares (from this provider's component)"
            ),
            Installed::TakenBack(from) => {
                let from = from.join(", ");
                warn!(crd = %name, %cluster, field_managers = %from, "CRD taken back: fields the host declares had been changed by {from}")
            }
            Installed::Applied => info!(crd = %name, %cluster, "CRD installed"),
        }
        written = true;
    }
    Ok(written)
}

/// Whether a field manager is one of the host's: `service-provider-host`
/// itself or `service-provider-host/<provider>`, not any name that merely
/// begins like it (`service-provider-hostile`).
pub fn is_hosts(manager: &str) -> bool {
    manager
        .strip_prefix(crate::owner::FIELD_MANAGER_PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

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

/// Whose an existing CRD is ([`Holder`]), or refuses to install over a
/// CRD that exists and that no writer of the host's ever wrote: the host
/// never takes over what another field manager installed (a Helm chart's
/// CRD, another provider's), nor what nobody can tell the writer of. Two
/// exceptions:
/// - Flux's kustomize-controller ([`GITOPS_MANAGER`]) applied `desired`
///   itself, field for field (`same`): the component of this release,
///   through openmcp's bootstrapper. It is co-owned, and under
///   `--adopt-from` it does not stand in the way of taking the rest over.
/// - `adoption` (`--adopt-from`) names the provider it replaces, and
///   nobody else wrote it ([`Adoption::judge`]).
///
/// The API server's own status writes do not count.
fn not_taken_over(
    live: &CustomResourceDefinition,
    same: bool,
    place: &str,
    adoption: &Adoption,
) -> Result<Holder, Error> {
    let writers: Vec<&str> = live
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|m| m.manager.as_deref())
        .collect();
    if writers.iter().any(|m| is_hosts(m)) {
        return Ok(Holder::Ours);
    }
    let gitops = same && writers.contains(&GITOPS_MANAGER);
    if gitops && writers.iter().all(|m| *m == GITOPS_MANAGER) {
        return Ok(Holder::GitOps);
    }
    if adoption.is_enabled() {
        let besides: &[&str] = if gitops { &[GITOPS_MANAGER] } else { &[] };
        let by = adoption.judge_besides(&live.metadata, besides).map_err(|why| Error::conflict(place, why))?;
        return Ok(Holder::Predecessor(by));
    }
    if writers.contains(&GITOPS_MANAGER) && !same {
        return Err(Error::conflict(place, Conflicting::OtherRelease { manager: GITOPS_MANAGER.into() }));
    }
    let writers = writers.into_iter().map(str::to_string).collect();
    // The writer to name in --adopt-from: not Flux where it applied what
    // the plugin declares (the other writer is the one to take over from).
    let adopt_from =
        crate::adopt::writers(&live.metadata).into_iter().find(|w| !(gitops && w.as_str() == GITOPS_MANAGER));
    Err(Error::conflict(place, Conflicting::InstalledBy { writers, adopt_from }))
}

/// Who wrote an existing CRD the host may update.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Ours,
    /// Flux applied exactly what the plugin declares, and nobody else wrote it.
    GitOps,
    /// The provider this host replaces (`--adopt-from`): this field manager.
    Predecessor(String),
}

/// The CRD `name` as it is at `place` (as JSON), if it exists and this host
/// may update it ([`not_taken_over`]), and whose it is.
async fn existing(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    place: &str,
    desired: &serde_json::Value,
    adoption: &Adoption,
) -> Result<Option<(serde_json::Value, Holder)>, Error> {
    let live = api.get_opt(name).await.map_err(|e| Error::kube(format!("reading {place}"), e))?;
    let Some(live) = live else { return Ok(None) };
    let json = serde_json::to_value(&live).map_err(|e| Error::json(format!("reading {place}"), e))?;
    let holder = not_taken_over(&live, contains(&json, desired), place, adoption)?;
    Ok(Some((json, holder)))
}

/// What installing a CRD came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Installed {
    /// Created, or updated where only the host had written.
    Applied,
    /// Applied with the same content beside Flux's kustomize-controller.
    CoOwned,
    /// Taken over from the provider this host replaces (`--adopt-from`).
    Adopted(String),
    /// The host's own CRD, whose fields these other field managers had
    /// changed since (the Go provider's `init` after a rollback), taken back.
    TakenBack(Vec<String>),
}

/// Server-side applies a CRD, then waits until it is established.
///
/// Where the CRD is the host's own (a writer of the host's wrote it, and
/// the plugin grant's identity lists it, [`check_crd`]) and another field
/// manager changed fields the host declares since, the apply conflicts, and
/// the host takes them back with a forced apply, naming who had them: the
/// plugin's schema is what its instances are stored by, and a rollback to
/// the Go provider followed by a switch forward again is such a case, with
/// or without `--adopt-from`. Never from Flux's kustomize-controller: it
/// puts back what git holds at its next reconcile, so the two would take
/// the CRD from each other for ever; that is a `Conflict` that says to
/// bring git and the image to one release (or `--adopt-from` it). A CRD
/// the host never wrote is never forced over ([`not_taken_over`]), except
/// when taken over from its predecessor.
async fn install(
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
    field_manager: &str,
    place: &str,
    holder: Option<&Holder>,
    adoption: &Adoption,
) -> Result<Installed, Error> {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    let apply = |force: bool| {
        let params = match force {
            true => PatchParams::apply(field_manager).force(),
            false => PatchParams::apply(field_manager),
        };
        async move { api.patch(name, &params, &Patch::Apply(crd)).await }
    };
    let installed = match holder {
        Some(Holder::Predecessor(by)) => {
            apply(true).await.map_err(|e| Error::kube(format!("installing {place}"), e))?;
            Installed::Adopted(by.clone())
        }
        _ => match apply(false).await {
            Ok(_) if holder == Some(&Holder::GitOps) => Installed::CoOwned,
            Ok(_) => Installed::Applied,
            Err(kube::Error::Api(s)) if s.is_conflict() && holder == Some(&Holder::Ours) => {
                let from = conflicting_managers(&s.message);
                if from.iter().any(|m| m == GITOPS_MANAGER) && !adoption.names(GITOPS_MANAGER) {
                    return Err(Error::conflict(place, Conflicting::OtherRelease { manager: GITOPS_MANAGER.into() }));
                }
                apply(true).await.map_err(|e| Error::kube(format!("taking back {place}"), e))?;
                Installed::TakenBack(from)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                return Err(Error::conflict(place, Conflicting::FieldsOwned { message: s.message }));
            }
            Err(e) => return Err(Error::kube(format!("installing {place}"), e)),
        },
    };
    let name = crd.metadata.name.clone().unwrap_or_default();
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| Error::Timeout {
        doing: format!("waiting for CRD {name} to be established"),
        after: Duration::from_secs(60),
        last_seen: None,
    })?
    .map_err(|source| Error::Watch { context: format!("waiting for CRD {name}"), source })?;
    Ok(installed)
}

/// The field managers an apply conflict names (`conflict with "x": .spec…`,
/// each once, as printable words), for the log line that says whom a CRD
/// was taken back from.
fn conflicting_managers(message: &str) -> Vec<String> {
    let mut managers: Vec<String> = Vec::new();
    for part in message.split("conflict with \"").skip(1) {
        let Some((manager, _)) = part.split_once('"') else { continue };
        let manager = crate::syntax::one_line(manager, 128);
        if !managers.contains(&manager) {
            managers.push(manager);
        }
    }
    if managers.is_empty() {
        managers.push("another field manager".into());
    }
    managers
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
        assert!(matches!(
            not_taken_over(&crd(&[("service-provider-host/kro", None)]), false, "c", &none),
            Ok(Holder::Ours)
        ));
        let lookalike = not_taken_over(&crd(&[("service-provider-hostile", None)]), false, "c", &none).unwrap_err();
        assert!(lookalike.to_string().contains("installed by service-provider-hostile"), "{lookalike}");
        let both = crd(&[("kubectl-edit", None), ("service-provider-host/kro", None)]);
        assert!(not_taken_over(&both, false, "c", &none).is_ok(), "ours, edited since: the apply reports conflicts");
        let theirs =
            not_taken_over(&crd(&[("helm", None), ("kube-apiserver", Some("status"))]), true, "c", &none).unwrap_err();
        assert!(theirs.to_string().contains("installed by helm, not by this host"), "{theirs}");
        let unknown = not_taken_over(&crd(&[("kube-apiserver", Some("status"))]), true, "c", &none).unwrap_err();
        assert!(unknown.to_string().contains("a writer that left no record"), "{unknown}");

        let go = Adoption::new(&["service-provider-kro".into()]).unwrap();
        let gos = crd(&[("service-provider-kro", None), ("kube-apiserver", Some("status"))]);
        let hint = not_taken_over(&gos, false, "c", &none).unwrap_err().to_string();
        assert!(hint.contains("--adopt-from \"service-provider-kro\""), "{hint}");
        let taken = not_taken_over(&gos, false, "c", &go);
        assert!(matches!(&taken, Ok(Holder::Predecessor(by)) if by == "service-provider-kro"), "{taken:?}");
        let edited = crd(&[("service-provider-kro", None), ("kubectl-edit", None)]);
        assert!(
            not_taken_over(&edited, false, "c", &go).unwrap_err().to_string().contains("\"kubectl-edit\" wrote more")
        );
    }

    #[test]
    fn a_crd_flux_applied_is_co_owned_only_when_it_is_the_plugins_own() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let crd = |managers: &[&str]| {
            let mut crd = CustomResourceDefinition::default();
            let entry = |m: &&str| ManagedFieldsEntry { manager: Some(m.to_string()), ..Default::default() };
            let status = ManagedFieldsEntry {
                manager: Some("kube-apiserver".into()),
                subresource: Some("status".into()),
                ..Default::default()
            };
            crd.metadata.managed_fields = Some(managers.iter().map(entry).chain([status]).collect());
            crd
        };
        let none = Adoption::default();
        let flux = crd(&[GITOPS_MANAGER]);
        // The component's CRD, as the plugin declares it: co-owned.
        assert_eq!(not_taken_over(&flux, true, "c", &none).unwrap(), Holder::GitOps);
        // Another release's, or anything else under Flux's name: refused,
        // saying what to do.
        let other = not_taken_over(&flux, false, "c", &none).unwrap_err().to_string();
        assert!(other.contains("other content than this plugin declares"), "{other}");
        assert!(other.contains("--adopt-from \"kustomize-controller\""), "{other}");
        // Flux and someone else: the rule against other writers stands.
        let helm = not_taken_over(&crd(&[GITOPS_MANAGER, "helm"]), true, "c", &none).unwrap_err().to_string();
        assert!(helm.contains("installed by kustomize-controller, helm, not by this host"), "{helm}");
        assert!(helm.contains("--adopt-from \"helm\""), "the other writer is named, not Flux: {helm}");
        // A migration: the Go provider's init wrote beside Flux, which
        // applied this release's CRD; --adopt-from the Go provider suffices.
        let go = Adoption::new(&["service-provider-kro".into()]).unwrap();
        let both = crd(&[GITOPS_MANAGER, "service-provider-kro"]);
        assert_eq!(not_taken_over(&both, true, "c", &go).unwrap(), Holder::Predecessor("service-provider-kro".into()));
        let stale = not_taken_over(&both, false, "c", &go).unwrap_err().to_string();
        assert!(stale.contains("\"kustomize-controller\" wrote more"), "Flux's other release is not adopted: {stale}");
        // Named outright, Flux's CRD is taken over whatever it holds.
        let flux_named = Adoption::new(&[GITOPS_MANAGER.into()]).unwrap();
        assert_eq!(not_taken_over(&flux, false, "c", &flux_named).unwrap(), Holder::Predecessor(GITOPS_MANAGER.into()));
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
    fn the_hosts_field_managers_are_named_exactly() {
        assert!(is_hosts("service-provider-host") && is_hosts("service-provider-host/kro"));
        assert!(!is_hosts("service-provider-hostile") && !is_hosts("service-provider-host-x") && !is_hosts("kro"));
    }

    #[test]
    fn a_conflict_names_the_managers_it_was_with() {
        let message = "Apply failed with 2 conflicts: conflict with \"service-provider-kro\" using apiextensions.k8s.io/v1: .spec.versions\nconflict with \"service-provider-kro\": .spec.names\nconflict with \"kubectl\u{1b}[2J\": .spec.scope";
        assert_eq!(conflicting_managers(message), ["service-provider-kro", "kubectl [2J"]);
        assert_eq!(conflicting_managers("something else"), ["another field manager"]);
    }
}
