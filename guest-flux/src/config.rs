//! Reading the ProviderConfig: version resolution, chart URL, poll interval,
//! the Helm values the provider acts on, and the CA bundle it wires into
//! every Flux controller.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::api::{CaBundleRef, DEFAULT_CHART_URL, FluxVersion, ProviderConfigSpec};

/// Seconds in the default poll interval (`1m`).
pub const DEFAULT_POLL_SECONDS: u32 = 60;
/// The poll interval as the Flux objects' interval when none is set.
pub const DEFAULT_POLL_INTERVAL: &str = "1m";
/// Where Flux goes on the ControlPlane unless `namespaceOverride` says otherwise.
pub const DEFAULT_FLUX_NAMESPACE: &str = "flux-system";
/// The copy of the CA bundle on the ControlPlane, and the volume mounting it.
pub const CA_BUNDLE: &str = "custom-ca-bundle";
/// Where the bundle is mounted in every controller.
pub const CA_MOUNT_PATH: &str = "/etc/open-control-plane/custom-ca";
/// The certificate directories every controller searches, the bundle last.
pub const SSL_CERT_DIR: &str = "/etc/ssl/certs:/etc/pki/tls/certs:/etc/open-control-plane/custom-ca";
/// The sections of the flux2 chart's values that run a controller.
pub const CONTROLLER_SECTIONS: [&str; 7] = [
    "helmController",
    "imageAutomationController",
    "imageReflectionController",
    "kustomizeController",
    "notificationController",
    "sourceController",
    "sourceWatcher",
];

const NOT_AVAILABLE: &str = "invalid user input: requested version is not available";

/// The offered version a tenant asked for (the first exact match); the error
/// lists what is offered, unlike the Go provider's.
pub fn resolve_version<'a>(config: Option<&'a ProviderConfigSpec>, requested: &str) -> Result<&'a FluxVersion, Error> {
    let Some(config) = config else {
        return Err(Error::VersionNotAvailable(format!(
            "{NOT_AVAILABLE}: {requested:?}, no provider config is configured"
        )));
    };
    if config.versions.is_empty() {
        return Err(Error::VersionNotAvailable(format!(
            "{NOT_AVAILABLE}: {requested:?}, the provider config offers no versions"
        )));
    }
    config.versions.iter().find(|v| v.version == requested).ok_or_else(|| {
        let offered: Vec<&str> = config.versions.iter().map(|v| v.version.as_str()).collect();
        Error::VersionNotAvailable(format!(
            "{NOT_AVAILABLE}: {requested:?}, available versions are: {}",
            offered.join(", ")
        ))
    })
}

/// The chart URL of a version: the default when unset or empty, otherwise as
/// given, which must be an `oci://` URL (Flux's OCIRepository needs one).
pub fn chart_url(version: &FluxVersion) -> Result<String, Error> {
    match version.chart_url.as_deref() {
        None | Some("") => Ok(DEFAULT_CHART_URL.to_string()),
        Some(url) if url.starts_with("oci://") => Ok(url.to_string()),
        Some(url) => Err(Error::InvalidProviderConfig(format!(
            "chartUrl {url:?} of version {:?} is not an oci:// URL",
            version.version
        ))),
    }
}

/// The poll interval as given (for the Flux objects) and in whole seconds
/// (for the requeue), `1m` when unset.
pub fn poll_interval(config: Option<&ProviderConfigSpec>) -> Result<(String, u32), Error> {
    match config.and_then(|c| c.poll_interval.as_deref()) {
        None => Ok((DEFAULT_POLL_INTERVAL.to_string(), DEFAULT_POLL_SECONDS)),
        Some(text) => guest_kro::config::parse_duration_seconds(text).map(|s| (text.to_string(), s)).ok_or_else(|| {
            Error::InvalidProviderConfig(format!(
                "spec.pollInterval {text:?} is not a duration such as 30s, 5m or 1h30m"
            ))
        }),
    }
}

/// The parts of the Helm values the provider acts on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Values {
    /// The namespace Flux goes into on the ControlPlane.
    pub namespace: String,
    /// Names under `imagePullSecrets`, in order, without duplicates.
    pub image_pull_secrets: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawValues {
    #[serde(default)]
    namespace_override: Option<String>,
    #[serde(default)]
    image_pull_secrets: Option<Vec<Reference>>,
}

#[derive(Deserialize)]
struct Reference {
    #[serde(default)]
    name: String,
}

/// Reads `namespaceOverride` and `imagePullSecrets`; other keys go to the
/// chart untouched. Malformed values are invalid input.
pub fn values(values: Option<&Value>) -> Result<Values, Error> {
    let invalid = |e: String| Error::InvalidProviderConfig(format!("failed to parse values: {e}"));
    let Some(values) = values.filter(|v| !v.is_null()) else {
        return Ok(Values { namespace: DEFAULT_FLUX_NAMESPACE.into(), image_pull_secrets: Vec::new() });
    };
    let raw = RawValues::deserialize(values).map_err(|e| invalid(e.to_string()))?;
    let namespace = match raw.namespace_override.filter(|n| !n.is_empty()) {
        None => DEFAULT_FLUX_NAMESPACE.to_string(),
        Some(ns) if is_dns_label(&ns) => ns,
        Some(ns) => return Err(invalid(format!("namespaceOverride {ns:?} is not a valid namespace name"))),
    };
    let mut image_pull_secrets: Vec<String> = Vec::new();
    for (index, reference) in raw.image_pull_secrets.unwrap_or_default().into_iter().enumerate() {
        if reference.name.is_empty() {
            return Err(invalid(format!("imagePullSecrets[{index}].name must not be empty")));
        }
        if !image_pull_secrets.contains(&reference.name) {
            image_pull_secrets.push(reference.name);
        }
    }
    Ok(Values { namespace, image_pull_secrets })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The Helm values with the CA bundle wired into every controller: a volume
/// from the `custom-ca-bundle` ConfigMap, its mount, and `SSL_CERT_DIR`
/// searching it last. Entries of the same name (or mount path) the operator
/// set are replaced, everything else is kept.
pub fn with_ca_bundle(values: Option<&Value>, reference: &CaBundleRef) -> Result<Value, Error> {
    let invalid = |e: String| Error::InvalidProviderConfig(e);
    if reference.name.is_empty() {
        return Err(invalid("caBundleRef.name must be set".into()));
    }
    if reference.key.is_empty() {
        return Err(invalid("caBundleRef.key must be set".into()));
    }
    let mut values = values.filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!({}));
    let root = values.as_object_mut().ok_or_else(|| invalid("failed to parse values: not an object".into()))?;
    let volume = json!({"name": CA_BUNDLE, "configMap": {"name": CA_BUNDLE, "items": [{"key": reference.key, "path": reference.key}]}});
    let mount = json!({"name": CA_BUNDLE, "mountPath": CA_MOUNT_PATH, "readOnly": true});
    let env = json!({"name": "SSL_CERT_DIR", "value": SSL_CERT_DIR});
    for section in CONTROLLER_SECTIONS {
        let section_value = root.entry(section).or_insert_with(|| json!({}));
        if section_value.is_null() {
            *section_value = json!({});
        }
        let fields = section_value
            .as_object_mut()
            .ok_or_else(|| invalid(format!("failed to parse values: {section} is not an object")))?;
        replace(fields, section, "volumes", volume.clone(), |v| v.get("name") == volume.get("name"))?;
        replace(fields, section, "volumeMounts", mount.clone(), |m| {
            m.get("name") == mount.get("name") || m.get("mountPath") == mount.get("mountPath")
        })?;
        replace(fields, section, "extraEnv", env.clone(), |e| e.get("name") == env.get("name"))?;
    }
    Ok(values)
}

/// Removes the entries of list `key` that `clashes`, then appends `entry`.
fn replace(
    fields: &mut serde_json::Map<String, Value>,
    section: &str,
    key: &str,
    entry: Value,
    clashes: impl Fn(&Value) -> bool,
) -> Result<(), Error> {
    let list = fields.entry(key).or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let items = list.as_array_mut().ok_or_else(|| {
        Error::InvalidProviderConfig(format!("failed to parse values: {section}.{key} is not a list"))
    })?;
    items.retain(|item| !clashes(item));
    items.push(entry);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(v: &str) -> FluxVersion {
        FluxVersion {
            version: v.into(),
            chart_version: "2.18.2".into(),
            chart_url: None,
            chart_pull_secret: None,
            values: None,
        }
    }

    fn config(versions: Vec<FluxVersion>) -> ProviderConfigSpec {
        ProviderConfigSpec { versions, poll_interval: None, ca_bundle_ref: None }
    }

    fn ca(name: &str, key: &str) -> CaBundleRef {
        CaBundleRef { name: name.into(), key: key.into(), optional: None }
    }

    #[test]
    fn versions_match_verbatim_and_unknown_ones_list_the_offer() {
        let pc = config(vec![version("2.8.3"), version("2.9.0")]);
        assert_eq!(resolve_version(Some(&pc), "2.9.0").unwrap().version, "2.9.0");
        let err = resolve_version(Some(&pc), "v2.8.3").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid user input: requested version is not available: \"v2.8.3\", available versions are: 2.8.3, 2.9.0"
        );
        assert!(err.is_invalid_input());
        assert!(resolve_version(None, "1").unwrap_err().is_invalid_input());
        assert!(resolve_version(Some(&config(vec![])), "1").unwrap_err().to_string().contains("offers no versions"));
    }

    #[test]
    fn the_chart_url_defaults_and_must_be_oci() {
        let mut v = version("1");
        assert_eq!(chart_url(&v).unwrap(), DEFAULT_CHART_URL);
        v.chart_url = Some("oci://registry.example/charts/flux2".into());
        assert_eq!(chart_url(&v).unwrap(), "oci://registry.example/charts/flux2");
        v.chart_url = Some("https://charts.example/flux2".into());
        assert!(chart_url(&v).unwrap_err().is_invalid_input());
    }

    #[test]
    fn the_poll_interval_is_kept_as_written_for_flux() {
        assert_eq!(poll_interval(None).unwrap(), ("1m".to_string(), 60));
        let mut pc = config(vec![]);
        pc.poll_interval = Some("5m".into());
        assert_eq!(poll_interval(Some(&pc)).unwrap(), ("5m".to_string(), 300));
        pc.poll_interval = Some("soon".into());
        assert!(poll_interval(Some(&pc)).unwrap_err().is_invalid_input());
    }

    #[test]
    fn values_give_the_namespace_and_pull_secrets() {
        assert_eq!(values(None).unwrap().namespace, "flux-system");
        let v =
            json!({"namespaceOverride": "gitops", "imagePullSecrets": [{"name": "a"}, {"name": "b"}, {"name": "a"}]});
        assert_eq!(
            values(Some(&v)).unwrap(),
            Values { namespace: "gitops".into(), image_pull_secrets: vec!["a".into(), "b".into()] }
        );
        assert_eq!(values(Some(&json!({"namespaceOverride": ""}))).unwrap().namespace, "flux-system");
        for bad in [
            json!({"namespaceOverride": "Not_A_Namespace"}),
            json!({"imagePullSecrets": "a"}),
            json!({"imagePullSecrets": [{}]}),
            json!([1]),
        ] {
            let err = values(Some(&bad)).unwrap_err();
            assert!(err.is_invalid_input() && err.to_string().starts_with("failed to parse values: "), "{bad}: {err}");
        }
    }

    #[test]
    fn the_ca_bundle_reaches_all_seven_controllers() {
        let out = with_ca_bundle(None, &ca("bundle", "ca.crt")).unwrap();
        for section in CONTROLLER_SECTIONS {
            let s = &out[section];
            assert_eq!(
                s["volumes"],
                json!([{"name": "custom-ca-bundle", "configMap": {"name": "custom-ca-bundle", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]),
                "{section}"
            );
            assert_eq!(
                s["volumeMounts"],
                json!([{"name": "custom-ca-bundle", "mountPath": CA_MOUNT_PATH, "readOnly": true}])
            );
            assert_eq!(s["extraEnv"], json!([{"name": "SSL_CERT_DIR", "value": SSL_CERT_DIR}]));
        }
    }

    #[test]
    fn existing_values_are_kept_and_clashing_entries_replaced() {
        let given = json!({
            "sourceController": {
                "image": "registry.example/source-controller",
                "volumes": [{"name": "custom-ca-bundle", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
                "volumeMounts": [{"name": "other", "mountPath": CA_MOUNT_PATH}, {"name": "data", "mountPath": "/data"}],
                "extraEnv": [{"name": "SSL_CERT_DIR", "value": "/old"}, {"name": "HTTPS_PROXY", "value": "p"}]
            },
            "helmController": null,
            "cli": {"image": "x"}
        });
        let out = with_ca_bundle(Some(&given), &ca("bundle", "ca.crt")).unwrap();
        let s = &out["sourceController"];
        assert_eq!(s["image"], "registry.example/source-controller");
        assert_eq!(s["volumes"].as_array().unwrap().len(), 2);
        assert_eq!(s["volumes"][0]["name"], "data");
        assert_eq!(s["volumeMounts"].as_array().unwrap().iter().filter(|m| m["mountPath"] == CA_MOUNT_PATH).count(), 1);
        assert_eq!(
            s["extraEnv"],
            json!([{"name": "HTTPS_PROXY", "value": "p"}, {"name": "SSL_CERT_DIR", "value": SSL_CERT_DIR}])
        );
        assert_eq!(out["cli"]["image"], "x");
        assert!(out["helmController"]["volumes"].is_array());
    }

    #[test]
    fn a_ca_reference_without_name_or_key_or_with_odd_values_is_refused() {
        assert_eq!(with_ca_bundle(None, &ca("", "k")).unwrap_err().to_string(), "caBundleRef.name must be set");
        assert_eq!(with_ca_bundle(None, &ca("n", "")).unwrap_err().to_string(), "caBundleRef.key must be set");
        for bad in [json!("text"), json!({"sourceController": 5}), json!({"kustomizeController": {"volumes": {}}})] {
            assert!(with_ca_bundle(Some(&bad), &ca("n", "k")).unwrap_err().is_invalid_input(), "{bad}");
        }
    }
}
