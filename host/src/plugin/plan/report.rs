//! What a plugin reports about an instance (phase, conditions, resources),
//! checked before the host writes it into the tenant's service object. The
//! words that tools read (a condition's type and reason, a phase, the kind
//! and name of a resource) must have the shape Kubernetes gives them, and
//! the counts are bounded: a plugin may not grow a status without end nor
//! make one the API server refuses. Free text (messages) is not refused
//! here; [`crate::reconcile::status`] bounds it and takes control characters out, and
//! keeps at most [`MAX_CONDITIONS`] conditions in all.

use service_provider_sdk::contract::{ResourceStatus, ServiceStatus};

use crate::syntax;

/// The most conditions a status holds: a plugin reports at most this many
/// at once, and of the conditions it stopped reporting the host keeps the
/// most recently changed, up to this many in all.
pub const MAX_CONDITIONS: usize = 16;

/// The host's own condition: what it cut from or held back of what a plugin
/// (or the tenant's object) made it write. Present only while it does; a
/// plugin may not report a condition of this type.
pub const CONDITION_LIMITED: &str = "Limited";

/// The most entries of `status.resources` (a plan has at most 256 objects,
/// and copies).
pub const MAX_RESOURCES: usize = 512;

/// Longest `location` of a resource entry.
const MAX_LOCATION: usize = 1024;

/// Checks a reported status; the error names the field at fault.
pub fn status(status: &ServiceStatus) -> Result<(), String> {
    if !syntax::phase(&status.phase) {
        return Err(format!("status.phase {:?} is not one word of letters and digits", clip(&status.phase)));
    }
    if status.conditions.len() > MAX_CONDITIONS {
        return Err(format!("status has {} conditions, more than {MAX_CONDITIONS}", status.conditions.len()));
    }
    for (i, c) in status.conditions.iter().enumerate() {
        if !syntax::qualified_name(&c.type_) {
            return Err(format!("status.conditions[{i}].type {:?} is not a condition type", clip(&c.type_)));
        }
        if c.type_ == CONDITION_LIMITED {
            return Err(format!("status.conditions[{i}].type {CONDITION_LIMITED:?} is the host's own condition"));
        }
        if status.conditions[..i].iter().any(|earlier| earlier.type_ == c.type_) {
            return Err(format!("status.conditions[{i}].type {:?} is named twice", c.type_));
        }
        if !syntax::condition_reason(&c.reason) {
            return Err(format!(
                "status.conditions[{i}].reason {:?} is not a CamelCase reason (letters, digits, `_`, `,`, `:`)",
                clip(&c.reason)
            ));
        }
    }
    match &status.resources {
        Some(list) => resources(list),
        None => Ok(()),
    }
}

/// Checks the entries of `status.resources`.
pub fn resources(list: &[ResourceStatus]) -> Result<(), String> {
    if list.len() > MAX_RESOURCES {
        return Err(format!("status.resources has {} entries, more than {MAX_RESOURCES}", list.len()));
    }
    for (i, r) in list.iter().enumerate() {
        let at = |field: &str, value: &str, what: &str| {
            Err(format!("status.resources[{i}].{field} {:?} is not {what}", clip(value)))
        };
        if let Some(group) = r.api_group.as_deref().filter(|g| !g.is_empty() && !syntax::api_group(g)) {
            return at("apiGroup", group, "an API group");
        }
        if !syntax::kind(&r.kind) {
            return at("kind", &r.kind, "a kind");
        }
        if !object_name(&r.name) {
            return at("name", &r.name, "an object name");
        }
        if let Some(ns) = r.namespace.as_deref().filter(|ns| !syntax::dns_label(ns)) {
            return at("namespace", ns, "a namespace name");
        }
        if !syntax::phase(&r.phase) {
            return at("phase", &r.phase, "one word of letters and digits");
        }
        if let Some(location) = r.location.as_deref().filter(|l| l.len() > MAX_LOCATION || !printable(l)) {
            return at("location", location, "a printable line of at most 1024 bytes");
        }
    }
    Ok(())
}

/// Any name the API server accepts for some kind: at most 253 bytes,
/// printable, no spaces, no `/` (names with a colon, as RBAC uses, pass).
fn object_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && printable(s) && !s.contains(|c: char| c.is_whitespace() || c == '/')
}

fn printable(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

/// A refused value, shown in an error: short, on one line.
fn clip(value: &str) -> String {
    syntax::one_line(value, 64)
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::{Condition, ConditionStatus};

    use super::*;

    fn condition(type_: &str, reason: &str) -> Condition {
        Condition { type_: type_.into(), status: ConditionStatus::True, reason: reason.into(), message: "m".into() }
    }

    fn resource(name: &str) -> ResourceStatus {
        ResourceStatus {
            api_group: Some("helm.toolkit.fluxcd.io".into()),
            kind: "HelmRelease".into(),
            name: name.into(),
            namespace: Some("mcp--tenant".into()),
            phase: "Ready".into(),
            message: Some("any text\nat all".into()),
            location: None,
        }
    }

    fn report(conditions: Vec<Condition>, resources: Option<Vec<ResourceStatus>>) -> ServiceStatus {
        ServiceStatus { phase: "Ready".into(), conditions, resources }
    }

    #[test]
    fn what_the_shipped_plugins_report_passes() {
        let ok = report(
            vec![condition("Ready", "ReconcileSuccess"), condition("example.com/Installed", "Install:Done")],
            Some(vec![resource("kro-helm-release"), resource("system:kro")]),
        );
        assert_eq!(status(&ok), Ok(()));
        assert_eq!(status(&report(vec![], None)), Ok(()));
    }

    #[test]
    fn malformed_reports_are_refused_naming_the_field() {
        let mut too_many: Vec<Condition> = (0..=MAX_CONDITIONS).map(|i| condition(&format!("T{i}"), "R")).collect();
        let cases: Vec<(ServiceStatus, &str)> = vec![
            (ServiceStatus { phase: "Not ready".into(), ..report(vec![], None) }, "status.phase \"Not ready\""),
            (report(std::mem::take(&mut too_many), None), "17 conditions, more than 16"),
            (report(vec![condition("Ready\nInjected", "R")], None), "conditions[0].type \"Ready Injected\""),
            (
                report(vec![condition("Ready", "R"), condition("Ready", "S")], None),
                "conditions[1].type \"Ready\" is named twice",
            ),
            (report(vec![condition("Ready", "Fine. Really")], None), "conditions[0].reason \"Fine. Really\""),
            (report(vec![condition("Ready", "")], None), "conditions[0].reason \"\""),
            (report(vec![condition("Limited", "Nothing")], None), "\"Limited\" is the host's own condition"),
            (report(vec![], Some(vec![resource("a/b")])), "resources[0].name \"a/b\""),
            (report(vec![], Some(vec![resource(&"n".repeat(254))])), "resources[0].name"),
            (
                report(vec![], Some(vec![ResourceStatus { kind: "helm release".into(), ..resource("x") }])),
                "resources[0].kind",
            ),
            (
                report(vec![], Some(vec![ResourceStatus { namespace: Some("A B".into()), ..resource("x") }])),
                "resources[0].namespace",
            ),
            (
                report(vec![], Some(vec![ResourceStatus { location: Some("\u{1b}[2J".into()), ..resource("x") }])),
                "resources[0].location",
            ),
            (report(vec![], Some(vec![resource("x"); MAX_RESOURCES + 1])), "513 entries, more than 512"),
        ];
        for (report, expected) in cases {
            let err = status(&report).expect_err(expected);
            assert!(err.contains(expected), "{err} does not contain {expected}");
        }
    }

    #[test]
    fn a_refused_value_is_shown_short_and_on_one_line() {
        let err = status(&ServiceStatus { phase: format!("A\n{}", "b".repeat(1000)), ..report(vec![], None) });
        let err = err.unwrap_err();
        assert!(err.len() < 150 && !err.contains('\n') && err.contains('…'), "{err}");
    }
}
