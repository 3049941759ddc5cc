//! Conditions on the fields of an object a plugin writes: the allow-list of
//! fields a write rule may name (`onlyFields`), and the conditions on single
//! fields (present, absent, one of some values, a reference to an object of
//! the same plan), with the placeholders that stand for what only the host
//! knows ([`super::PLACEHOLDERS`]).

use serde_json::Value;
use service_provider_sdk::contract::{Cluster, Context};

use super::FieldRule;
use super::hard::Target;
use crate::syntax;

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
///
/// A walk down the object that carries along the allowed paths still
/// matching where it is, and stops where one ends (its whole subtree is
/// allowed): each value is looked at once, and no path is built but the
/// one reported. (Building every leaf's path, as a first version did, cost
/// depth × key length per leaf: 47,000 leaves under two 250 KB keys are a
/// 1 MB plan and would have been 24 GB of paths.)
pub(super) fn unreviewed_field(only: &[String], object: &Value) -> Option<String> {
    if only.is_empty() {
        return None;
    }
    let allowed: Vec<Vec<String>> = only.iter().map(|p| segments(p)).collect();
    let map = object.as_object()?;
    let mut at = Vec::new();
    for (key, value) in map.iter().filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")) {
        let below: Vec<&[String]> = allowed.iter().filter_map(|a| next(a, key)).collect();
        at.push(Segment::Key(key));
        if uncovered(value, &below, &mut at) {
            return Some(format!("field {} is not one the plugin grant allows", pointer(&at)));
        }
        at.pop();
    }
    None
}

/// One step of a path: an object's key or a list's index.
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// The unescaped segments of a JSON pointer (`/spec/a~1b` is `spec`, `a/b`).
fn segments(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
}

/// What is left of an allowed path below `step`, if it goes through it.
fn next<'p>(allowed: &'p [String], step: &str) -> Option<&'p [String]> {
    match allowed.split_first() {
        Some((first, rest)) if first == step => Some(rest),
        _ => None,
    }
}

/// Whether something under `value` is not covered by the allowed paths
/// `below` (each what is left of one below `value`); if so, `at` ends at
/// the first such leaf. An empty object or list on the way to an allowed
/// path is covered; a scalar where an allowed path needs an object is not.
fn uncovered<'v>(value: &'v Value, below: &[&[String]], at: &mut Vec<Segment<'v>>) -> bool {
    if below.iter().any(|rest| rest.is_empty()) {
        return false;
    }
    if below.is_empty() {
        first_leaf(value, at);
        return true;
    }
    match value {
        Value::Object(map) => map.iter().any(|(key, child)| {
            let deeper: Vec<&[String]> = below.iter().filter_map(|rest| next(rest, key)).collect();
            at.push(Segment::Key(key));
            let found = uncovered(child, &deeper, at);
            if !found {
                at.pop();
            }
            found
        }),
        Value::Array(items) => items.iter().enumerate().any(|(i, child)| {
            let index = i.to_string();
            let deeper: Vec<&[String]> = below.iter().filter_map(|rest| next(rest, &index)).collect();
            at.push(Segment::Index(i));
            let found = uncovered(child, &deeper, at);
            if !found {
                at.pop();
            }
            found
        }),
        _ => true,
    }
}

/// Extends `at` down to the first leaf under `value` (a scalar, or an
/// empty object or list).
fn first_leaf<'v>(mut value: &'v Value, at: &mut Vec<Segment<'v>>) {
    loop {
        match value {
            Value::Object(map) if !map.is_empty() => {
                let (key, child) = map.iter().next().expect("not empty");
                at.push(Segment::Key(key));
                value = child;
            }
            Value::Array(items) if !items.is_empty() => {
                at.push(Segment::Index(0));
                value = &items[0];
            }
            _ => return,
        }
    }
}

/// `at` as a JSON pointer for a message: escaped, and short.
fn pointer(at: &[Segment<'_>]) -> String {
    let mut text = String::new();
    for segment in at {
        text.push('/');
        match segment {
            Segment::Key(key) => text.push_str(&escape(key)),
            Segment::Index(i) => text.push_str(&i.to_string()),
        }
        if text.len() > MAX_POINTER {
            break;
        }
    }
    crate::syntax::one_line(&text, MAX_POINTER)
}

/// The longest field path a refusal shows.
const MAX_POINTER: usize = 200;

/// JSON-pointer escaping of one key.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// What field rules are checked against besides the object: the
/// instance's context, the plan's other objects and copies, and the
/// ProviderConfig (which only the platform operator writes).
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub context: &'a Context,
    pub siblings: &'a [Sibling],
    pub provider_config: Option<&'a Value>,
}

/// Why `object` breaks a field rule, if it does.
pub(super) fn field_denial(rule: &FieldRule, object: &Value, facts: &Facts<'_>, target: &Target) -> Option<String> {
    let field = object.pointer(&rule.path);
    let field = match field {
        Some(_) if rule.absent => return Some(format!("field {} must not be set", rule.path)),
        None if rule.required => return Some(format!("field {} must be set", rule.path)),
        None => return None,
        Some(reference) if rule.planned => return planned_denial(&rule.path, reference, target, facts.siblings),
        Some(field) => field,
    };
    if let Some(why) = bound_denial(rule, field) {
        return Some(why);
    }
    if rule.one_of.is_empty() {
        return None;
    }
    let allowed: Vec<String> = rule.one_of.iter().flat_map(|v| expand(v, facts, target)).collect();
    match field.as_str() {
        Some(value) if allowed.iter().any(|a| a == value) => None,
        _ => Some(format!("field {} must be one of {:?}", rule.path, shown(&allowed))),
    }
}

/// The allowed values as a refusal shows them: at most 16, each short.
fn shown(allowed: &[String]) -> Vec<String> {
    let mut shown: Vec<String> = allowed.iter().take(16).map(|a| syntax::one_line(a, 120)).collect();
    if allowed.len() > 16 {
        shown.push(format!("… {} more", allowed.len() - 16));
    }
    shown
}

/// Why a field with a bound (`atLeast`, `atMost`) breaks it: a whole
/// number out of bounds (Helm's `retries: -1` retries for ever), not a
/// duration, or one out of bounds (an interval of `1s` would make
/// source-controller poll a registry every second for this instance).
fn bound_denial(rule: &FieldRule, field: &Value) -> Option<String> {
    if rule.at_least.is_none() && rule.at_most.is_none() {
        return None;
    }
    let whole = |bound: &Option<String>| bound.as_deref().and_then(|b| b.parse::<i64>().ok());
    let (least, most) = (whole(&rule.at_least), whole(&rule.at_most));
    if least.is_some() || most.is_some() {
        let shown = syntax::one_line(&field.to_string(), 40);
        let Some(value) = field.as_i64() else {
            return Some(format!("field {} must be a whole number (it is {shown})", rule.path));
        };
        return match (least, most) {
            (Some(l), _) if value < l => Some(format!("field {} must be at least {l} (it is {value})", rule.path)),
            (_, Some(m)) if value > m => Some(format!("field {} must be at most {m} (it is {value})", rule.path)),
            _ => None,
        };
    }
    let text = field.as_str().unwrap_or_default();
    let Some(value) = syntax::go_duration(text) else {
        return Some(format!(
            "field {} must be a duration such as 5m (it is {})",
            rule.path,
            syntax::one_line(&field.to_string(), 40)
        ));
    };
    let text = syntax::one_line(text, 40);
    if let Some(limit) = rule.at_least.as_deref().filter(|l| syntax::go_duration(l).is_some_and(|least| value < least))
    {
        return Some(format!("field {} must be at least {limit} (it is {text})", rule.path));
    }
    if let Some(limit) = rule.at_most.as_deref().filter(|l| syntax::go_duration(l).is_some_and(|most| value > most)) {
        return Some(format!("field {} must be at most {limit} (it is {text})", rule.path));
    }
    None
}

/// Why a reference does not name an object of the same plan next to the
/// referring object, if it does not.
fn planned_denial(path: &str, reference: &Value, target: &Target, siblings: &[Sibling]) -> Option<String> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str);
    let namespace_ok = reference.get("namespace").is_none() || text("namespace") == target.namespace;
    // With an apiVersion, the group must be the sibling's too.
    let group = text("apiVersion").map(syntax::group_of);
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
fn expand(value: &str, facts: &Facts<'_>, target: &Target) -> Vec<String> {
    let context = facts.context;
    let copies = |kind: &str| {
        facts
            .siblings
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
        "{providerConfigURLs}" => {
            let mut urls = Vec::new();
            if let Some(spec) = facts.provider_config.and_then(|pc| pc.get("spec")) {
                strings(spec, &mut urls);
            }
            // A registry named without a scheme is one a provider pulls
            // from as `oci://` (Flux's OCIRepository needs the scheme).
            let schemeless: Vec<String> =
                urls.iter().filter(|u| !u.contains("://")).map(|u| format!("oci://{u}")).collect();
            urls.extend(schemeless);
            urls
        }
        literal => vec![literal.to_string()],
    }
}

/// Every string under `value`.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
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
            (json!({"values": {}, "chart": {"spec": 1}}), "/spec/chart/spec"),
            (json!({"kubeConfig": {"secretRef": {"name": "k"}, "other": [[]]}}), "/spec/kubeConfig/other/0"),
        ] {
            assert_eq!(check(spec), Some(format!("field {field} is not one the plugin grant allows")));
        }
        let lists = ["/spec/list/1".to_string()];
        let in_list = |spec: serde_json::Value| unreviewed_field(&lists, &json!({"spec": spec}));
        assert_eq!(in_list(json!({"list": []})), None, "an empty list on the way");
        let second_only = json!({"list": [[], {"b": 2}]});
        assert_eq!(in_list(second_only), Some("field /spec/list/0 is not one the plugin grant allows".to_string()));
        assert_eq!(
            in_list(json!({"list": [{"a": 1}, {}]})),
            Some("field /spec/list/0/a is not one the plugin grant allows".to_string())
        );
        let escaped = ["/spec/a~1b".to_string()];
        assert_eq!(unreviewed_field(&escaped, &json!({"spec": {"a/b": {"c": 1}}})), None);
    }

    /// The shape that made the first version build gigabytes of paths:
    /// many leaves under long keys, all of them allowed. Walked once, it
    /// passes at once; a refused field under it is named in 200 characters.
    #[test]
    fn long_keys_and_many_leaves_cost_one_walk() {
        let leaves: serde_json::Map<String, serde_json::Value> =
            (0..47_000).map(|i| (format!("k{i}"), json!(0))).collect();
        let mut values = serde_json::Map::new();
        values.insert("a".repeat(250_000), json!({"b".repeat(250_000): leaves}));
        let object = json!({"kind": "HelmRelease", "spec": {"values": values.clone()}});
        let only = ["/spec/values".to_string()];
        let started = std::time::Instant::now();
        assert_eq!(unreviewed_field(&only, &object), None);
        let narrower = [format!("/spec/values/{}/x", "a".repeat(250_000))];
        let refused = unreviewed_field(&narrower, &object).expect("a field outside the allowed one");
        assert!(refused.len() < 300 && refused.contains("/spec/values/aaaa"), "{}", &refused[..100.min(refused.len())]);
        println!("walked 47,000 leaves under 500 KB of keys twice in {:?}", started.elapsed());
    }
}
