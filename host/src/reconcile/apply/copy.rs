//! Copies of Secrets and ConfigMaps from the provider's pod namespace to
//! where a plan wants them. The data never leaves the host: the plugin only
//! names the source, the target and (for a Secret) the type the source must
//! have, and only sources the operator allowed are copied
//! ([`crate::plugin::grant`]): never the host's own credentials, nor any other
//! cluster credential. A copy is written only where nothing else is, or over
//! this instance's own earlier copy. Two instances that need the very same
//! copy in one place (possible only when tenants share a cluster) share it:
//! the second finds it identical and writes nothing, instead of the two
//! overwriting each other's owner labels on every poll.
//!
//! Switching from a Go provider (`--adopt-from`): its copy at the target
//! place is taken over; and its copy under the *source's* name where the
//! plan names the copy otherwise (the Go providers copy a Secret under its
//! own name, this host under a prefixed one) is retired: deleted once the
//! plan's objects are applied, if only that field manager wrote it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use service_provider_sdk::contract::{Cluster, CopyKind, ObjectCopy};
use service_provider_sdk::names;

use super::{Change, Existing};
use crate::adopt::Adoption;
use crate::error::{Conflicting, Error, UserInput};
use crate::owner::{ANNOTATION_COPY_OF, ANNOTATION_INSTANCE, LABEL_COPY_OF, Owner};
use crate::plugin::grant::Effective;
use crate::plugin::grant::hard::Source;
use crate::stores::{Lookup, Stores};

/// What decides whether a source may be copied.
pub struct Sources<'a> {
    pub granted: &'a Effective,
    pub provider_config: Option<&'a serde_json::Value>,
    /// The host's own credentials in the pod namespace.
    pub reserved: &'a [String],
}

/// Where a copy comes from and goes, and who makes it.
pub struct CopyJob<'a> {
    pub platform: &'a Client,
    pub pod_namespace: &'a str,
    pub target: &'a Client,
    pub sources: &'a Sources<'a>,
    /// Where the source, and a copy on the platform cluster, are read from
    /// first.
    pub stores: &'a Stores,
    pub owner: &'a Owner,
    pub field_manager: &'a str,
    /// What may be taken over (`--adopt-from`).
    pub adoption: &'a Adoption,
}

impl CopyJob<'_> {
    /// Performs one copy, unless the target already equals the source.
    #[tracing::instrument(level = "debug", name = "copy", skip_all, fields(cluster = %copy.target_cluster, kind = copy.kind(), name = %copy.target_name))]
    pub async fn copy(&self, copy: &ObjectCopy) -> Result<Change, Error> {
        match &copy.kind {
            CopyKind::Secret(required) => self.secret(copy, required).await,
            CopyKind::ConfigMap => self.config_map(copy).await,
        }
    }

    /// The source in the pod namespace: from its store, else the API.
    async fn source<K>(&self, copy: &ObjectCopy) -> Result<K, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let what = || format!("reading {} {}/{}", copy.kind(), self.pod_namespace, copy.source_name);
        let found = match self.stores.source(copy.kind(), self.pod_namespace, &copy.source_name) {
            Lookup::Found(object) => Some(typed(&object).map_err(|e| Error::json(what(), e))?),
            Lookup::Absent => None,
            Lookup::Unknown => Api::<K>::namespaced(self.platform.clone(), self.pod_namespace)
                .get_opt(&copy.source_name)
                .await
                .map_err(|e| Error::kube(what(), e))?,
        };
        found.ok_or_else(|| self.missing(copy))
    }

    /// The target as it is: a copy on the platform cluster from its store,
    /// else from the API (which also finds what is not ours); created at
    /// once where nothing is there ([`super::existing`]).
    async fn existing<K>(&self, api: &Api<K>, copy: &ObjectCopy, desired: &K) -> Result<Existing<K>, Error>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    {
        let place = Self::place(copy);
        let cached = match copy.target_cluster {
            Cluster::Platform => self.stores.our_copy(copy.kind(), &copy.target_namespace, &copy.target_name),
            _ => Lookup::Unknown,
        };
        let stored = |o: &DynamicObject| typed(o).map_err(|e| Error::json(format!("reading {place}"), e));
        super::existing(api, &copy.target_name, cached, stored, desired, self.field_manager, &place).await
    }

    fn missing(&self, copy: &ObjectCopy) -> Error {
        let (kind, namespace, name) =
            (copy.kind().to_string(), self.pod_namespace.to_string(), copy.source_name.clone());
        UserInput::NoSource { kind, namespace, name }.into()
    }

    pub(super) fn place(copy: &ObjectCopy) -> String {
        format!("{} {}/{} on the {} cluster", copy.kind(), copy.target_namespace, copy.target_name, copy.target_cluster)
    }

    /// The copy's metadata: owner labels plus the source it copies.
    fn metadata(&self, copy: &ObjectCopy) -> ObjectMeta {
        let mut labels = self.owner.labels();
        labels.insert(LABEL_COPY_OF.to_string(), names::label_value(&copy.source_name));
        ObjectMeta {
            name: Some(copy.target_name.clone()),
            namespace: Some(copy.target_namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_INSTANCE.to_string(), self.owner.annotation()),
                (ANNOTATION_COPY_OF.to_string(), format!("{}/{}", self.pod_namespace, copy.source_name)),
            ])),
            ..Default::default()
        }
    }

    /// Who holds an existing target: this instance, another instance of
    /// this provider that copied the same source there, or a predecessor
    /// the operator said to take over from. Anything else is a conflict.
    fn holder(&self, copy: &ObjectCopy, live: &ObjectMeta) -> Result<Holder, Error> {
        let is_copy = live.labels.as_ref().is_some_and(|l| l.contains_key(LABEL_COPY_OF));
        let source = format!("{}/{}", self.pod_namespace, copy.source_name);
        let same_source = live.annotations.as_ref().and_then(|a| a.get(ANNOTATION_COPY_OF)) == Some(&source);
        if is_copy && self.owner.owns(live) {
            return Ok(Holder::Ours);
        }
        if is_copy && same_source && Owner::of(live, &self.owner.provider).is_some() {
            return Ok(Holder::Shared);
        }
        match self.adoption.take_over(live, self.owner) {
            Ok(by) => Ok(Holder::Adopted(by)),
            Err(why) => Err(Error::conflict(Self::place(copy), why)),
        }
    }

    /// Whether to write: not when an equal copy is there; a shared copy
    /// that differs is a conflict (two instances would fight over it).
    fn decide(&self, copy: &ObjectCopy, holder: &Holder, equal: bool) -> Result<bool, Error> {
        match (holder, equal) {
            (Holder::Adopted(_), _) => Ok(true),
            (_, true) => Ok(false),
            (Holder::Ours, false) => Ok(true),
            (Holder::Shared, false) => Err(Error::conflict(Self::place(copy), Conflicting::SharedCopy)),
        }
    }

    /// Checks the source against the grant and the credential rules.
    fn check_source(
        &self,
        copy: &ObjectCopy,
        meta: &ObjectMeta,
        type_: Option<&str>,
        keys: &[&str],
    ) -> Result<(), Error> {
        let owner_kinds: Vec<&str> = meta.owner_references.iter().flatten().map(|r| r.kind.as_str()).collect();
        let facts =
            Source { kind: copy.kind(), name: &copy.source_name, type_, owner_kinds: &owner_kinds, data_keys: keys };
        let labels = meta.labels.clone().unwrap_or_default();
        let sources = self.sources;
        sources.granted.check_copy_source(
            &self.owner.provider,
            sources.provider_config,
            &facts,
            &labels,
            sources.reserved,
        )?;
        let annotations = meta.annotations.clone().unwrap_or_default();
        crate::plugin::grant::check::copy_to(copy.kind(), &copy.source_name, &annotations, copy.target_cluster)?;
        Ok(())
    }

    async fn secret(&self, copy: &ObjectCopy, required: &str) -> Result<Change, Error> {
        let source: Secret = self.source(copy).await?;
        let keys: Vec<&str> = source.data.iter().flatten().map(|(k, _)| k.as_str()).collect();
        self.check_source(copy, &source.metadata, source.type_.as_deref(), &keys)?;
        let source_type = source.type_.clone().unwrap_or_else(|| "Opaque".to_string());
        if source_type != required {
            let (namespace, name) = (self.pod_namespace.to_string(), copy.source_name.clone());
            return Err(
                UserInput::SecretType { namespace, name, found: source_type, required: required.to_string() }.into()
            );
        }

        let api = Api::<Secret>::namespaced(self.target.clone(), &copy.target_namespace);
        let place = Self::place(copy);
        let desired = Secret {
            metadata: self.metadata(copy),
            type_: Some(source_type.clone()),
            data: Some(source.data.clone().unwrap_or_default()),
            ..Default::default()
        };
        let live = match self.existing(&api, copy, &desired).await? {
            Existing::Created { bytes } => return Ok(Change::Written { bytes }),
            Existing::Live(live) => live,
        };
        let holder = self.holder(copy, &live.metadata)?;
        let same_type = live.type_.as_deref().unwrap_or("Opaque") == source_type;
        let same_content = same_type && live.data == desired.data;
        let equal = same_content && (holder == Holder::Shared || labels_kept(&live.metadata, &desired.metadata));
        if !self.decide(copy, &holder, equal)? {
            return Ok(Change::Unchanged);
        }
        if !same_type && !matches!(holder, Holder::Ours) {
            return Err(Error::conflict(place, Conflicting::OtherType));
        }
        if !same_type {
            // The type of a Secret is immutable: delete ours (exactly the
            // one looked at), then create anew (never over what may have
            // taken its place meanwhile).
            api.delete(&copy.target_name, &super::exactly(&live.metadata))
                .await
                .map_err(|e| Error::kube(format!("replacing {place}"), e))?;
            return match super::create_or_read(&api, &copy.target_name, &desired, self.field_manager, &place).await? {
                Existing::Created { bytes } => Ok(Change::Written { bytes }),
                Existing::Live(_) => Err(Error::NotYet {
                    reason: format!("{place} is being replaced"),
                    retry_after: Duration::from_secs(1),
                }),
            };
        }
        self.write(&api, copy, &desired, &live.metadata, holder).await
    }

    async fn config_map(&self, copy: &ObjectCopy) -> Result<Change, Error> {
        let source: ConfigMap = self.source(copy).await?;
        let keys: Vec<&str> = source
            .data
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .chain(source.binary_data.iter().flatten().map(|(k, _)| k.as_str()))
            .collect();
        self.check_source(copy, &source.metadata, None, &keys)?;

        let api = Api::<ConfigMap>::namespaced(self.target.clone(), &copy.target_namespace);
        let desired = ConfigMap {
            metadata: self.metadata(copy),
            data: source.data.clone(),
            binary_data: source.binary_data.clone(),
            ..Default::default()
        };
        let live = match self.existing(&api, copy, &desired).await? {
            Existing::Created { bytes } => return Ok(Change::Written { bytes }),
            Existing::Live(live) => live,
        };
        let holder = self.holder(copy, &live.metadata)?;
        let same_content = live.data == desired.data && live.binary_data == desired.binary_data;
        let equal = same_content && (holder == Holder::Shared || labels_kept(&live.metadata, &desired.metadata));
        if !self.decide(copy, &holder, equal)? {
            return Ok(Change::Unchanged);
        }
        self.write(&api, copy, &desired, &live.metadata, holder).await
    }

    /// Writes the copy over what is there (ours, or taken over): over the
    /// very object looked at (`seen`'s uid as a precondition).
    async fn write<K>(
        &self,
        api: &Api<K>,
        copy: &ObjectCopy,
        desired: &K,
        seen: &ObjectMeta,
        holder: Holder,
    ) -> Result<Change, Error>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    {
        let place = Self::place(copy);
        let body = serde_json::to_value(desired).map_err(|e| Error::json(format!("building {place}"), e))?;
        let body = super::on_the_one_seen(body, seen);
        let written = api
            .patch(&copy.target_name, &PatchParams::apply(self.field_manager).force(), &Patch::Apply(&body))
            .await
            .map_err(|e| Error::kube(format!("writing {place}"), e))?;
        let bytes = super::stored_size(&written);
        Ok(match holder {
            Holder::Adopted(by) => Change::Adopted { place, by, bytes },
            _ => Change::Written { bytes },
        })
    }
}

/// A stored object as its typed kind.
fn typed<K: DeserializeOwned>(object: &DynamicObject) -> Result<K, serde_json::Error> {
    serde_json::to_value(object).and_then(serde_json::from_value)
}

/// Who holds an existing copy target.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Ours,
    /// Another instance of this provider, copying the same source.
    Shared,
    /// A predecessor's, taken over from this field manager.
    Adopted(String),
}

/// Whether the live copy still carries every label the host gives it.
fn labels_kept(live: &ObjectMeta, desired: &ObjectMeta) -> bool {
    let live = live.labels.clone().unwrap_or_default();
    desired.labels.iter().flatten().all(|(k, v)| live.get(k) == Some(v))
}
