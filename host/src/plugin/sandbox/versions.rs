//! The contract versions the host supports, side by side.
//!
//! Component types are checked structurally: a plugin built against one
//! version of the WIT does not link against another, however small the
//! change. So each supported version has its own bindings here, generated
//! from its frozen WIT under `wit/v<version>/`, and is adapted to the newest
//! contract types (the SDK's), which the rest of the host works with. A
//! plugin's version is read from the interface it exports; anything else is
//! refused naming the plugin's version and the supported range.

use service_provider_sdk::contract as sdk;
use service_provider_sdk::convert::Convert;

/// The oldest and the newest contract version the host loads.
pub const OLDEST: &str = "0.1.0";
pub const NEWEST: &str = service_provider_sdk::CONTRACT_VERSION;

/// The interface a plugin exports, without its version.
pub const PROVIDER_INTERFACE: &str = "open-control-plane:service-provider/provider";

/// A supported contract version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V0_1,
    V0_2,
}

impl Version {
    /// The version of an exported `…/provider@<version>` interface name, if
    /// the host supports it (patch releases of a version are compatible).
    pub fn of_export(name: &str) -> Option<Version> {
        let version = name.strip_prefix(PROVIDER_INTERFACE)?.strip_prefix('@')?;
        let mut parts = version.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some("1")) => Some(Version::V0_1),
            (Some("0"), Some("2")) => Some(Version::V0_2),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V0_1 => "0.1.0",
            Version::V0_2 => "0.2.0",
        }
    }
}

/// Contract 0.2.0, the newest: converts one to one.
pub mod v0_2 {
    pub mod bindings {
        wasmtime::component::bindgen!({ world: "plugin", path: "../wit/v0.2.0", exports: { default: async } });
    }
    service_provider_sdk::wit_conversions!(
        crate::plugin::sandbox::versions::v0_2::bindings::open_control_plane::service_provider::types
    );
}

/// Contract 0.1.0: Secret copies only, with an optional required type.
pub mod v0_1 {
    pub mod bindings {
        wasmtime::component::bindgen!({ world: "plugin", path: "../wit/v0.1.0", exports: { default: async } });
    }

    use super::{Convert, sdk};
    use bindings::open_control_plane::service_provider::types as wit;
    use service_provider_sdk::__convert;

    // Inputs go to the plugin, everything else comes back; only the types
    // that changed in 0.2.0 are adapted by hand below.
    __convert!(to_wit record KubeconfigRef { namespace, name, key });
    __convert!(to_wit record Context { provider_name, tenant_namespace, pod_namespace, control_plane, workload });
    __convert!(to_wit record Observed { id, objects });
    __convert!(to_wit record Input { object, provider_config, context, observed });
    __convert!(from_wit enum Cluster { Platform, Onboarding, ControlPlane, Workload });
    __convert!(from_wit enum Stage { Reconcile, Cleanup, Always });
    __convert!(from_wit enum Detail { Full, Metadata });
    __convert!(from_wit enum ConditionStatus { True, False, Unknown });
    __convert!(from_wit variant NamespaceScope { Tenant, ClusterScoped } { Named });
    __convert!(from_wit variant PlanError {} { InvalidInput, Transient });
    __convert!(from_wit variant CleanupPlan {} { Blocked, Teardown });
    __convert!(from_wit record ApiKind { group, version, kind, plural, namespaced });
    __convert!(from_wit record Crd { cluster, manifest });
    __convert!(from_wit record PolicyRule { api_groups, resources, resource_names, verbs });
    __convert!(from_wit record Access { control_plane_rules, workload_cluster, workload_rules });
    __convert!(from_wit record Capability { cluster, api, scope, names });
    __convert!(from_wit record Observation { id, cluster, api, scope, name, stage, detail });
    __convert!(from_wit record Descriptor {
        name, service, provider_config, finalizer, crds, access, capabilities, observations
    });
    __convert!(from_wit record DesiredObject { cluster, manifest });
    __convert!(from_wit record ObjectRef { cluster, api_version, kind, plural, namespace, name });
    __convert!(from_wit record Condition { type_, status, reason, message });
    __convert!(from_wit record ResourceStatus { api_group, kind, name, namespace, phase, message, location });
    __convert!(from_wit record ServiceStatus { phase, conditions, resources });
    __convert!(from_wit record InvalidInput { message, requeue_after_seconds });
    __convert!(from_wit record Blocked { message, requeue_after_seconds, resources });

    /// A 0.1.0 Secret copy; without a required type the host refuses it
    /// (every copy must state its type since 0.2.0).
    impl Convert<sdk::ObjectCopy> for wit::SecretCopy {
        fn convert(self) -> sdk::ObjectCopy {
            sdk::ObjectCopy {
                kind: sdk::CopyKind::Secret(self.required_type.unwrap_or_default()),
                source_name: self.source_name,
                target_cluster: self.target_cluster.convert(),
                target_namespace: self.target_namespace,
                target_name: self.target_name,
            }
        }
    }

    impl Convert<sdk::Plan> for wit::ReconcilePlan {
        fn convert(self) -> sdk::Plan {
            sdk::Plan {
                objects: self.objects.convert(),
                copies: self.secret_copies.convert(),
                status: self.status.convert(),
                requeue_after_seconds: self.requeue_after_seconds,
            }
        }
    }

    impl Convert<sdk::Teardown> for wit::Teardown {
        fn convert(self) -> sdk::Teardown {
            sdk::Teardown {
                objects: self.objects.convert(),
                copies: self.secret_copies.convert(),
                resources: self.resources.convert(),
            }
        }
    }
}

/// The contract version a component says it implements in its
/// `service-provider:contract` custom section (written by the SDK), if any:
/// used to name the version of a plugin the host cannot load.
pub fn declared_version(wasm: &[u8]) -> Option<String> {
    use wasmtime::wasmparser::{Parser, Payload};
    let mut found = None;
    for payload in Parser::new(0).parse_all(wasm) {
        if let Ok(Payload::CustomSection(section)) = payload
            && section.name() == "service-provider:contract"
        {
            found = std::str::from_utf8(section.data()).ok().map(str::to_string);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_exported_interface() {
        assert_eq!(Version::of_export("open-control-plane:service-provider/provider@0.1.0"), Some(Version::V0_1));
        assert_eq!(Version::of_export("open-control-plane:service-provider/provider@0.2.0"), Some(Version::V0_2));
        assert_eq!(Version::of_export("open-control-plane:service-provider/provider@0.2.3"), Some(Version::V0_2));
        assert_eq!(Version::of_export("open-control-plane:service-provider/provider@0.3.0"), None);
        assert_eq!(Version::of_export("open-control-plane:service-provider/provider@1.0.0"), None);
        assert_eq!(Version::of_export("other:package/provider@0.2.0"), None);
        assert_eq!(NEWEST, Version::V0_2.as_str());
    }

    #[test]
    fn a_0_1_copy_without_a_type_keeps_it_empty_for_the_host_to_refuse() {
        let copy = v0_1::bindings::open_control_plane::service_provider::types::SecretCopy {
            source_name: "s".into(),
            target_cluster: v0_1::bindings::open_control_plane::service_provider::types::Cluster::Platform,
            target_namespace: "n".into(),
            target_name: "t".into(),
            required_type: None,
        };
        let converted: sdk::ObjectCopy = copy.convert();
        assert_eq!(converted.kind, sdk::CopyKind::Secret(String::new()));
    }
}
