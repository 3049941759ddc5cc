//! Reading an observation that lists objects: a page at a time, trimmed
//! and serialised as the pages come, and never past the plugin's input
//! limit ([`Budget`]).

use kube::api::{DynamicObject, ListParams};
use serde_json::json;
use service_provider_sdk::contract::{Detail, Observation};

use super::{to_json, trim};
use crate::Error;
use crate::resource::{LIST_PAGE, kind_absent};

/// What an observation may read in all: the plugin's input limit. A LIST
/// is read a page at a time and stops once its objects outgrow it, so a
/// tenant who fills a cluster costs the host one page, not the cluster.
pub(super) struct Budget {
    max_bytes: usize,
    used: usize,
}

impl Budget {
    pub(super) fn new(max_bytes: usize) -> Self {
        Budget { max_bytes, used: 0 }
    }

    pub(super) fn spend(&mut self, what: &str, bytes: usize) -> Result<(), Error> {
        self.used = self.used.saturating_add(bytes);
        match self.used > self.max_bytes {
            true => Err(Error::InputTooLarge { what: what.to_string(), max: self.max_bytes }),
            false => Ok(()),
        }
    }
}

/// Lists an observation a page at a time, each object trimmed and
/// serialised once as it comes, within the budget; an unserved kind lists
/// nothing.
pub(super) async fn list(
    api: &kube::Api<DynamicObject>,
    o: &Observation,
    detail: Detail,
    annotations: &[String],
    budget: &mut Budget,
    what: &impl Fn() -> String,
) -> Result<Vec<String>, Error> {
    let mut objects = Vec::new();
    let mut params = ListParams::default().limit(LIST_PAGE);
    loop {
        let (page, next) = match detail {
            Detail::Full => match api.list(&params).await {
                Ok(list) => {
                    let next = list.metadata.continue_.clone();
                    (list.items.into_iter().map(|f| to_json(f, what)).collect::<Result<Vec<_>, _>>()?, next)
                }
                Err(e) if kind_absent(&e) => return Ok(Vec::new()),
                Err(e) => return Err(Error::kube(what(), e)),
            },
            Detail::Metadata => match api.list_metadata(&params).await {
                Ok(list) => {
                    let next = list.metadata.continue_.clone();
                    let items = list.items.into_iter().map(|item| {
                        json!({"apiVersion": o.api.api_version(), "kind": o.api.kind, "metadata": item.metadata})
                    });
                    (items.collect(), next)
                }
                Err(e) if kind_absent(&e) => return Ok(Vec::new()),
                Err(e) => return Err(Error::kube(what(), e)),
            },
        };
        for object in page {
            let object = trim(object, detail, annotations).to_string();
            budget.spend(&what(), object.len())?;
            objects.push(object);
        }
        match next.filter(|n| !n.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(objects),
        }
    }
}
