//! The whole service-provider lifecycle on local API servers, in one command
//! (`task demo`, or `task demo-flux`): three real kube-apiserver/etcd
//! clusters (platform, onboarding, ControlPlane), the openmcp and Flux
//! simulators from `tests/testbed`, then the host's `init`, its controller
//! with the plugin component (Kro by default, `flux` as the first argument),
//! the seed's ProviderConfig and service object from `examples/`, and the
//! deletion. Prints what happens on each cluster. The host code is the same
//! for both: only the plugin and the example files change.
//!
//! With `--real-flux` (`task demo-real`, Kro only), the real
//! source-controller and helm-controller replace the Flux simulator: the
//! chart comes from a local registry that requires the credentials of the
//! pull secret, and kro is installed onto the ControlPlane (its Deployment
//! appears there; no kubelet runs, so a simulator marks it Available) and
//! uninstalled on deletion.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use service_provider_host::controller::{self, Settings};
use service_provider_host::controller::{init, watch};
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::sandbox::{Limits, Sandbox};
use service_provider_host::{clusters, render, resource};
use service_provider_sdk::contract::Cluster;
use testbed::{
    DeploymentSimulator, FluxOptions, FluxSimulator, OpenMcpSimulator, RealFlux, RealFluxOptions, SimulatorOptions,
    TestEnv,
};

const POD_NAMESPACE: &str = "openmcp-system";

/// One provider's demo: its plugin, service kind, examples and sources.
struct Demo {
    provider: &'static str,
    plugin: host_test_support::plugins::Component,
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    object: &'static str,
    provider_config: &'static str,
    /// Docker-config Secrets the ProviderConfig names.
    secrets: &'static [&'static str],
    /// ConfigMaps the ProviderConfig names: `(name, key)`.
    config_maps: &'static [(&'static str, &'static str)],
    /// Where the copies land on the ControlPlane.
    control_plane_namespace: &'static str,
}

const KRO: Demo = Demo {
    provider: "kro",
    plugin: host_test_support::plugins::KRO,
    group: "kro.services.open-control-plane.io",
    kind: "Kro",
    plural: "kroes",
    object: "examples/kro.yaml",
    provider_config: "examples/providerconfig.yaml",
    secrets: &["my-registry-secret"],
    config_maps: &[],
    control_plane_namespace: "kro-system",
};

const FLUX: Demo = Demo {
    provider: "flux",
    plugin: host_test_support::plugins::FLUX,
    group: "flux.services.open-control-plane.io",
    kind: "Flux",
    plural: "fluxes",
    object: "examples/flux/flux.yaml",
    provider_config: "examples/flux/providerconfig.yaml",
    secrets: &["chart-registry-credentials", "image-registry-credentials"],
    config_maps: &[("custom-ca-bundle", "ca-bundle.crt")],
    control_plane_namespace: "flux-system",
};

fn root() -> PathBuf {
    host_test_support::plugins::root()
}

fn step(text: &str) {
    println!("\n==> {text}");
}

async fn wait_for<T, Fut: std::future::Future<Output = anyhow::Result<Option<T>>>>(
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> anyhow::Result<T> {
    // Generous for the real chain: Helm's readiness wait polls every ~5 s.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn apply_yaml(path: &str) -> anyhow::Result<DynamicObject> {
    let doc = render::read_document(&root().join(path))?;
    Ok(serde_json::from_value(doc)?)
}

async fn show(client: &Client, kind: &str, api_version: &str, plural: &str, namespace: &str) -> anyhow::Result<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource::api_resource(api_version, kind, plural));
    for o in api.list(&ListParams::default()).await?.items {
        let ready = o.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["status"].as_str().unwrap_or("?").to_string())
            .unwrap_or_else(|| "-".into());
        println!("    {kind:<14} {namespace}/{:<28} Ready={ready}", o.name_any());
    }
    Ok(())
}

/// What plays Flux.
enum Flux {
    Simulated(FluxSimulator),
    Real { chain: Box<RealFlux>, deployments: DeploymentSimulator },
}

/// kro's Deployment on the ControlPlane, as `image (ready/replicas)`.
async fn kro_deployment(control_plane: &Client) -> anyhow::Result<Option<String>> {
    let deployment = Api::<Deployment>::namespaced(control_plane.clone(), "kro-system").get_opt("kro").await?;
    Ok(deployment.map(|d| {
        let image = d.spec.template.spec.and_then(|s| s.containers.into_iter().next()?.image).unwrap_or_default();
        let status = d.status.unwrap_or_default();
        format!("{image} ({}/{} ready)", status.ready_replicas.unwrap_or(0), status.replicas.unwrap_or(0))
    }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let real_flux = args.iter().any(|a| a == "--real-flux");
    let demo = match args.iter().find(|a| !a.starts_with("--")).map(String::as_str) {
        None | Some("kro") => KRO,
        Some("flux") if !real_flux => FLUX,
        Some(other) => bail!("unknown demo {other:?}: kro, flux, or kro --real-flux"),
    };
    let provider = demo.provider;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .init();

    step("starting three API servers (platform, onboarding, ControlPlane)");
    let env = TestEnv::start().await.context("starting the clusters (did you run `task testbed-bins`?)")?;
    println!("    ready in {:?}", env.timings.clusters_ready);
    let platform = env.platform.client().await?;
    let onboarding = env.onboarding.client().await?;
    let control_plane = env.control_plane.client().await?;

    step("openmcp: provider namespace, ServiceProvider, ControlPlane mcp-01, Flux");
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(POD_NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(platform.clone()).create(&PostParams::default(), &ns).await?;
    let providers: Api<DynamicObject> = Api::all_with(platform.clone(), &init::service_provider_resource());
    let sp: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
        "metadata": {"name": provider}, "spec": {"image": "service-provider-host:demo"}}))?;
    providers.create(&PostParams::default(), &sp).await?;
    providers
        .patch_status(
            provider,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"observedGeneration": 1, "phase": "Progressing"}})),
        )
        .await?;
    let openmcp = OpenMcpSimulator::start(
        &env.platform,
        &env.onboarding,
        SimulatorOptions {
            provider_namespaces: vec![POD_NAMESPACE.into()],
            remove_clusteraccess_finalizer: false,
            ..Default::default()
        },
    );
    let tenant = openmcp.register_control_plane("mcp-01", "default", &env.control_plane).await?;
    println!("    tenant namespace of default/mcp-01: {tenant}");
    let flux = match real_flux {
        false => {
            Flux::Simulated(FluxSimulator::start(&env.platform, FluxOptions { auto_ready: true, ..Default::default() }))
        }
        true => {
            step(
                "the real Flux chain: registry with the kro charts (credentials required), source-controller, helm-controller",
            );
            let chain = RealFlux::start(&env.platform, RealFluxOptions::default())
                .await
                .context("starting the real Flux chain (did you run `task flux-bins`?)")?;
            println!("    started in {:?}; charts at {}", chain.startup_duration(), chain.kro_chart_url());
            let deployments = DeploymentSimulator::start(&env.control_plane, &["kro-system"]);
            Flux::Real { chain: Box::new(chain), deployments }
        }
    };

    step(&format!("loading the {} plugin component", demo.kind));
    let wasm = host_test_support::plugins::plugin_path(demo.plugin);
    let plugin = Sandbox::new()?.load_file(&wasm, None, Limits::default()).await?;
    let compile_time = plugin.compile_time();
    // The built-in grant, as `run` uses it without --plugin-grant.
    let planner = host_test_support::plugins::planner(plugin);
    println!("    {} ({} bytes), compiled in {:?}", wasm.display(), std::fs::metadata(&wasm)?.len(), compile_time);

    let metrics = Metrics::new(provider);
    let settings = Settings {
        adoption: Default::default(),
        provider_name: provider.into(),
        pod_namespace: POD_NAMESPACE.into(),
        pod_name: Some(format!("sp-{provider}-demo")),
        environment: "demo".into(),
        onboarding_kubeconfig: None,
        onboarding_timeout: Duration::from_secs(60),
        watch_namespace: None,
        unreachable_grace: service_provider_host::reconcile::shared::UNREACHABLE_GRACE,
        writes: Default::default(),
        host_writes: service_provider_host::reconcile::budget::HOST,
    };
    let counted_platform =
        clusters::client_from_kubeconfig(env.platform.kubeconfig_yaml(), Cluster::Platform, &metrics).await?;

    step("service-provider-host init: CRDs by label, service kind registered (onboarding access via openmcp)");
    controller::init(&planner, &settings, counted_platform.clone(), &metrics).await?;
    let sp = providers.get(provider).await?;
    println!("    ServiceProvider {provider} status.resources = {}", sp.data["status"]["resources"]);

    step("service-provider-host run (controller), ProviderConfig and its sources from examples/");
    let counted_onboarding = controller::onboarding_client(
        &counted_platform,
        &settings,
        planner.descriptor(),
        controller::Onboard::Run,
        &metrics,
    )
    .await?;
    let reached = controller::Reached::new(counted_platform, counted_onboarding);
    let ctx = std::sync::Arc::new(controller::shared(planner, &settings, reached, metrics.clone()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(watch::run(ctx, async move {
        let _ = stopped.await;
    }));
    for name in demo.secrets {
        let secret = match &flux {
            // The pull secret holds the local registry's credentials.
            Flux::Real { chain, .. } => chain.registry().pull_secret(name, POD_NAMESPACE),
            Flux::Simulated(_) => Secret {
                metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
                type_: Some("kubernetes.io/dockerconfigjson".into()),
                data: Some([(".dockerconfigjson".to_string(), ByteString(br#"{"auths":{}}"#.to_vec()))].into()),
                ..Default::default()
            },
        };
        Api::<Secret>::namespaced(platform.clone(), POD_NAMESPACE).create(&PostParams::default(), &secret).await?;
    }
    for (name, key) in demo.config_maps {
        let config_map = ConfigMap {
            metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
            data: Some([(key.to_string(), "-----BEGIN CERTIFICATE-----\n(demo)\n".to_string())].into()),
            ..Default::default()
        };
        Api::<ConfigMap>::namespaced(platform.clone(), POD_NAMESPACE)
            .create(&PostParams::default(), &config_map)
            .await?;
    }
    let mut pc = apply_yaml(demo.provider_config)?;
    if let Flux::Real { chain, .. } = &flux {
        // The same ProviderConfig, with the charts from the local registry.
        for version in pc.data["spec"]["versions"].as_array_mut().into_iter().flatten() {
            version["chartURL"] = json!(chain.kro_chart_url());
        }
        println!("    ProviderConfig kro: chartURL {} (pull secret my-registry-secret)", chain.kro_chart_url());
    }
    let api_version = format!("{}/v1alpha1", demo.group);
    let pcs: Api<DynamicObject> =
        Api::all_with(platform.clone(), &resource::api_resource(&api_version, "ProviderConfig", "providerconfigs"));
    pcs.create(&PostParams::default(), &pc).await?;

    let kind = demo.kind;
    step(&format!("a tenant orders {kind}: {} ({kind} mcp-01)", demo.object));
    let mut kro = apply_yaml(demo.object)?;
    kro.metadata.generation = None;
    let kroes: Api<DynamicObject> =
        Api::namespaced_with(onboarding.clone(), "default", &resource::api_resource(&api_version, kind, demo.plural));
    kroes.create(&PostParams::default(), &kro).await?;
    let started = Instant::now();
    if let Flux::Real { .. } = &flux {
        let deployment = wait_for("kro's Deployment on the ControlPlane", || kro_deployment(&control_plane)).await?;
        println!("    ControlPlane: Deployment kro-system/kro appeared after {:?}: {deployment}", started.elapsed());
    }
    let ready = wait_for(&format!("{kind} mcp-01 Ready"), || async {
        Ok(kroes.get_opt("mcp-01").await?.filter(|k| k.data["status"]["phase"] == "Ready"))
    })
    .await?;
    println!("    {kind} mcp-01 is Ready after {:?}; its status:", started.elapsed());
    let status: Value = ready.data["status"].clone();
    println!("{}", indent(&serde_saphyr::to_string(&status)?));
    println!("    platform cluster, {tenant}:");
    show(&platform, "OCIRepository", "source.toolkit.fluxcd.io/v1", "ocirepositories", &tenant).await?;
    show(&platform, "HelmRelease", "helm.toolkit.fluxcd.io/v2", "helmreleases", &tenant).await?;
    for s in Api::<Secret>::namespaced(platform.clone(), &tenant).list(&ListParams::default()).await?.items {
        println!("    Secret         {tenant}/{}", s.name_any());
    }
    let cp_namespace = demo.control_plane_namespace;
    println!("    ControlPlane cluster, {cp_namespace}:");
    for s in Api::<Secret>::namespaced(control_plane.clone(), cp_namespace).list(&ListParams::default()).await?.items {
        println!("    Secret         {cp_namespace}/{}", s.name_any());
    }
    let copies = Api::<ConfigMap>::namespaced(control_plane.clone(), cp_namespace);
    for c in copies.list(&ListParams::default().labels(service_provider_host::owner::LABEL_COPY_OF)).await?.items {
        println!("    ConfigMap      {cp_namespace}/{}", c.name_any());
    }
    if let Flux::Real { .. } = &flux {
        let deployment = kro_deployment(&control_plane).await?.context("kro's Deployment is on the ControlPlane")?;
        println!("    Deployment     kro-system/kro: {deployment}");
        let releases: Api<DynamicObject> = Api::namespaced_with(
            platform.clone(),
            &tenant,
            &resource::api_resource("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases"),
        );
        let release = releases.get("kro-helm-release").await?;
        println!("    Helm release   kro, chart {}", release.data["status"]["history"][0]["chartVersion"]);
    }
    println!(
        "    API writes so far: platform {}, onboarding {}, ControlPlane {}",
        metrics.writes("platform"),
        metrics.writes("onboarding"),
        metrics.writes("control-plane")
    );

    step(&format!("the tenant deletes {kind} mcp-01"));
    kroes.delete("mcp-01", &Default::default()).await?;
    let started = Instant::now();
    wait_for(&format!("{kind} mcp-01 gone"), || async { Ok(kroes.get_opt("mcp-01").await?.is_none().then_some(())) })
        .await?;
    println!("    gone after {:?}; left in {tenant}:", started.elapsed());
    show(&platform, "OCIRepository", "source.toolkit.fluxcd.io/v1", "ocirepositories", &tenant).await?;
    show(&platform, "HelmRelease", "helm.toolkit.fluxcd.io/v2", "helmreleases", &tenant).await?;
    let left = Api::<Secret>::namespaced(platform.clone(), &tenant).list(&ListParams::default()).await?.items.len();
    println!("    Secrets left in the tenant namespace: {left}");
    if let Flux::Real { .. } = &flux {
        match kro_deployment(&control_plane).await? {
            None => println!("    ControlPlane: kro's Deployment is gone (helm-controller uninstalled the release)"),
            Some(d) => bail!("kro's Deployment is still on the ControlPlane: {d}"),
        }
    }

    let _ = stop.send(());
    let _ = controller.await;
    openmcp.stop().await;
    match flux {
        Flux::Simulated(simulator) => simulator.stop().await,
        Flux::Real { chain, deployments } => {
            deployments.stop().await;
            chain.stop();
        }
    }
    step("done");
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      {l}")).collect::<Vec<_>>().join("\n")
}
