//! The Kro service-provider plugin.
//!
//! A plain library: everything Kro-specific the generic host needs, as pure
//! functions over the contract types of `service-provider-sdk`. Compiled to a
//! `wasm32-wasip2` component, the thin [`component`] shim exports it through
//! `wit/service-provider.wit`; natively, `cargo test` exercises the same code.
//!
//! Behaviour follows service-provider-kro v1.3.0 (version resolution, the
//! Flux objects, status mapping, RGD-blocked deletion), with its known quirks
//! fixed: prefixed and type-checked pull-secret copies that are cleaned up,
//! the kubeconfig reference taken from the AccessRequest status, and no
//! `Ready` phase while terminating.

pub mod api;
/// Shared test inputs (also used by the host's component test).
#[cfg(any(test, feature = "test-cases"))]
pub mod cases;
mod cleanup;
pub mod config;
pub mod describe;
pub mod desired;
mod read;
pub mod status;

// The component: the WIT export around `KroProvider` (behind the default
// `component` feature, so another plugin can use this crate as a library).
#[cfg(feature = "component")]
service_provider_sdk::export_provider!(crate::KroProvider);

use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Descriptor, Input, InvalidInput, Plan, PlanError, Provider};

use crate::api::ProviderConfigSpec;
use crate::describe::{OBSERVE_HELM_RELEASE, OBSERVE_OCI_REPOSITORY};

/// Everything that can go wrong while planning.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The requested version is not offered (message as in the Go provider).
    #[error("{0}")]
    VersionNotAvailable(String),
    /// The ProviderConfig cannot be used as it is.
    #[error("{0}")]
    InvalidProviderConfig(String),
    /// The service object does not match the Kro schema.
    #[error("invalid Kro object: {0}")]
    InvalidObject(String),
    /// The host has not granted ControlPlane access yet.
    #[error("ControlPlane access has not been granted yet")]
    NoControlPlaneAccess,
    /// The host passed an observed object that is not JSON (a host bug).
    #[error("observed object {id:?} is not a JSON document")]
    MalformedObserved { id: String },
}

impl Error {
    /// Whether only a user (tenant or operator) can fix this.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Error::VersionNotAvailable(_) | Error::InvalidProviderConfig(_) | Error::InvalidObject(_))
    }

    fn into_plan_error(self, requeue_after_seconds: u32) -> PlanError {
        if self.is_invalid_input() {
            PlanError::InvalidInput(InvalidInput { message: self.to_string(), requeue_after_seconds })
        } else {
            PlanError::Transient(self.to_string())
        }
    }
}

/// The Kro provider, as the contract's [`Provider`].
pub struct KroProvider;

impl Provider for KroProvider {
    fn describe() -> Descriptor {
        describe::descriptor()
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let config = provider_config(input).map_err(|e| e.into_plan_error(config::DEFAULT_POLL_SECONDS))?;
        let poll = config::poll_interval_seconds(config.as_ref())
            .map_err(|e| e.into_plan_error(config::DEFAULT_POLL_SECONDS))?;
        plan(input, config.as_ref(), poll).map_err(|e| e.into_plan_error(poll))
    }

    fn cleanup(input: &Input) -> Result<CleanupPlan, PlanError> {
        Ok(cleanup::cleanup(input))
    }
}

fn provider_config(input: &Input) -> Result<Option<ProviderConfigSpec>, Error> {
    input
        .provider_config
        .as_deref()
        .map(|json| {
            read::provider_config_spec(json)
                .map_err(|e| Error::InvalidProviderConfig(format!("invalid ProviderConfig: {e}")))
        })
        .transpose()
}

/// The first (and only) object of an observation, parsed.
fn observed_object(input: &Input, id: &str) -> Result<Option<Value>, Error> {
    input
        .observed(id)
        .and_then(|objects| objects.first())
        .map(|json| serde_json::from_str::<Value>(json).map_err(|_| Error::MalformedObserved { id: id.into() }))
        .transpose()
}

fn plan(input: &Input, config: Option<&ProviderConfigSpec>, poll: u32) -> Result<Plan, Error> {
    let object = read::kro_spec(&input.object).map_err(Error::InvalidObject)?;
    let tenant = input.context.tenant_namespace.as_str();
    let version = config::resolve_version(config, &object.version)?;
    let image_pull_secrets = config::image_pull_secrets(version.helm_values.as_ref())?;
    let kubeconfig = input.context.control_plane.as_ref().ok_or(Error::NoControlPlaneAccess)?;

    let repository = observed_object(input, OBSERVE_OCI_REPOSITORY)?;
    let release = observed_object(input, OBSERVE_HELM_RELEASE)?;
    let expected = status::Expected {
        oci_repository: &desired::oci_repository(version, tenant),
        helm_release: &desired::helm_release(version, tenant, kubeconfig),
        version,
        provider_config: &input.context.provider_name,
        pod_namespace: &input.context.pod_namespace,
        tenant_namespace: tenant,
    };
    Ok(Plan {
        objects: desired::objects(version, !image_pull_secrets.is_empty(), tenant, kubeconfig),
        copies: desired::secret_copies(version, &image_pull_secrets, tenant),
        status: status::report(&expected, repository.as_ref(), release.as_ref()),
        requeue_after_seconds: poll,
    })
}

#[cfg(test)]
mod tests;
