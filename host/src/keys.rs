//! How the host names what it keeps something for: one service instance
//! (what it remembers, budgets and queues per instance). One constructor
//! per source, one way to print it. A leaf module: it imports nothing from
//! the crate, so every floor, the metrics included, can use it.

use std::fmt;

use kube::{Resource, ResourceExt};

/// Where a service object lives: how the host keys what it remembers per
/// instance, and how it names one in a message (`namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub namespace: String,
    pub name: String,
}

impl InstanceKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        InstanceKey { namespace: namespace.into(), name: name.into() }
    }

    /// The key of a service object as the API server returned it.
    pub fn of(object: &impl Resource) -> Self {
        InstanceKey::new(object.namespace().unwrap_or_default(), object.name_any())
    }
}

impl fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_prints_as_namespace_slash_name_and_orders_by_namespace_first() {
        let (a, b) = (InstanceKey::new("b", "a"), InstanceKey::new("a", "z"));
        assert_eq!(a.to_string(), "b/a");
        assert!(b < a, "namespace first");
    }
}
