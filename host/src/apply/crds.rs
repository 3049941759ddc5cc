//! CRDs a plugin brings for the tenant's clusters (ControlPlane or workload
//! cluster): there is one such cluster per instance, so `init` cannot install
//! them; the reconcile applies them to the instance's cluster before its
//! plan's objects. Only CRDs of the plugin's own groups are ever installed,
//! like those `init` installs.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use service_provider_sdk::contract::{Cluster, Descriptor};

use super::{Change, contains};
use crate::Error;
use crate::grant::hard::Own;
use crate::init::{check_crd, install, not_taken_over, parse_crd};

/// Applies the plugin's CRDs for `cluster` (unless they already are as
/// declared) and waits until each is established.
pub async fn ensure(
    client: &Client,
    cluster: Cluster,
    descriptor: &Descriptor,
    own: &Own,
    field_manager: &str,
) -> Result<Change, Error> {
    let mut change = Change::Unchanged;
    for declared in descriptor.crds.iter().filter(|c| c.cluster == cluster) {
        let crd = parse_crd(&declared.manifest, cluster)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        check_crd(&crd, own)?;
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let what = |verb: &str| format!("{verb} CRD {name} on the {cluster} cluster");
        let live = api.get_opt(&name).await.map_err(|e| Error::kube(what("reading"), e))?;
        if let Some(live) = &live {
            not_taken_over(live, &format!("CRD {name} on the {cluster} cluster"))?;
        }
        let desired = serde_json::to_value(&crd).map_err(|e| Error::json(what("encoding"), e))?;
        let current = live.map(serde_json::to_value).transpose().map_err(|e| Error::json(what("reading"), e))?;
        if current.is_some_and(|live| contains(&live, &desired)) {
            continue;
        }
        install(&api, &crd, field_manager, &format!("CRD {name} on the {cluster} cluster")).await?;
        tokio::time::timeout(Duration::from_secs(60), await_condition(api, &name, conditions::is_crd_established()))
            .await
            .map_err(|_| Error::Timeout(format!("CRD {name} was not established within 60s")))?
            .map_err(|e| Error::Timeout(format!("waiting for CRD {name}: {e}")))?;
        change = Change::Written;
    }
    Ok(change)
}
