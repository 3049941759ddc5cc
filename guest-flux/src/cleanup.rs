//! Deletion: block while Flux objects of the tenant's own still exist on the
//! ControlPlane (removing Flux first would strand them with finalizers no
//! controller will ever remove), otherwise remove the HelmRelease (so
//! helm-controller uninstalls Flux), then the OCIRepository. Deletion does
//! not need the version to be offered any more, nor a ProviderConfig.

use service_provider_sdk::contract::{Blocked, CleanupPlan, Cluster, Input, ObjectRef, Teardown};

use crate::describe::BLOCKERS;
use crate::desired::{HELM_API_VERSION, NAME, SOURCE_API_VERSION};
use crate::status;

/// How long to wait before checking blockers again.
pub const BLOCKED_REQUEUE_SECONDS: u32 = 10;

pub fn cleanup(input: &Input) -> CleanupPlan {
    let tenant = input.context.tenant_namespace.as_str();
    let blocking: Vec<String> = BLOCKERS
        .iter()
        .filter_map(|(id, kind, _, _)| {
            let count = input.observed(id).map_or(0, <[String]>::len);
            (count > 0).then(|| format!("{count} {kind}"))
        })
        .collect();
    if !blocking.is_empty() {
        return CleanupPlan::Blocked(Blocked {
            message: format!(
                "deletion blocked: waiting for the Flux objects on the control plane to be removed ({})",
                blocking.join(", ")
            ),
            requeue_after_seconds: BLOCKED_REQUEUE_SECONDS,
            resources: Some(status::terminating_resources(tenant)),
        });
    }
    let object = |api_version: &str, kind: &str, plural: &str| ObjectRef {
        cluster: Cluster::Platform,
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespace: Some(tenant.to_string()),
        name: NAME.into(),
    };
    CleanupPlan::Teardown(Teardown {
        objects: vec![
            object(HELM_API_VERSION, "HelmRelease", "helmreleases"),
            object(SOURCE_API_VERSION, "OCIRepository", "ocirepositories"),
        ],
        // The host removes every copy it made for the instance.
        copies: Vec::new(),
        resources: Some(status::terminating_resources(tenant)),
    })
}
