//! A loaded plugin: its descriptor, and the calls with the host-side
//! checks of what goes in and what comes out.

use std::sync::Arc;
use std::time::Duration;

use service_provider_sdk::contract as sdk;

use super::{Answer, Call, Limits, PluginError, Prepared};

pub(super) struct Inner {
    pub(super) prepared: Prepared,
    pub(super) limits: Limits,
    pub(super) descriptor: sdk::Descriptor,
}

/// A loaded plugin: cheap to clone, safe to call from many tasks at once.
#[derive(Clone)]
pub struct Plugin {
    pub(super) inner: Arc<Inner>,
}

impl Plugin {
    /// What the plugin declared about itself (read once at load).
    pub fn descriptor(&self) -> &sdk::Descriptor {
        &self.inner.descriptor
    }

    pub fn name(&self) -> &str {
        &self.inner.descriptor.name
    }

    /// The largest input a call accepts, in bytes.
    pub fn input_limit(&self) -> usize {
        self.inner.limits.input_bytes
    }

    /// `sha256:<hex>` of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.inner.prepared.digest
    }

    /// How long compiling (or loading the precompiled) component took.
    pub fn compile_time(&self) -> Duration {
        self.inner.prepared.compile_time
    }

    /// The contract version the plugin implements.
    pub fn contract_version(&self) -> &'static str {
        self.inner.prepared.contract_version()
    }

    pub async fn plan(&self, input: &sdk::Input) -> Result<Result<sdk::Plan, sdk::PlanError>, PluginError> {
        self.check_input(input)?;
        let Answer::Plan(result) = self.call(Call::Plan(input)).await? else { unreachable!("plan answers plan") };
        if let Ok(plan) = &result {
            self.check_output("a plan", plan, plan.objects.len() + plan.copies.len())?;
        }
        Ok(result)
    }

    pub async fn cleanup(&self, input: &sdk::Input) -> Result<Result<sdk::CleanupPlan, sdk::PlanError>, PluginError> {
        self.check_input(input)?;
        let Answer::Cleanup(result) = self.call(Call::Cleanup(input)).await? else {
            unreachable!("cleanup answers cleanup")
        };
        if let Ok(plan) = &result {
            let objects = match plan {
                sdk::CleanupPlan::Teardown(t) => t.objects.len() + t.copies.len(),
                sdk::CleanupPlan::Blocked(_) => 0,
            };
            self.check_output("a cleanup plan", plan, objects)?;
        }
        Ok(result)
    }

    async fn call(&self, call: Call<'_>) -> Result<Answer, PluginError> {
        self.inner.prepared.call(self.name(), &self.inner.limits, call).await
    }

    /// Refuses inputs over the limit (the host gathered them, but a cluster
    /// full of observed objects must not turn into an unbounded guest
    /// allocation).
    fn check_input(&self, input: &sdk::Input) -> Result<(), PluginError> {
        let bytes = input.object.len()
            + input.provider_config.as_ref().map_or(0, String::len)
            + input.observed.iter().flat_map(|o| &o.objects).map(String::len).sum::<usize>();
        let max = self.inner.limits.input_bytes;
        if bytes > max {
            return Err(PluginError::TooLarge { plugin: self.name().into(), what: "an input", bytes, max });
        }
        Ok(())
    }

    /// Refuses outputs over the size or object-count limits before the host
    /// parses anything in them.
    pub(super) fn check_output(
        &self,
        what: &'static str,
        output: &impl serde::Serialize,
        objects: usize,
    ) -> Result<(), PluginError> {
        let limits = &self.inner.limits;
        let plugin = || self.name().to_string();
        if objects > limits.objects {
            return Err(PluginError::Limit {
                plugin: plugin(),
                limit: format!("limit of {} objects per plan", limits.objects),
            });
        }
        let bytes = serialized_len(output);
        if bytes > limits.output_bytes {
            return Err(PluginError::TooLarge { plugin: plugin(), what, bytes, max: limits.output_bytes });
        }
        Ok(())
    }
}

/// The length of a value's JSON serialisation, without building it.
fn serialized_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(usize::MAX, |()| count.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_lengths_are_exact() {
        let value = serde_json::json!({"a": [1, 2, "three"]});
        assert_eq!(serialized_len(&value), value.to_string().len());
    }
}
