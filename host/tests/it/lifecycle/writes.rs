//! What a reconcile writes: nothing when nothing changed, and only what the instance owns when
//! pruning.

use super::*;

/// The seed's ProviderConfig: a chart pull secret and imagePullSecrets,
/// both sources present.
async fn seed_config_with_pull_secrets(f: &Fixture) {
    f.source_secret("registry", DOCKER, "{}").await;
    f.source_secret("pull", DOCKER, "{}").await;
    f.provider_config(json!([{
        "version": "v0.9.3", "chartVersion": "0.9.3", "chartPullSecret": "registry",
        "helmValues": {"imagePullSecrets": [{"name": "pull"}]}
    }]))
    .await;
}

/// Requests made by single reconciles, called directly so each one can be
/// counted on its own. A no-op reconcile must make no write request.
#[tokio::test]
async fn a_no_op_reconcile_makes_no_write_requests() {
    let f = Fixture::new(one("mcp-01", true)).await;
    seed_config_with_pull_secrets(&f).await;
    f.create_kro("mcp-01", "v0.9.3").await;
    let ctx = f.context().await;
    let clusters = ["platform", "onboarding", "control-plane"];
    let counts = |m: &service_provider_host::metrics::Metrics| {
        clusters.iter().map(|c| (m.requests(c, &["GET"]), m.writes(c))).collect::<Vec<_>>()
    };
    let once = async |ctx: &Arc<reconcile::Shared>| -> (Vec<(u64, u64)>, Action) {
        let object = Arc::new(f.kroes().get("mcp-01").await.unwrap());
        let before = counts(&f.metrics);
        let action = reconcile::reconcile(object, ctx.clone()).await.expect("reconcile");
        let after = counts(&f.metrics);
        (before.iter().zip(&after).map(|(b, a)| (a.0 - b.0, a.1 - b.1)).collect(), action)
    };
    let total = |d: &[(u64, u64)]| d.iter().map(|(r, w)| r + w).sum::<u64>();

    once(&ctx).await; // adds the finalizer
    // Until the AccessRequest is granted, reconciles wait.
    let first = eventually("a full first reconcile", WAIT, || async {
        let (delta, _) = once(&ctx).await;
        f.flux_objects("HelmRelease", "mcp-01").get_opt("kro-helm-release").await.unwrap().map(|_| delta)
    })
    .await;
    // Flux reports Ready; a later reconcile records it in the status.
    eventually("Ready", WAIT, || async {
        once(&ctx).await;
        f.kro("mcp-01").await.filter(|k| k["status"]["phase"] == "Ready")
    })
    .await;
    let (noop, action) = once(&ctx).await;
    eprintln!(
        "requests (reads, writes) per cluster [platform, onboarding, control-plane]: first reconcile {first:?} = {} requests; no-op reconcile {noop:?} = {} requests",
        total(&first),
        total(&noop)
    );
    assert!(first.iter().map(|(_, w)| w).sum::<u64>() >= 6, "the first reconcile writes: {first:?}");
    assert_eq!(noop.iter().map(|(_, w)| w).sum::<u64>(), 0, "no-op reconcile wrote: {noop:?}");
    assert_eq!(action, Action::requeue(Duration::from_secs(60)), "requeue after pollInterval");
}

/// With the controller running, a steady-state reconcile reads from the
/// watches' stores and what it verified earlier: no request at all, on
/// any cluster. A `reconcile` operation annotation makes it look again.
#[tokio::test]
async fn a_steady_state_reconcile_with_the_watches_running_makes_no_request() {
    let mut f = Fixture::new(one("mcp-01", true)).await;
    seed_config_with_pull_secrets(&f).await;
    let ctx = f.context().await;
    f.start_operator_on(ctx.clone());
    f.create_kro("mcp-01", "v0.9.3").await;
    f.wait_ready("mcp-01").await;
    let clusters = ["platform", "onboarding", "control-plane"];
    let requests =
        || clusters.iter().map(|c| f.metrics.requests(c, &["GET", "LIST"]) + f.metrics.writes(c)).sum::<u64>();
    // Settled: the watch events of the last writes have come and gone.
    let previous = std::sync::atomic::AtomicU64::new(requests());
    eventually("no more requests for a second", WAIT, || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = requests();
        (previous.swap(now, std::sync::atomic::Ordering::Relaxed) == now).then_some(())
    })
    .await;
    let object = Arc::new(f.kroes().get("mcp-01").await.unwrap());
    let before = requests();
    reconcile::reconcile(object.clone(), ctx.clone()).await.expect("reconcile");
    assert_eq!(requests() - before, 0, "a steady-state reconcile made requests");

    let control_plane_reads = f.metrics.requests("control-plane", &["GET"]);
    f.patch_kro("mcp-01", json!({"metadata": {"annotations": {"openmcp.cloud/operation": "reconcile"}}})).await;
    eventually("the full look reads the ControlPlane again", WAIT, || async {
        (f.metrics.requests("control-plane", &["GET"]) > control_plane_reads).then_some(())
    })
    .await;
    f.stop_operator().await;
}

/// Pruning: an object the plugin stops planning is deleted; objects of the
/// same kind that are not the instance's (a user's, another instance's)
/// stay, and deleting the instance leaves nothing of it behind.
#[tokio::test]
async fn an_object_the_plugin_stops_planning_is_pruned_and_nothing_else() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use service_provider_host::owner::Owner;

    let mut f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: false, workload: true }).await;
    f.provider_config(json!([version("v1", "1")])).await;
    f.start_operator_with(workload_echo_plugin()).await;
    f.create_kro("mcp-01", "v7+a+b").await;
    f.wait_ready("mcp-01").await;

    let workload = f.workload.as_ref().unwrap().client().await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(workload, "default");
    for name in ["echo", "echo-a", "echo-b"] {
        config_maps.get(name).await.unwrap_or_else(|e| panic!("{name} planned and applied: {e}"));
    }
    // Bystanders: a user's ConfigMap, and one of another instance of the
    // same provider (owner labels and annotation, as the host writes them).
    let other = Owner { provider: f.provider.clone(), name: "mcp-02".into(), namespace: f.ns.clone() };
    for (name, labels, annotations) in [
        ("users-own", None, None),
        (
            "echo-c",
            Some(other.labels()),
            Some([(service_provider_host::owner::ANNOTATION_INSTANCE.to_string(), other.annotation())].into()),
        ),
    ] {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), labels, annotations, ..Default::default() },
            ..Default::default()
        };
        config_maps.create(&PostParams::default(), &cm).await.expect("bystander created");
    }

    f.patch_kro("mcp-01", json!({"spec": {"version": "v7+a"}})).await;
    eventually("echo-b pruned", WAIT, || async {
        config_maps.get_opt("echo-b").await.unwrap().is_none().then_some(())
    })
    .await;
    for name in ["echo", "echo-a", "users-own", "echo-c"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_some(), "{name} must stay");
    }
    f.wait_kro("mcp-01", "Ready for generation 2", |k| k["status"]["observedGeneration"] == 2).await;

    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    for name in ["echo", "echo-a"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_none(), "{name} removed with the instance");
    }
    for name in ["users-own", "echo-c"] {
        assert!(config_maps.get_opt(name).await.unwrap().is_some(), "{name} is not the instance's and stays");
    }
    f.stop_operator().await;
}
