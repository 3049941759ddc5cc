//! What Kubernetes accepts as names, versions, kinds and plurals: the rule
//! every string from a plugin, a tenant or a cluster must pass before it
//! becomes part of a request path (a URL), a label or another object's
//! identity; and [`one_line`], how free text from outside is shown in a
//! message. A leaf module: it imports nothing from the crate.
//!
//! Every predicate here accepts only lower-case letters, digits, `-` and
//! (for subdomains) `.`, with letters or digits at the edges: no `/`, `?`,
//! `#`, `%` or `..` segment can pass, so a string that passed is exactly
//! one path segment (or, for a subdomain, one dot-separated run of them)
//! and a request built from it never leaves the object's own path.

/// Letters or digits at both ends.
fn alnum_edges(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric()) && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn lower_alnum_dash(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// RFC 1123 label: namespaces and most names' parts (`kro-system`).
pub fn dns_label(s: &str) -> bool {
    !s.is_empty() && s.len() <= 63 && lower_alnum_dash(s) && alnum_edges(s)
}

/// RFC 1035 label: an RFC 1123 label that starts with a letter. API
/// versions and REST plurals are these (the API server validates CRD
/// plurals and versions so).
pub fn dns1035_label(s: &str) -> bool {
    dns_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// RFC 1123 subdomain: object names and API groups (`things.kro.run`).
pub fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(dns_label)
}

/// An API group: empty (the core group) or a subdomain.
pub fn api_group(s: &str) -> bool {
    s.is_empty() || dns_subdomain(s)
}

/// An API version within a group (`v1`, `v2beta1`).
pub fn api_version_part(s: &str) -> bool {
    dns1035_label(s)
}

/// An `apiVersion`: `group/version`, or `version` for the core group.
pub fn api_version(s: &str) -> bool {
    match s.split_once('/') {
        Some((group, version)) => dns_subdomain(group) && api_version_part(version),
        None => api_version_part(s),
    }
}

/// A kind: `UpperCamelCase` letters and digits (`HelmRelease`).
pub fn kind(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A REST plural (`helmreleases`).
pub fn plural(s: &str) -> bool {
    dns1035_label(s)
}

/// A label or annotation key, or a finalizer: `[prefix/]name`.
pub fn qualified_name(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    prefix.is_none_or(dns_subdomain)
        && !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && alnum_edges(name)
}

/// A label value (may be empty).
pub fn label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && alnum_edges(value))
}

/// A condition reason (`ReconcileSuccess`, `Install:Failed`): what
/// metav1.Condition accepts, a letter first, then letters, digits, `_`,
/// `,` or `:`, never ending in `,` or `:`; at most 1024 bytes.
pub fn condition_reason(s: &str) -> bool {
    s.len() <= 1024
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        && !s.ends_with([',', ':'])
}

/// A phase (`Ready`, `Progressing`): one word of ASCII letters and digits,
/// a letter first, at most 63 bytes. Empty means none.
pub fn phase(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Whether a character would break or rearrange the line it is shown on:
/// control characters (line breaks, tabs, escapes), the Unicode line and
/// paragraph separators, and the bidirectional overrides and isolates that
/// make a terminal show text in another order than it was written.
pub fn breaks_a_line(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Free text from others (a plugin's message, an API server's error) made
/// safe for a line someone reads: every character that [`breaks_a_line`]
/// becomes a space, so it forges no row of `kubectl describe`, `kubectl get
/// events` or a text log.
pub fn flat(text: &str) -> String {
    text.chars().map(|c| if breaks_a_line(c) { ' ' } else { c }).collect()
}

/// The most characters of a plugin's error text (a transient error, what
/// it says a tenant must fix) the host keeps: a line someone reads (a log
/// line, a trace event, a condition, an Event), not a document.
pub const PLUGIN_TEXT: usize = 1024;

/// Free text from outside (a registry's error, a refused value) shown on
/// one line of a message: as [`flat`], at most `max` characters, with `…`
/// when cut.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line: String = text.chars().map(|c| if breaks_a_line(c) { ' ' } else { c }).take(max).collect();
    if text.chars().count() > max {
        line.push('…');
    }
    line
}

/// A Go duration (`time.ParseDuration`, what Kubernetes' `metav1.Duration`
/// and Flux's intervals are): a sequence of decimal numbers, each with a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `1m30s` or `1.5h`;
/// `0` alone is zero. `None` for anything else, a sign included (Flux
/// refuses negative durations too) or a value past `u64` nanoseconds.
pub fn go_duration(text: &str) -> Option<std::time::Duration> {
    if text == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut rest = text;
    let mut nanos: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return None;
        }
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
        let mut part = whole.checked_mul(scale)?;
        let mut divisor: u128 = 1;
        for digit in fraction.bytes().take(18) {
            divisor *= 10;
            part = part.checked_add(u128::from(digit - b'0') * scale / divisor)?;
        }
        nanos = nanos.checked_add(part)?;
        rest = next;
    }
    u64::try_from(nanos).ok().map(std::time::Duration::from_nanos)
}

/// `(group, version)` of an `apiVersion`; the core group is `""`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The API group of an `apiVersion` (empty for the core group).
pub fn group_of(api_version: &str) -> &str {
    split_api_version(api_version).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_split_into_group_and_version() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("helm.toolkit.fluxcd.io/v2"), "helm.toolkit.fluxcd.io");
    }

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        let d = |s: &str| go_duration(s).map(|d| d.as_millis());
        assert_eq!(d("1m0s"), Some(60_000));
        assert_eq!(d("1m30s"), Some(90_000));
        assert_eq!(d("1.5h"), Some(5_400_000));
        assert_eq!(d("300ms"), Some(300));
        assert_eq!(d("2h45m"), Some(9_900_000));
        assert_eq!(d(".5s"), Some(500));
        assert_eq!(d("0"), Some(0));
        assert_eq!(go_duration("1us"), Some(std::time::Duration::from_micros(1)));
        for bad in ["", "1", "-1m", "+1m", "1d", "m", "1.2.3s", "1 m", "9999999999999h", "1m\n"] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn flat_text_breaks_no_line_and_turns_nothing_around() {
        let forged = "ok\nReady: True\r\n\t\u{1b}[2J\u{85}next\u{2028}sep\u{202e}desrever\u{2066}x";
        assert_eq!(flat(forged), "ok Ready: True    [2J next sep desrever x");
        assert_eq!(flat("ünïcødé stays"), "ünïcødé stays");
        assert_eq!(one_line(forged, 8), "ok Ready…");
    }

    #[test]
    fn reasons_and_phases_are_single_words() {
        for good in ["ReconcileSuccess", "Install:Failed", "a_b,c1", "X"] {
            assert!(condition_reason(good), "{good}");
        }
        for bad in ["", "1Reason", "Ends:", "Two words", "Line\nbreak", "Ésprit", &"R".repeat(1025)] {
            assert!(!condition_reason(bad), "{bad:?}");
        }
        assert!(phase("") && phase("Ready") && phase("Progressing2"));
        assert!(!phase("Not ready") && !phase("9lives") && !phase("\u{1b}[31mRed") && !phase(&"P".repeat(64)));
    }

    #[test]
    fn one_line_is_printable_and_bounded() {
        assert_eq!(one_line("a\nb\u{1b}c", 10), "a b c");
        assert_eq!(one_line("éééé", 3), "ééé…");
        assert_eq!(one_line("abc", 3), "abc");
    }

    #[test]
    fn names_follow_kubernetes_rules() {
        assert!(dns_label("kro-system") && !dns_label("-a") && !dns_label(&"a".repeat(64)));
        assert!(dns_subdomain("things.kro.run") && !dns_subdomain("a..b"));
        assert!(qualified_name("app.kubernetes.io/name") && !qualified_name("/x") && !qualified_name("a/b/c"));
        assert!(label_value("") && label_value("v1.2_3") && !label_value("-x"));
    }

    #[test]
    fn what_would_bend_a_request_path_never_passes() {
        for bad in ["helmreleases#", "v2/helmreleases#", "a?watch=true", "a/b", "..", "a%2Fb", "A", "", " a", "ä"] {
            assert!(!plural(bad) && !api_version_part(bad) && !dns_label(bad), "{bad:?}");
            assert!(!dns_subdomain(bad), "{bad:?}");
        }
        assert!(!api_version("helm.toolkit.fluxcd.io/v2/helmreleases#"));
        assert!(!api_version("helm.toolkit.fluxcd.io/v2?x"));
        assert!(api_version("helm.toolkit.fluxcd.io/v2") && api_version("v1"));
        assert!(!api_version("1") && !plural("1things"), "versions and plurals start with a letter");
        assert!(kind("HelmRelease") && !kind("helmRelease") && !kind("Helm-Release"));
        assert!(api_group("") && api_group("apps") && !api_group("Apps") && !api_group("a/b"));
    }
}
