//! Gathering a plugin's inputs: who the instance is, its tenant context and
//! the objects the plugin asked to observe.
//!
//! The cluster-facing gatherer reads observations from the API servers; the
//! helpers here are shared with `render`, which reads them from files;
//! [`list`] reads what an observation lists, a page at a time, each object
//! trimmed while it is parsed, within bounds on what it reads and on the
//! plugin's input.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use serde::de::DeserializeSeed;
use serde_json::Value;
use service_provider_sdk::contract::{Cluster, Context, Detail, Input, KubeconfigRef, Observation, Observed};
use service_provider_sdk::names;

mod list;

use list::{Bounds, Budget, list};

use crate::Error;
use crate::instance::{Instance, Reach};
use crate::owner::LABEL_PROVIDER;
use crate::plugin::grant::Effective;
use crate::plugin::plan::scope::{reachable, scope_namespace};
use crate::resource::{self, kind_absent};
use crate::stores::trimmed::Keep;
use crate::stores::{Lookup, Stores};

/// The context for one instance.
pub fn context(
    instance: &Instance,
    provider_name: &str,
    pod_namespace: &str,
    control_plane: Option<KubeconfigRef>,
    workload: Option<KubeconfigRef>,
) -> Context {
    Context {
        provider_name: provider_name.to_string(),
        tenant_namespace: instance.tenant_namespace(),
        pod_namespace: pod_namespace.to_string(),
        control_plane,
        workload,
    }
}

/// What an input is gathered for: the plugin's `plan` call, or its
/// `cleanup` call.
#[derive(Clone, Copy)]
pub enum Purpose<'a> {
    Plan,
    /// `watched` answers the observations a blocked deletion watches.
    Cleanup {
        watched: &'a (dyn Fn(&Observation) -> Option<Vec<Value>> + Sync),
    },
}

impl Purpose<'_> {
    fn is_cleanup(&self) -> bool {
        matches!(self, Purpose::Cleanup { .. })
    }

    fn watched(&self, observation: &Observation) -> Option<Vec<Value>> {
        match self {
            Purpose::Plan => None,
            Purpose::Cleanup { watched } => watched(observation),
        }
    }
}

/// The granted observations a call needs.
pub fn observations<'a>(granted: &'a [Observation], purpose: Purpose<'_>) -> impl Iterator<Item = &'a Observation> {
    let cleanup = purpose.is_cleanup();
    granted.iter().filter(move |o| o.stage.applies(cleanup))
}

/// Trims an object to what the plugin asked for, with the metadata of
/// [`METADATA`](crate::stores::trimmed::METADATA) and of the annotations
/// only those in `annotations`: the same [`Keep`] a LIST's objects are
/// parsed with, applied to an object parsed already (one read by name, a
/// watch's, a file's). Anything but an object trims to an empty one.
pub fn trim(object: Value, detail: Detail, annotations: &[String]) -> Value {
    let kept = Keep { detail, annotations }.deserialize(object).unwrap_or_default();
    Value::Object(kept.object)
}

/// What a plugin is shown of the objects an observation found: on the
/// platform cluster the tenant namespace is shared with other providers (a
/// ControlPlane's Kro and Flux instances have the same one), so of what a
/// full-detail observation finds there the objects another provider of
/// this host owns (its owner label names another provider) are shown at
/// metadata detail only: their HelmRelease `values` are none of this
/// plugin's business. Objects without the label are shown in full: a
/// plugin taking over what its Go predecessor made (`--adopt-from`) must
/// read their status before the host has labelled them.
fn shown(o: &Observation, context: &Context, annotations: &[String], objects: Vec<String>) -> Vec<String> {
    if o.cluster != Cluster::Platform || o.detail != Detail::Full {
        return objects;
    }
    let ours = names::label_value(&context.provider_name);
    let label = format!("/metadata/labels/{}", LABEL_PROVIDER.replace('~', "~0").replace('/', "~1"));
    objects
        .into_iter()
        .map(|text| {
            let Ok(object) = serde_json::from_str::<Value>(&text) else { return text };
            match object.pointer(&label).and_then(Value::as_str) {
                Some(owner) if owner != ours => trim(object, Detail::Metadata, annotations).to_string(),
                _ => text,
            }
        })
        .collect()
}

/// Whether `object` is one that `observation` covers in this context. An
/// object without a namespace matches any namespaced scope (convenient for
/// hand-written fixtures).
pub fn matches(observation: &Observation, context: &Context, object: &Value) -> bool {
    let field = |key: &str| object.get(key).and_then(Value::as_str);
    let meta = |key: &str| object.pointer(&format!("/metadata/{key}")).and_then(Value::as_str);
    if field("apiVersion") != Some(observation.api.api_version().as_str())
        || field("kind") != Some(observation.api.kind.as_str())
    {
        return false;
    }
    if let Some(name) = &observation.name
        && meta("name") != Some(name.as_str())
    {
        return false;
    }
    match (scope_namespace(&observation.scope, context), meta("namespace")) {
        (Some(want), Some(have)) => want == have,
        (Some(_), None) => true,
        // Every namespace of a namespaced kind.
        (None, _) if observation.api.namespaced => true,
        (None, have) => have.is_none(),
    }
}

/// Observations answered from a given set of objects (as `render` does with
/// `--observed`): every needed observation on a reachable cluster gets an
/// entry, possibly empty. The objects are the author's own, shown as given
/// (a live observation shows another provider's objects at metadata detail
/// only, [`shown`]; hand-written fixtures carry no owner labels).
pub fn observed_from(granted: &Effective, context: &Context, purpose: Purpose<'_>, objects: &[Value]) -> Vec<Observed> {
    observations(&granted.observations, purpose)
        .filter(|o| reachable(o.cluster, context))
        .map(|o| Observed {
            id: o.id.clone(),
            objects: objects
                .iter()
                .filter(|obj| matches(o, context, obj))
                .map(|obj| trim(obj.clone(), o.detail, granted.annotations(&o.id)).to_string())
                .collect(),
        })
        .collect()
}

/// Where [`observe`] may look, and how much it may bring back.
#[derive(Clone, Copy)]
pub struct Observer<'a> {
    /// The clusters the instance reaches.
    pub reach: &'a Reach<'a>,
    /// The watches' stores, read before any cluster.
    pub stores: &'a Stores,
    /// What the plugin was granted to observe.
    pub granted: &'a Effective,
    /// The plugin's input limit: what all observations together may weigh.
    pub input_limit: usize,
}

/// Reads every observation the plugin needs for this call from the clusters
/// it can reach. Observations of unreachable clusters are left out, so the
/// plugin can tell "none there" from "could not look".
///
/// A named object on the platform cluster that this provider made comes
/// from the watch's store, and what a cleanup's watches answer from there;
/// anything else is read from its cluster.
#[tracing::instrument(level = "debug", name = "gather", skip_all)]
pub async fn observe(
    observer: &Observer<'_>,
    context: &Context,
    purpose: Purpose<'_>,
    fetched: &mut Fetched,
) -> Result<Vec<Observed>, Error> {
    let Observer { reach, stores, granted, input_limit } = *observer;
    let budget = &mut Budget::new(input_limit);
    let mut observed = Vec::new();
    for o in observations(&granted.observations, purpose) {
        let Some(client) = reach.client(o.cluster) else { continue };
        let annotations = granted.annotations(&o.id);
        let what = || format!("observing {} ({}) on the {} cluster", o.api.kind, o.id, o.cluster);
        // A watch keeps no annotations (see `stores::blockers`): an
        // observation granted some is read instead.
        let watched = match annotations.is_empty() {
            true => purpose.watched(o),
            false => None,
        };
        if let Some(objects) = watched {
            let objects = objects.into_iter().filter(|obj| matches(o, context, obj));
            let objects: Vec<String> = objects.map(|obj| trim(obj, o.detail, annotations).to_string()).collect();
            budget.spend(&what(), objects.iter().map(String::len).sum())?;
            observed.push(Observed { id: o.id.clone(), objects: shown(o, context, annotations, objects) });
            continue;
        }
        let namespace = scope_namespace(&o.scope, context);
        let api = resource::dynamic_api(client, &resource::of_kind(&o.api), namespace);
        let stored = match (&o.name, o.cluster) {
            (Some(name), Cluster::Platform) => stores.owned(&o.api.api_version(), &o.api.kind, namespace, name).found(),
            _ => None,
        };
        let found: Option<Value> = match &o.name {
            None => {
                let keep = Keep { detail: o.detail, annotations };
                let objects = list(client, api.resource_url(), o, keep, Bounds::OBSERVATION, budget, &what).await?;
                observed.push(Observed { id: o.id.clone(), objects: shown(o, context, annotations, objects) });
                continue;
            }
            Some(_) if stored.is_some() => Some(to_json(stored.as_deref(), &what)?),
            Some(name) => match api.get_opt(name).await {
                Ok(found) => {
                    let found = found.map(Arc::new);
                    fetched.record(o.cluster, &o.api.api_version(), &o.api.kind, namespace, name, found.clone());
                    found.map(|f| to_json(f.as_ref(), &what)).transpose()?
                }
                Err(e) if kind_absent(&e) => None,
                Err(e) => return Err(Error::kube(what(), e)),
            },
        };
        let objects: Vec<String> = found.into_iter().map(|obj| trim(obj, o.detail, annotations).to_string()).collect();
        budget.spend(&what(), objects.iter().map(String::len).sum())?;
        observed.push(Observed { id: o.id.clone(), objects: shown(o, context, annotations, objects) });
    }
    Ok(observed)
}

/// An object's place: cluster, apiVersion, kind, namespace, name.
type Place = (Cluster, String, String, Option<String>, String);

fn place(cluster: Cluster, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Place {
    (cluster, api_version.into(), kind.into(), namespace.map(str::to_string), name.into())
}

/// What one reconcile read by name from an API server, so that it does not
/// read it again (an observed object the plan then applies).
#[derive(Default)]
pub struct Fetched {
    objects: HashMap<Place, Option<Arc<DynamicObject>>>,
}

impl Fetched {
    fn record(
        &mut self,
        cluster: Cluster,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        object: Option<Arc<DynamicObject>>,
    ) {
        self.objects.insert(place(cluster, api_version, kind, namespace, name), object);
    }

    /// What the read found, or [`Lookup::Unknown`] if it made none.
    pub fn lookup(
        &self,
        cluster: Cluster,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Lookup {
        match self.objects.get(&place(cluster, api_version, kind, namespace, name)) {
            Some(Some(object)) => Lookup::Found(object.clone()),
            Some(None) => Lookup::Absent,
            None => Lookup::Unknown,
        }
    }
}

fn to_json(object: impl serde::Serialize, what: &impl Fn() -> String) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(|e| Error::json(what(), e))
}

/// The complete plugin input.
pub fn input(object: &Value, provider_config: Option<&Value>, context: Context, observed: Vec<Observed>) -> Input {
    Input { object: object.to_string(), provider_config: provider_config.map(Value::to_string), context, observed }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_provider_sdk::contract::{ApiKind, Cluster, NamespaceScope, Stage};

    use super::*;

    fn observation(scope: NamespaceScope, name: Option<&str>) -> Observation {
        Observation {
            id: "x".into(),
            cluster: Cluster::Platform,
            api: ApiKind {
                group: "g.io".into(),
                version: "v1".into(),
                kind: "Thing".into(),
                plural: "things".into(),
                namespaced: true,
            },
            scope,
            name: name.map(str::to_string),
            stage: Stage::Always,
            detail: Detail::Full,
        }
    }

    fn ctx() -> Context {
        let instance = Instance { name: "example".into(), namespace: "default".into(), generation: 1 };
        context(&instance, "p", "pods", None, None)
    }

    #[test]
    fn of_the_platform_another_providers_objects_are_shown_at_metadata_only() {
        let c = ctx();
        let release = |provider: &str| {
            json!({"apiVersion": "g.io/v1", "kind": "Thing",
                "metadata": {"name": provider, "labels": {LABEL_PROVIDER: provider}, "annotations": {"note": "n"}},
                "spec": {"values": {"password": "theirs"}}, "status": {"ready": true}})
            .to_string()
        };
        let o = observation(NamespaceScope::Tenant, None);
        let mut unlabelled: Value = serde_json::from_str(&release("go")).unwrap();
        unlabelled["metadata"].as_object_mut().unwrap().remove("labels");
        let unlabelled = unlabelled.to_string();
        let all = vec![release("p"), release("other"), unlabelled.clone()];
        let shown_ = shown(&o, &c, &["note".to_string()], all);
        let parsed: Vec<Value> = shown_.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
        assert_eq!(parsed[0]["spec"]["values"]["password"], "theirs", "the provider's own, in full");
        assert_eq!(shown_[2], unlabelled, "what no provider of the host owns (a predecessor's), in full");
        assert!(parsed[1].get("spec").is_none() && parsed[1].get("status").is_none(), "{}", parsed[1]);
        assert_eq!(parsed[1]["metadata"]["name"], "other");
        assert_eq!(parsed[1]["metadata"]["annotations"]["note"], "n", "granted annotations stay");
        let mut control_plane = observation(NamespaceScope::Tenant, None);
        control_plane.cluster = Cluster::ControlPlane;
        assert_eq!(
            shown(&control_plane, &c, &[], vec![release("other")]),
            vec![release("other")],
            "tenant clusters as read"
        );
    }

    #[test]
    fn matching_checks_kind_name_and_scope() {
        let c = ctx();
        let tenant = c.tenant_namespace.clone();
        let o = observation(NamespaceScope::Tenant, Some("one"));
        let thing = |name: &str, ns: Option<&str>| {
            let mut v = json!({"apiVersion": "g.io/v1", "kind": "Thing", "metadata": {"name": name}});
            if let Some(ns) = ns {
                v["metadata"]["namespace"] = json!(ns);
            }
            v
        };
        assert!(matches(&o, &c, &thing("one", Some(&tenant))));
        assert!(matches(&o, &c, &thing("one", None)));
        assert!(!matches(&o, &c, &thing("two", Some(&tenant))));
        assert!(!matches(&o, &c, &thing("one", Some("elsewhere"))));
        let mut other_kind = thing("one", None);
        other_kind["kind"] = json!("Other");
        assert!(!matches(&o, &c, &other_kind));
        let mut cluster_scoped = observation(NamespaceScope::ClusterScoped, None);
        cluster_scoped.api.namespaced = false;
        assert!(matches(&cluster_scoped, &c, &thing("any", None)));
        assert!(!matches(&cluster_scoped, &c, &thing("any", Some("ns"))));
        let every_namespace = observation(NamespaceScope::ClusterScoped, None);
        assert!(matches(&every_namespace, &c, &thing("any", Some("ns"))), "a namespaced kind in every namespace");
    }

    #[test]
    fn trimming_drops_managed_fields_and_keeps_metadata_only_when_asked() {
        let obj = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "managedFields": [{}]}, "spec": {"a": 1}});
        let full = trim(obj.clone(), Detail::Full, &[]);
        assert!(full["metadata"].get("managedFields").is_none());
        assert_eq!(full["spec"]["a"], 1);
        let meta = trim(obj, Detail::Metadata, &[]);
        assert!(meta.get("spec").is_none());
        assert_eq!(meta["metadata"]["name"], "n");
    }

    #[test]
    fn metadata_is_an_allow_list_and_annotations_come_only_by_name() {
        let secret_data = r#"{"apiVersion":"v1","kind":"Secret","data":{"password":"c2VjcmV0"}}"#;
        let obj = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "n", "labels": {"a": "b"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": secret_data, "team": "x"},
            "selfLink": "/x", "resourceVersion": "7", "finalizers": ["f"]}});
        let meta = trim(obj.clone(), Detail::Metadata, &[]);
        assert_eq!(meta["metadata"], json!({"name": "n", "labels": {"a": "b"}, "finalizers": ["f"]}));
        let named = trim(obj, Detail::Metadata, &["team".to_string()]);
        assert_eq!(named["metadata"]["annotations"], json!({"team": "x"}));
    }

    #[test]
    fn unreachable_clusters_and_other_stages_get_no_observation() {
        let platform = observation(NamespaceScope::Tenant, None);
        let mut control_plane = observation(NamespaceScope::ClusterScoped, None);
        control_plane.id = "cp".into();
        control_plane.cluster = Cluster::ControlPlane;
        let mut cleanup_only = observation(NamespaceScope::Tenant, None);
        cleanup_only.id = "late".into();
        cleanup_only.stage = Stage::Cleanup;
        let granted = vec![platform, control_plane, cleanup_only];
        let mut c = ctx();
        let thing = json!({"apiVersion": "g.io/v1", "kind": "Thing", "metadata": {"name": "a"}});
        let ids = |v: Vec<Observed>| v.into_iter().map(|o| (o.id, o.objects.len())).collect::<Vec<_>>();
        let granted = Effective::granting(granted);
        assert_eq!(
            ids(observed_from(&granted, &c, Purpose::Plan, std::slice::from_ref(&thing))),
            [("x".to_string(), 1)]
        );
        c.control_plane = Some(KubeconfigRef { namespace: "n".into(), name: "s".into(), key: "kubeconfig".into() });
        assert_eq!(
            ids(observed_from(&granted, &c, Purpose::Cleanup { watched: &|_| None }, &[thing])),
            [("x".to_string(), 1), ("cp".to_string(), 1), ("late".to_string(), 1)]
        );
    }
}
