//! The host's side of the contract: [`Convert`] between its generated
//! bindings and the SDK contract types the rest of the host works with.

pub(super) use service_provider_sdk::convert::Convert;

service_provider_sdk::wit_conversions!(crate::sandbox::bindings::open_control_plane::service_provider::types);
