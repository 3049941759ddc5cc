//! Conversions between the contract types and generated WIT bindings.
//!
//! wit-bindgen (in a plugin) and wasmtime's `bindgen!` (in the host) generate
//! types of the same shape from `wit/service-provider.wit`, but they are
//! distinct types in each crate. [`wit_conversions!`](crate::wit_conversions)
//! implements [`Convert`] in both directions between the contract types and
//! one crate's bindings, so neither side hand-writes field-by-field copies.
//! A WIT change that the contract types do not follow fails to compile here.

/// A conversion between two types of the same shape (contract ↔ bindings).
pub trait Convert<T> {
    fn convert(self) -> T;
}

macro_rules! identity {
    ($($t:ty),*) => { $(impl Convert<$t> for $t { fn convert(self) -> $t { self } })* };
}
identity!(String, bool, u32, i64);

impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(self) -> Vec<B> {
        self.into_iter().map(Convert::convert).collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(self) -> Option<B> {
        self.map(Convert::convert)
    }
}

impl<A: Convert<B>, B, E: Convert<F>, F> Convert<Result<B, F>> for Result<A, E> {
    fn convert(self) -> Result<B, F> {
        self.map(Convert::convert).map_err(Convert::convert)
    }
}

/// Implements [`Convert`] both ways between [`crate::contract`] and the WIT
/// bindings of the `types` interface at `$wit` (an absolute path, e.g.
/// `crate::bindings::open_control_plane::service_provider::types`).
#[macro_export]
macro_rules! wit_conversions {
    ($($wit:ident)::+) => {
        #[allow(unused_imports)]
        const _: () = {
            use $crate::contract as sdk;
            use $crate::convert::Convert;
            use $($wit)::+ as wit;

            $crate::__both_ways!(enum Cluster { Platform, Onboarding, ControlPlane, Workload });
            $crate::__both_ways!(enum Stage { Reconcile, Cleanup, Always });
            $crate::__both_ways!(enum Detail { Full, Metadata });
            $crate::__both_ways!(enum ConditionStatus { True, False, Unknown });
            $crate::__both_ways!(variant NamespaceScope { Tenant, ClusterScoped } { Named });
            $crate::__both_ways!(variant PlanError {} { InvalidInput, Transient });
            $crate::__both_ways!(variant CleanupPlan {} { Blocked, Teardown });
            $crate::__both_ways!(record ApiKind { group, version, kind, plural, namespaced });
            $crate::__both_ways!(record Crd { cluster, manifest });
            $crate::__both_ways!(record PolicyRule { api_groups, resources, resource_names, verbs });
            $crate::__both_ways!(record Access { control_plane_rules, workload_cluster, workload_rules });
            $crate::__both_ways!(record Capability { cluster, api, scope, names });
            $crate::__both_ways!(record Observation { id, cluster, api, scope, name, stage, detail });
            $crate::__both_ways!(record Descriptor {
                name, service, provider_config, finalizer, crds, access, capabilities, observations
            });
            $crate::__both_ways!(record KubeconfigRef { namespace, name, key });
            $crate::__both_ways!(record Context { provider_name, tenant_namespace, pod_namespace, control_plane, workload });
            $crate::__both_ways!(record Observed { id, objects });
            $crate::__both_ways!(record Input { object, provider_config, context, observed });
            $crate::__both_ways!(record DesiredObject { cluster, manifest });
            $crate::__both_ways!(record SecretCopy { source_name, target_cluster, target_namespace, target_name, required_type });
            $crate::__both_ways!(record ObjectRef { cluster, api_version, kind, plural, namespace, name });
            $crate::__both_ways!(record Condition { type_, status, reason, message });
            $crate::__both_ways!(record ResourceStatus { api_group, kind, name, namespace, phase, message, location });
            $crate::__both_ways!(record ServiceStatus { phase, conditions, resources });
            $crate::__both_ways!(record Plan = ReconcilePlan { objects, secret_copies, status, requeue_after_seconds });
            $crate::__both_ways!(record InvalidInput { message, requeue_after_seconds });
            $crate::__both_ways!(record Blocked { message, requeue_after_seconds, resources });
            $crate::__both_ways!(record Teardown { objects, secret_copies, resources });
        };
    };
}

/// Implementation detail of [`wit_conversions!`]: one type, both directions.
#[doc(hidden)]
#[macro_export]
macro_rules! __both_ways {
    (enum $t:ident { $($v:ident),* }) => {
        impl Convert<wit::$t> for sdk::$t {
            fn convert(self) -> wit::$t { match self { $(sdk::$t::$v => wit::$t::$v),* } }
        }
        impl Convert<sdk::$t> for wit::$t {
            fn convert(self) -> sdk::$t { match self { $(wit::$t::$v => sdk::$t::$v),* } }
        }
    };
    (variant $t:ident { $($unit:ident),* } { $($new:ident),* }) => {
        impl Convert<wit::$t> for sdk::$t {
            fn convert(self) -> wit::$t {
                match self { $(sdk::$t::$unit => wit::$t::$unit,)* $(sdk::$t::$new(x) => wit::$t::$new(x.convert()),)* }
            }
        }
        impl Convert<sdk::$t> for wit::$t {
            fn convert(self) -> sdk::$t {
                match self { $(wit::$t::$unit => sdk::$t::$unit,)* $(wit::$t::$new(x) => sdk::$t::$new(x.convert()),)* }
            }
        }
    };
    (record $t:ident { $($f:ident),* }) => {
        $crate::__both_ways!(record $t = $t { $($f),* });
    };
    (record $s:ident = $w:ident { $($f:ident),* }) => {
        impl Convert<wit::$w> for sdk::$s {
            fn convert(self) -> wit::$w { wit::$w { $($f: self.$f.convert()),* } }
        }
        impl Convert<sdk::$s> for wit::$w {
            fn convert(self) -> sdk::$s { sdk::$s { $($f: self.$f.convert()),* } }
        }
    };
}

/// Exports a [`Provider`](crate::contract::Provider) as the plugin's WIT
/// world. Use it in the plugin crate behind `#[cfg(target_arch = "wasm32")]`,
/// with the WIT directory relative to the crate root and `wit-bindgen` as a
/// `wasm32`-only dependency:
///
/// ```ignore
/// #[cfg(target_arch = "wasm32")]
/// service_provider_sdk::export_provider!(crate::MyProvider, "../wit");
/// ```
// `crate::` deliberately names the calling crate: the module is generated there.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! export_provider {
    ($provider:path, $wit_dir:literal) => {
        mod __service_provider_component {
            wit_bindgen::generate!({ world: "plugin", path: $wit_dir });
            $crate::wit_conversions!(crate::__service_provider_component::open_control_plane::service_provider::types);

            use $crate::contract::Provider as _;
            use $crate::convert::Convert as _;
            use open_control_plane::service_provider::types as wit;

            struct Component;

            impl exports::open_control_plane::service_provider::provider::Guest for Component {
                fn describe() -> wit::Descriptor {
                    <$provider>::describe().convert()
                }

                fn plan(input: wit::Input) -> Result<wit::ReconcilePlan, wit::PlanError> {
                    <$provider>::plan(&input.convert()).convert()
                }

                fn cleanup(input: wit::Input) -> Result<wit::CleanupPlan, wit::PlanError> {
                    <$provider>::cleanup(&input.convert()).convert()
                }
            }

            export!(Component);
        }
    };
}
