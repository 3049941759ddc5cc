//! Retiring what a predecessor copied under the source's own name
//! (`--adopt-from`). The Go providers copy a Secret into the tenant
//! namespace under its own name; this host names its copy with a prefix,
//! so after a take-over the predecessor's copy is used by nothing. It is
//! deleted once the objects that referred to it are applied, and only when
//! the evidence says whose it is: no instance of this provider holds it,
//! an `--adopt-from` field manager wrote it and nobody else did (status and
//! finalizers aside), and a Secret has its source's type; and only as it
//! was when judged (its uid and resourceVersion as preconditions).

use kube::api::{ApiResource, GroupVersionKind};
use service_provider_sdk::contract::{CopyKind, ObjectCopy};

use super::CopyJob;
use crate::Error;
use crate::adopt::Predecessor;
use crate::resource::dynamic_api;

impl CopyJob<'_> {
    /// Deletes (by uid) the predecessor's copy of `copy`'s source in the
    /// target namespace, if there is one; returns where it was and whose
    /// it was. Nothing without `--adopt-from`, nor where the plan's copy
    /// has the source's name (that one is taken over instead).
    pub async fn retire_predecessor(&self, copy: &ObjectCopy) -> Result<Option<Predecessor>, Error> {
        if !self.adoption.is_enabled() || copy.target_name == copy.source_name {
            return Ok(None);
        }
        let predecessor = ObjectCopy { target_name: copy.source_name.clone(), ..copy.clone() };
        let place = Self::place(&predecessor);
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", copy.kind()));
        let api = dynamic_api(self.target, &resource, Some(&copy.target_namespace));
        let found = api.get_opt(&copy.source_name).await.map_err(|e| Error::kube(format!("reading {place}"), e))?;
        let Some(found) = found else { return Ok(None) };
        if let CopyKind::Secret(required) = &copy.kind
            && found.data.get("type").and_then(|t| t.as_str()).unwrap_or("Opaque") != required
        {
            return Ok(None);
        }
        let Ok(by) = self.adoption.take_over(&found.metadata, self.owner) else { return Ok(None) };
        // As it was judged: a write by anyone since (another provider
        // taking it over, say) makes the deletion fail.
        match api.delete(&copy.source_name, &super::unchanged(&found.metadata)).await {
            Ok(_) => Ok(Some(Predecessor { place, by })),
            // Gone, or replaced or changed meanwhile (the preconditions).
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(None),
            Err(e) => Err(Error::kube(format!("deleting {place}"), e)),
        }
    }
}
