//! `plugin componentize`: a component of the core module Go (or another
//! language writing WASI preview 1) builds, for the newest contract, the
//! one the SDKs implement (see the crate `plugin-componentize`). What a Go
//! author needs besides Go is this CLI.

use anyhow::Result;

/// The newest contract.
const WIT: &str = include_str!("../../../../wit/v0.2.0/service-provider.wit");

/// Makes a component of `core`; fails if it does not fit the contract's
/// `plugin` world.
pub fn componentize(core: &[u8]) -> Result<Vec<u8>> {
    plugin_componentize::Contract::from_text("service-provider.wit", WIT)?.componentize(core, "plugin")
}
