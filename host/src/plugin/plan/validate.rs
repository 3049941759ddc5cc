//! The shape of a desired object, checked before the host touches it: a
//! plugin's output is untrusted text, and the host must never panic on it
//! nor send the API server something that is not a plain object of the
//! plugin's own.

use serde_json::{Map, Value};
use service_provider_sdk::contract::Cluster;

use super::Manifest;
use crate::syntax::{self, dns_label, dns_subdomain, label_value, qualified_name};

/// Prefix of the labels and annotations the host owns (owner labels, the
/// applied hash): a plugin may not set them, or it could forge ownership.
const HOST_PREFIX: &str = "service-provider.open-control-plane.io/";

/// Metadata the API server or the host manages, never the plugin.
const FORBIDDEN_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
    "generateName",
];

/// The most JSON values (counted by their separators) one desired object
/// may have.
const MAX_JSON_VALUES: usize = 100_000;

/// Largest total size of an object's annotations (the API server's limit).
const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Parses and checks one desired object; the error says what is wrong.
pub fn manifest(cluster: Cluster, text: &str) -> Result<Manifest, String> {
    // Parsed, each value of the text is tens of bytes of host memory: a
    // 4 MiB `[0,0,0,…]` would be 30 MiB and more. An upper bound of the
    // values, counted before parsing.
    let values = text.bytes().filter(|b| matches!(b, b',' | b'[' | b'{' | b':')).count();
    if values > MAX_JSON_VALUES {
        return Err(format!("a desired object has more than {MAX_JSON_VALUES} JSON values"));
    }
    let object: Value = serde_json::from_str(text).map_err(|e| format!("a desired object is not valid JSON: {e}"))?;
    let map = object.as_object().ok_or("a desired object is not a JSON object")?;
    let api_version = string(map, "apiVersion")?;
    if !syntax::api_version(api_version) {
        return Err(format!("apiVersion {api_version:?} is not group/version or version"));
    }
    let kind = string(map, "kind")?;
    if !syntax::kind(kind) {
        return Err(format!("kind {kind:?} is not a Kubernetes kind"));
    }
    let meta = map.get("metadata").and_then(Value::as_object).ok_or("metadata is missing or not an object")?;
    let name = string(meta, "name").map_err(|e| format!("metadata: {e}"))?;
    if !dns_subdomain(name) {
        return Err(format!("metadata.name {name:?} is not a valid object name"));
    }
    let namespace = match meta.get("namespace") {
        None => None,
        Some(Value::String(ns)) if dns_label(ns) => Some(ns.clone()),
        Some(other) => return Err(format!("metadata.namespace {other} is not a valid namespace name")),
    };
    if let Some(field) = FORBIDDEN_METADATA.iter().find(|f| meta.contains_key(**f)) {
        return Err(format!("metadata.{field} is managed by the API server or the host, not by plugins"));
    }
    string_map(meta, "labels", |k, v| qualified_name(k) && label_value(v))?;
    string_map(meta, "annotations", |k, _| qualified_name(k))?;
    let annotation_bytes: usize = meta
        .get("annotations")
        .and_then(Value::as_object)
        .map_or(0, |a| a.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum());
    if annotation_bytes > MAX_ANNOTATION_BYTES {
        return Err(format!("metadata.annotations are {annotation_bytes} bytes, more than {MAX_ANNOTATION_BYTES}"));
    }
    // Its labels and annotations, and deeper: labels a HelmRelease's
    // `spec.commonMetadata` or `spec.chart.metadata`, or a pod template,
    // hands on to the objects another controller makes would make those
    // look like the host's (watched, mapped to an instance, pruned by it).
    if let Some(at) = host_key(&object) {
        return Err(format!("{at} uses the host's prefix {HOST_PREFIX}: a plugin sets it nowhere in an object"));
    }
    Ok(Manifest {
        cluster,
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: String::new(),
        name: name.to_string(),
        namespace,
        object,
    })
}

/// Where in `value` a key starts with [`HOST_PREFIX`], as a dotted path
/// (`spec.containers[0].env`). The path is built only for the key found,
/// not for every key on the way; the depth is bounded by the parser's (128).
fn host_key(value: &Value) -> Option<String> {
    /// The path's steps, innermost first.
    fn steps(value: &Value) -> Option<Vec<String>> {
        match value {
            Value::Object(map) => map.iter().find_map(|(k, v)| {
                let mut path = if k.starts_with(HOST_PREFIX) { Vec::new() } else { steps(v)? };
                path.push(k.clone());
                Some(path)
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
                let mut path = steps(v)?;
                path.push(format!("[{i}]"));
                Some(path)
            }),
            _ => None,
        }
    }
    let mut at = String::new();
    for step in steps(value)?.into_iter().rev() {
        if !at.is_empty() && !step.starts_with('[') {
            at.push('.');
        }
        at.push_str(&step);
    }
    Some(at)
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(format!("{key} is not a non-empty string")),
        None => Err(format!("{key} is missing")),
    }
}

/// `metadata.<key>` is absent or an object of strings whose entries pass
/// `ok` (the host's prefix is refused anywhere, by [`host_key`]).
fn string_map(meta: &Map<String, Value>, key: &str, ok: impl Fn(&str, &str) -> bool) -> Result<(), String> {
    let Some(value) = meta.get(key) else { return Ok(()) };
    let map = value.as_object().ok_or_else(|| format!("metadata.{key} is not an object"))?;
    for (k, v) in map {
        let v = v.as_str().ok_or_else(|| format!("metadata.{key}.{k} is not a string"))?;
        if !ok(k, v) {
            return Err(format!("metadata.{key} has an invalid entry {k:?}: {v:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(v: Value) -> Result<Manifest, String> {
        manifest(Cluster::Platform, &v.to_string())
    }

    fn base() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "mcp--t", "labels": {"app": "web"}}})
    }

    #[test]
    fn a_plain_object_passes() {
        let m = check(base()).unwrap();
        assert_eq!((m.api_version.as_str(), m.kind.as_str(), m.name.as_str()), ("apps/v1", "Deployment", "web"));
        assert_eq!(m.namespace.as_deref(), Some("mcp--t"));
        assert!(check(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kro-system"}})).is_ok());
    }

    #[test]
    fn malformed_objects_are_refused_with_a_reason() {
        let mut cases: Vec<(Value, &str)> = vec![
            (json!([]), "not a JSON object"),
            (json!({"kind": "X", "metadata": {"name": "a"}}), "apiVersion is missing"),
            (json!({"apiVersion": "v1", "kind": 5, "metadata": {"name": "a"}}), "kind is not"),
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}), "metadata is missing or not an object"),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "UPPER"}}),
                "not a valid object name",
            ),
            (json!({"apiVersion": "a b/v1", "kind": "ConfigMap", "metadata": {"name": "a"}}), "apiVersion"),
        ];
        let mut with = |pointer: &str, value: Value, reason: &'static str| {
            let mut v = base();
            *v.pointer_mut(pointer).unwrap() = value;
            cases.push((v, reason));
        };
        with("/metadata/labels", json!("a string"), "labels is not an object");
        with("/metadata/labels", json!({"app": 5}), "is not a string");
        with("/metadata/labels", json!({"app": "has space"}), "invalid entry");
        with(
            "/metadata/labels",
            json!({"service-provider.open-control-plane.io/instance-name": "other"}),
            "host's prefix",
        );
        with("/metadata/namespace", json!("Kube_System"), "not a valid namespace");
        with("/metadata/namespace", json!(["a"]), "not a valid namespace");
        let mut owned = base();
        owned["metadata"]["ownerReferences"] = json!([]);
        cases.push((owned, "ownerReferences"));
        let mut huge = base();
        huge["metadata"]["annotations"] = json!({"a": "x".repeat(300 * 1024)});
        cases.push((huge, "annotations are"));
        let mut release = base();
        release["spec"] =
            json!({"commonMetadata": {"labels": {"service-provider.open-control-plane.io/instance-name": "other"}}});
        cases.push((release, "spec.commonMetadata.labels.service-provider.open-control-plane.io/instance-name uses"));
        let mut chart = base();
        chart["spec"] =
            json!({"chart": {"metadata": {"annotations": {"service-provider.open-control-plane.io/instance": "a/b"}}}});
        cases.push((chart, "spec.chart.metadata.annotations.service-provider.open-control-plane.io/instance uses"));
        let mut template = base();
        template["spec"] = json!({"containers": [{"env": [{"service-provider.open-control-plane.io/x": "y"}]}]});
        cases.push((template, "spec.containers[0].env[0].service-provider.open-control-plane.io/x uses"));
        for (object, reason) in cases {
            let err = check(object.clone()).unwrap_err();
            assert!(err.contains(reason), "{object}: {err}");
        }
        assert!(manifest(Cluster::Platform, "{not json").unwrap_err().contains("not valid JSON"));
        let zeros = format!("{{\"a\": [{}0]}}", "0,".repeat(MAX_JSON_VALUES));
        assert!(manifest(Cluster::Platform, &zeros).unwrap_err().contains("more than 100000 JSON values"));
    }
}
