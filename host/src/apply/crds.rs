//! CRDs a plugin brings for the tenant's clusters (ControlPlane or workload
//! cluster): there is one such cluster per instance, so `init` cannot install
//! them; the reconcile applies them to the instance's cluster before its
//! plan's objects. Only CRDs of the plugin's own groups are ever installed,
//! like those `init` installs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use service_provider_sdk::contract::{Cluster, Descriptor};

use super::{Change, contains};
use crate::Error;
use crate::adopt::Adoption;
use crate::grant::hard::Own;
use crate::init::{check_crd, existing, install, parse_crd};

/// Applies the plugin's CRDs for `cluster` (unless they already are as
/// declared) and waits until each is established.
pub async fn ensure(
    client: &Client,
    cluster: Cluster,
    descriptor: &Descriptor,
    own: &Own,
    field_manager: &str,
    adoption: &Adoption,
) -> Result<Change, Error> {
    let mut change = Change::Unchanged;
    for declared in descriptor.crds.iter().filter(|c| c.cluster == cluster) {
        let crd = parse_crd(&declared.manifest, cluster)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        check_crd(&crd, own)?;
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let place = format!("CRD {name} on the {cluster} cluster");
        let live = existing(&api, &name, &place, adoption).await?;
        let desired = serde_json::to_value(&crd).map_err(|e| Error::json(format!("encoding {place}"), e))?;
        let current =
            live.map(serde_json::to_value).transpose().map_err(|e| Error::json(format!("reading {place}"), e))?;
        if current.is_some_and(|live| contains(&live, &desired)) {
            continue;
        }
        install(&api, &crd, field_manager, &place).await?;
        change = Change::Written;
    }
    Ok(change)
}
