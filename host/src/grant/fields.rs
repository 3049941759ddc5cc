//! Conditions on the fields of an object a plugin writes: the allow-list of
//! fields a write rule may name (`onlyFields`), and the conditions on single
//! fields (present, absent, one of some values, a reference to an object of
//! the same plan), with the placeholders that stand for what only the host
//! knows ([`super::PLACEHOLDERS`]).

use serde_json::Value;
use service_provider_sdk::contract::{Cluster, Context};

use super::FieldRule;
use super::hard::Target;

/// An object or copy of the same plan: what `{secretCopies}`,
/// `{configMapCopies}` and `planned` references may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sibling {
    pub cluster: Cluster,
    /// The API group (empty for copies and the core group).
    pub group: String,
    /// `Secret` or `ConfigMap` for a copy.
    pub kind: String,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
    /// A copy (rather than an applied object).
    pub copy: bool,
}

/// The first field of `object` (outside `apiVersion`, `kind`, `metadata`)
/// that no path of `only` covers, if `only` is a list at all.
pub(super) fn unreviewed_field(only: &[String], object: &Value) -> Option<String> {
    if only.is_empty() {
        return None;
    }
    let mut leaves = Vec::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map.iter().filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")) {
            leaf_paths(&format!("/{}", escape(key)), value, &mut leaves);
        }
    }
    // A leaf under an allowed path is covered; so is an empty object or
    // list on the way to one (`spec: {}`), but not an empty one elsewhere
    // (`valuesFrom: []` names a field like any other), nor a scalar where
    // an allowed path needs an object.
    let under = |path: &str, prefix: &str| path.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'));
    let covered =
        |(leaf, empty): &(String, bool)| only.iter().any(|p| leaf == p || under(leaf, p) || (*empty && under(p, leaf)));
    leaves
        .into_iter()
        .find(|leaf| !covered(leaf))
        .map(|(leaf, _)| format!("field {leaf} is not one the plugin grant allows"))
}

/// JSON-pointer escaping of one key.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The paths of every scalar, empty object and empty list under `value`,
/// each with whether it is an empty object or list.
fn leaf_paths(at: &str, value: &Value, out: &mut Vec<(String, bool)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            map.iter().for_each(|(k, v)| leaf_paths(&format!("{at}/{}", escape(k)), v, out))
        }
        Value::Array(items) if !items.is_empty() => {
            items.iter().enumerate().for_each(|(i, v)| leaf_paths(&format!("{at}/{i}"), v, out))
        }
        Value::Object(_) | Value::Array(_) => out.push((at.to_string(), true)),
        _ => out.push((at.to_string(), false)),
    }
}

/// Why `object` breaks a field rule, if it does.
pub(super) fn field_denial(
    rule: &FieldRule,
    object: &Value,
    context: &Context,
    target: &Target,
    siblings: &[Sibling],
) -> Option<String> {
    let field = object.pointer(&rule.path);
    match field {
        Some(_) if rule.absent => return Some(format!("field {} must not be set", rule.path)),
        None if rule.required => return Some(format!("field {} must be set", rule.path)),
        None => return None,
        Some(reference) if rule.planned => return planned_denial(&rule.path, reference, target, siblings),
        Some(_) if rule.one_of.is_empty() => return None,
        Some(_) => {}
    }
    let allowed: Vec<String> = rule.one_of.iter().flat_map(|v| expand(v, context, target, siblings)).collect();
    match field.and_then(Value::as_str) {
        Some(value) if allowed.iter().any(|a| a == value) => None,
        _ => Some(format!("field {} must be one of {allowed:?}", rule.path)),
    }
}

/// Why a reference does not name an object of the same plan next to the
/// referring object, if it does not.
fn planned_denial(path: &str, reference: &Value, target: &Target, siblings: &[Sibling]) -> Option<String> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str);
    let namespace_ok = reference.get("namespace").is_none() || text("namespace") == target.namespace;
    // With an apiVersion, the group must be the sibling's too.
    let group = text("apiVersion").map(crate::resource::group_of);
    let found = siblings.iter().any(|s| {
        !s.copy
            && s.cluster == target.cluster
            && s.namespace.as_deref() == target.namespace
            && Some(s.kind.as_str()) == text("kind")
            && Some(s.name.as_str()) == text("name")
            && group.is_none_or(|g| g == s.group)
    });
    match namespace_ok && found {
        true => None,
        false => Some(format!(
            "field {path} must refer to an object of the same plan in {}",
            target.namespace.unwrap_or("<cluster>")
        )),
    }
}

/// The values a field-rule value stands for.
fn expand(value: &str, context: &Context, target: &Target, siblings: &[Sibling]) -> Vec<String> {
    let copies = |kind: &str| {
        siblings
            .iter()
            .filter(|c| {
                c.copy && c.kind == kind && c.cluster == target.cluster && c.namespace.as_deref() == target.namespace
            })
            .map(|c| c.name.clone())
            .collect()
    };
    match value {
        "{tenant}" => vec![context.tenant_namespace.clone()],
        "{controlPlaneSecret}" => context.control_plane.iter().map(|k| k.name.clone()).collect(),
        "{workloadSecret}" => context.workload.iter().map(|k| k.name.clone()).collect(),
        "{secretCopies}" => copies("Secret"),
        "{configMapCopies}" => copies("ConfigMap"),
        literal => vec![literal.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_reviewed_fields_pass() {
        let only = ["/spec/kubeConfig/secretRef".to_string(), "/spec/values".to_string()];
        let check = |spec: serde_json::Value| unreviewed_field(&only, &json!({"kind": "K", "spec": spec}));
        assert_eq!(check(json!({"kubeConfig": {"secretRef": {"name": "k"}}, "values": {"a": [1, {}]}})), None);
        assert_eq!(check(json!({})), None, "an empty object on the way to an allowed field");
        assert_eq!(check(json!({"kubeConfig": {}})), None);
        for (spec, field) in [
            (json!({"valuesFrom": []}), "/spec/valuesFrom"),
            (json!({"kubeConfig": "k"}), "/spec/kubeConfig"),
            (json!({"kubeConfig": {"configMapRef": {"name": "c"}}}), "/spec/kubeConfig/configMapRef/name"),
            (json!({"a~b/c": 1}), "/spec/a~0b~1c"),
        ] {
            assert_eq!(check(spec), Some(format!("field {field} is not one the plugin grant allows")));
        }
    }
}
