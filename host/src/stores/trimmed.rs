//! What the host keeps of an object it reads for a plugin, decided while
//! the object is parsed.
//!
//! Objects an observation reads come from clusters a tenant controls, and
//! Kubernetes lets an object carry 256 KiB of annotations (40,000 short
//! ones) and a managedFields entry for each. Parsed whole first (kube's
//! `PartialObjectMeta`, a `DynamicObject`, a `serde_json::Value`) and
//! trimmed after, a page of such objects cost some ten times its size in
//! maps and strings: the tenant decided what the host built. [`Keep`] parses
//! an object into what a plugin sees of it and nothing else: what it drops
//! is skipped where it lies in the input (serde's [`IgnoredAny`]; map keys
//! are compared in place, copied only when kept), never built. So what an
//! object costs the host is what the plugin sees of it, plus the raw text
//! it was read from.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};
use service_provider_sdk::contract::Detail;

/// The metadata a plugin sees of an observed object: an allow-list, so
/// nothing that carries data (`managedFields`, the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation, which
/// holds a whole Secret's data) enters the sandbox. Annotations only as the
/// grant names them (`Effective::annotations`).
pub const METADATA: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "uid",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
];

/// What to keep of an object as it is parsed: `apiVersion`, `kind`, the
/// [`METADATA`], of the annotations those in `annotations`, and at
/// [`Detail::Full`] every other top-level field. A `serde`
/// [`DeserializeSeed`], for any deserializer (a page's bytes, a `Value`).
#[derive(Clone, Copy, Debug)]
pub struct Keep<'a> {
    pub detail: Detail,
    /// The annotation keys the grant names for the observation.
    pub annotations: &'a [String],
}

/// An object as [`Keep`] parsed it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    /// What the plugin sees of it.
    pub object: Map<String, Value>,
    /// Its `metadata.resourceVersion`, which a watch resumes from; kept
    /// apart, never shown to a plugin.
    pub resource_version: Option<String>,
}

impl Kept {
    /// The object with the given `apiVersion` and `kind`, first: items of
    /// a LIST of a built-in kind come without them, metadata-only items
    /// as `meta.k8s.io/v1` `PartialObjectMetadata`.
    pub fn typed(self, api_version: &str, kind: &str) -> Value {
        let mut typed = Map::with_capacity(self.object.len() + 2);
        typed.insert("apiVersion".into(), api_version.into());
        typed.insert("kind".into(), kind.into());
        typed.extend(self.object.into_iter().filter(|(key, _)| key != "apiVersion" && key != "kind"));
        Value::Object(typed)
    }
}

impl<'de> DeserializeSeed<'de> for Keep<'_> {
    type Value = Kept;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kept, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Keep<'_> {
    type Value = Kept;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kept, A::Error> {
        let full = self.detail == Detail::Full;
        let wanted = |key: &str| full || matches!(key, "apiVersion" | "kind" | "metadata");
        let mut kept = Kept::default();
        while let Some(key) = map.next_key_seed(KeyIf(&wanted))? {
            match key {
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
                Some(key) if key == "metadata" => {
                    let seed = Metadata { annotations: self.annotations, resource_version: &mut kept.resource_version };
                    let metadata = map.next_value_seed(seed)?;
                    kept.object.insert(key, Value::Object(metadata));
                }
                Some(key) => {
                    let value = map.next_value()?;
                    kept.object.insert(key, value);
                }
            }
        }
        Ok(kept)
    }
}

/// An object's `metadata`: the [`METADATA`] fields, the granted
/// annotations; its `resourceVersion` goes to `resource_version`.
struct Metadata<'a> {
    annotations: &'a [String],
    resource_version: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Metadata<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Metadata<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Map::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let wanted = |key: &str| METADATA.contains(&key) || matches!(key, "annotations" | "resourceVersion");
        let mut kept = Map::new();
        while let Some(key) = map.next_key_seed(KeyIf(&wanted))? {
            let Some(key) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            match key.as_str() {
                "resourceVersion" => *self.resource_version = map.next_value()?,
                "annotations" => {
                    let annotations = map.next_value_seed(Annotations(self.annotations))?;
                    if !annotations.is_empty() {
                        kept.insert(key, Value::Object(annotations));
                    }
                }
                _ => {
                    let value = map.next_value()?;
                    kept.insert(key, value);
                }
            }
        }
        Ok(kept)
    }
}

/// `metadata.annotations`: only those named.
struct Annotations<'a>(&'a [String]);

impl<'de> DeserializeSeed<'de> for Annotations<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        if self.0.is_empty() {
            deserializer.deserialize_ignored_any(IgnoredAny)?;
            return Ok(Map::new());
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Annotations<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("annotations")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Map::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let named = |key: &str| self.0.iter().any(|a| a == key);
        let mut kept = Map::new();
        while let Some(key) = map.next_key_seed(KeyIf(&named))? {
            match key {
                Some(key) => {
                    let value = map.next_value()?;
                    kept.insert(key, value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(kept)
    }
}

/// A map key, copied only if `wanted` (`None` otherwise): a key that is
/// not kept is compared where it lies in the input.
pub(crate) struct KeyIf<F>(pub(crate) F);

impl<'de, F: Fn(&str) -> bool> DeserializeSeed<'de> for KeyIf<F> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, F: Fn(&str) -> bool> Visitor<'de> for KeyIf<F> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok((self.0)(key).then(|| key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn keep(json: &str, detail: Detail, annotations: &[String]) -> Kept {
        let mut deserializer = serde_json::Deserializer::from_str(json);
        let kept = Keep { detail, annotations }.deserialize(&mut deserializer).expect("an object");
        deserializer.end().expect("nothing after it");
        kept
    }

    /// An RGD as a tenant may make it: 40,000 annotations (and a
    /// managedFields entry for each), besides what a plugin sees.
    fn flooded() -> String {
        let annotations: Map<String, Value> = (0..40_000).map(|i| (format!("a{i:05}"), json!(""))).collect();
        let fields: Map<String, Value> = (0..40_000).map(|i| (format!("f:a{i:05}"), json!({}))).collect();
        json!({
            "apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition",
            "metadata": {
                "name": "flood", "uid": "u-1", "resourceVersion": "42", "generation": 1,
                "labels": {"team": "a"}, "finalizers": ["kro.run/finalizer"],
                "annotations": annotations.into_iter().chain([("team".to_string(), json!("x"))]).collect::<Map<_, _>>(),
                "managedFields": [{"manager": "kubectl", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:annotations": fields}}}],
            },
            "spec": {"schema": {"kind": "Flood"}},
            "status": {"state": "Active"},
        })
        .to_string()
    }

    #[test]
    fn a_flooded_object_keeps_only_what_the_plugin_sees() {
        let text = flooded();
        assert!(text.len() > 1_000_000, "the flood is a megabyte of JSON: {}", text.len());
        let kept = keep(&text, Detail::Metadata, &[]);
        assert_eq!(
            Value::Object(kept.object),
            json!({"apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition", "metadata": {
                "name": "flood", "uid": "u-1", "generation": 1, "labels": {"team": "a"},
                "finalizers": ["kro.run/finalizer"]}})
        );
        assert_eq!(kept.resource_version.as_deref(), Some("42"), "kept apart for a watch");

        let named = keep(&text, Detail::Metadata, &["team".to_string(), "absent".to_string()]);
        assert_eq!(named.object["metadata"]["annotations"], json!({"team": "x"}), "only the granted annotations");

        let full = keep(&text, Detail::Full, &[]);
        assert_eq!(
            (&full.object["spec"], &full.object["status"]),
            (&json!({"schema": {"kind": "Flood"}}), &json!({"state": "Active"}))
        );
        let metadata = full.object["metadata"].as_object().unwrap();
        assert!(!metadata.contains_key("managedFields") && !metadata.contains_key("annotations"));
        assert!(Value::Object(full.object).to_string().len() < 1024, "what is kept is what the plugin sees");
    }

    #[test]
    fn what_is_kept_does_not_depend_on_how_it_was_read() {
        let text = flooded();
        let value: Value = serde_json::from_str(&text).unwrap();
        let from_value = Keep { detail: Detail::Metadata, annotations: &[] }.deserialize(value).unwrap();
        assert_eq!(from_value, keep(&text, Detail::Metadata, &[]));
        // Escaped keys are compared as they read, not as they are written.
        let escaped = r#"{"metadata": {"n\u0061me": "x", "annotations": {"te\u0061m": "y", "other": "z"}}}"#;
        let kept = keep(escaped, Detail::Metadata, &["team".to_string()]);
        assert_eq!(Value::Object(kept.object), json!({"metadata": {"name": "x", "annotations": {"team": "y"}}}));
    }

    #[test]
    fn absent_or_null_metadata_is_no_metadata() {
        let kept = keep(r#"{"metadata": null, "spec": {}}"#, Detail::Full, &["a".to_string()]);
        assert_eq!(Value::Object(kept.object), json!({"metadata": {}, "spec": {}}));
        let kept = keep(r#"{"metadata": {"name": "n", "annotations": null}}"#, Detail::Metadata, &["a".to_string()]);
        assert_eq!(Value::Object(kept.object), json!({"metadata": {"name": "n"}}));
        assert!(Keep { detail: Detail::Full, annotations: &[] }.deserialize(json!([1])).is_err(), "not an object");
    }

    #[test]
    fn typed_objects_carry_the_given_kind_first() {
        let kept = keep(
            r#"{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "n"}}"#,
            Detail::Metadata,
            &[],
        );
        let typed = kept.typed("kro.run/v1alpha1", "ResourceGraphDefinition");
        assert_eq!(
            typed.to_string(),
            r#"{"apiVersion":"kro.run/v1alpha1","kind":"ResourceGraphDefinition","metadata":{"name":"n"}}"#
        );
    }
}
