//! What the Wasm side fails with when it is asked for a plan: the call
//! failed, the plan cannot be used, or it asks for what the grant does not
//! allow. The host's [`crate::Error`] takes each as the variant of the same
//! name, so categories, reasons and messages are decided in one place.

use super::grant::Denial;
use super::sandbox::PluginError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Calling the plugin failed (trap, deadline, resource limit, output
    /// the host cannot read).
    #[error(transparent)]
    Call(#[from] PluginError),
    /// The plugin returned something the host cannot use (malformed
    /// objects, copies without a type).
    #[error("plugin {plugin} returned an unusable plan: {reason}")]
    InvalidPlan { plugin: String, reason: String },
    /// The plugin asked for something its grant does not allow, or that
    /// the host never allows.
    #[error(transparent)]
    Denied(#[from] Denial),
}
