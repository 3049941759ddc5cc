//! How a store keeps an object: as compact JSON text.
//!
//! A parsed `DynamicObject` is a tree of maps and strings, each its own
//! allocation: four to five times the size of its JSON. At 500 instances the
//! stores hold some 3,000 objects, and kept parsed they were the largest
//! part of the host's heap (`task bench-scale`, heap profile). Kept as text,
//! an object is parsed when a reconcile looks it up: a few microseconds,
//! for the handful of objects one reconcile reads.

use std::borrow::Cow;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher;
use serde::{Deserialize, Deserializer};

/// An object as a store keeps it: its name and namespace (what the store is
/// keyed on) and the whole object as JSON.
#[derive(Clone, Debug)]
pub struct Packed {
    metadata: ObjectMeta,
    json: Box<str>,
}

/// The largest service object a store keeps whole: a status (at most
/// 64 KiB, the host's own) and room for labels, annotations and a spec.
/// A tenant can make its object a megabyte of labels; hundreds of them
/// would otherwise be the host's heap.
pub const MAX_SEED_BYTES: usize = 128 << 10;
/// The annotation of a trimmed object as the store keeps it: how many
/// bytes of JSON the object was.
pub const OVERSIZED: &str = "service-provider.open-control-plane.io/oversized";
/// The largest `spec` or `status` a trimmed object keeps.
const MAX_SEED_PART_BYTES: usize = 32 << 10;

/// Only the metadata of a packed object (the rest is skipped, not built).
#[derive(Deserialize)]
struct Head {
    metadata: ObjectMeta,
}

impl Packed {
    /// Packs an object. Serialising a parsed object does not fail; if it
    /// ever did, the entry would hold no JSON and every lookup of it would
    /// read from the API server instead (see [`Self::unpack`]).
    pub fn pack(object: &DynamicObject) -> Self {
        let metadata = ObjectMeta {
            name: object.metadata.name.clone(),
            namespace: object.metadata.namespace.clone(),
            ..ObjectMeta::default()
        };
        let json = serde_json::to_string(object).unwrap_or_default().into_boxed_str();
        Packed { metadata, json }
    }

    /// Packs a service object, trimmed when it is larger than
    /// [`MAX_SEED_BYTES`]: then only what identifies it, its generation,
    /// deletion and finalizers, openmcp's operation, and its `spec` and
    /// `status` where each is small, are kept (no labels or other
    /// annotations; [`OVERSIZED`] says how large it was). A reconcile reports such an object as too
    /// large without asking the plugin; a deletion still cleans up.
    pub fn seed(object: &DynamicObject) -> Self {
        let packed = Packed::pack(object);
        if packed.json.len() <= MAX_SEED_BYTES {
            // The mark is the host's: a tenant's own is dropped.
            let marked = object.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(OVERSIZED));
            return match marked {
                true => {
                    let mut object = object.clone();
                    object.metadata.annotations.as_mut().map(|a| a.remove(OVERSIZED));
                    Packed::pack(&object)
                }
                false => packed,
            };
        }
        let small = |value: &serde_json::Value| serde_json::to_vec(value).is_ok_and(|b| b.len() <= MAX_SEED_PART_BYTES);
        let meta = &object.metadata;
        // Finalizers whole, whatever their size: the finalizer helper adds
        // and removes the host's by its place in the list.
        let trimmed = DynamicObject {
            types: object.types.clone(),
            metadata: ObjectMeta {
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                generation: meta.generation,
                resource_version: meta.resource_version.clone(),
                creation_timestamp: meta.creation_timestamp.clone(),
                deletion_timestamp: meta.deletion_timestamp.clone(),
                finalizers: meta.finalizers.clone(),
                annotations: Some(seed_annotations(meta, packed.json.len())),
                ..ObjectMeta::default()
            },
            data: match &object.data {
                serde_json::Value::Object(fields) => serde_json::Value::Object(
                    fields
                        .iter()
                        .filter(|(key, value)| matches!(key.as_str(), "spec" | "status") && small(value))
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect(),
                ),
                _ => serde_json::Value::Null,
            },
        };
        Packed::pack(&trimmed)
    }

    /// Packs an object already in JSON form (a blocker watch's, trimmed
    /// as it was read); its name and namespace are read from its metadata.
    pub fn pack_value(object: &serde_json::Value) -> Self {
        let field = |key: &str| object.get("metadata")?.get(key)?.as_str().map(str::to_string);
        let metadata = ObjectMeta { name: field("name"), namespace: field("namespace"), ..ObjectMeta::default() };
        Packed { metadata, json: object.to_string().into_boxed_str() }
    }

    /// The object, parsed again.
    pub fn unpack(&self) -> Result<DynamicObject, serde_json::Error> {
        serde_json::from_str(&self.json)
    }

    /// The object's whole metadata, without building the rest.
    pub fn full_metadata(&self) -> Result<ObjectMeta, serde_json::Error> {
        serde_json::from_str::<Head>(&self.json).map(|head| head.metadata)
    }

    /// `status.phase`, read without parsing the rest.
    pub fn phase(&self) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Object {
            status: Option<Status>,
        }
        #[derive(serde::Deserialize)]
        struct Status {
            phase: Option<String>,
        }
        serde_json::from_str::<Object>(&self.json).ok()?.status?.phase
    }

    /// The namespace, without parsing.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// The object as a JSON value (what a plugin's input is made of).
    pub fn value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.json)
    }

    /// The size of the packed object, in bytes of JSON.
    pub fn bytes(&self) -> usize {
        self.json.len()
    }
}

/// The annotations a trimmed object keeps: its size, and openmcp's
/// operation (`ignore`, `reconcile`) when it is one of those words.
fn seed_annotations(meta: &ObjectMeta, bytes: usize) -> std::collections::BTreeMap<String, String> {
    let mut kept: std::collections::BTreeMap<String, String> = [(OVERSIZED.to_string(), bytes.to_string())].into();
    let operation = meta.annotations.as_ref().and_then(|a| a.get(OPERATION));
    if let Some(word) = operation.filter(|w| matches!(w.as_str(), "ignore" | "reconcile")) {
        kept.insert(OPERATION.to_string(), word.clone());
    }
    kept
}

/// openmcp's operation annotation.
const OPERATION: &str = "openmcp.cloud/operation";

/// A watch event with its objects packed by `pack`.
pub fn pack_event<K>(event: &watcher::Event<K>, pack: impl Fn(&K) -> Packed) -> watcher::Event<Packed> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(pack(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(pack(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(pack(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The controller's bound on its object type; a packed object is read by
/// reading the object and packing it.
impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DynamicObject::deserialize(deserializer).map(|object| Packed::pack(&object))
    }
}

/// Stores key their objects by `meta()`; the kind comes from the store's
/// [`ApiResource`], as for a `DynamicObject`.
impl Resource for Packed {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_service_object_of_a_megabyte_is_kept_trimmed_and_marked() {
        let labels: serde_json::Map<String, serde_json::Value> =
            (0..8_000).map(|i| (format!("tenant.example/label-{i:05}"), json!("x".repeat(63)))).collect();
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kro.services.open-control-plane.io/v1alpha1", "kind": "Kro",
            "metadata": {"name": "big", "namespace": "t", "uid": "u-1", "generation": 3, "labels": labels,
                "annotations": {"openmcp.cloud/operation": "ignore", "other": "x"},
                "finalizers": ["kro.services.open-control-plane.io/finalizer"]},
            "spec": {"version": "v0.9.1"},
            "status": {"phase": "Ready"}
        }))
        .unwrap();
        let whole = Packed::pack(&object).bytes();
        assert!(whole > 700_000, "{whole}");
        let seed = Packed::seed(&object);
        assert!(seed.bytes() < 1_000, "{}", seed.bytes());
        let kept = seed.unpack().unwrap();
        let annotations = kept.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[OVERSIZED], whole.to_string());
        assert_eq!((annotations[OPERATION].as_str(), annotations.len()), ("ignore", 2), "{annotations:?}");
        assert!(kept.metadata.labels.is_none());
        assert_eq!((kept.metadata.generation, kept.metadata.uid.as_deref()), (Some(3), Some("u-1")));
        assert_eq!(kept.metadata.finalizers.unwrap(), ["kro.services.open-control-plane.io/finalizer"]);
        assert_eq!((&kept.data["spec"]["version"], &kept.data["status"]["phase"]), (&json!("v0.9.1"), &json!("Ready")));

        // A small object keeps everything but a mark of its own.
        let mut small = object.clone();
        small.metadata.labels = None;
        small.metadata.annotations = Some([(OVERSIZED.to_string(), "1".to_string()), ("a".into(), "b".into())].into());
        let kept = Packed::seed(&small).unpack().unwrap();
        assert_eq!(kept.metadata.annotations.unwrap().keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn an_object_comes_back_as_it_went_in() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "kro", "namespace": "mcp-1", "labels": {"a": "b"}, "resourceVersion": "7"},
            "spec": {"interval": "1m", "values": {"list": [1, 2.5, "three", null, true]}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .expect("object");
        let packed = Packed::pack(&object);
        assert_eq!(packed.unpack().expect("unpacks"), object);
        assert_eq!(packed.full_metadata().expect("metadata"), object.metadata);
        assert_eq!((packed.meta().name.as_deref(), packed.namespace()), (Some("kro"), Some("mcp-1")));
        assert_eq!(packed.meta().labels, None, "only what the store keys on is kept parsed");
        let read: Packed = serde_json::from_value(serde_json::to_value(&object).expect("json")).expect("reads");
        assert_eq!(read.unpack().expect("unpacks"), object);
    }

    #[test]
    fn a_value_packs_with_its_name_and_namespace() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}});
        let packed = Packed::pack_value(&object);
        assert_eq!((packed.meta().name.as_deref(), packed.namespace()), (Some("c"), Some("n")));
        assert_eq!(packed.value().expect("parses"), object);
    }

    #[test]
    fn an_entry_without_json_reads_as_unreadable_not_as_empty() {
        let packed = Packed { metadata: ObjectMeta::default(), json: Box::from("") };
        assert!(packed.unpack().is_err());
        assert!(packed.full_metadata().is_err());
    }
}
