//! Namespaces an instance makes. The host never deletes a Namespace (it may
//! hold what others put there, which a token scoped to the plugin's kinds
//! cannot see), so it bounds how many it creates instead: an instance owns
//! at most [`NAMESPACES_PER_INSTANCE`] on each cluster. A plugin that names
//! new Namespaces every round is refused at the bound, with the ones it
//! holds named, instead of leaving Namespaces behind without end.

use kube::Api;
use kube::api::{DynamicObject, ListParams};

use crate::Error;
use crate::owner::Owner;
use crate::plugin::plan::Manifest;
use crate::plugin::plan::NAMESPACES_PER_INSTANCE;
use crate::resource::LIST_PAGE;
use crate::stores::Lookup;

/// What is at a planned Namespace's place, looked up for certain; where
/// nothing is, whether the instance may create one more: refused when it
/// owns [`NAMESPACES_PER_INSTANCE`] on the cluster already.
pub(super) async fn admit(
    api: &Api<DynamicObject>,
    cached: Lookup,
    manifest: &Manifest,
    owner: &Owner,
) -> Result<Lookup, Error> {
    let place = manifest.place();
    // `Absent` says only that none of ours is there.
    if let Lookup::Found(live) = cached {
        return Ok(Lookup::Found(live));
    }
    if let Some(live) = api.get_opt(&manifest.name).await.map_err(|e| Error::kube(format!("reading {place}"), e))? {
        return Ok(Lookup::Found(live.into()));
    }
    let owned = owned(api, owner, &place).await?;
    if owned.len() >= NAMESPACES_PER_INSTANCE {
        let reason = format!(
            "creating {place} would make the instance own more than the {NAMESPACES_PER_INSTANCE} Namespaces the \
             host creates per instance and cluster; it owns {}. The host never deletes a Namespace (it may hold \
             what others put there): delete those no longer needed",
            owned.join(", ")
        );
        return Err(Error::InvalidPlan { plugin: owner.provider.clone(), reason });
    }
    Ok(Lookup::Absent)
}

/// The names of the Namespaces `owner` owns on the cluster (not those being
/// deleted), at most one more than the bound: enough to refuse.
async fn owned(api: &Api<DynamicObject>, owner: &Owner, place: &str) -> Result<Vec<String>, Error> {
    let mut params = ListParams::default().labels(&owner.selector()).limit(LIST_PAGE);
    let mut names = Vec::new();
    loop {
        let list = api
            .list_metadata(&params)
            .await
            .map_err(|e| Error::kube(format!("listing the instance's Namespaces before creating {place}"), e))?;
        names.extend(
            list.items
                .into_iter()
                .filter(|o| o.metadata.deletion_timestamp.is_none() && owner.owns(&o.metadata))
                .filter_map(|o| o.metadata.name),
        );
        match list.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) if names.len() <= NAMESPACES_PER_INSTANCE => params = params.continue_token(&token),
            _ => break,
        }
    }
    names.sort();
    names.truncate(NAMESPACES_PER_INSTANCE + 1);
    Ok(names)
}
