//! Status mapping: from the Flux objects' conditions to `status.resources`
//! and the instance's phase and `Ready` condition.

use serde_json::Value;
use service_provider_sdk::contract::{Condition, ConditionStatus, ResourceStatus, ServiceStatus};

use crate::api::KroVersion;
use crate::config;
use crate::desired::{DOCKER_CONFIG_JSON, HELM_RELEASE, OCI_REPOSITORY, chart_pull_secret_copy_name};

pub const PHASE_READY: &str = "Ready";
pub const PHASE_PROGRESSING: &str = "Progressing";
pub const PHASE_TERMINATING: &str = "Terminating";

pub const CONDITION_READY: &str = "Ready";
pub const REASON_RECONCILING: &str = "Reconciling";
pub const REASON_SUCCESS: &str = "ReconcileSuccess";

pub const LOCATION_PLATFORM: &str = "PlatformCluster";

/// The `Ready` message while something is not ready yet (as the Go provider).
pub const WAITING: &str = "Waiting for managed resources to become ready";

const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
const HELM_GROUP: &str = "helm.toolkit.fluxcd.io";
const OCI_KIND: &str = "OCIRepository";
const HELM_KIND: &str = "HelmRelease";

/// How one Flux object stands, judged against the generation of its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxState {
    pub phase: &'static str,
    pub message: Option<String>,
    /// Flux reports a failure for the current spec (`Ready=False`).
    pub failed: bool,
}

impl FluxState {
    fn progressing(message: Option<String>) -> Self {
        FluxState { phase: PHASE_PROGRESSING, message, failed: false }
    }

    fn waiting_for_generation(generation: i64) -> Self {
        Self::progressing(Some(format!("waiting for Flux to reconcile generation {generation}")))
    }
}

fn int(object: &Value, pointer: &str) -> Option<i64> {
    object.pointer(pointer).and_then(Value::as_i64)
}

fn text<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// Judges one managed Flux object by its `Ready` condition, as the real
/// controllers write it:
/// - no object, or no `Ready` condition yet → Progressing, no message;
/// - a `Ready` condition about an older generation (its own
///   `observedGeneration`, else `status.observedGeneration`) → Progressing:
///   Flux has not looked at the latest spec yet;
/// - `Ready=False|Unknown` about the current generation → Progressing with
///   Flux's message (`failed` when False). A failed reconcile leaves
///   `status.observedGeneration` behind (at `-1` if it never succeeded), so
///   only the condition says which generation the message is about;
/// - `Ready=True` about the current generation → Ready once
///   `status.observedGeneration` has caught up too (Flux writes the
///   condition one status update before the end of its reconcile).
pub fn judge(object: Option<&Value>) -> FluxState {
    let Some(object) = object else {
        return FluxState::progressing(None);
    };
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| text(c, "type") == Some(CONDITION_READY)));
    let Some(ready) = ready else {
        return FluxState::progressing(None);
    };
    let generation = int(object, "/metadata/generation");
    let finished = int(object, "/status/observedGeneration");
    let about = int(ready, "/observedGeneration").or(finished);
    let behind = |observed: Option<i64>| matches!((generation, observed), (Some(g), Some(o)) if o < g);
    if behind(about) {
        return FluxState::waiting_for_generation(generation.unwrap_or_default());
    }
    let message = text(ready, "message").filter(|m| !m.is_empty()).map(str::to_string);
    match text(ready, "status") {
        Some("True") if behind(finished) => FluxState::waiting_for_generation(generation.unwrap_or_default()),
        Some("True") => FluxState { phase: PHASE_READY, message: None, failed: false },
        Some("False") => FluxState { phase: PHASE_PROGRESSING, message, failed: true },
        _ => FluxState::progressing(message),
    }
}

/// The phase and message of one managed Flux object (see [`judge`]).
pub fn flux_phase(object: Option<&Value>) -> (&'static str, Option<String>) {
    let state = judge(object);
    (state.phase, state.message)
}

/// What a plan applies and knows, to judge the observed Flux objects by.
pub struct Expected<'a> {
    /// The OCIRepository manifest this plan applies.
    pub oci_repository: &'a Value,
    /// The HelmRelease manifest this plan applies.
    pub helm_release: &'a Value,
    /// The offered version the tenant asked for.
    pub version: &'a KroVersion,
    /// The ProviderConfig's name (the version is offered there).
    pub provider_config: &'a str,
    /// Where the chart pull secret's source lives.
    pub pod_namespace: &'a str,
    pub tenant_namespace: &'a str,
}

/// Whether `live` has every field `wanted` sets, with the same value.
fn contains(live: &Value, wanted: &Value) -> bool {
    match (live, wanted) {
        (Value::Object(live), Value::Object(wanted)) => {
            wanted.iter().all(|(key, value)| live.get(key).is_some_and(|l| contains(l, value)))
        }
        (Value::Array(live), Value::Array(wanted)) => {
            live.len() == wanted.len() && live.iter().zip(wanted).all(|(l, w)| contains(l, w))
        }
        _ => live == wanted,
    }
}

/// The observed object was read before this plan's spec was applied (its
/// status says nothing about that spec yet). Objects observed without a
/// spec are not compared.
fn spec_outdated(observed: &Value, desired: &Value) -> bool {
    match (observed.get("spec"), desired.get("spec")) {
        (Some(live), Some(wanted)) => !contains(live, wanted),
        _ => false,
    }
}

fn outdated() -> FluxState {
    FluxState::progressing(Some("waiting for Flux to reconcile the updated spec".into()))
}

/// Registry answers that mean "these credentials (or none) may not pull".
fn is_refused(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["unauthorized", "authentication required", "denied", "forbidden"].iter().any(|m| lower.contains(m))
}

fn is_unknown_chart(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["manifest_unknown", "manifest unknown", "name_unknown", "name unknown"].iter().any(|m| lower.contains(m))
}

/// Flux's message about a failed chart pull, with what to do about it
/// (which Secret, which registry, which ProviderConfig field).
pub fn explain_pull_failure(message: &str, expected: &Expected) -> String {
    let version = expected.version;
    let chart = format!("{}:{}", config::chart_url(version), version.chart_version);
    let offer = format!("version {} of ProviderConfig {}", version.version, expected.provider_config);
    let secret = version.chart_pull_secret.as_deref().filter(|s| !s.is_empty());
    if is_refused(message) {
        return match secret {
            None => format!(
                "the registry refused to serve chart {chart} without credentials: set chartPullSecret of {offer} \
                 to a Secret of type {DOCKER_CONFIG_JSON} in namespace {} that may pull it (Flux: {message})",
                expected.pod_namespace
            ),
            Some(source) => format!(
                "the registry refused the credentials of Secret {}/{source} (chartPullSecret of {offer}, copied to \
                 {}/{}) for chart {chart}: update that Secret with credentials that may pull it (Flux: {message})",
                expected.pod_namespace,
                expected.tenant_namespace,
                chart_pull_secret_copy_name(source)
            ),
        };
    }
    if is_unknown_chart(message) {
        return format!(
            "chart {chart} was not found in the registry: check chartURL and chartVersion of {offer} (Flux: {message})"
        );
    }
    message.to_string()
}

/// The digest part of an OCI artifact revision (`0.9.3@sha256:…`).
fn revision_digest(revision: &str) -> Option<&str> {
    revision.split_once('@').map(|(_, digest)| digest)
}

/// The HelmRelease is Ready for the chart artifact the OCIRepository holds
/// now, not only for the one it installed before: after a chart change the
/// HelmRelease keeps its old `Ready=True` (its own spec did not change)
/// until helm-controller picks up the new artifact.
fn release_behind_artifact(repository: Option<&Value>, release: &Value) -> Option<String> {
    let revision = repository?.pointer("/status/artifact/revision").and_then(Value::as_str)?;
    let attempted = release.pointer("/status/lastAttemptedRevisionDigest").and_then(Value::as_str)?;
    (revision_digest(revision)? != attempted).then(|| format!("waiting for Flux to install chart revision {revision}"))
}

/// The status of a plan: each Flux object judged by [`judge`], against the
/// spec this plan applies, with an explanation of chart pull failures; the
/// first failure also goes into the `Ready` condition's message.
pub fn report(expected: &Expected, oci_repository: Option<&Value>, helm_release: Option<&Value>) -> ServiceStatus {
    let mut repository = match oci_repository {
        Some(observed) if spec_outdated(observed, expected.oci_repository) => outdated(),
        observed => judge(observed),
    };
    if repository.failed {
        repository.message = repository.message.map(|m| explain_pull_failure(&m, expected));
    }
    let release = match helm_release {
        Some(observed) if spec_outdated(observed, expected.helm_release) => outdated(),
        observed => {
            let state = judge(observed);
            let behind = observed.filter(|_| state.phase == PHASE_READY && repository.phase == PHASE_READY);
            match behind.and_then(|release| release_behind_artifact(oci_repository, release)) {
                Some(message) => FluxState::progressing(Some(message)),
                None => state,
            }
        }
    };
    let tenant = expected.tenant_namespace;
    let failure = [(OCI_KIND, OCI_REPOSITORY, &repository), (HELM_KIND, HELM_RELEASE, &release)]
        .into_iter()
        .find(|(_, _, state)| state.failed)
        .map(|(kind, name, state)| format!("{kind} {name}: {}", state.message.as_deref().unwrap_or("failed")));
    let resources = vec![
        entry(SOURCE_GROUP, OCI_KIND, OCI_REPOSITORY, tenant, repository.phase, repository.message),
        entry(HELM_GROUP, HELM_KIND, HELM_RELEASE, tenant, release.phase, release.message),
    ];
    overall(resources, failure.as_deref())
}

fn entry(
    api_group: &str,
    kind: &str,
    name: &str,
    namespace: &str,
    phase: &str,
    message: Option<String>,
) -> ResourceStatus {
    ResourceStatus {
        api_group: Some(api_group.to_string()),
        kind: kind.to_string(),
        name: name.to_string(),
        namespace: Some(namespace.to_string()),
        phase: phase.to_string(),
        message,
        location: Some(LOCATION_PLATFORM.to_string()),
    }
}

/// `status.resources` for the two Flux objects, from what the host observed.
pub fn resources(
    tenant_namespace: &str,
    oci_repository: Option<&Value>,
    helm_release: Option<&Value>,
) -> Vec<ResourceStatus> {
    let (repo_phase, repo_message) = flux_phase(oci_repository);
    let (release_phase, release_message) = flux_phase(helm_release);
    vec![
        entry(SOURCE_GROUP, OCI_KIND, OCI_REPOSITORY, tenant_namespace, repo_phase, repo_message),
        entry(HELM_GROUP, HELM_KIND, HELM_RELEASE, tenant_namespace, release_phase, release_message),
    ]
}

/// Both Flux objects in phase Terminating, as shown during deletion.
pub fn terminating_resources(tenant_namespace: &str) -> Vec<ResourceStatus> {
    resources(tenant_namespace, None, None)
        .into_iter()
        .map(|r| ResourceStatus { phase: PHASE_TERMINATING.to_string(), message: None, ..r })
        .collect()
}

/// Ready when every managed object is Ready, Progressing otherwise; a
/// failure (what failed, and why) is added to the `Ready` condition's
/// message, so that it also reaches the Event.
pub fn overall(resources: Vec<ResourceStatus>, failure: Option<&str>) -> ServiceStatus {
    let ready = resources.iter().all(|r| r.phase == PHASE_READY);
    let (phase, status, reason, message) = if ready {
        (PHASE_READY, ConditionStatus::True, REASON_SUCCESS, "Domain Service is ready".to_string())
    } else {
        let message = match failure {
            Some(failure) => format!("{WAITING}: {failure}"),
            None => WAITING.to_string(),
        };
        (PHASE_PROGRESSING, ConditionStatus::False, REASON_RECONCILING, message)
    };
    ServiceStatus {
        phase: phase.to_string(),
        conditions: vec![Condition { type_: CONDITION_READY.to_string(), status, reason: reason.to_string(), message }],
        resources: Some(resources),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_conditions(conditions: Value) -> Value {
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "conditions": conditions}})
    }

    #[test]
    fn no_object_or_no_conditions_is_progressing_without_message() {
        assert_eq!(flux_phase(None), (PHASE_PROGRESSING, None));
        assert_eq!(flux_phase(Some(&json!({"metadata": {}}))), (PHASE_PROGRESSING, None));
        assert_eq!(flux_phase(Some(&with_conditions(json!([])))), (PHASE_PROGRESSING, None));
    }

    #[test]
    fn ready_true_is_ready_and_drops_the_message() {
        let obj = with_conditions(json!([{"type": "Ready", "status": "True", "message": "stored artifact"}]));
        assert_eq!(flux_phase(Some(&obj)), (PHASE_READY, None));
    }

    #[test]
    fn ready_false_or_unknown_is_progressing_with_the_message() {
        for status in ["False", "Unknown"] {
            let obj = with_conditions(json!([{"type": "Ready", "status": status, "message": "pulling chart"}]));
            assert_eq!(flux_phase(Some(&obj)), (PHASE_PROGRESSING, Some("pulling chart".into())), "{status}");
        }
    }

    #[test]
    fn only_a_stalled_condition_is_progressing_without_message() {
        let obj = with_conditions(json!([{"type": "Stalled", "status": "True", "message": "broken"}]));
        assert_eq!(flux_phase(Some(&obj)), (PHASE_PROGRESSING, None));
    }

    #[test]
    fn a_status_older_than_the_spec_is_progressing() {
        let obj = json!({
            "metadata": {"generation": 3},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let (phase, message) = flux_phase(Some(&obj));
        assert_eq!(phase, PHASE_PROGRESSING);
        assert!(message.unwrap().contains("generation 3"));
    }

    #[test]
    fn overall_is_ready_only_when_every_resource_is_ready() {
        let ready = with_conditions(json!([{"type": "Ready", "status": "True"}]));
        let status = overall(resources("ns", Some(&ready), Some(&ready)), None);
        assert_eq!(status.phase, PHASE_READY);
        assert_eq!(status.conditions[0].status, ConditionStatus::True);
        assert_eq!(status.conditions[0].reason, "ReconcileSuccess");
        assert_eq!(status.conditions[0].message, "Domain Service is ready");

        let status = overall(resources("ns", Some(&ready), None), None);
        assert_eq!(status.phase, PHASE_PROGRESSING);
        assert_eq!(status.conditions[0].reason, "Reconciling");
        assert_eq!(status.conditions[0].message, "Waiting for managed resources to become ready");
        let resources = status.resources.unwrap();
        assert_eq!(resources[0].phase, PHASE_READY);
        assert_eq!(resources[1].phase, PHASE_PROGRESSING);
    }

    #[test]
    fn a_failure_goes_into_the_ready_message() {
        let status = overall(resources("ns", None, None), Some("OCIRepository kro-oci-repository: no way"));
        assert_eq!(
            status.conditions[0].message,
            "Waiting for managed resources to become ready: OCIRepository kro-oci-repository: no way"
        );
    }

    /// The real source-controller after a failed pull: the conditions are
    /// about generation 1, `status.observedGeneration` stays at -1.
    fn failed_pull(message: &str) -> Value {
        json!({
            "metadata": {"generation": 1},
            "status": {"observedGeneration": -1, "conditions": [
                {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry", "observedGeneration": 1,
                 "message": "processing object: new generation 0 -> 1"},
                {"type": "Ready", "status": "False", "reason": "OCIArtifactPullFailed", "observedGeneration": 1,
                 "message": message}
            ]}
        })
    }

    const REFUSED: &str = "failed to determine artifact digest: GET http://127.0.0.1:5000/v2/kro/charts/kro/manifests/0.9.3: \
                           UNAUTHORIZED: authentication required";

    #[test]
    fn a_failed_reconcile_is_judged_by_its_condition_not_by_observed_generation() {
        let state = judge(Some(&failed_pull(REFUSED)));
        assert_eq!(state, FluxState { phase: PHASE_PROGRESSING, message: Some(REFUSED.into()), failed: true });
    }

    #[test]
    fn ready_true_counts_only_once_observed_generation_caught_up() {
        let mut obj = json!({
            "metadata": {"generation": 2},
            "status": {"observedGeneration": 1, "conditions": [
                {"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 2, "message": "stored"}
            ]}
        });
        let state = judge(Some(&obj));
        assert_eq!(state.phase, PHASE_PROGRESSING);
        assert_eq!(state.message.as_deref(), Some("waiting for Flux to reconcile generation 2"));
        assert!(!state.failed);
        obj["status"]["observedGeneration"] = json!(2);
        assert_eq!(judge(Some(&obj)).phase, PHASE_READY);
        obj["status"]["observedGeneration"] = json!(-1);
        assert_eq!(judge(Some(&obj)).phase, PHASE_PROGRESSING, "never finished");
    }

    #[test]
    fn a_condition_about_an_older_generation_hides_its_message() {
        let mut obj = failed_pull("an old failure");
        obj["metadata"]["generation"] = json!(2);
        let state = judge(Some(&obj));
        assert_eq!(state.message.as_deref(), Some("waiting for Flux to reconcile generation 2"));
        assert!(!state.failed, "the failure was about generation 1");
    }

    #[test]
    fn in_progress_is_not_a_failure() {
        let obj = with_conditions(json!([{"type": "Ready", "status": "Unknown", "message": "Fresh install"}]));
        assert_eq!(judge(Some(&obj)), FluxState::progressing(Some("Fresh install".into())));
    }

    fn version(pull_secret: Option<&str>) -> KroVersion {
        KroVersion {
            version: "v0.9.3".into(),
            chart_version: "0.9.3".into(),
            chart_url: Some("oci://127.0.0.1:5000/kro/charts/kro".into()),
            chart_pull_secret: pull_secret.map(str::to_string),
            helm_values: None,
        }
    }

    fn expected<'a>(version: &'a KroVersion, repository: &'a Value, release: &'a Value) -> Expected<'a> {
        Expected {
            oci_repository: repository,
            helm_release: release,
            version,
            provider_config: "kro",
            pod_namespace: "openmcp-system",
            tenant_namespace: "mcp--x",
        }
    }

    #[test]
    fn a_refused_pull_without_a_pull_secret_says_which_field_to_set() {
        let v = version(None);
        let message = explain_pull_failure(REFUSED, &expected(&v, &Value::Null, &Value::Null));
        assert_eq!(
            message,
            format!(
                "the registry refused to serve chart oci://127.0.0.1:5000/kro/charts/kro:0.9.3 without credentials: \
                 set chartPullSecret of version v0.9.3 of ProviderConfig kro to a Secret of type \
                 kubernetes.io/dockerconfigjson in namespace openmcp-system that may pull it (Flux: {REFUSED})"
            )
        );
    }

    #[test]
    fn refused_credentials_name_the_secret_and_its_copy() {
        let v = version(Some("registry"));
        let message = explain_pull_failure(REFUSED, &expected(&v, &Value::Null, &Value::Null));
        assert_eq!(
            message,
            format!(
                "the registry refused the credentials of Secret openmcp-system/registry (chartPullSecret of version \
                 v0.9.3 of ProviderConfig kro, copied to mcp--x/sp-kro-registry) for chart \
                 oci://127.0.0.1:5000/kro/charts/kro:0.9.3: update that Secret with credentials that may pull it \
                 (Flux: {REFUSED})"
            )
        );
        let denied = "GET https://ghcr.io/v2/x/manifests/0.9.3: DENIED: requested access to the resource is denied";
        assert!(explain_pull_failure(denied, &expected(&v, &Value::Null, &Value::Null)).contains("update that Secret"));
    }

    #[test]
    fn an_unknown_chart_points_at_chart_url_and_version_and_other_failures_pass() {
        let v = version(None);
        let e = expected(&v, &Value::Null, &Value::Null);
        let unknown = "failed to determine artifact digest: GET …/manifests/9.9.9: MANIFEST_UNKNOWN: manifest unknown";
        assert!(explain_pull_failure(unknown, &e).starts_with(
            "chart oci://127.0.0.1:5000/kro/charts/kro:0.9.3 was not found in the registry: check chartURL and \
                 chartVersion of version v0.9.3 of ProviderConfig kro"
        ));
        assert_eq!(explain_pull_failure("dial tcp: connection refused", &e), "dial tcp: connection refused");
    }

    fn ready_object(spec: Value, status: Value) -> Value {
        let mut status = status;
        status["observedGeneration"] = json!(1);
        status["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        json!({"metadata": {"generation": 1}, "spec": spec, "status": status})
    }

    #[test]
    fn an_object_observed_with_an_older_spec_says_nothing_about_this_plan() {
        let v = version(None);
        let (repo, release) = (json!({"spec": {"ref": {"tag": "0.9.3"}}}), json!({"spec": {"interval": "1m"}}));
        let observed = ready_object(json!({"ref": {"tag": "0.9.1"}, "timeout": "60s"}), json!({}));
        let release_ready = ready_object(json!({"interval": "1m", "timeout": "5m"}), json!({}));
        let status = report(&expected(&v, &repo, &release), Some(&observed), Some(&release_ready));
        let resources = status.resources.unwrap();
        assert_eq!(resources[0].phase, PHASE_PROGRESSING);
        assert_eq!(resources[0].message.as_deref(), Some("waiting for Flux to reconcile the updated spec"));
        assert_eq!(resources[1].phase, PHASE_READY, "fields Flux defaults do not count as a difference");

        let current = ready_object(json!({"ref": {"tag": "0.9.3"}, "timeout": "60s"}), json!({}));
        assert_eq!(report(&expected(&v, &repo, &release), Some(&current), Some(&release_ready)).phase, PHASE_READY);
    }

    #[test]
    fn the_release_is_ready_only_for_the_artifact_the_repository_holds() {
        let v = version(None);
        let (repo, release) = (json!({}), json!({}));
        let repository =
            ready_object(json!({}), json!({"artifact": {"revision": "0.9.3@sha256:new", "digest": "sha256:tarball"}}));
        let old = ready_object(json!({}), json!({"lastAttemptedRevisionDigest": "sha256:old"}));
        let status = report(&expected(&v, &repo, &release), Some(&repository), Some(&old));
        assert_eq!(status.phase, PHASE_PROGRESSING);
        let resources = status.resources.unwrap();
        assert_eq!(
            resources[1].message.as_deref(),
            Some("waiting for Flux to install chart revision 0.9.3@sha256:new")
        );
        let new = ready_object(json!({}), json!({"lastAttemptedRevisionDigest": "sha256:new"}));
        assert_eq!(report(&expected(&v, &repo, &release), Some(&repository), Some(&new)).phase, PHASE_READY);
    }

    #[test]
    fn the_first_failure_is_explained_in_the_resource_and_the_ready_message() {
        let v = version(None);
        let (repo, release) = (json!({}), json!({}));
        let status = report(&expected(&v, &repo, &release), Some(&failed_pull(REFUSED)), None);
        let resources = status.resources.as_ref().unwrap();
        let explained = resources[0].message.clone().unwrap();
        assert!(explained.starts_with("the registry refused to serve chart"), "{explained}");
        assert_eq!(resources[1].message, None);
        assert_eq!(
            status.conditions[0].message,
            format!("Waiting for managed resources to become ready: OCIRepository kro-oci-repository: {explained}")
        );
    }

    #[test]
    fn resources_carry_group_namespace_and_location() {
        let entries = resources("mcp--x", None, None);
        assert_eq!(entries[0].api_group.as_deref(), Some("source.toolkit.fluxcd.io"));
        assert_eq!(entries[0].kind, "OCIRepository");
        assert_eq!(entries[0].name, "kro-oci-repository");
        assert_eq!(entries[1].api_group.as_deref(), Some("helm.toolkit.fluxcd.io"));
        assert_eq!(entries[1].kind, "HelmRelease");
        assert_eq!(entries[1].name, "kro-helm-release");
        for e in &entries {
            assert_eq!(e.namespace.as_deref(), Some("mcp--x"));
            assert_eq!(e.location.as_deref(), Some("PlatformCluster"));
        }
        assert!(terminating_resources("mcp--x").iter().all(|r| r.phase == "Terminating"));
    }
}
