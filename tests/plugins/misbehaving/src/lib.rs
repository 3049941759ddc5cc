//! A hostile plugin for the host's sandbox tests: `plan` never returns and
//! `cleanup` tries to allocate far more memory than any limit allows.
//! Asked to (by a word in the object), `plan` panics, or floods stderr.
//! Only meaningful as a `wasm32-wasip2` component. Written directly against
//! the frozen contract 0.1.0 with wit-bindgen (not the SDK), so it also
//! proves the host still loads plugins of the older contract.

#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({ world: "plugin", path: "../../../wit/v0.1.0" });

use exports::open_control_plane::service_provider::provider::Guest;
use open_control_plane::service_provider::types::*;

struct Misbehaving;

fn kind(name: &str) -> ApiKind {
    ApiKind {
        group: "misbehaving.test".into(),
        version: "v1".into(),
        kind: name.into(),
        plural: format!("{}s", name.to_lowercase()),
        namespaced: true,
    }
}

impl Guest for Misbehaving {
    fn describe() -> Descriptor {
        Descriptor {
            name: "misbehaving".into(),
            service: kind("Thing"),
            provider_config: kind("ProviderConfig"),
            finalizer: "misbehaving.test/finalizer".into(),
            crds: vec![],
            access: Access { control_plane_rules: vec![], workload_cluster: false, workload_rules: vec![] },
            capabilities: vec![],
            observations: vec![],
        }
    }

    fn plan(input: Input) -> Result<ReconcilePlan, PlanError> {
        if input.object.contains("please panic") {
            panic!("asked to panic, with {} bytes of input", input.object.len());
        }
        if input.object.contains("please shout") {
            use std::io::Write;
            let line = [b'x'; 1023];
            for _ in 0..10 << 10 {
                let _ = std::io::stderr().write_all(&line).and_then(|()| std::io::stderr().write_all(b"\n"));
            }
            return Err(PlanError::Transient("shouted 10 MiB".into()));
        }
        // Spin until the host's epoch deadline interrupts us.
        let mut n: u64 = input.object.len() as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    fn cleanup(_input: Input) -> Result<CleanupPlan, PlanError> {
        // Grow memory 16 MiB at a time until the host's limit stops us.
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 16 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

export!(Misbehaving);
