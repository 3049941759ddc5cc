//! A plugin whose `describe()` sleeps in a WASI call and never returns. The
//! host must fail its start-up with a clear message instead of hanging.

use service_provider_sdk::contract::{ApiKind, CleanupPlan, Descriptor, Input, Plan, PlanError, Provider};

pub struct Sleepy;

impl Provider for Sleepy {
    fn describe() -> Descriptor {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        let kind = ApiKind::new("sleepy.test", "v1", "Thing", "things", true);
        Descriptor::new("sleepy", kind.clone(), kind, "sleepy.test/finalizer")
    }

    fn plan(_input: &Input) -> Result<Plan, PlanError> {
        Err(PlanError::Transient("never described".into()))
    }

    fn cleanup(_input: &Input) -> Result<CleanupPlan, PlanError> {
        Err(PlanError::Transient("never described".into()))
    }
}

service_provider_sdk::export_provider!(crate::Sleepy);
