//! A loaded plugin: its descriptor, and the calls with the host-side
//! checks of what goes in and what comes out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use service_provider_sdk::contract as sdk;
use tracing::Instrument;

use super::error::INPUT;
use super::{Answer, Call, Limits, Method, PluginError, Prepared};
use crate::metrics::{Bounds, LabelValue, PluginMeter, Usage};

pub(super) struct Inner {
    pub(super) prepared: Prepared,
    pub(super) limits: Limits,
    pub(super) descriptor: sdk::Descriptor,
    pub(super) described: Described,
}

/// A loaded plugin: cheap to clone, safe to call from many tasks at once.
#[derive(Clone)]
pub struct Plugin {
    pub(super) inner: Arc<Inner>,
    /// Where its calls report what they used and how they ended.
    pub(super) meter: Option<PluginMeter>,
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

    /// The limits every call runs under, as metrics report them.
    pub fn bounds(&self) -> Bounds {
        let limits = &self.inner.limits;
        Bounds { timeout: limits.timeout, memory_bytes: limits.memory_bytes, output_bytes: limits.output_bytes }
    }

    /// This plugin, reporting each call to `meter` (and, the first time,
    /// the `describe` it was loaded with).
    pub fn metered(&self, meter: PluginMeter) -> Plugin {
        let described = &self.inner.described;
        if !described.reported.swap(true, Ordering::Relaxed) {
            meter.called(Method::Describe, &described.usage);
        }
        Plugin { inner: self.inner.clone(), meter: Some(meter) }
    }

    /// The component was halted (a canary whose cohort went back to the
    /// plugin).
    pub fn halted(&self) {
        if let Some(meter) = &self.meter {
            meter.halted();
        }
    }

    /// The host refused what a call answered (`kind` says why).
    pub fn refused(&self, method: Method, kind: impl LabelValue) {
        if let Some(meter) = &self.meter {
            meter.refused(method, kind);
        }
    }

    pub async fn plan(&self, input: &sdk::Input) -> Result<Result<sdk::Plan, sdk::PlanError>, PluginError> {
        self.answer(Method::Plan, input, |answer| {
            let Answer::Plan(result) = answer else { unreachable!("plan answers plan") };
            let objects = result.as_ref().map_or(0, |plan| plan.objects.len() + plan.copies.len());
            (result, "a plan", objects)
        })
        .await
    }

    pub async fn cleanup(&self, input: &sdk::Input) -> Result<Result<sdk::CleanupPlan, sdk::PlanError>, PluginError> {
        self.answer(Method::Cleanup, input, |answer| {
            let Answer::Cleanup(result) = answer else { unreachable!("cleanup answers cleanup") };
            let objects = match &result {
                Ok(sdk::CleanupPlan::Teardown(t)) => t.objects.len() + t.copies.len(),
                Ok(sdk::CleanupPlan::Blocked(_)) | Err(_) => 0,
            };
            (result, "a cleanup plan", objects)
        })
        .await
    }

    /// One call with `input`: its answer taken out of [`Answer`] by
    /// `unpack` (with what to call it and how many objects it asks for),
    /// checked against the limits; what it used and how it ended go to the
    /// meter, and its time to a span.
    async fn answer<T: serde::Serialize, E: serde::Serialize>(
        &self,
        method: Method,
        input: &sdk::Input,
        unpack: impl FnOnce(Answer) -> (Result<T, E>, &'static str, usize),
    ) -> Result<Result<T, E>, PluginError> {
        let span = tracing::debug_span!(
            "plugin",
            call = method.label(),
            plugin = %self.name(),
            plugin.digest = %self.digest(),
            plugin.memory_bytes = tracing::field::Empty,
        );
        let called = async {
            // An input over the limit is refused before any call: no usage.
            let (answer, mut usage) = match self.check_input(input) {
                Ok(()) => {
                    let (answer, usage) =
                        self.inner.prepared.call(self.name(), &self.inner.limits, call_of(method, input)).await;
                    (answer, Some(usage))
                }
                Err(e) => (Err(e), None),
            };
            let result = answer.and_then(|answer| {
                let (result, what, objects) = unpack(answer);
                // A plan is held to the output limits; the plugin's own
                // error is only measured (its size is bounded by the
                // hostcall fuel while it is lifted).
                let (bytes, fits) = match &result {
                    Ok(ok) => self.check_output(what, ok, objects),
                    Err(refusal) => (serialized_len(refusal), Ok(())),
                };
                if let Some(usage) = &mut usage {
                    usage.output_bytes = bytes;
                }
                fits.map(|()| result)
            });
            if let Some(usage) = &usage {
                let memory = i64::try_from(usage.memory_bytes).unwrap_or(i64::MAX);
                tracing::Span::current().record("plugin.memory_bytes", memory);
            }
            if let Some(meter) = &self.meter {
                if let Some(usage) = &usage {
                    meter.called(method, usage);
                }
                if let Some(stopped) = result.as_ref().err().and_then(PluginError::stopped) {
                    meter.stopped(method, stopped);
                }
            }
            result
        };
        called.instrument(span).await
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
            return Err(PluginError::TooLarge { plugin: self.name().into(), what: INPUT, bytes, max });
        }
        Ok(())
    }

    /// Refuses outputs over the size or object-count limits before the host
    /// parses anything in them; returns the output's size too.
    fn check_output(
        &self,
        what: &'static str,
        output: &impl serde::Serialize,
        objects: usize,
    ) -> (usize, Result<(), PluginError>) {
        let bytes = serialized_len(output);
        (bytes, self.check_size(what, bytes, objects))
    }

    /// Refuses an output of `bytes` (its JSON) and `objects` over the limits.
    pub(super) fn check_size(&self, what: &'static str, bytes: usize, objects: usize) -> Result<(), PluginError> {
        let limits = &self.inner.limits;
        let plugin = || self.name().to_string();
        if objects > limits.objects {
            let limit = format!("limit of {} objects per plan", limits.objects);
            return Err(PluginError::Limit { plugin: plugin(), bound: super::Bound::Objects, limit });
        }
        if bytes > limits.output_bytes {
            return Err(PluginError::TooLarge { plugin: plugin(), what, bytes, max: limits.output_bytes });
        }
        Ok(())
    }
}

/// What the `describe` call a plugin was loaded with used, reported once:
/// to the first meter the plugin is given (a controller started again, a
/// new leader term, gives it one more).
pub(super) struct Described {
    usage: Usage,
    reported: AtomicBool,
}

impl Described {
    pub(super) fn new(usage: Usage) -> Self {
        Described { usage, reported: AtomicBool::new(false) }
    }
}

fn call_of(method: Method, input: &sdk::Input) -> Call<'_> {
    match method {
        Method::Describe => Call::Describe,
        Method::Plan => Call::Plan(input),
        Method::Cleanup => Call::Cleanup(input),
    }
}

/// The length of a value's JSON serialisation, without building it.
pub(super) fn serialized_len(value: &impl serde::Serialize) -> usize {
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
