//! Reading the ProviderConfig: version resolution, chart URL, poll interval
//! and the parts of the Helm values the provider acts on.

use crate::api::{DEFAULT_CHART_URL, KroVersion, ProviderConfigSpec};
use crate::{Error, read};

/// Seconds in the default poll interval (`1m`).
pub const DEFAULT_POLL_SECONDS: u32 = 60;

/// The prefix every version-resolution error starts with; it matches the Go
/// provider's `ErrVersionNotAvailable` text so tenants see the same message.
const NOT_AVAILABLE: &str = "invalid user input: requested version is not available";

/// Finds the offered version a tenant asked for: the first entry whose
/// `version` equals the request exactly (no semver, no `v` inference).
pub fn resolve_version<'a>(config: Option<&'a ProviderConfigSpec>, requested: &str) -> Result<&'a KroVersion, Error> {
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

/// The chart URL of a version: the default when unset or empty, and `oci://`
/// prepended when the scheme is missing.
pub fn chart_url(version: &KroVersion) -> String {
    match version.chart_url.as_deref() {
        None | Some("") => DEFAULT_CHART_URL.to_string(),
        Some(url) if url.starts_with("oci://") => url.to_string(),
        Some(url) => format!("oci://{url}"),
    }
}

/// The poll interval in whole seconds (rounded up), `1m` when unset.
pub fn poll_interval_seconds(config: Option<&ProviderConfigSpec>) -> Result<u32, Error> {
    match config.and_then(|c| c.poll_interval.as_deref()) {
        None => Ok(DEFAULT_POLL_SECONDS),
        Some(text) => parse_duration_seconds(text).ok_or_else(|| {
            Error::InvalidProviderConfig(format!(
                "spec.pollInterval {text:?} is not a duration such as 30s, 5m or 1h30m"
            ))
        }),
    }
}

/// Parses a Go `time.Duration` string (`300ms`, `1.5h`, `2h45m`) into whole
/// seconds, rounding up, saturating at `u32::MAX`.
pub fn parse_duration_seconds(text: &str) -> Option<u32> {
    let mut rest = text.trim();
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Some(total.ceil().min(f64::from(u32::MAX)) as u32)
}

/// Names under `helmValues.imagePullSecrets`, in order, without duplicates.
/// Unknown keys are ignored; a malformed list is invalid input.
pub fn image_pull_secrets(values: Option<&serde_json::Value>) -> Result<Vec<String>, Error> {
    let Some(values) = values.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let invalid = |problem: String| Error::InvalidProviderConfig(format!("failed to parse helm values: {problem}"));
    let mut names: Vec<String> = Vec::new();
    for (index, name) in read::image_pull_secret_names(values).map_err(invalid)?.into_iter().enumerate() {
        if name.is_empty() {
            return Err(invalid(format!("helmValues.imagePullSecrets[{index}].name must not be empty")));
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn version(v: &str, chart: &str) -> KroVersion {
        KroVersion {
            version: v.into(),
            chart_version: chart.into(),
            chart_url: None,
            chart_pull_secret: None,
            helm_values: None,
        }
    }

    fn config(versions: Vec<KroVersion>) -> ProviderConfigSpec {
        ProviderConfigSpec { versions, poll_interval: None }
    }

    #[test]
    fn resolves_a_prefixed_version_to_its_chart_version() {
        let pc = config(vec![version("v0.9.1", "0.9.1"), version("v0.9.3", "0.9.3")]);
        assert_eq!(resolve_version(Some(&pc), "v0.9.3").unwrap().chart_version, "0.9.3");
    }

    #[test]
    fn resolves_an_unprefixed_version() {
        let pc = config(vec![version("0.9.3", "0.9.3")]);
        assert_eq!(resolve_version(Some(&pc), "0.9.3").unwrap().version, "0.9.3");
    }

    #[test]
    fn matching_is_verbatim() {
        let pc = config(vec![version("v0.9.3", "0.9.3")]);
        let err = resolve_version(Some(&pc), "0.9.3").unwrap_err();
        assert!(err.is_invalid_input());
    }

    #[test]
    fn unknown_version_lists_the_offered_ones_in_order() {
        let pc = config(vec![version("v0.9.3", "0.9.3"), version("v0.9.1", "0.9.1")]);
        let err = resolve_version(Some(&pc), "9.9.9").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid user input: requested version is not available: \"9.9.9\", available versions are: v0.9.3, v0.9.1"
        );
        assert!(err.is_invalid_input());
    }

    #[test]
    fn empty_list_and_missing_config_have_their_own_messages() {
        let empty = config(vec![]);
        assert_eq!(
            resolve_version(Some(&empty), "v1").unwrap_err().to_string(),
            "invalid user input: requested version is not available: \"v1\", the provider config offers no versions"
        );
        let missing = resolve_version(None, "v1").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "invalid user input: requested version is not available: \"v1\", no provider config is configured"
        );
        assert!(missing.is_invalid_input());
    }

    #[test]
    fn chart_url_defaults_and_gets_the_oci_scheme() {
        let mut v = version("v1", "1");
        assert_eq!(chart_url(&v), DEFAULT_CHART_URL);
        v.chart_url = Some(String::new());
        assert_eq!(chart_url(&v), DEFAULT_CHART_URL);
        v.chart_url = Some("oci://example.com/charts/kro".into());
        assert_eq!(chart_url(&v), "oci://example.com/charts/kro");
        v.chart_url = Some("example.com/charts/kro".into());
        assert_eq!(chart_url(&v), "oci://example.com/charts/kro");
    }

    #[test]
    fn poll_interval_defaults_to_a_minute_and_parses_go_durations() {
        assert_eq!(poll_interval_seconds(None).unwrap(), 60);
        let mut pc = config(vec![]);
        assert_eq!(poll_interval_seconds(Some(&pc)).unwrap(), 60);
        pc.poll_interval = Some("5m".into());
        assert_eq!(poll_interval_seconds(Some(&pc)).unwrap(), 300);
        for (text, seconds) in [("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("300ms", 1), ("0s", 0), ("0", 0)] {
            assert_eq!(parse_duration_seconds(text), Some(seconds), "{text}");
        }
        for bad in ["", "5", "5 minutes", "m", "1d", "-"] {
            assert_eq!(parse_duration_seconds(bad), None, "{bad}");
        }
        pc.poll_interval = Some("soon".into());
        let err = poll_interval_seconds(Some(&pc)).unwrap_err();
        assert!(err.is_invalid_input());
        assert!(err.to_string().contains("spec.pollInterval \"soon\""));
    }

    #[test]
    fn helm_values_without_pull_secrets_give_none() {
        assert!(image_pull_secrets(None).unwrap().is_empty());
        assert!(image_pull_secrets(Some(&json!(null))).unwrap().is_empty());
        assert!(image_pull_secrets(Some(&json!({}))).unwrap().is_empty());
        assert!(image_pull_secrets(Some(&json!({"config": {"logLevel": "debug"}}))).unwrap().is_empty());
    }

    #[test]
    fn helm_values_pull_secrets_are_parsed_in_order_without_duplicates() {
        let values = json!({
            "imagePullSecrets": [{"name": "one"}, {"name": "two", "extra": true}, {"name": "one"}],
            "deployment": {"replicas": 2}
        });
        assert_eq!(image_pull_secrets(Some(&values)).unwrap(), ["one", "two"]);
    }

    #[test]
    fn malformed_helm_values_are_invalid_input() {
        for bad in [
            json!({"imagePullSecrets": "one"}),
            json!({"imagePullSecrets": [{"name": 5}]}),
            json!({"imagePullSecrets": [{}]}),
            json!("just a string"),
        ] {
            let err = image_pull_secrets(Some(&bad)).unwrap_err();
            assert!(err.is_invalid_input(), "{bad}");
            assert!(err.to_string().starts_with("failed to parse helm values: "), "{err}");
        }
    }
}
