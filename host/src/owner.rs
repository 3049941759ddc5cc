//! Which service instance an object the host wrote belongs to.
//!
//! No owner references cross clusters, so ownership is written into every
//! object the host creates: labels for selection (watches, pruning; possibly
//! shortened to fit label limits) and an annotation with the exact identity.
//! A leaf module: it imports nothing from the crate.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use service_provider_sdk::names;

use crate::keys::InstanceKey;

pub const LABEL_PROVIDER: &str = "service-provider.open-control-plane.io/provider";
pub const LABEL_INSTANCE_NAME: &str = "service-provider.open-control-plane.io/instance-name";
pub const LABEL_INSTANCE_NAMESPACE: &str = "service-provider.open-control-plane.io/instance-namespace";
/// On copies: the (possibly shortened) name of the source object.
pub const LABEL_COPY_OF: &str = "service-provider.open-control-plane.io/copy-of";
/// On copies: `<namespace>/<name>` of the source object.
pub const ANNOTATION_COPY_OF: &str = "service-provider.open-control-plane.io/copy-of";
/// Exact instance identity, `<namespace>/<name>` (labels may be shortened).
pub const ANNOTATION_INSTANCE: &str = "service-provider.open-control-plane.io/instance";
/// Hash of what the host applied (see [`crate::reconcile::apply`]).
pub const ANNOTATION_APPLIED: &str = "service-provider.open-control-plane.io/applied-hash";

/// The field managers whose names mark the host's own writes (every
/// provider's: [`field_manager`]).
pub const FIELD_MANAGER_PREFIX: &str = "service-provider-host";

/// The field manager of a provider's writes, `service-provider-host/<provider>`:
/// also the controller name its Events are reported by.
pub fn field_manager(provider: &str) -> String {
    format!("{FIELD_MANAGER_PREFIX}/{provider}")
}

/// The service instance that owns what the host writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub provider: String,
    pub name: String,
    pub namespace: String,
}

impl Owner {
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_PROVIDER.to_string(), names::label_value(&self.provider)),
            (LABEL_INSTANCE_NAME.to_string(), names::label_value(&self.name)),
            (LABEL_INSTANCE_NAMESPACE.to_string(), names::label_value(&self.namespace)),
        ])
    }

    /// Label selector for everything this instance owns.
    pub fn selector(&self) -> String {
        self.labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Label selector for everything any instance of this provider owns.
    pub fn provider_selector(provider: &str) -> String {
        format!("{LABEL_PROVIDER}={}", names::label_value(provider))
    }

    /// The value of [`ANNOTATION_INSTANCE`].
    pub fn annotation(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The owning instance of an object of this provider, from the exact
    /// annotation or else the labels.
    pub fn of(meta: &ObjectMeta, provider: &str) -> Option<InstanceKey> {
        let labels = meta.labels.as_ref()?;
        if labels.get(LABEL_PROVIDER)? != &names::label_value(provider) {
            return None;
        }
        if let Some((ns, name)) =
            meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION_INSTANCE)).and_then(|v| v.split_once('/'))
        {
            return Some(InstanceKey::new(ns, name));
        }
        Some(InstanceKey::new(labels.get(LABEL_INSTANCE_NAMESPACE)?, labels.get(LABEL_INSTANCE_NAME)?))
    }

    /// Whether this instance owns the object with these metadata.
    pub fn owns(&self, meta: &ObjectMeta) -> bool {
        Owner::of(meta, &self.provider).is_some_and(|key| key.namespace == self.namespace && key.name == self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner { provider: "kro".into(), name: "mcp-01".into(), namespace: "default".into() }
    }

    fn meta(labels: BTreeMap<String, String>, annotation: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: Some(labels),
            annotations: annotation.map(|a| BTreeMap::from([(ANNOTATION_INSTANCE.to_string(), a.to_string())])),
            ..Default::default()
        }
    }

    #[test]
    fn owners_are_read_back_from_labels_and_annotations() {
        let m = meta(owner().labels(), Some("default/mcp-01"));
        assert_eq!(Owner::of(&m, "kro"), Some(InstanceKey::new("default", "mcp-01")));
        assert_eq!(Owner::of(&m, "flux"), None);
        assert!(owner().owns(&m));
        let other = Owner { name: "mcp-02".into(), ..owner() };
        assert!(!other.owns(&m));
        // Without the annotation the labels decide.
        assert!(owner().owns(&meta(owner().labels(), None)));
        assert_eq!(
            owner().selector(),
            "service-provider.open-control-plane.io/instance-name=mcp-01,service-provider.open-control-plane.io/instance-namespace=default,service-provider.open-control-plane.io/provider=kro"
        );
    }

    #[test]
    fn the_exact_annotation_wins_over_shortened_labels() {
        // Two instances whose long names shorten to the same label value are
        // told apart by the annotation.
        let long = "x".repeat(70);
        let a = Owner { name: format!("{long}a"), ..owner() };
        let b = Owner { name: format!("{long}b"), ..owner() };
        let m = meta(a.labels(), Some(&a.annotation()));
        assert!(a.owns(&m));
        assert!(!b.owns(&m));
    }
}
