//! Taking over what another provider wrote (`--adopt-from <field manager>`).
//!
//! A platform that switches from the Go service-provider-kro to this host
//! has, for every live instance, Flux objects, AccessRequests and copies at
//! exactly the places this host's plans put them, but without this host's
//! owner labels. Without an opt-in the host never touches them (a
//! `Conflict` that says how to opt in). With it, an object is taken over
//! only if its `managedFields` prove who wrote it: at least one entry of a
//! named manager, and every other entry a controller that wrote nothing but
//! status or finalizers (Flux's controllers, openmcp's cluster provider).
//! Anything written by someone else, or owned by another instance of this
//! host, is never taken.
//!
//! Only the object's metadata is read here; applying is the caller's. It
//! imports only [`crate::owner`], a leaf.

use kube::api::ObjectMeta;
use serde_json::Value;

use crate::keys::InstanceKey;
use crate::owner::Owner;

/// An object another provider wrote that the host took over or retired:
/// where it is (for logs and Events) and its field manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predecessor {
    pub place: String,
    pub by: String,
}

/// The field managers whose objects may be taken over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adoption {
    managers: Vec<String>,
}

impl Adoption {
    /// Field manager names are at most 128 printable characters (the API
    /// server's own limit); anything else is refused at start.
    pub fn new(managers: &[String]) -> Result<Self, String> {
        for m in managers {
            if m.is_empty() || m.len() > 128 || !m.chars().all(|c| c.is_ascii_graphic()) {
                return Err(format!("--adopt-from {m:?} is not a field manager name"));
            }
        }
        Ok(Self { managers: managers.to_vec() })
    }

    pub fn is_enabled(&self) -> bool {
        !self.managers.is_empty()
    }

    /// Whether `manager` is one of the named field managers.
    pub fn names(&self, manager: &str) -> bool {
        self.managers.iter().any(|m| m == manager)
    }

    /// Whether this object may be taken over: from which manager, or why not.
    pub fn judge(&self, meta: &ObjectMeta) -> Result<String, Refusal> {
        self.judge_besides(meta, &[])
    }

    /// [`Self::judge`], with the entries of the managers `besides` left out:
    /// writers whose fields the caller knows to be what it would write
    /// anyway (Flux applying the very CRD a plugin declares).
    pub fn judge_besides(&self, meta: &ObjectMeta, besides: &[&str]) -> Result<String, Refusal> {
        let entries = meta.managed_fields.as_deref().unwrap_or_default();
        let mut by = None;
        for entry in entries {
            let manager = entry.manager.as_deref().unwrap_or("");
            if self.names(manager) {
                by.get_or_insert_with(|| manager.to_string());
                continue;
            }
            if besides.contains(&manager) {
                continue;
            }
            let fields = entry.fields_v1.as_ref().map(|f| &f.0);
            if entry.subresource.as_deref() == Some("status") || fields.is_some_and(only_status_or_finalizers) {
                continue;
            }
            return Err(Refusal::WroteMore { manager: manager.to_string() });
        }
        by.ok_or_else(|| Refusal::NotWrittenBy { managers: self.managers.clone() })
    }
}

impl Adoption {
    /// Whether an object without `owner`'s labels may be taken over: never
    /// another instance's; otherwise only as [`Self::judge`] allows.
    /// Without the opt-in, the refusal names the flag that would take the
    /// object over.
    pub fn take_over(&self, meta: &ObjectMeta, owner: &Owner) -> Result<String, Refusal> {
        if let Some(InstanceKey { namespace, name }) = Owner::of(meta, &owner.provider) {
            return Err(Refusal::OtherInstance { namespace, name });
        }
        self.consent(meta)
    }

    /// Like [`Self::take_over`], for an object whose other marks already
    /// say it is this instance's (an AccessRequest with openmcp's labels
    /// for it): only who wrote it decides.
    pub fn consent(&self, meta: &ObjectMeta) -> Result<String, Refusal> {
        match self.is_enabled() {
            true => self.judge(meta),
            false => Err(Refusal::NotOptedIn { writers: writers(meta) }),
        }
    }
}

/// Why an object is not taken over; completes "<object> already exists and …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Someone besides the named managers wrote more than status or finalizers.
    #[error("field manager {} wrote more than status and finalizers: it is not taken over", quoted(manager))]
    WroteMore { manager: String },
    /// None of the named managers wrote it.
    #[error("{}: it is not taken over", not_written_by(managers))]
    NotWrittenBy { managers: Vec<String> },
    /// It carries another instance's owner labels.
    #[error("it belongs to instance {namespace}/{name}")]
    OtherInstance { namespace: String, name: String },
    /// No `--adopt-from` was given; `writers` are the managers one would name.
    #[error(
        "it was not created by this provider{}; the host does not take over objects it did not create: remove or rename it",
        adopt_hint(writers)
    )]
    NotOptedIn { writers: Vec<String> },
}

fn not_written_by(managers: &[String]) -> String {
    match managers {
        [one] => format!("it was not written by field manager {}", quoted(one)),
        _ => "it was not written by any of the --adopt-from field managers".to_string(),
    }
}

/// What to run to take an object over, given who wrote it.
fn adopt_hint(writers: &[String]) -> String {
    match writers {
        [] => String::new(),
        writers => format!(
            " (written by field manager {}; run with --adopt-from {} to take it over)",
            writers.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(", "),
            quoted(&writers[0])
        ),
    }
}

/// The managers that wrote the object's content (not only its status or
/// finalizers): what a `Conflict` names so that an operator knows which
/// `--adopt-from` would take it over.
pub fn writers(meta: &ObjectMeta) -> Vec<String> {
    let mut writers: Vec<String> = meta
        .managed_fields
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|e| e.subresource.as_deref() != Some("status"))
        .filter(|e| !e.fields_v1.as_ref().is_some_and(|f| only_status_or_finalizers(&f.0)))
        .filter_map(|e| e.manager.clone())
        .collect();
    writers.sort();
    writers.dedup();
    writers
}

/// `{"f:status": …}` and/or `{"f:metadata": {"f:finalizers": …}}`, nothing else.
fn only_status_or_finalizers(fields: &Value) -> bool {
    let Some(top) = fields.as_object() else { return false };
    top.iter().all(|(key, value)| match key.as_str() {
        "f:status" => true,
        "f:metadata" => value.as_object().is_some_and(|m| m.keys().all(|k| k == "f:finalizers")),
        _ => false,
    })
}

/// A manager name as data in a message: quoted, control characters gone.
fn quoted(name: &str) -> String {
    let clean: String = name.chars().filter(|c| !c.is_control()).take(128).collect();
    format!("{clean:?}")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    use super::*;

    fn entry(manager: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            subresource: subresource.map(Into::into),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta { managed_fields: Some(entries), ..Default::default() }
    }

    fn go() -> Adoption {
        Adoption::new(&["service-provider-kro".into()]).unwrap()
    }

    #[test]
    fn what_the_go_provider_wrote_and_flux_only_finalized_and_reported_is_taken() {
        let helm_release = meta(vec![
            entry("service-provider-kro", None, json!({"f:spec": {"f:interval": {}}})),
            entry(
                "helm-controller",
                None,
                json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"finalizers.fluxcd.io\"": {}}}}),
            ),
            entry("helm-controller", Some("status"), json!({"f:status": {"f:conditions": {}}})),
        ]);
        assert_eq!(go().judge(&helm_release), Ok("service-provider-kro".into()));
        assert_eq!(writers(&helm_release), vec!["service-provider-kro".to_string()]);
    }

    #[test]
    fn another_writer_or_no_proof_is_never_taken() {
        let edited = meta(vec![
            entry("service-provider-kro", None, json!({"f:spec": {}})),
            entry("kubectl-edit", None, json!({"f:spec": {"f:values": {}}})),
        ]);
        let e = go().judge(&edited).unwrap_err().to_string();
        assert!(e.contains("\"kubectl-edit\" wrote more than status"), "{e}");
        let someone_elses = meta(vec![entry("kubectl-client-side-apply", None, json!({"f:spec": {}}))]);
        assert_eq!(go().judge(&someone_elses), Err(Refusal::WroteMore { manager: "kubectl-client-side-apply".into() }));
        let only_status = meta(vec![entry("helm-controller", Some("status"), json!({"f:status": {}}))]);
        assert!(
            go().judge(&only_status)
                .unwrap_err()
                .to_string()
                .contains("not written by field manager \"service-provider-kro\"")
        );
        assert!(go().judge(&ObjectMeta::default()).is_err(), "no managedFields, no proof");
        let labels_too = meta(vec![
            entry("service-provider-kro", None, json!({})),
            entry("other", None, json!({"f:metadata": {"f:finalizers": {}, "f:labels": {}}})),
        ]);
        assert!(go().judge(&labels_too).is_err());
        assert!(!Adoption::default().is_enabled());
    }

    #[test]
    fn manager_names_are_checked_at_start() {
        assert!(Adoption::new(&["".into()]).is_err());
        assert!(Adoption::new(&["a b".into()]).is_err());
        assert!(Adoption::new(&["x".repeat(129)]).is_err());
        assert!(Adoption::new(&["service-provider-kro".into()]).is_ok_and(|a| a.is_enabled()));
    }
}
