//! Reading the inputs the plugin acts on (the Kro object, the
//! ProviderConfig, the Helm values) from JSON, with messages that name the
//! field and say what is wrong with it.
//!
//! The messages are this plugin's own words, not a JSON library's, so that
//! they read the same for every tenant and the Go port of this plugin
//! (`examples/go-kro`) can give exactly the same answers. Rules: a missing
//! field and a `null` one are the same; unknown fields are ignored.

use serde_json::{Map, Value};

use crate::api::{KroSpec, KroVersion, ProviderConfigSpec};

/// A JSON value and the path it was found at (`spec.versions[1].version`).
#[derive(Clone, Copy)]
struct At<'a> {
    value: &'a Value,
    path: &'a str,
}

type Read<T> = Result<T, String>;

/// What a value is, for "must be a string, not a number".
fn what(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl<'a> At<'a> {
    fn wrong(self, expected: &str) -> String {
        format!("{} must be {expected}, not {}", self.path, what(self.value))
    }

    fn object(self) -> Read<&'a Map<String, Value>> {
        self.value.as_object().ok_or_else(|| self.wrong("an object"))
    }

    fn list(self) -> Read<&'a [Value]> {
        self.value.as_array().map(Vec::as_slice).ok_or_else(|| self.wrong("a list"))
    }

    fn string(self) -> Read<&'a str> {
        self.value.as_str().ok_or_else(|| self.wrong("a string"))
    }
}

fn join(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// The field `key` of an object, `None` when missing or null.
fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|v| !v.is_null())
}

fn optional_string(object: &Map<String, Value>, path: &str, key: &str) -> Read<Option<String>> {
    let path = join(path, key);
    field(object, key).map(|value| At { value, path: &path }.string().map(str::to_string)).transpose()
}

fn required_string(object: &Map<String, Value>, path: &str, key: &str) -> Read<String> {
    optional_string(object, path, key)?.ok_or_else(|| format!("{} is missing", join(path, key)))
}

/// The `spec` of a Kubernetes object given as JSON text.
fn spec(json: &str) -> Read<Map<String, Value>> {
    let document: Value = serde_json::from_str(json).map_err(|_| "the object is not a JSON document".to_string())?;
    let Value::Object(mut object) = document else {
        return Err(At { value: &document, path: "the object" }.wrong("an object"));
    };
    match object.remove("spec") {
        None | Some(Value::Null) => Err("spec is missing".into()),
        Some(Value::Object(spec)) => Ok(spec),
        Some(other) => Err(At { value: &other, path: "spec" }.wrong("an object")),
    }
}

/// `spec` of a Kro object.
pub fn kro_spec(json: &str) -> Read<KroSpec> {
    Ok(KroSpec { version: required_string(&spec(json)?, "spec", "version")? })
}

/// `spec` of a ProviderConfig.
pub fn provider_config_spec(json: &str) -> Read<ProviderConfigSpec> {
    let spec = spec(json)?;
    let path = "spec.versions";
    let versions = field(&spec, "versions").ok_or_else(|| format!("{path} is missing"))?;
    let versions = At { value: versions, path }
        .list()?
        .iter()
        .enumerate()
        .map(|(index, value)| kro_version(value, &format!("{path}[{index}]")))
        .collect::<Read<Vec<_>>>()?;
    Ok(ProviderConfigSpec { versions, poll_interval: optional_string(&spec, "spec", "pollInterval")? })
}

fn kro_version(value: &Value, path: &str) -> Read<KroVersion> {
    let version = At { value, path }.object()?;
    Ok(KroVersion {
        version: required_string(version, path, "version")?,
        chart_version: required_string(version, path, "chartVersion")?,
        chart_url: optional_string(version, path, "chartURL")?,
        chart_pull_secret: optional_string(version, path, "chartPullSecret")?,
        helm_values: field(version, "helmValues").cloned(),
    })
}

/// The names under `imagePullSecrets` of a version's Helm values, in order
/// and as written (an unset name is empty).
pub fn image_pull_secret_names(values: &Value) -> Read<Vec<String>> {
    let values = At { value: values, path: "helmValues" }.object()?;
    let Some(list) = field(values, "imagePullSecrets") else {
        return Ok(Vec::new());
    };
    let list_path = "helmValues.imagePullSecrets";
    At { value: list, path: list_path }
        .list()?
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let path = format!("{list_path}[{index}]");
            let reference = At { value, path: &path }.object()?;
            Ok(optional_string(reference, &path, "name")?.unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kro(spec: Value) -> Read<KroSpec> {
        kro_spec(&json!({"metadata": {"name": "x"}, "spec": spec}).to_string())
    }

    fn config(spec: Value) -> Read<ProviderConfigSpec> {
        provider_config_spec(&json!({"spec": spec}).to_string())
    }

    #[test]
    fn a_kro_spec_needs_a_string_version() {
        assert_eq!(kro(json!({"version": "v1", "extra": 1})).unwrap().version, "v1");
        assert_eq!(kro(json!({"version": 3})).unwrap_err(), "spec.version must be a string, not a number");
        assert_eq!(kro(json!({})).unwrap_err(), "spec.version is missing");
        assert_eq!(kro(json!({"version": null})).unwrap_err(), "spec.version is missing");
        assert_eq!(kro(json!(["v1"])).unwrap_err(), "spec must be an object, not a list");
        assert_eq!(kro_spec("{}").unwrap_err(), "spec is missing");
        assert_eq!(kro_spec("[]").unwrap_err(), "the object must be an object, not a list");
        assert_eq!(kro_spec("{").unwrap_err(), "the object is not a JSON document");
    }

    #[test]
    fn a_provider_config_names_the_version_at_fault() {
        let ok = config(json!({"pollInterval": null, "versions": [
            {"version": "v1", "chartVersion": "1", "chartURL": null, "helmValues": {"a": 1}}
        ]}))
        .unwrap();
        assert_eq!(ok.poll_interval, None);
        assert_eq!(ok.versions[0].helm_values, Some(json!({"a": 1})));
        assert_eq!(config(json!({})).unwrap_err(), "spec.versions is missing");
        assert_eq!(config(json!({"versions": "v1"})).unwrap_err(), "spec.versions must be a list, not a string");
        assert_eq!(
            config(json!({"versions": [{"version": "v1", "chartVersion": "1"}, {"version": "v2"}]})).unwrap_err(),
            "spec.versions[1].chartVersion is missing"
        );
        assert_eq!(
            config(json!({"versions": [{"version": "v1", "chartVersion": "1", "chartPullSecret": true}]})).unwrap_err(),
            "spec.versions[0].chartPullSecret must be a string, not a boolean"
        );
        assert_eq!(config(json!({"versions": [7]})).unwrap_err(), "spec.versions[0] must be an object, not a number");
        assert_eq!(
            config(json!({"versions": [], "pollInterval": 5})).unwrap_err(),
            "spec.pollInterval must be a string, not a number"
        );
    }

    #[test]
    fn image_pull_secret_names_are_read_as_written() {
        let names = image_pull_secret_names(&json!({"imagePullSecrets": [{"name": "a"}, {}, {"name": null}]}));
        assert_eq!(names.unwrap(), ["a", "", ""]);
        assert!(image_pull_secret_names(&json!({"imagePullSecrets": null})).unwrap().is_empty());
        assert_eq!(
            image_pull_secret_names(&json!({"imagePullSecrets": [{"name": 5}]})).unwrap_err(),
            "helmValues.imagePullSecrets[0].name must be a string, not a number"
        );
        assert_eq!(image_pull_secret_names(&json!("x")).unwrap_err(), "helmValues must be an object, not a string");
    }
}
