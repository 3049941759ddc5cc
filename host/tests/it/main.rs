//! The host's integration tests, one binary for all that can share a
//! process (each test binary links wasmtime and kube once; on two cores
//! that is minutes per binary). One module per area; a test's path names
//! it: `cargo test -p service-provider-host --test it lifecycle::`.
//!
//! Two stay binaries of their own: `architecture` (the lint step runs it
//! alone, without building plugins or servers) and `real_flux` (the real
//! Flux controllers act on every namespace of the shared platform cluster,
//! so the Flux simulator of these tests must not run next to them).

mod authoring;
mod binary;
mod blast;
mod component;
mod delivery;
mod deploy;
mod docs;
mod flux;
mod hostile;
mod image;
mod init;
mod lifecycle;
mod observability;
mod openmcp;
mod plan_fuzz;
mod render;
mod rotation;
mod tenant_flood;
mod upgrade;
