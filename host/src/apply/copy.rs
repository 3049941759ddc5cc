//! Copies of Secrets from the provider's pod namespace to where a plan wants
//! them. The data never leaves the host: the plugin only names the source,
//! the target and the type the source must have, and only sources the
//! operator allowed are copied ([`crate::grant`]): never the host's own
//! credentials, nor any other cluster credential.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use service_provider_sdk::contract::SecretCopy;
use service_provider_sdk::names;

use super::Change;
use crate::Error;
use crate::grant::Effective;
use crate::grant::hard::Source;
use crate::owner::{ANNOTATION_COPY_OF, ANNOTATION_INSTANCE, LABEL_COPY_OF, Owner};

/// What decides whether a source may be copied.
pub struct Sources<'a> {
    pub granted: &'a Effective,
    pub provider_config: Option<&'a serde_json::Value>,
    /// The host's own credentials in the pod namespace.
    pub reserved: &'a [String],
}

/// Copies a Secret from the pod namespace on the platform cluster to the
/// target. The data never leaves the host.
pub async fn copy_secret(
    platform: &Client,
    pod_namespace: &str,
    target: &Client,
    copy: &SecretCopy,
    sources: &Sources<'_>,
    owner: &Owner,
    field_manager: &str,
) -> Result<Change, Error> {
    let source = Api::<Secret>::namespaced(platform.clone(), pod_namespace)
        .get_opt(&copy.source_name)
        .await
        .map_err(|e| Error::kube(format!("reading Secret {pod_namespace}/{}", copy.source_name), e))?
        .ok_or_else(|| {
            Error::UserInput(format!(
                "Secret {pod_namespace}/{} does not exist on the platform cluster",
                copy.source_name
            ))
        })?;
    let owner_kinds: Vec<&str> = source.metadata.owner_references.iter().flatten().map(|r| r.kind.as_str()).collect();
    let data_keys: Vec<&str> = source.data.iter().flatten().map(|(k, _)| k.as_str()).collect();
    let facts = Source {
        kind: "Secret",
        name: &copy.source_name,
        type_: source.type_.as_deref(),
        owner_kinds: &owner_kinds,
        data_keys: &data_keys,
    };
    let labels = source.metadata.labels.clone().unwrap_or_default();
    sources.granted.check_copy_source(&owner.provider, sources.provider_config, &facts, &labels, sources.reserved)?;
    let source_type = source.type_.clone().unwrap_or_else(|| "Opaque".to_string());
    if let Some(required) = &copy.required_type
        && &source_type != required
    {
        return Err(Error::UserInput(format!(
            "Secret {pod_namespace}/{} has type {source_type}, but {required} is required",
            copy.source_name
        )));
    }

    let api = Api::<Secret>::namespaced(target.clone(), &copy.target_namespace);
    let place = format!("{}/{} on the {} cluster", copy.target_namespace, copy.target_name, copy.target_cluster);
    let mut labels = owner.labels();
    labels.insert(LABEL_COPY_OF.to_string(), names::label_value(&copy.source_name));
    let data = source.data.clone().unwrap_or_default();
    if let Some(live) =
        api.get_opt(&copy.target_name).await.map_err(|e| Error::kube(format!("reading Secret {place}"), e))?
    {
        let live_labels = live.metadata.labels.clone().unwrap_or_default();
        if !live_labels.contains_key(LABEL_COPY_OF) || Owner::of(&live.metadata, &owner.provider).is_none() {
            return Err(Error::Conflict(format!(
                "Secret {place} already exists and is not a copy made by this provider; remove or rename it"
            )));
        }
        let same_type = live.type_.as_deref().unwrap_or("Opaque") == source_type;
        let same_labels = labels.iter().all(|(k, v)| live_labels.get(k) == Some(v));
        if same_type && same_labels && live.data.clone().unwrap_or_default() == data {
            return Ok(Change::Unchanged);
        }
        if !same_type {
            // The type of a Secret is immutable.
            api.delete(&copy.target_name, &DeleteParams::default())
                .await
                .map_err(|e| Error::kube(format!("replacing Secret {place}"), e))?;
        }
    }
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(copy.target_name.clone()),
            namespace: Some(copy.target_namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_INSTANCE.to_string(), owner.annotation()),
                (ANNOTATION_COPY_OF.to_string(), format!("{pod_namespace}/{}", copy.source_name)),
            ])),
            ..Default::default()
        },
        type_: Some(source_type),
        data: Some(data.into_iter().collect::<BTreeMap<String, ByteString>>()),
        ..Default::default()
    };
    api.patch(&copy.target_name, &PatchParams::apply(field_manager).force(), &Patch::Apply(&secret))
        .await
        .map_err(|e| Error::kube(format!("writing Secret {place}"), e))?;
    Ok(Change::Written)
}
