//! The host's integration tests, one binary for all that can share a
//! process (each test binary links wasmtime and kube once; on two cores
//! that is minutes per binary). One module per area; a test's path names
//! it: `cargo test -p service-provider-host --test it lifecycle::`.
//!
//! Two stay binaries of their own: `architecture` (the lint step runs it
//! alone, without building plugins or servers) and `real_flux` (the real
//! Flux controllers act on every namespace of the shared platform cluster,
//! so the Flux simulator of these tests must not run next to them).
//!
//! libtest starts the tests in the order of their paths, six at a time:
//! the longest chain (`flood`'s two tests, one after the other) is named to
//! start mid-run, not last, where it alone would set the run's length.

mod authoring;
mod binary;
mod blast;
mod component;
mod delivery;
mod deploy;
mod docs;
mod flood;
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
mod upgrade;
