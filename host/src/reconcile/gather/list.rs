//! Reading an observation that lists objects: a page at a time, each
//! object trimmed while it is parsed ([`Keep`]: what the plugin does not
//! see is skipped, not built) and serialised as the pages come, within two
//! kinds of bounds: what the host reads ([`Bounds`]: the raw bytes of one
//! page, and of all of them) and what the plugin gets ([`Budget`]: its
//! input limit).
//!
//! The LIST is the request `Api::list_metadata` (or `Api::list`) makes,
//! built with kube's [`Request`] and sent on the same client, so that the
//! body is read within [`Bounds::page_bytes`] and parsed by [`Keep`]
//! instead of into `PartialObjectMeta` or `DynamicObject`. A page larger
//! than its bound is asked for again with as many objects as the part of it
//! that was read held whole (at most half as many), so that objects a
//! tenant made large cost more requests, not more memory; when not even one
//! fits, the observation fails and says so.

use std::cell::Cell;

use bytes::BytesMut;
use http_body_util::{BodyExt, LengthLimitError};
use hyper::body::Body as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::Client;
use kube::api::ListParams;
use kube::client::Body;
use kube::core::{Request, Status};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use service_provider_sdk::contract::{Detail, Observation};
use tracing::debug;

use crate::Error;
use crate::resource::{LIST_PAGE, kind_absent};
use crate::stores::trimmed::{Keep, Kept, KeyIf};

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

/// What one observation's LIST may read from its API server, counted in
/// response bytes before anything is trimmed, whatever the plugin then
/// gets: what it costs the host's memory is one page's bytes and what the
/// plugin sees, and its requests end within `total_bytes` (plus a page's
/// bytes for each page that was too large, one each time the objects grow).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    /// One response (a page): a page of 250 objects with a few KiB of
    /// metadata each is a MiB or two.
    pub(super) page_bytes: usize,
    /// All pages together.
    pub(super) total_bytes: usize,
}

impl Bounds {
    /// A quarter of what a tenant's cluster may answer at all
    /// ([`crate::clusters::MAX_TENANT_RESPONSE_BYTES`]) per page; sixteen
    /// pages in all.
    pub(super) const OBSERVATION: Bounds = Bounds { page_bytes: 8 << 20, total_bytes: 128 << 20 };
}

/// Which bound the error names (completes "the host reads …").
const PER_RESPONSE: &str = "in one response, even one object at a time";
const PER_OBSERVATION: &str = "for one observation";

/// Lists an observation a page at a time, each object trimmed while it is
/// parsed and serialised once, within `bounds` and the budget; an unserved
/// kind lists nothing.
#[tracing::instrument(level = "debug", name = "list", skip_all, fields(observation = %o.id))]
pub(super) async fn list(
    client: &Client,
    url: &str,
    o: &Observation,
    keep: Keep<'_>,
    bounds: Bounds,
    budget: &mut Budget,
    what: &impl Fn() -> String,
) -> Result<Vec<String>, Error> {
    let too_large = |max, per| Error::ObservationTooLarge { what: what(), max, per };
    let (api_version, kind) = (o.api.api_version(), &o.api.kind);
    let mut objects = Vec::new();
    let (mut limit, mut read, mut token) = (LIST_PAGE, 0usize, None::<String>);
    loop {
        let mut params = ListParams::default().limit(limit);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let (page, bytes) = match page(client, url, &params, keep, bounds.page_bytes).await {
            Ok(read) => read,
            Err(Failed::TooLarge { fitting }) if fitting > 0 && limit > 1 => {
                limit = u32::try_from(fitting).unwrap_or(u32::MAX).min(limit / 2);
                debug!(limit, max_bytes = bounds.page_bytes, "a page was too large: asking for fewer objects");
                continue;
            }
            Err(Failed::TooLarge { .. }) => return Err(too_large(bounds.page_bytes, PER_RESPONSE)),
            Err(Failed::Kube(e)) if kind_absent(&e) => return Ok(Vec::new()),
            Err(Failed::Kube(e)) => return Err(Error::kube(what(), e)),
            Err(Failed::Json(e)) => return Err(Error::json(what(), e)),
        };
        read += bytes;
        if read > bounds.total_bytes {
            return Err(too_large(bounds.total_bytes, PER_OBSERVATION));
        }
        for kept in page.items {
            let object = kept.typed(&api_version, kind).to_string();
            budget.spend(&what(), object.len())?;
            objects.push(object);
        }
        match page.next.filter(|n| !n.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok(objects),
        }
    }
}

/// Why a page was not read.
enum Failed {
    /// Its response is larger than the page's bound; the part within it
    /// held `fitting` of its objects whole.
    TooLarge {
        fitting: usize,
    },
    Kube(kube::Error),
    Json(serde_json::Error),
}

/// Reads one page of at most `max_bytes` of response; returns it and its
/// size.
#[tracing::instrument(level = "debug", name = "page", skip_all, fields(limit = ?params.limit))]
async fn page(
    client: &Client,
    url: &str,
    params: &ListParams,
    keep: Keep<'_>,
    max_bytes: usize,
) -> Result<(Page, usize), Failed> {
    let request = match keep.detail {
        // What `Api::list_metadata` asks for: the API server sends
        // `PartialObjectMetadata`, no spec or status.
        Detail::Metadata => Request::new(url).list_metadata(params),
        Detail::Full => Request::new(url).list(params),
    };
    let request = request.map_err(|e| Failed::Kube(kube::Error::BuildRequest(e)))?;
    let response = client.send(request.map(Body::from)).await.map_err(Failed::Kube)?;
    let status = response.status();
    let body = match within(response.into_body(), max_bytes).await {
        Err(Cut::Failed(e)) => return Err(Failed::Kube(e)),
        Ok(body) | Err(Cut::TooLarge(body)) if !status.is_success() => {
            return Err(Failed::Kube(api_error(status, &body)));
        }
        Err(Cut::TooLarge(part)) => return Err(Failed::TooLarge { fitting: items_in(&part) }),
        Ok(body) => body,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(&body);
    let page = PageSeed(keep).deserialize(&mut deserializer).and_then(|page| deserializer.end().map(|()| page));
    Ok((page.map_err(Failed::Json)?, body.len()))
}

/// Why a body was not read whole.
enum Cut {
    /// It is larger than the bound: its first bytes, up to the bound.
    TooLarge(BytesMut),
    Failed(kube::Error),
}

/// A response body, if it is at most `max_bytes` (`Limited` would tell the
/// same, but drop what it read: the part that was read tells how many
/// objects fit).
async fn within(mut body: Body, max_bytes: usize) -> Result<BytesMut, Cut> {
    let expected = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    let mut read = BytesMut::with_capacity(expected.min(max_bytes));
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            // The bound every response from a tenant's cluster is read within.
            Err(e) if limit_exceeded(&e) => return Err(Cut::TooLarge(read)),
            Err(e) => return Err(Cut::Failed(e)),
        };
        let Ok(data) = frame.into_data() else { continue };
        if read.len() + data.len() > max_bytes {
            read.extend_from_slice(&data[..max_bytes - read.len()]);
            return Err(Cut::TooLarge(read));
        }
        read.extend_from_slice(&data);
    }
    Ok(read)
}

/// Whether a body ended at a length limit.
fn limit_exceeded(error: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(error), |e| e.source()).any(|e| e.is::<LengthLimitError>())
}

/// How many items the first bytes of a page hold whole.
fn items_in(part: &[u8]) -> usize {
    let whole = Cell::new(0);
    // Ends with an error where the bytes end.
    let _ = Counted(&whole).deserialize(&mut serde_json::Deserializer::from_slice(part));
    whole.get()
}

/// Counts a page's items, skipping them.
struct Counted<'a>(&'a Cell<usize>);

impl<'de> DeserializeSeed<'de> for Counted<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counted<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes list")
    }

    /// The page: only its `items` count.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key_seed(KeyIf(|key: &str| key == "items"))? {
            match key {
                Some(_) => map.next_value_seed(Counted(self.0))?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    /// Its items.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {
            self.0.set(self.0.get() + 1);
        }
        Ok(())
    }
}

/// An API server's refusal as kube reports it: its `Status`, or, for a
/// body that is none (the plain-text 404 of a kind that is not served), a
/// `Status` with the response's code, so that [`kind_absent`] reads it.
fn api_error(code: http::StatusCode, body: &[u8]) -> kube::Error {
    let status = serde_json::from_slice::<Status>(body).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(body);
        Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
    });
    kube::Error::Api(status.boxed())
}

/// One page of a LIST: its items as [`Keep`] keeps them, and the token of
/// the next page.
struct Page {
    items: Vec<Kept>,
    next: Option<String>,
}

/// Parses a page (an `…List`): `items` and `metadata.continue`, nothing
/// else.
struct PageSeed<'a>(Keep<'a>);

impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
    type Value = Page;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Page, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Page;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page, A::Error> {
        let mut page = Page { items: Vec::new(), next: None };
        while let Some(key) = map.next_key_seed(KeyIf(|key: &str| matches!(key, "items" | "metadata")))? {
            match key.as_deref() {
                Some("items") => page.items = map.next_value_seed(Items(self.0))?,
                Some(_) => page.next = map.next_value::<Option<ListMeta>>()?.and_then(|m| m.continue_),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(page)
    }
}

/// A list's `items`, each kept as the [`Keep`] says.
struct Items<'a>(Keep<'a>);

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = Vec<Kept>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<Kept>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = Vec<Kept>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list's items")
    }

    /// `"items": null`, as for an empty list.
    fn visit_unit<E: de::Error>(self) -> Result<Vec<Kept>, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Kept>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(LIST_PAGE as usize));
        while let Some(item) = seq.next_element_seed(self.0)? {
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use service_provider_sdk::contract::{ApiKind, Cluster, NamespaceScope, Stage};

    use super::*;

    fn rgds() -> Observation {
        Observation {
            id: "rgds".into(),
            cluster: Cluster::ControlPlane,
            api: ApiKind::new("kro.run", "v1alpha1", "ResourceGraphDefinition", "resourcegraphdefinitions", false),
            scope: NamespaceScope::ClusterScoped,
            name: None,
            stage: Stage::Cleanup,
            detail: Detail::Metadata,
        }
    }

    /// A metadata-only item as the API server sends it, with `filler`
    /// annotations of a few bytes each (and their managedFields).
    fn item(i: usize, filler: usize) -> Value {
        let annotations: serde_json::Map<String, Value> =
            (0..filler).map(|a| (format!("a{a:05}"), json!(""))).collect();
        let fields: serde_json::Map<String, Value> = (0..filler).map(|a| (format!("f:a{a:05}"), json!({}))).collect();
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {
            "name": format!("rgd-{i}"), "resourceVersion": "9", "labels": {"n": i.to_string()},
            "annotations": annotations,
            "managedFields": [{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": fields}}]}})
    }

    /// An API server with `objects`, serving pages as `limit` and
    /// `continue` ask; records the `limit` of every request.
    fn server(objects: Vec<Value>) -> (Client, Arc<Mutex<Vec<usize>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let query = request.uri().query().unwrap_or_default().to_string();
            let param = |name: &str| {
                let pairs = query.split('&').filter_map(|p| p.split_once('='));
                pairs.filter(|(k, _)| *k == name).find_map(|(_, v)| v.parse::<usize>().ok())
            };
            let (limit, start) = (param("limit").unwrap_or(usize::MAX), param("continue").unwrap_or(0));
            seen.lock().unwrap().push(limit);
            let end = objects.len().min(start.saturating_add(limit));
            let next = (end < objects.len()).then(|| end.to_string());
            let page = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "9", "continue": next}, "items": objects[start..end]});
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(page.to_string().into_bytes()))) }
        });
        (Client::new(service, "default"), asked)
    }

    async fn read(client: &Client, bounds: Bounds, budget: usize) -> Result<Vec<Value>, Error> {
        let o = rgds();
        let keep = Keep { detail: o.detail, annotations: &[] };
        let what = || "observing ResourceGraphDefinition (rgds) on the control-plane cluster".to_string();
        let url = "/apis/kro.run/v1alpha1/resourcegraphdefinitions";
        let objects = list(client, url, &o, keep, bounds, &mut Budget::new(budget), &what).await?;
        Ok(objects.iter().map(|o| serde_json::from_str(o).unwrap()).collect())
    }

    #[tokio::test]
    async fn a_page_too_large_is_asked_for_again_with_as_many_objects_as_fit() {
        let objects: Vec<Value> = (0..5).map(|i| item(i, 200)).collect();
        let one = objects[0].to_string().len();
        let (client, asked) = server(objects);
        // Room for two objects a page, not for three.
        let bounds = Bounds { page_bytes: one * 5 / 2, total_bytes: 1 << 20 };
        let listed = read(&client, bounds, 1 << 20).await.expect("listed");
        assert_eq!(listed.len(), 5);
        assert_eq!(
            listed[4],
            json!({"apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition",
                "metadata": {"name": "rgd-4", "labels": {"n": "4"}}}),
            "the observation's kind, and only the metadata a plugin sees"
        );
        assert_eq!(*asked.lock().unwrap(), [250, 2, 2, 2], "as many as the part read held, then kept");

        // Objects that grow as the list goes on: fewer again, at most half.
        let growing: Vec<Value> = [1, 1, 1, 1, 1, 1, 1, 4].iter().enumerate().map(|(i, n)| item(i, 200 * n)).collect();
        let (client, asked) = server(growing);
        let bounds = Bounds { page_bytes: one * 9 / 2, total_bytes: 1 << 20 };
        assert_eq!(read(&client, bounds, 1 << 20).await.expect("listed").len(), 8);
        assert_eq!(*asked.lock().unwrap(), [250, 4, 4, 2, 2, 1, 1]);
    }

    #[test]
    fn the_part_read_of_a_page_counts_its_whole_items() {
        let page =
            json!({"kind": "List", "metadata": {"continue": "x"}, "items": [item(0, 3), item(1, 3), item(2, 3)]});
        let text = page.to_string();
        let second_ends = text.find("rgd-2").expect("the third item");
        assert_eq!(items_in(&text.as_bytes()[..second_ends]), 2);
        assert_eq!(items_in(&text.as_bytes()[..20]), 0);
        assert_eq!(items_in(text.as_bytes()), 3);
    }

    #[tokio::test]
    async fn what_is_too_large_is_named_with_its_bound() {
        let (client, asked) = server((0..3).map(|i| item(i, 200)).collect());
        let one = Bounds { page_bytes: 1000, total_bytes: 1 << 20 };
        let e = read(&client, one, 1 << 20).await.expect_err("one object is more than a page");
        assert_eq!(*asked.lock().unwrap(), [250], "not even one fits: no more requests");
        assert_eq!(e.category(), crate::error::Category::UserInput, "the tenant must act");
        assert_eq!(
            e.to_string(),
            "observing ResourceGraphDefinition (rgds) on the control-plane cluster: its objects are more than the \
             limit of 1000 bytes the host reads in one response, even one object at a time (what the plugin does \
             not see counts too, such as annotations and managedFields): remove or shrink them"
        );
        let all = Bounds { page_bytes: 1 << 20, total_bytes: 10_000 };
        let e = read(&client, all, 1 << 20).await.expect_err("more than all pages may be");
        assert!(e.to_string().contains("more than the limit of 10000 bytes the host reads for one observation"), "{e}");
        // What the plugin gets has its own bound, as before.
        let e = read(&client, Bounds::OBSERVATION, 100).await.expect_err("more than the plugin's input");
        assert!(matches!(e, Error::InputTooLarge { max: 100, .. }), "{e}");
    }

    #[tokio::test]
    async fn an_unserved_kind_lists_nothing_and_other_refusals_are_errors() {
        let respond = |code: u16, body: &'static str| {
            let service = tower::service_fn(move |_: http::Request<Body>| async move {
                let response = http::Response::builder().status(code).body(Body::from(body.as_bytes().to_vec()));
                Ok::<_, std::convert::Infallible>(response.unwrap())
            });
            Client::new(service, "default")
        };
        let absent = respond(404, "404 page not found");
        assert_eq!(read(&absent, Bounds::OBSERVATION, 1 << 20).await.expect("nothing"), Vec::<Value>::new());
        let forbidden = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"rgds is forbidden","reason":"Forbidden","code":403}"#;
        let e = read(&respond(403, forbidden), Bounds::OBSERVATION, 1 << 20).await.expect_err("refused");
        assert!(crate::error::report(&e).ends_with("rgds is forbidden: Forbidden"), "{}", crate::error::report(&e));
    }
}
