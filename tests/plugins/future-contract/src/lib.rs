//! A plugin of a contract version the host does not support: the loader must
//! refuse it naming its version and the supported range.

#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({ world: "plugin", path: "wit" });

struct Future;

impl exports::open_control_plane::service_provider::provider::Guest for Future {
    fn describe() -> String {
        "from the future".into()
    }
}

export!(Future);
