//! The plugin as a reconcile uses it: the component with its grant, and
//! the kinds it serves. A part of [`super::shared::Shared`], and of a
//! canary beside it ([`super::rollout`]).

use std::collections::BTreeSet;

use kube::api::ApiResource;
use service_provider_sdk::contract::Descriptor;

use super::gather;
use crate::instance::Reach;
use crate::plugin::grant::Effective;
use crate::plugin::plan::Planner;
use crate::stores::Stores;

/// The plugin as loaded: the component with its grant, and the kinds it
/// serves.
pub struct Loaded {
    pub(crate) planner: Planner,
    /// The service kind, on the onboarding cluster.
    pub(crate) service: ApiResource,
    /// The ProviderConfig kind, on the platform cluster.
    pub(crate) provider_config: ApiResource,
    /// The group versions whose kinds were checked against the platform's
    /// discovery at start ([`crate::clusters::kinds::check`]); the others are
    /// checked on each tenant cluster.
    pub(crate) platform_versions: BTreeSet<String>,
}

impl Loaded {
    /// The plugin, with the kinds of its descriptor; `platform_versions`
    /// as the platform's discovery checked them.
    pub fn new(planner: Planner, platform_versions: BTreeSet<String>) -> Self {
        let descriptor = planner.descriptor();
        let service = crate::resource::of_kind(&descriptor.service);
        let provider_config = crate::resource::of_kind(&descriptor.provider_config);
        Loaded { planner, service, provider_config, platform_versions }
    }

    pub fn descriptor(&self) -> &Descriptor {
        self.planner.descriptor()
    }

    pub fn granted(&self) -> &Effective {
        &self.planner.granted
    }

    /// Where a gather for this plugin may look (`reach`, then `stores`), and
    /// how much it may bring back.
    pub(crate) fn observer<'a>(&'a self, reach: &'a Reach<'a>, stores: &'a Stores) -> gather::Observer<'a> {
        gather::Observer { reach, stores, granted: self.granted(), input_limit: self.planner.plugin.input_limit() }
    }
}
