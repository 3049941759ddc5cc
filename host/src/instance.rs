//! One service instance and its reach: who it is, which tenant namespace it
//! belongs to, which clusters the host can talk to on its behalf, and what a
//! namespace scope of the contract resolves to for it.
//!
//! Shared by the stages that need an instance's identity (gather, plan,
//! apply, reconcile, render); it depends only on the error type, the
//! instance key and the owner labels.

use kube::Client;
use serde_json::Value;
use service_provider_sdk::contract::Cluster;
use service_provider_sdk::names;

use crate::error::{Error, UserInput};
use crate::keys::InstanceKey;
use crate::owner::Owner;

/// The identity of one service object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub namespace: String,
    pub generation: i64,
}

impl Instance {
    pub fn from_object(object: &Value) -> Result<Self, Error> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
        let missing = |field| Error::from(UserInput::ServiceObject { field });
        let name = text("/metadata/name").ok_or_else(|| missing("metadata.name"))?;
        // Service objects are namespaced.
        let namespace = text("/metadata/namespace").ok_or_else(|| missing("metadata.namespace"))?;
        Ok(Instance {
            name: name.to_string(),
            namespace: namespace.to_string(),
            generation: object.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
        })
    }

    /// `mcp--<uuid>`: the tenant namespace of the ControlPlane this instance
    /// belongs to (same name and namespace).
    pub fn tenant_namespace(&self) -> String {
        names::tenant_namespace(&self.name, &self.namespace).expect("name is non-empty")
    }

    pub fn key(&self) -> InstanceKey {
        InstanceKey::new(&self.namespace, &self.name)
    }

    /// The owner labels of everything the host writes for this instance.
    pub fn owner(&self, provider: &str) -> Owner {
        Owner { provider: provider.to_string(), name: self.name.clone(), namespace: self.namespace.clone() }
    }
}

/// The clients the host holds for one instance.
pub struct Reach<'a> {
    pub platform: &'a Client,
    pub onboarding: &'a Client,
    pub control_plane: Option<&'a Client>,
    pub workload: Option<&'a Client>,
}

impl Reach<'_> {
    pub fn client(&self, cluster: Cluster) -> Option<&Client> {
        match cluster {
            Cluster::Platform => Some(self.platform),
            Cluster::Onboarding => Some(self.onboarding),
            Cluster::ControlPlane => self.control_plane,
            Cluster::Workload => self.workload,
        }
    }

    /// The clusters the host can write to for this instance (the onboarding
    /// cluster is never a target: it holds only the service objects).
    pub fn targets(&self) -> impl Iterator<Item = (Cluster, &Client)> {
        [Cluster::Platform, Cluster::ControlPlane, Cluster::Workload]
            .into_iter()
            .filter_map(|cluster| self.client(cluster).map(|client| (cluster, client)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_instance_needs_name_and_namespace() {
        let ok = Instance::from_object(&json!({"metadata": {"name": "a", "namespace": "b", "generation": 4}})).unwrap();
        assert_eq!(ok.generation, 4);
        assert_eq!(ok.tenant_namespace(), names::tenant_namespace("a", "b").unwrap());
        assert_eq!(ok.owner("kro").annotation(), "b/a");
        for bad in [json!({}), json!({"metadata": {"name": "a"}}), json!({"metadata": {"namespace": "b"}})] {
            assert!(Instance::from_object(&bad).is_err(), "{bad}");
        }
    }
}
