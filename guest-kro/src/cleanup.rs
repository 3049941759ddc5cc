//! Deletion: block while kro ResourceGraphDefinitions or Graphs exist on
//! the ControlPlane, otherwise remove the HelmRelease (so helm-controller
//! uninstalls kro), then the OCIRepository, then the Secret copies.

use service_provider_sdk::contract::{Blocked, CleanupPlan, Cluster, Input, ObjectRef, Teardown};

use crate::describe::{OBSERVE_GRAPHS, OBSERVE_RGDS};
use crate::desired::{self, HELM_API_VERSION, HELM_RELEASE, OCI_REPOSITORY, SOURCE_API_VERSION};
use crate::{config, read, status};

/// How long to wait before checking blockers again.
pub const BLOCKED_REQUEUE_SECONDS: u32 = 10;

/// Blocks while the ControlPlane still has ResourceGraphDefinitions or
/// (kro v0.10) Graphs: removing kro first would orphan everything they
/// manage, and kro alone deletes what a Graph created. When the host could
/// not look (no ControlPlane access any more), there is nothing left to
/// protect and deletion proceeds.
pub fn cleanup(input: &Input) -> CleanupPlan {
    let tenant = input.context.tenant_namespace.as_str();
    let count = |id: &str| input.observed(id).map_or(0, |objects| objects.len());
    let (rgds, graphs) = (count(OBSERVE_RGDS), count(OBSERVE_GRAPHS));
    if rgds + graphs > 0 {
        let what = match (rgds, graphs) {
            (rgds, 0) => format!("{rgds} kro ResourceGraphDefinition(s)"),
            (0, graphs) => format!("{graphs} kro Graph(s)"),
            (rgds, graphs) => format!("{rgds} kro ResourceGraphDefinition(s) and {graphs} Graph(s)"),
        };
        return CleanupPlan::Blocked(Blocked {
            message: format!("deletion blocked: waiting for {what} to be removed from the control plane"),
            requeue_after_seconds: BLOCKED_REQUEUE_SECONDS,
            resources: Some(status::terminating_resources(tenant)),
        });
    }
    CleanupPlan::Teardown(Teardown {
        objects: vec![
            object_ref(Cluster::Platform, HELM_API_VERSION, "HelmRelease", "helmreleases", Some(tenant), HELM_RELEASE),
            object_ref(
                Cluster::Platform,
                SOURCE_API_VERSION,
                "OCIRepository",
                "ocirepositories",
                Some(tenant),
                OCI_REPOSITORY,
            ),
        ],
        copies: known_secret_copies(input),
        resources: Some(status::terminating_resources(tenant)),
    })
}

fn object_ref(
    cluster: Cluster,
    api_version: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
    name: &str,
) -> ObjectRef {
    ObjectRef {
        cluster,
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
    }
}

/// The copies the current ProviderConfig implies for this instance. Deletion
/// must not depend on the ProviderConfig (the version may have been
/// withdrawn, the config may be gone or broken), so anything unreadable just
/// yields nothing here; the host removes every copy it labelled for the
/// instance anyway.
fn known_secret_copies(input: &Input) -> Vec<ObjectRef> {
    let requested = read::kro_spec(&input.object).ok();
    let config = input.provider_config.as_deref().and_then(|pc| read::provider_config_spec(pc).ok());
    let (Some(requested), Some(config)) = (requested, config) else {
        return Vec::new();
    };
    let Ok(version) = config::resolve_version(Some(&config), &requested.version) else {
        return Vec::new();
    };
    let images = config::image_pull_secrets(version.helm_values.as_ref()).unwrap_or_default();
    // Copies on the ControlPlane are only worth naming while it is reachable.
    let reachable = |c: &Cluster| *c != Cluster::ControlPlane || input.context.control_plane.is_some();
    desired::secret_copies(version, &images, &input.context.tenant_namespace)
        .into_iter()
        .filter(|copy| reachable(&copy.target_cluster))
        .map(|copy| {
            object_ref(copy.target_cluster, "v1", "Secret", "secrets", Some(&copy.target_namespace), &copy.target_name)
        })
        .collect()
}
