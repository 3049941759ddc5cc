//! The watch loop driven by scripted watch events.

use futures::stream;
use kube::api::DynamicObject;
use serde_json::json;

use super::*;

fn object(name: &str, filler: usize) -> Packed {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kro.run/v1alpha1", "kind": "ResourceGraphDefinition",
        "metadata": {"name": name}, "spec": {"filler": "x".repeat(filler)}
    }))
    .expect("object");
    Packed::pack(&object)
}

fn resource() -> ApiResource {
    crate::resource::api_resource("kro.run/v1alpha1", "ResourceGraphDefinition", "resourcegraphdefinitions")
}

type Events = Vec<Result<watcher::Event<Packed>, watcher::Error>>;

/// Runs the watch loop over `events` (then a watch that stays open).
async fn run(events: Events, max_bytes: usize) -> (Store<Packed>, Arc<Health>, Vec<InstanceKey>) {
    let writer = reflector::store::Writer::<Packed>::new(resource());
    let store = writer.as_reader();
    let health = Arc::new(Health::new(store.clone()));
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let instance = InstanceKey::new("default", "mcp-01");
    let events = stream::iter(events).chain(stream::pending()).reflect(writer);
    let watching = follow(events, health.clone(), Some(wake), instance, max_bytes);
    let _ = tokio::time::timeout(Duration::from_millis(200), watching).await;
    (store, health, woken.collect().await)
}

fn is(health: &Health) -> (bool, bool) {
    (health.current.load(Ordering::Acquire), health.ended.load(Ordering::Acquire))
}

#[tokio::test]
async fn a_listed_watch_is_current_and_wakes_its_instance_on_each_change() {
    let events = vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(object("a", 10))),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Delete(object("a", 10))),
    ];
    let (store, health, woken) = run(events, 1 << 20).await;
    assert_eq!(is(&health), (true, false), "current, running");
    assert!(store.state().is_empty(), "the deletion reached the store");
    assert_eq!(woken.len(), 2, "once listed, and once for the deletion");
    assert_eq!(health.bytes.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn after_an_error_only_a_complete_list_makes_the_store_current_again() {
    let error = || Err(watcher::Error::NoResourceVersion);
    let listed = || [Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)];
    let events = listed().into_iter().chain([error(), Ok(watcher::Event::Apply(object("b", 1)))]).collect();
    let (store, health, woken) = run(events, 1 << 20).await;
    assert_eq!(is(&health), (false, false), "an event may have been lost: not current, still watching");
    assert_eq!((store.state().len(), woken.len()), (1, 1), "no wake for a store that is not current");
    let relisted = listed().into_iter().chain([error()]).chain(listed()).collect();
    let (_, health, _) = run(relisted, 1 << 20).await;
    assert_eq!(is(&health), (true, false));
}

#[tokio::test]
async fn a_watch_that_cannot_list_ends() {
    let (_, health, woken) = run(vec![Err(watcher::Error::NoResourceVersion)], 1 << 20).await;
    assert_eq!(is(&health), (false, true));
    assert!(woken.is_empty());
}

#[tokio::test]
async fn a_watch_whose_objects_outgrow_the_input_limit_ends() {
    let during_the_list = vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(object("a", 600))),
        Ok(watcher::Event::InitApply(object("b", 600))),
        Ok(watcher::Event::InitDone),
    ];
    let (_, health, woken) = run(during_the_list, 1000).await;
    assert_eq!(is(&health), (false, true), "ended before the list was complete");
    assert!(woken.is_empty());
    let kept = health.store.lock().unwrap().is_some();
    assert_eq!((kept, health.bytes.load(Ordering::Acquire)), (false, 0), "an ended watch keeps nothing");
    let later = vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(object("a", 600))),
        Ok(watcher::Event::Apply(object("a", 700))),
        Ok(watcher::Event::Apply(object("b", 600))),
        Ok(watcher::Event::Apply(object("c", 1))),
    ];
    let (store, health, woken) = run(later, 1000).await;
    assert_eq!(is(&health), (false, true));
    assert_eq!(store.state().len(), 2, "nothing after the object that crossed the limit");
    assert_eq!(woken.len(), 3, "listed, and a's two versions (a replaced object counts once)");
}

#[test]
fn stored_objects_carry_their_kind_and_only_what_a_plugin_sees() {
    let resource = crate::resource::api_resource("v1", "PersistentVolumeClaim", "persistentvolumeclaims");
    let item = json!({"metadata": {"name": "data", "namespace": "n", "resourceVersion": "7", "managedFields": [{}],
        "annotations": {"a": "b"}}, "spec": {"size": 1}});
    let slim: Slim<false> = serde_json::from_value(item).unwrap();
    assert_eq!(slim.meta().resource_version.as_deref(), Some("7"), "what the watch resumes from");
    let value = slim.pack(&resource).value().unwrap();
    assert_eq!(
        value,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "n"},
            "spec": {"size": 1}}),
        "typed, without managedFields, annotations or the resourceVersion"
    );

    // A metadata-only list item, as the API server sends it.
    let item = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "data", "resourceVersion": "8", "labels": {"l": "v"}}});
    let slim: Slim<true> = serde_json::from_value(item).unwrap();
    assert!(Slim::<true>::metadata_api() && !Slim::<false>::metadata_api());
    let value = slim.pack(&resource).value().unwrap();
    assert_eq!((value["apiVersion"].as_str(), value["kind"].as_str()), (Some("v1"), Some("PersistentVolumeClaim")));
    assert_eq!(value["metadata"], json!({"name": "data", "labels": {"l": "v"}}));
}
