//! The Kro plugin's "next version": guest-kro, with changes a test can name
//! one by one.
//!
//! - the HelmRelease gets the Helm value `next: true` and takes its chart
//!   from the renamed source;
//! - the OCIRepository is renamed to [`CHART`]: one object more
//!   (`kro-chart`), one no longer planned (`kro-oci-repository`, pruned),
//!   and the source's status is read from the new one;
//! - the ControlPlane token asks for one more rule ([`EXTRA_RULE`]), which
//!   the built-in grant covers;
//! - for instances of version [`REFUSED_VERSION`], the source's interval is
//!   `5s`, which the built-in grant refuses (at least 30s);
//! - for instances of version [`AGREEING_VERSION`], its plan is guest-kro's
//!   (asked with the same input, a shadow of it agrees there).
//!
//! Nothing else differs, so a preview, a shadow or a canary of it must
//! report exactly these.

use guest_kro::KroProvider;
use serde_json::{Value, json};
use service_provider_sdk::contract::{CleanupPlan, Descriptor, Input, Plan, PlanError, PolicyRule, Provider};

/// The OCIRepository's new name.
pub const CHART: &str = "kro-chart";
/// The service version whose plans the built-in grant refuses.
pub const REFUSED_VERSION: &str = "v0.8.0";

/// The service version whose plans are guest-kro's, unchanged.
pub const AGREEING_VERSION: &str = "v0.9.0";

/// The token rule the next version adds.
pub fn extra_rule() -> PolicyRule {
    PolicyRule::new(&[""], &["configmaps"], &["get", "list"])
}

pub struct KroNext;

impl Provider for KroNext {
    fn describe() -> Descriptor {
        let mut descriptor = KroProvider::describe();
        descriptor.access.control_plane_rules.push(extra_rule());
        for capability in &mut descriptor.capabilities {
            if capability.names.iter().any(|n| n == guest_kro::desired::OCI_REPOSITORY) {
                capability.names.push(CHART.into());
            }
        }
        for observation in &mut descriptor.observations {
            if observation.id == guest_kro::describe::OBSERVE_OCI_REPOSITORY {
                observation.name = Some(CHART.into());
            }
        }
        descriptor
    }

    fn plan(input: &Input) -> Result<Plan, PlanError> {
        let mut plan = KroProvider::plan(&as_guest_kro_sees(input))?;
        let version = serde_json::from_str::<Value>(&input.object)
            .ok()
            .and_then(|o| o.pointer("/spec/version").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        if version == AGREEING_VERSION {
            return Ok(plan);
        }
        let refuse = version == REFUSED_VERSION;
        for object in &mut plan.objects {
            let Ok(mut manifest) = serde_json::from_str::<Value>(&object.manifest) else { continue };
            match manifest["kind"].as_str() {
                Some("OCIRepository") => {
                    manifest["metadata"]["name"] = json!(CHART);
                    if refuse {
                        manifest["spec"]["interval"] = json!("5s");
                    }
                }
                Some("HelmRelease") => {
                    manifest["spec"]["chartRef"]["name"] = json!(CHART);
                    let values = manifest["spec"].as_object_mut().expect("a spec").entry("values").or_insert(json!({}));
                    values["next"] = json!(true);
                }
                _ => continue,
            }
            object.manifest = manifest.to_string();
        }
        Ok(plan)
    }

    fn cleanup(input: &Input) -> Result<CleanupPlan, PlanError> {
        KroProvider::cleanup(input)
    }
}

/// The input with the observed HelmRelease as guest-kro would have written
/// it: guest-kro judges a release whose spec differs from its own as not
/// yet reconciled, and this version's changes are made after it plans.
fn as_guest_kro_sees(input: &Input) -> Input {
    let mut input = input.clone();
    for observed in input.observed.iter_mut().filter(|o| o.id == guest_kro::describe::OBSERVE_HELM_RELEASE) {
        for object in &mut observed.objects {
            let Ok(mut release) = serde_json::from_str::<Value>(object) else { continue };
            if release.pointer("/spec/chartRef/name") == Some(&json!(CHART)) {
                release["spec"]["chartRef"]["name"] = json!(guest_kro::desired::OCI_REPOSITORY);
            }
            if let Some(values) = release.pointer_mut("/spec/values").and_then(Value::as_object_mut) {
                values.remove("next");
                if values.is_empty() {
                    release["spec"].as_object_mut().expect("a spec").remove("values");
                }
            }
            *object = release.to_string();
        }
    }
    input
}

service_provider_sdk::export_provider!(crate::KroNext);
