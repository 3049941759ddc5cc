//! What triggers a reconcile: the kube-rs `Controller` over the plugin's
//! service kind, plus everything that maps back to an instance.
//!
//! - service objects on the onboarding cluster (the primary watch);
//! - the ProviderConfig named `--provider-name` (every instance; its
//!   `reconcile` operation annotation is consumed here);
//! - on the platform cluster, every kind the plugin observes or may write,
//!   filtered by the host's provider label and mapped back through the owner
//!   labels (a user's edit of a HelmRelease is reverted at once);
//! - the instances' ControlPlane AccessRequests (a grant continues a waiting
//!   reconcile);
//! - source Secrets in the pod namespace (exactly the instances whose last
//!   plan copies them) and the copies themselves.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use service_provider_sdk::contract::Cluster;
use service_provider_sdk::names;
use tracing::{debug, info, warn};

use crate::access;
use crate::owner::{LABEL_COPY_OF, Owner};
use crate::reconcile::{self, Context, OPERATION, OPERATION_RECONCILE};
use crate::resource;

/// The kinds the plugin may copy: Secrets always, ConfigMaps when it asks
/// for them anywhere (copies and objects share capabilities).
fn copied_kinds(ctx: &Context) -> Vec<kube::api::ApiResource> {
    let mut kinds = vec![resource::api_resource("v1", "Secret", "secrets")];
    if ctx.descriptor().capabilities.iter().any(|c| c.api.group.is_empty() && c.api.kind == "ConfigMap") {
        kinds.push(resource::api_resource("v1", "ConfigMap", "configmaps"));
    }
    kinds
}

/// The platform kinds to watch: what the plugin observes or writes there
/// (Secrets and ConfigMaps have their own watches).
fn platform_kinds(ctx: &Context) -> Vec<kube::api::ApiResource> {
    let d = ctx.descriptor();
    let mut seen = BTreeSet::new();
    let observed = d.observations.iter().filter(|o| o.cluster == Cluster::Platform).map(|o| &o.api);
    let written = d.capabilities.iter().filter(|c| c.cluster == Cluster::Platform).map(|c| &c.api);
    observed
        .chain(written)
        .filter(|api| !(api.group.is_empty() && matches!(api.kind.as_str(), "Secret" | "ConfigMap" | "Namespace")))
        .filter(|api| seen.insert((api.api_version(), api.kind.clone())))
        .map(resource::of_kind)
        .collect()
}

fn instance_ref(ctx: &Context, namespace: &str, name: &str) -> ObjectRef<DynamicObject> {
    ObjectRef::new_with(name, ctx.service.clone()).within(namespace)
}

/// Runs the controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    run_until(ctx, shutdown, || {}).await;
}

/// Like [`run`]; `synced` is called once the service objects have been
/// listed (the controller's cache is filled and reconciles start).
pub async fn run_until(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    synced: impl FnOnce() + Send + 'static,
) {
    let service = resource::dynamic_api(&ctx.onboarding, &ctx.service, ctx.watch_namespace.as_deref());
    let provider_selector = Owner::provider_selector(&ctx.provider_name);
    let mut controller = Controller::new_with(service, watcher::Config::default().any_semantic(), ctx.service.clone())
        .with_config(controller::Config::default().concurrency(8));
    let store = controller.store();
    let cache = tokio::spawn(async move {
        // The store's readiness wakes only its latest waiter, and the
        // controller waits on it too: look again in short intervals.
        loop {
            match tokio::time::timeout(std::time::Duration::from_millis(100), store.wait_until_ready()).await {
                Ok(Ok(())) => return synced(),
                Ok(Err(_)) => return,
                Err(_) => {}
            }
        }
    });

    for resource in platform_kinds(&ctx) {
        info!(kind = %resource.kind, "watching managed objects on the platform cluster");
        let api: Api<DynamicObject> = Api::all_with(ctx.platform.clone(), &resource);
        let c = ctx.clone();
        controller = controller.watches_with(
            api,
            resource,
            watcher::Config::default().labels(&provider_selector),
            move |o: DynamicObject| {
                Owner::of(&o.metadata, &c.provider_name).map(|(ns, name)| instance_ref(&c, &ns, &name))
            },
        );
    }

    let controller_name = ctx.descriptor().service.group.clone();
    let requests: Api<DynamicObject> = Api::all_with(ctx.platform.clone(), &access::access_request_resource());
    let c = ctx.clone();
    controller = controller.watches_with(
        requests,
        access::access_request_resource(),
        watcher::Config::default().labels(&format!(
            "{}={}",
            access::LABEL_MANAGED_BY,
            names::label_value(&controller_name)
        )),
        move |ar: DynamicObject| {
            let labels = ar.labels();
            let name = labels.get(access::LABEL_ONBOARDING_NAME)?;
            let namespace = labels.get(access::LABEL_ONBOARDING_NAMESPACE)?;
            Some(instance_ref(&c, namespace, name))
        },
    );

    for kind in copied_kinds(&ctx) {
        // Sources in the pod namespace: exactly the instances whose last plan
        // copies them, so a rotated pull secret or CA bundle rolls out at once.
        let sources = resource::dynamic_api(&ctx.platform, &kind, Some(&ctx.pod_namespace));
        let c = ctx.clone();
        let source_kind = kind.kind.clone();
        controller =
            controller.watches_with(sources, kind.clone(), watcher::Config::default(), move |o: DynamicObject| {
                let users = c.instances.users_of_source(&source_kind, &o.name_any());
                users.into_iter().map(|(ns, name)| instance_ref(&c, &ns, &name)).collect::<Vec<_>>()
            });
        // The copies on the platform cluster: an edit or deletion is undone.
        let copies = resource::dynamic_api(&ctx.platform, &kind, None);
        let c = ctx.clone();
        controller = controller.watches_with(
            copies,
            kind,
            watcher::Config::default().labels(&format!("{provider_selector},{LABEL_COPY_OF}")),
            move |o: DynamicObject| {
                Owner::of(&o.metadata, &c.provider_name).map(|(ns, name)| instance_ref(&c, &ns, &name))
            },
        );
    }

    let (trigger, all) = futures::channel::mpsc::unbounded::<()>();
    let provider_config = tokio::spawn(watch_provider_config(ctx.clone(), trigger));
    controller
        .reconcile_all_on(all)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => debug!(%object, "reconciled"),
                Err(controller::Error::ObjectNotFound(object)) => debug!(%object, "gone before its turn"),
                Err(e) => debug!(error = %e, "reconcile did not complete"),
            }
        })
        .await;
    provider_config.abort();
    cache.abort();
}

/// Watches the ProviderConfig: any change re-reconciles every instance; a
/// `reconcile` operation annotation is removed first (one-shot trigger).
async fn watch_provider_config(ctx: Arc<Context>, trigger: futures::channel::mpsc::UnboundedSender<()>) {
    let api: Api<DynamicObject> = Api::all_with(ctx.platform.clone(), &ctx.provider_config);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", ctx.provider_name));
    let mut events = watcher(api.clone(), config).default_backoff().touched_objects().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(pc) => {
                let requested = pc.annotations().get(OPERATION).map(String::as_str) == Some(OPERATION_RECONCILE);
                if requested && pc.metadata.deletion_timestamp.is_none() {
                    info!(name = %pc.name_any(), "reconcile of every instance requested by annotation");
                    if let Err(e) = reconcile::consume_reconcile_annotation(&api, &pc.name_any()).await {
                        warn!(error = %e, "could not remove the operation annotation of the ProviderConfig");
                    }
                }
                if trigger.unbounded_send(()).is_err() {
                    return;
                }
            }
            Err(e) => warn!(error = %e, "watching the ProviderConfig"),
        }
    }
}
