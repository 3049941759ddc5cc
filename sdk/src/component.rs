//! The component side of the contract, compiled for `wasm32` only: the
//! bindings of the newest contract version, generated once here so plugin
//! crates need neither the WIT files nor wit-bindgen, and their conversions
//! to the contract types. Plugins use it through
//! [`export_provider!`](crate::export_provider).

pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "wit",
        pub_export_macro: true,
        default_bindings_module: "service_provider_sdk::component::bindings",
    });
}

crate::wit_conversions!(crate::component::bindings::open_control_plane::service_provider::types);
