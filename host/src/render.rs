//! `service-provider-host render`: the reconcile data path with files instead
//! of clusters. It shows a plugin author (or an operator reviewing a
//! ProviderConfig change) exactly what the host would apply, copy, delete and
//! write as status, without any cluster.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use service_provider_sdk::contract::{CleanupPlan, CopyKind, KubeconfigRef, ObjectCopy, PlanError, ServiceStatus};

use crate::instance::Instance;
use crate::plugin::plan::{self, CheckedPlan, Planner, Step};
use crate::reconcile::access::{KUBECONFIG_KEY, Target};
use crate::reconcile::gather;
use crate::reconcile::status;
use crate::{Category, Error};

/// Everything `render` needs besides the plugin.
#[derive(Debug, Clone)]
pub struct Request {
    pub object: PathBuf,
    pub provider_config: Option<PathBuf>,
    pub observed: Option<PathBuf>,
    pub deleting: bool,
    pub pod_namespace: String,
    /// Defaults to the ProviderConfig's name, then the plugin's name.
    pub provider_name: Option<String>,
    /// Name of the ControlPlane kubeconfig Secret (the AccessRequest's
    /// `status.secretRef`); defaults to the AccessRequest's name.
    pub control_plane_secret: Option<String>,
    /// Render as if ControlPlane access were not (or no longer) granted.
    pub without_control_plane: bool,
}

/// Reads one YAML or JSON document.
pub fn read_document(path: &Path) -> Result<Value, Error> {
    let mut docs = read_documents(path)?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        n => Err(Error::Parse { path: path.to_path_buf(), message: format!("expected one document, found {n}") }),
    }
}

/// Reads all YAML or JSON documents of a file (JSON is valid YAML).
pub fn read_documents(path: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| Error::Parse { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// All documents of the `.yaml`, `.yml` and `.json` files in a directory,
/// in file-name order.
fn read_dir(dir: &Path) -> Result<Vec<Value>, Error> {
    let io = |source| Error::Io { path: dir.to_path_buf(), source };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    files.retain(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")));
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        objects.extend(read_documents(&file)?);
    }
    Ok(objects)
}

fn copy_json(c: &ObjectCopy) -> Value {
    json!({
        "source": {"cluster": "platform", "namespace": "<pod namespace>", "name": c.source_name},
        "target": {"cluster": c.target_cluster, "namespace": c.target_namespace, "name": c.target_name},
        "kind": c.kind(),
        "requiredType": match &c.kind { CopyKind::Secret(t) => Some(t.as_str()), CopyKind::ConfigMap => None },
    })
}

/// The steps the host performs, in the order it performs them.
pub fn steps(plan: &CheckedPlan) -> Vec<Value> {
    plan.steps()
        .map(|step| match step {
            Step::Apply(m) => json!({"apply": {"cluster": m.cluster, "object": m.object}}),
            Step::Copy(c) => json!({"copy": copy_json(c)}),
        })
        .collect()
}

/// Renders what the host would do, as one JSON document. Requests the grant
/// refuses are shown as the host would report them; Secret copies are shown
/// but their sources are not checked (there is no cluster to read them).
pub async fn render(planner: &Planner, request: &Request) -> Result<Value, Error> {
    let descriptor = planner.descriptor();
    let object = read_document(&request.object)?;
    let instance = Instance::from_object(&object)?;
    let provider_config = request.provider_config.as_deref().map(read_document).transpose()?;
    let observed_objects = request.observed.as_deref().map(read_dir).transpose()?.unwrap_or_default();
    let provider_name = request
        .provider_name
        .clone()
        .or_else(|| {
            provider_config
                .as_ref()
                .and_then(|pc| pc.pointer("/metadata/name"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| descriptor.name.clone());

    let tenant = instance.tenant_namespace();
    let access_request = Target::ControlPlane.request_name(&descriptor.service.group, &instance.name);
    let control_plane = (!request.without_control_plane).then(|| KubeconfigRef {
        namespace: tenant.clone(),
        name: request.control_plane_secret.clone().unwrap_or_else(|| access_request.clone()),
        key: KUBECONFIG_KEY.into(),
    });
    let context = gather::context(&instance, &provider_name, &request.pod_namespace, control_plane, None);
    let purpose = match request.deleting {
        true => gather::Purpose::Cleanup { watched: &|_| None },
        false => gather::Purpose::Plan,
    };
    let observed = gather::observed_from(&planner.granted, &context, purpose, &observed_objects);
    let input = gather::input(&object, provider_config.as_ref(), context, observed);

    let mut doc = json!({
        "instance": {
            "name": instance.name,
            "namespace": instance.namespace,
            "generation": instance.generation,
            "tenantNamespace": tenant,
            "controlPlaneAccessRequest": access_request,
        },
        "call": if request.deleting { "cleanup" } else { "plan" },
    });
    if !planner.granted.refused.is_empty() {
        doc["notGranted"] = json!(planner.granted.refused);
    }
    let outcome: ServiceStatus = if request.deleting {
        match answer(plan::cleanup(planner, &input).await)? {
            Answer::Plan(CleanupPlan::Blocked(b)) => {
                doc["result"] = json!("blocked");
                doc["message"] = json!(b.message);
                doc["requeueAfterSeconds"] = json!(b.requeue_after_seconds);
                ServiceStatus { resources: b.resources, ..status::terminating(b.message) }
            }
            Answer::Plan(CleanupPlan::Teardown(t)) => {
                doc["result"] = json!("teardown");
                doc["delete"] = json!(t.objects);
                doc["deleteCopies"] = json!(t.copies);
                ServiceStatus { resources: t.resources, ..status::terminating("Cleanup in progress") }
            }
            Answer::PlanError(e) => plan_error(&mut doc, &e, true),
            Answer::Refused(e) => refusal(&mut doc, &e, true),
        }
    } else if provider_config.is_none() {
        let message = status::missing_provider_config(descriptor, &provider_name).to_string();
        doc["result"] = json!("no-provider-config");
        doc["message"] = json!(message);
        status::reconcile_error(message)
    } else {
        match answer(plan::reconcile(planner, &input).await)? {
            Answer::Plan(p) => {
                doc["result"] = json!("planned");
                doc["steps"] = Value::Array(steps(&p));
                doc["requeueAfterSeconds"] = json!(p.requeue_after_seconds);
                p.status
            }
            Answer::PlanError(e) => plan_error(&mut doc, &e, false),
            Answer::Refused(e) => refusal(&mut doc, &e, false),
        }
    };
    let current = object.get("status").and_then(|s| serde_json::from_value::<status::ObjectStatus>(s.clone()).ok());
    let next = status::next(current.as_ref(), instance.generation, &outcome, &status::now());
    doc["status"] = serde_json::to_value(next).map_err(|e| Error::json("rendering the status", e))?;
    Ok(doc)
}

/// What a plugin call came to, for rendering.
enum Answer<T> {
    Plan(T),
    PlanError(PlanError),
    /// The host refuses the plan, or the plugin failed: shown as the status
    /// the host would write.
    Refused(Error),
}

fn answer<T>(result: Result<Result<T, PlanError>, crate::plugin::Error>) -> Result<Answer<T>, Error> {
    match result.map_err(Error::from) {
        Ok(Ok(plan)) => Ok(Answer::Plan(plan)),
        Ok(Err(e)) => Ok(Answer::PlanError(e)),
        Err(e) if matches!(e.category(), Category::CapabilityDenied | Category::Plugin | Category::PluginTimeout) => {
            Ok(Answer::Refused(e))
        }
        Err(e) => Err(e),
    }
}

fn refusal(doc: &mut Value, error: &Error, deleting: bool) -> ServiceStatus {
    let (reason, message) = (error.category().reason(), crate::error::report(error));
    doc["result"] = json!("refused");
    doc["reason"] = json!(reason);
    doc["message"] = json!(message);
    if deleting { status::terminating_failed(reason, message) } else { status::failed(reason, message) }
}

fn plan_error(doc: &mut Value, error: &PlanError, deleting: bool) -> ServiceStatus {
    let message = error.to_string();
    match error {
        PlanError::InvalidInput(i) => {
            doc["result"] = json!("invalid-input");
            doc["requeueAfterSeconds"] = json!(i.requeue_after_seconds);
        }
        PlanError::Transient(_) => {
            doc["result"] = json!("transient-error");
            doc["retry"] = json!("with backoff");
        }
    }
    doc["message"] = json!(message);
    if deleting { status::terminating_error(message) } else { status::reconcile_error(message) }
}
