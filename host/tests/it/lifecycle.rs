//! The service-provider lifecycle on real API servers: the host's controller
//! with the Kro component, the openmcp and Flux simulators, one behaviour
//! per test, one area per file: the live path (`ready`), copies, cluster
//! access, what is written (`writes`), deletion, and switching from the Go
//! provider (`adopt`). Run with `task test` (builds the plugin and the API
//! servers).

use std::time::Duration;

use host_test_support::*;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use service_provider_host::reconcile;
use std::sync::Arc;

pub(crate) mod access;
mod adopt;
mod copies;
mod deletion;
mod ready;
mod writes;

const DOCKER: &str = "kubernetes.io/dockerconfigjson";

fn one(instance: &str, flux_ready: bool) -> Options {
    Options { instances: vec![instance.to_string()], flux_ready, workload: false }
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name).await.expect("read").map(|o| serde_json::to_value(o).unwrap())
}
