//! For plugin authors: the commands between an empty directory and a
//! component a platform team can review and run.
//!
//! - [`template`]: `plugin new`, a working plugin in Rust or Go to start
//!   from;
//! - [`componentize`]: a component of the core module Go (or another
//!   language writing WASI preview 1) builds;
//! - [`inspect`]: `plugin inspect`, what a component is and asks for, and
//!   `plugin grant`, the grant that gives it exactly that;
//! - [`conformance`]: `plugin test`, the shared cases and the checks every
//!   plugin must pass, through the real sandbox and the host's checks.

pub mod componentize;
pub mod conformance;
pub mod inspect;
pub mod template;
