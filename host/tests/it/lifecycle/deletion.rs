//! Deletion: blocked by what the plugin reports, watched while blocked, and finished without what
//! is already gone.

use super::*;

fn rgd(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": name},
        "spec": {"schema": {"apiVersion": "v1alpha1", "kind": format!("Thing{}", name.len()), "spec": {"name": "string"}}}
    }))
    .unwrap()
}

/// The chart version with its pull secret, and nothing else.
async fn seed_chart_config(f: &Fixture) {
    f.source_secret("registry", DOCKER, "{}").await;
    f.provider_config(json!([{"version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry"}])).await;
}

/// `mcp-01` Ready, then deleted while the RGD `noop` exists on its
/// ControlPlane: returns once the status says the deletion is blocked.
async fn ready_then_blocked_by_one_rgd(f: &Fixture) -> Api<DynamicObject> {
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let rgds: Api<DynamicObject> = Api::all_with(f.control_plane.clone(), &rgd_resource());
    rgds.create(&PostParams::default(), &rgd("noop")).await.expect("RGD created");
    f.delete_kro("mcp-01").await;
    let blocked = |k: &Value| {
        ready(k)["message"].as_str().is_some_and(|m| m.contains("waiting for 1 kro ResourceGraphDefinition(s)"))
    };
    f.wait_kro("mcp-01", "deletion blocked by one RGD", blocked).await;
    rgds
}

#[tokio::test]
async fn deletion_is_blocked_by_rgds_then_completes() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;

    let rgds: Api<DynamicObject> = Api::all_with(f.control_plane.clone(), &rgd_resource());
    for name in ["noop", "webapp"] {
        rgds.create(&PostParams::default(), &rgd(name)).await.expect("RGD created");
    }
    f.delete_kro("mcp-01").await;
    let kro = f
        .wait_kro("mcp-01", "deletion blocked", |k| {
            ready(k)["message"].as_str().is_some_and(|m| m.contains("waiting for 2 kro ResourceGraphDefinition(s)"))
        })
        .await;
    assert_eq!(kro["status"]["phase"], "Terminating");
    assert_eq!(ready(&kro)["reason"], "Terminating");
    assert!(
        get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_some(),
        "kro stays while RGDs exist"
    );

    for name in ["noop", "webapp"] {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none());
    assert!(get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.is_none());
    assert!(
        get(&f.access_requests("mcp-01"), "kro.services.open-control-plane.io--mcp-01--mcp").await.is_none(),
        "AccessRequest removed"
    );
    let copies: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    assert!(copies.get_opt("sp-kro-registry").await.unwrap().is_none(), "pull-secret copy removed");
    f.stop_operator().await;
}

/// kro v0.10's Graph, as a ControlPlane whose kro serves it has it: a
/// namespaced kind of `kro.run/v1alpha1` (the module proxy serves no kro
/// v0.10 to read its CRD from, so the test states the parts the host reads).
fn graph_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "graphs.kro.run"},
        "spec": {
            "group": "kro.run",
            "scope": "Namespaced",
            "names": {"kind": "Graph", "plural": "graphs", "singular": "graph", "listKind": "GraphList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// Where the installed kro serves Graphs, a Graph blocks the deletion as an
/// RGD does (removing kro would orphan what it created); once it is gone
/// the deletion finishes. Where kro serves none (every other test), there
/// is nothing to count.
#[tokio::test]
async fn deletion_is_blocked_by_graphs_where_kro_serves_them() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    let crd: testbed::crds::Crd =
        testbed::crds::parse_crds(&graph_crd().to_string(), "graphs.kro.run", None).unwrap().remove(0);
    testbed::crds::install(&f.control_plane, &[crd], WAIT).await.expect("the Graph CRD");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.control_plane.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap())
        .await
        .expect("a tenant's namespace");
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;

    let resource = service_provider_host::resource::api_resource("kro.run/v1alpha1", "Graph", "graphs");
    let graphs: Api<DynamicObject> = Api::namespaced_with(f.control_plane.clone(), "team-a", &resource);
    let graph = json!({"apiVersion": "kro.run/v1alpha1", "kind": "Graph", "metadata": {"name": "web"}, "spec": {}});
    graphs.create(&PostParams::default(), &serde_json::from_value(graph).unwrap()).await.expect("a Graph");
    f.delete_kro("mcp-01").await;
    let blocked = |k: &Value| {
        ready(k)["message"].as_str().is_some_and(|m| m.contains("waiting for 1 kro Graph(s) to be removed"))
    };
    let kro = f.wait_kro("mcp-01", "deletion blocked by a Graph", blocked).await;
    assert_eq!(kro["status"]["phase"], "Terminating");
    assert!(
        get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_some(),
        "kro stays while a Graph exists"
    );
    graphs.delete("web", &DeleteParams::default()).await.expect("Graph deleted");
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none());
    f.stop_operator().await;
}

/// While its deletion is blocked, an instance watches what blocks it on the
/// ControlPlane (with its own credentials) instead of listing it every
/// round: blocked rounds make no request there, a change reaches the
/// status through the watch, and the watch ends with the deletion.
#[tokio::test]
async fn a_blocked_deletion_watches_its_blockers_instead_of_listing_them() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    let ctx = f.context().await;
    f.start_operator_on(ctx.clone());
    let rgds = ready_then_blocked_by_one_rgd(&f).await;
    let blocked_by = |n: usize| {
        let text = format!("waiting for {n} kro ResourceGraphDefinition(s)");
        move |k: &Value| ready(k)["message"].as_str().is_some_and(|m| m.contains(&text))
    };
    // Both of kro's blockers: its RGDs, and its Graphs (a kind this
    // ControlPlane does not serve: none of it, without a request per round).
    assert_eq!(ctx.blockers().len(), 2, "the blockers are watched");
    // The plugin asks to be looked at again every 10 s.
    let rounds = || f.metrics.reconciles(reconcile::Ended::Deleting);
    let next_round = |after: u64| async move {
        eventually("a blocked round", WAIT, || async { (rounds() > after).then_some(()) }).await;
    };
    next_round(rounds()).await;
    // From the round after the watch started: no request to the ControlPlane.
    let control_plane_reads = || f.metrics.requests("control-plane", &["GET"]);
    let before = (control_plane_reads(), rounds());
    tokio::time::sleep(Duration::from_secs(21)).await;
    assert!(rounds() >= before.1 + 2, "blocked rounds ran");
    assert_eq!(control_plane_reads() - before.0, 0, "a blocked round read the ControlPlane: the watch was not used");

    // A change wakes the instance at once, not at its next round (10 s
    // after the last one, which has just run).
    next_round(rounds()).await;
    let changed = std::time::Instant::now();
    rgds.create(&PostParams::default(), &rgd("webapp")).await.expect("RGD created");
    f.wait_kro("mcp-01", "deletion blocked by two RGDs", blocked_by(2)).await;
    assert!(
        changed.elapsed() < Duration::from_secs(6),
        "the change waited for the next round: {:?}",
        changed.elapsed()
    );
    for name in ["noop", "webapp"] {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_gone("mcp-01").await;
    assert_eq!(ctx.blockers().len(), 0, "the watch ended with the deletion");
    f.stop_operator().await;
}

/// A tenant who fills its ControlPlane while its deletion is blocked
/// cannot make the host hold it: the watch ends at the plugin's input
/// limit and keeps nothing, the round that lists instead fails with the
/// input limit in the status, and once the tenant cleans up the deletion
/// goes on.
#[tokio::test]
async fn a_blocker_watch_ends_at_the_input_limit_and_keeps_nothing() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_chart_config(&f).await;
    let limit = 64 << 10;
    let limits = service_provider_host::plugin::sandbox::Limits { input_bytes: limit, ..Default::default() };
    let ctx = f.context_with(plugins::load(plugins::KRO, limits)).await;
    f.start_operator_on(ctx.clone());
    let rgds = ready_then_blocked_by_one_rgd(&f).await;
    let message = |k: &Value| ready(k)["message"].as_str().unwrap_or_default().to_string();
    // Both of kro's blockers: its RGDs, and its Graphs (a kind this
    // ControlPlane does not serve: none of it, without a request per round).
    assert_eq!(ctx.blockers().len(), 2, "the blockers are watched");

    // Four RGDs of about 20 KiB of metadata each (labels: annotations never
    // reach the plugin): more than one input's worth.
    let big = |name: &str| {
        let mut rgd = rgd(name);
        let filler = (0..150).map(|i| (format!("filler.example/{}-{i:03}", "k".repeat(50)), "x".repeat(63)));
        rgd.metadata.labels = Some(filler.collect());
        rgd
    };
    let names = ["big-a", "big-b", "big-c", "big-d"];
    for name in names {
        rgds.create(&PostParams::default(), &big(name)).await.expect("RGD created");
    }
    f.wait_kro("mcp-01", "the input limit in the status", |k| message(k).contains("more than the limit")).await;
    assert!(ctx.blockers().bytes() <= limit, "the host holds {} bytes of the tenant's RGDs", ctx.blockers().bytes());

    for name in names {
        rgds.delete(name, &DeleteParams::default()).await.expect("RGD deleted");
    }
    f.wait_kro("mcp-01", "blocked again", |k| message(k).contains("waiting for 1 kro")).await;
    rgds.delete("noop", &DeleteParams::default()).await.expect("RGD deleted");
    f.wait_gone("mcp-01").await;
    assert_eq!(ctx.blockers().len(), 0);
    f.stop_operator().await;
}

#[tokio::test]
async fn deletion_completes_when_the_access_request_is_already_gone() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.stop_operator().await;

    // The ControlPlane goes away behind the provider's back.
    f.openmcp.unregister_control_plane("mcp-01", &f.ns).await.unwrap();
    let ars = f.access_requests("mcp-01");
    let ar_name = "kro.services.open-control-plane.io--mcp-01--mcp";
    ars.patch(ar_name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    ars.delete(ar_name, &DeleteParams::default()).await.unwrap();
    eventually("AccessRequest gone", WAIT, || async { get(&ars, ar_name).await.is_none().then_some(()) }).await;

    f.delete_kro("mcp-01").await;
    f.start_operator().await;
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none(), "not orphaned");
    assert!(get(&f.flux_objects("OCIRepository", "mcp-01"), "kro-oci-repository").await.is_none(), "not orphaned");
    f.stop_operator().await;
}

#[tokio::test]
async fn deletion_does_not_need_the_version_to_be_offered() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.start_operator().await;
    f.create_kro("mcp-01", "v0.9.1").await;
    f.wait_ready("mcp-01").await;
    f.provider_config(json!([version("v0.9.3", "0.9.3")])).await;
    f.wait_kro("mcp-01", "version withdrawn", |k| ready(k)["reason"] == "ReconcileError").await;
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(get(&f.flux_objects("HelmRelease", "mcp-01"), "kro-helm-release").await.is_none());
    f.stop_operator().await;
}
