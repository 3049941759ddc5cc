//! The native-vs-component comparison, for any plugin: every shared case
//! (see `service_provider_sdk::testing`) must give the same answer through
//! the compiled component as the plugin's library gives natively.

use serde_json::{Value, json};
use service_provider_host::plugin::sandbox::Plugin;
use service_provider_sdk::contract::Provider;
use service_provider_sdk::testing::{Call, Case};

/// A plan or cleanup result as JSON, with each object manifest parsed: the
/// contract promises JSON documents, not a byte-exact key order.
pub fn normalized<T: serde::Serialize, E: serde::Serialize>(result: &Result<T, E>) -> Value {
    let mut value = match result {
        Ok(v) => json!({ "ok": v }),
        Err(e) => json!({ "err": e }),
    };
    let objects = match value.pointer("/ok/objects") {
        Some(_) => "/ok/objects",
        None => "/ok",
    };
    if let Some(objects) = value.pointer_mut(objects).and_then(Value::as_array_mut) {
        for object in objects {
            if let Some(text) = object.get("manifest").and_then(Value::as_str).map(str::to_string) {
                object["manifest"] = serde_json::from_str(&text).expect("manifest is JSON");
            }
        }
    }
    value
}

/// Runs every case natively (`P`) and through `component`; panics naming the
/// first case whose answers differ, or that trapped.
pub async fn assert_parity<P: Provider>(component: &Plugin, cases: Vec<Case>) {
    assert!(!cases.is_empty(), "a plugin must bring cases");
    assert_eq!(component.descriptor(), &P::describe(), "describe() differs");
    for case in cases {
        let (native, through) = match case.call {
            Call::Plan => (
                normalized(&P::plan(&case.input)),
                normalized(&component.plan(&case.input).await.unwrap_or_else(|e| panic!("{}: {e}", case.name))),
            ),
            Call::Cleanup => (
                normalized(&P::cleanup(&case.input)),
                normalized(&component.cleanup(&case.input).await.unwrap_or_else(|e| panic!("{}: {e}", case.name))),
            ),
        };
        assert_eq!(through, native, "case {:?}", case.name);
    }
}
