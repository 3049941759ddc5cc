//! Conversions between the contract types and generated WIT bindings.
//!
//! wit-bindgen (in the SDK's component bindings) and wasmtime's `bindgen!`
//! (in the host, once per supported contract version) generate types of the
//! same shape from the WIT, but they are distinct types in each crate.
//! [`wit_conversions!`](crate::wit_conversions) implements [`Convert`] in
//! both directions between the contract types and the bindings of the
//! newest contract version, so nobody hand-writes field-by-field copies. A
//! WIT change that the contract types do not follow fails to compile here.
//! Hosts adapting an older version use the one-way arms of
//! [`__convert!`](crate::__convert) for the types that did not change.

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
/// bindings of the `types` interface of the newest contract version at
/// `$wit` (an absolute path, e.g.
/// `crate::bindings::open_control_plane::service_provider::types`).
#[macro_export]
macro_rules! wit_conversions {
    ($($wit:ident)::+) => {
        #[allow(unused_imports)]
        const _: () = {
            use $crate::contract as sdk;
            use $crate::convert::Convert;
            use $($wit)::+ as wit;

            $crate::__convert!(both enum Cluster { Platform, Onboarding, ControlPlane, Workload });
            $crate::__convert!(both enum Stage { Reconcile, Cleanup, Always });
            $crate::__convert!(both enum Detail { Full, Metadata });
            $crate::__convert!(both enum ConditionStatus { True, False, Unknown });
            $crate::__convert!(both variant NamespaceScope { Tenant, ClusterScoped, Any } { Named });
            $crate::__convert!(both variant CopyKind { ConfigMap } { Secret });
            $crate::__convert!(both variant PlanError {} { InvalidInput, Transient });
            $crate::__convert!(both variant CleanupPlan {} { Blocked, Teardown });
            $crate::__convert!(both record ApiKind { group, version, kind, plural, namespaced });
            $crate::__convert!(both record Crd { cluster, manifest });
            $crate::__convert!(both record PolicyRule { api_groups, resources, resource_names, verbs });
            $crate::__convert!(both record Access { control_plane_rules, workload_cluster, workload_rules });
            $crate::__convert!(both record Capability { cluster, api, scope, names });
            $crate::__convert!(both record Observation { id, cluster, api, scope, name, stage, detail });
            $crate::__convert!(both record Descriptor {
                name, service, provider_config, finalizer, crds, access, capabilities, observations
            });
            $crate::__convert!(both record KubeconfigRef { namespace, name, key });
            $crate::__convert!(both record Context { provider_name, tenant_namespace, pod_namespace, control_plane, workload });
            $crate::__convert!(both record Observed { id, objects });
            $crate::__convert!(both record Input { object, provider_config, context, observed });
            $crate::__convert!(both record DesiredObject { cluster, manifest });
            $crate::__convert!(both record ObjectCopy { kind, source_name, target_cluster, target_namespace, target_name });
            $crate::__convert!(both record ObjectRef { cluster, api_version, kind, plural, namespace, name });
            $crate::__convert!(both record Condition { type_, status, reason, message });
            $crate::__convert!(both record ResourceStatus { api_group, kind, name, namespace, phase, message, location });
            $crate::__convert!(both record ServiceStatus { phase, conditions, resources });
            $crate::__convert!(both record Plan = ReconcilePlan { objects, copies, status, requeue_after_seconds });
            $crate::__convert!(both record InvalidInput { message, requeue_after_seconds });
            $crate::__convert!(both record Blocked { message, requeue_after_seconds, resources });
            $crate::__convert!(both record Teardown { objects, copies, resources });
        };
    };
}

/// Implementation detail of [`wit_conversions!`], also used by hosts that
/// adapt older contract versions: one type, from the bindings (`from_wit`),
/// to them (`to_wit`) or `both`. Expects `sdk`, `wit` and `Convert` in scope.
#[doc(hidden)]
#[macro_export]
macro_rules! __convert {
    (both $($rest:tt)*) => {
        $crate::__convert!(from_wit $($rest)*);
        $crate::__convert!(to_wit $($rest)*);
    };
    (from_wit enum $t:ident { $($v:ident),* }) => {
        impl Convert<sdk::$t> for wit::$t {
            fn convert(self) -> sdk::$t { match self { $(wit::$t::$v => sdk::$t::$v),* } }
        }
    };
    (to_wit enum $t:ident { $($v:ident),* }) => {
        impl Convert<wit::$t> for sdk::$t {
            fn convert(self) -> wit::$t { match self { $(sdk::$t::$v => wit::$t::$v),* } }
        }
    };
    (from_wit variant $t:ident { $($unit:ident),* } { $($new:ident),* }) => {
        impl Convert<sdk::$t> for wit::$t {
            fn convert(self) -> sdk::$t {
                match self { $(wit::$t::$unit => sdk::$t::$unit,)* $(wit::$t::$new(x) => sdk::$t::$new(x.convert()),)* }
            }
        }
    };
    (to_wit variant $t:ident { $($unit:ident),* } { $($new:ident),* }) => {
        impl Convert<wit::$t> for sdk::$t {
            fn convert(self) -> wit::$t {
                match self { $(sdk::$t::$unit => wit::$t::$unit,)* $(sdk::$t::$new(x) => wit::$t::$new(x.convert()),)* }
            }
        }
    };
    ($dir:ident record $t:ident { $($f:ident),* }) => {
        $crate::__convert!($dir record $t = $t { $($f),* });
    };
    (from_wit record $s:ident = $w:ident { $($f:ident),* }) => {
        impl Convert<sdk::$s> for wit::$w {
            fn convert(self) -> sdk::$s { sdk::$s { $($f: self.$f.convert()),* } }
        }
    };
    (to_wit record $s:ident = $w:ident { $($f:ident),* }) => {
        impl Convert<wit::$w> for sdk::$s {
            fn convert(self) -> wit::$w { wit::$w { $($f: self.$f.convert()),* } }
        }
    };
}

/// Exports a [`Provider`](crate::contract::Provider) as the plugin's
/// component, against the newest contract version. One line in the plugin
/// crate, which needs no WIT files and no wit-bindgen of its own; the SDK
/// also records the contract version in the component (a custom section the
/// host reads):
///
/// ```ignore
/// service_provider_sdk::export_provider!(crate::MyProvider);
/// ```
///
/// Put it behind a default cargo feature (e.g. `component`) so that another
/// plugin can depend on the crate as a library without exporting twice.
// `crate::` deliberately names the calling crate: the module is generated there.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! export_provider {
    ($provider:path) => {
        #[cfg(target_arch = "wasm32")]
        mod __service_provider_component {
            use $crate::component::bindings::exports::open_control_plane::service_provider::provider::Guest;
            use $crate::component::bindings::open_control_plane::service_provider::types as wit;
            use $crate::contract::Provider as _;
            use $crate::convert::Convert as _;

            struct Component;

            impl Guest for Component {
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

            $crate::component::bindings::export!(Component with_types_in $crate::component::bindings);

            /// The contract version, for the host to read before loading.
            #[unsafe(link_section = "service-provider:contract")]
            #[used]
            static CONTRACT: [u8; $crate::CONTRACT_SECTION.len()] = $crate::CONTRACT_SECTION;
        }
    };
}
