//! The Flux service-provider plugin.
//!
//! A plain library: everything Flux-specific the generic host needs, as pure
//! functions over the contract types of `service-provider-sdk`, exported as
//! a component with one line (behind the default `component` feature).
//!
//! Behaviour follows service-provider-flux (version resolution, the Flux
//! objects with drift detection and uninstall settings, pull-secret copies,
//! the CA bundle wired into all seven controllers, `namespaceOverride`),
//! with its gaps fixed: deletion does not need the version to be offered,
//! the unknown-version message lists the offer, the Ready message is never
//! empty, orphaned copies are removed (by the host), deletion waits for the
//! tenant's Flux objects on the ControlPlane, and the ControlPlane token is
//! least privilege instead of `*/*/*`.

pub mod api;
#[cfg(any(test, feature = "test-cases"))]
pub mod cases;
mod cleanup;
pub mod config;
pub mod describe;
pub mod desired;
pub mod status;

#[cfg(feature = "component")]
service_provider_sdk::export_provider!(crate::FluxProvider);

use serde_json::Value;
use service_provider_sdk::contract::{CleanupPlan, Descriptor, Input, InvalidInput, Plan, PlanError, Provider};

use crate::api::{FluxSpec, Object, ProviderConfigSpec};
use crate::describe::{OBSERVE_HELM_RELEASE, OBSERVE_OCI_REPOSITORY};

/// Everything that can go wrong while planning.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("{0}")]
    VersionNotAvailable(String),
    #[error("{0}")]
    InvalidProviderConfig(String),
    #[error("invalid Flux object: {0}")]
    InvalidObject(String),
    #[error("ControlPlane access has not been granted yet")]
    NoControlPlaneAccess,
    #[error("observed object {id:?} is not valid JSON: {message}")]
    MalformedObserved { id: String, message: String },
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

/// The Flux provider, as the contract's [`Provider`].
pub struct FluxProvider;

impl Provider for FluxProvider {
    fn describe() -> Descriptor {
        describe::descriptor()
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let default = config::DEFAULT_POLL_SECONDS;
        let config = provider_config(input).map_err(|e| e.into_plan_error(default))?;
        let (interval, poll) = config::poll_interval(config.as_ref()).map_err(|e| e.into_plan_error(default))?;
        plan(input, config.as_ref(), &interval, poll).map_err(|e| e.into_plan_error(poll))
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
            serde_json::from_str::<Object<ProviderConfigSpec>>(json)
                .map(|pc| pc.spec)
                .map_err(|e| Error::InvalidProviderConfig(format!("invalid ProviderConfig: {e}")))
        })
        .transpose()
}

fn observed_object(input: &Input, id: &str) -> Result<Option<Value>, Error> {
    input
        .observed(id)
        .and_then(|objects| objects.first())
        .map(|json| {
            serde_json::from_str(json).map_err(|e| Error::MalformedObserved { id: id.into(), message: e.to_string() })
        })
        .transpose()
}

fn plan(input: &Input, config: Option<&ProviderConfigSpec>, interval: &str, poll: u32) -> Result<Plan, Error> {
    let object: Object<FluxSpec> =
        serde_json::from_str(&input.object).map_err(|e| Error::InvalidObject(e.to_string()))?;
    let version = config::resolve_version(config, &object.spec.version)?;
    let config = config.expect("a version resolved, so there is a config");
    let request = desired::request(version, config, interval)?;
    let kubeconfig = input.context.control_plane.as_ref().ok_or(Error::NoControlPlaneAccess)?;
    let tenant = input.context.tenant_namespace.as_str();
    let repository = observed_object(input, OBSERVE_OCI_REPOSITORY)?;
    let release = observed_object(input, OBSERVE_HELM_RELEASE)?;
    Ok(Plan {
        objects: desired::objects(&request, tenant, kubeconfig),
        copies: desired::copies(&request, tenant),
        status: status::overall(status::resources(tenant, repository.as_ref(), release.as_ref())),
        requeue_after_seconds: poll,
    })
}

#[cfg(test)]
mod tests;
