//! The Wasm side: everything about the untrusted code, and nothing about
//! the clusters it is for.
//!
//! - [`source`] turns `--plugin` (a file, or an OCI reference pulled,
//!   verified and cached by [`oci`]) into component bytes;
//! - [`sandbox`] compiles and calls a component under its limits (one
//!   engine, a fresh store per call, deadlines that always fire);
//! - [`grant`] is the platform operator's word on what a plugin may touch,
//!   and the hard rules no grant can lift;
//! - [`plan`] calls the plugin and checks every object, copy and deletion
//!   it asks for against its requests and its grant, before anything is
//!   written;
//! - [`load`] puts them together: bytes, a compiled plugin, its grant;
//! - [`author`] serves plugin authors: templates, componentize, inspect,
//!   the grant a plugin needs, and the conformance run.
//!
//! No module here uses kube or a module of the host outside this folder
//! but the ground floor ([`crate::syntax`], [`crate::metrics`]'s label
//! trait): what the plugin's answers do to a cluster is decided by the
//! reconcile side, from the checked values this side hands it. The host's
//! [`crate::Error`] wraps this side's [`Error`]. `tests/architecture.rs`
//! holds the rule.

pub mod author;
pub mod grant;
pub mod load;
pub mod oci;
pub mod plan;
pub mod sandbox;
pub(crate) mod source;

pub use error::Error;

mod error;
