//! The container image (`scripts/build-image.sh`, named by
//! `SERVICE_PROVIDER_HOST_IMAGE`): `init` and `run` from inside it against
//! the test clusters, the Kro lifecycle to Ready and a clean deletion with
//! the plugin pulled by digest from an authenticated registry and its cosign
//! signature verified (the generic image, any plugin: guest-kro, and its Go
//! port through a lifecycle of its own), and the start-up time
//! to the first reconcile with the precompiled plugin cache baked into the
//! image and without it.
//!
//! Without the variable the test passes with a note, unless
//! `SERVICE_PROVIDER_HOST_REQUIRE_IMAGE=1` (CI) makes that a failure.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use host_test_support::oci::{IMAGE_DIR, PluginRegistry};
use host_test_support::plugins::{self, Component, GO_KRO, KRO};
use host_test_support::process::{Launcher, Replica, ReplicaOptions};
use host_test_support::*;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

fn image() -> Option<Launcher> {
    let launcher = Launcher::image_from_env();
    if launcher.is_none() {
        let required = std::env::var("SERVICE_PROVIDER_HOST_REQUIRE_IMAGE").is_ok_and(|v| v == "1");
        assert!(!required, "SERVICE_PROVIDER_HOST_IMAGE is not set: build the image with scripts/build-image.sh");
        eprintln!("skipped: SERVICE_PROVIDER_HOST_IMAGE is not set (eval \"$(scripts/build-image.sh)\")");
    }
    launcher
}

/// The fixture's ServiceProvider running `image`, as openmcp-operator has
/// reconciled it before its init Job runs; returns the ServiceProviders.
async fn reconciled_service_provider(f: &Fixture, image: &str) -> Api<DynamicObject> {
    let providers: Api<DynamicObject> =
        Api::all_with(f.platform.clone(), &service_provider_host::controller::init::service_provider_resource());
    let sp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
        "metadata": {"name": f.provider}, "spec": {"image": image}
    }))
    .unwrap();
    providers.create(&PostParams::default(), &sp).await.expect("ServiceProvider");
    let status = json!({"status": {"observedGeneration": 1, "phase": "Progressing"}});
    providers.patch_status(&f.provider, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    providers
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// Starts `run` from the image and measures the time until the Kro `name`
/// (created before) has a status written by this process; its log so far.
async fn first_reconcile(
    image: &Launcher,
    f: &Fixture,
    name: &str,
    env: Vec<(String, String)>,
) -> (Replica, Duration, String) {
    f.create_kro(name, "v0.9.1").await;
    let log = std::env::temp_dir().join(unique(&format!("image-{name}.log")));
    let options = ReplicaOptions { env, log: Some(log.clone()), ..ReplicaOptions::new(name) };
    let replica = Replica::start(image, f, options);
    let started = Instant::now();
    eventually(&format!("the first reconcile of {name}"), WAIT, || async {
        f.kro(name).await.filter(|k| k["status"]["observedGeneration"].is_number()).map(drop)
    })
    .await;
    let took = started.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (replica, took, text)
}

#[tokio::test]
async fn the_image_runs_init_and_run_through_the_kro_lifecycle() {
    let Some(image) = image() else { return };
    let f = Fixture::new(Options {
        instances: vec!["mcp-01".into(), "cached".into(), "compiled".into()],
        flux_ready: true,
        workload: false,
    })
    .await;
    let kubeconfig = f.env.platform.kubeconfig_path();

    // The image runs as a user that cannot write into it: the baked cache
    // cannot be changed, and nothing else can be written either.
    let out = image
        .command(&args(&["precompile", "--plugin-cache-dir", "/plugins/cache-new", "/plugins"]), &kubeconfig, &[])
        .output()
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("Permission denied"), "non-root, read-only: {stderr}");

    // init, as openmcp's init Job runs it (its ServiceProvider reconciled).
    let providers = reconciled_service_provider(&f, "service-provider-host:test").await;
    let init = [
        "init",
        "--environment=test",
        "--verbosity=INFO",
        "--provider-name",
        &f.provider,
        "--plugin",
        "/plugins/kro.wasm",
    ];
    let out = image.command(&args(&init), &kubeconfig, &[("POD_NAMESPACE", &f.pod_ns)]).output().await;
    assert!(out.status.success(), "init in the image: {}", String::from_utf8_lossy(&out.stderr));
    let sp = providers.get(&f.provider).await.unwrap();
    assert_eq!(sp.data["status"]["resources"][0]["kind"], "Kro", "{:?}", sp.data);

    // The built-in grant is for the components the image ships, by digest:
    // guest-kro as built against contract 0.1.0 also calls itself kro and
    // claims exactly kro's identity, and is refused before any request.
    let old = plugin_path(plugins::KRO_0_1);
    let mounts = [(old.clone(), "/mnt/old-kro.wasm".to_string())];
    let mut old_init = init.map(str::to_string).to_vec();
    *old_init.last_mut().unwrap() = image.path(&old, "/mnt/old-kro.wasm");
    let old_init: Vec<OsString> = old_init.into_iter().map(OsString::from).collect();
    let out = image.command_with(&old_init, &kubeconfig, &[("POD_NAMESPACE", &f.pod_ns)], &mounts).output().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a component the image does not ship got kro's identity: {stderr}");
    assert!(stderr.contains("digest") && stderr.contains("--plugin-grant"), "{stderr}");

    // run: start to first reconcile with the baked cache, then with the
    // cache unusable (a directory the user cannot create: the host warns
    // and compiles the plugin in memory).
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    // The baked cache is used as it is: sealed, root's, readable, nothing
    // compiled again.
    let (cached, with_cache, log) = first_reconcile(&image, &f, "cached", vec![]).await;
    assert!(cached.terminate().success());
    assert!(!log.contains("compiling"), "the baked cache was not used: {log}");
    let no_cache = vec![("PLUGIN_CACHE_DIR".to_string(), "/nonexistent/cache".to_string())];
    let (compiled, without_cache, log) = first_reconcile(&image, &f, "compiled", no_cache).await;
    assert!(compiled.terminate().success());
    assert!(log.contains("compiling the plugin in memory"), "{log}");
    eprintln!(
        "start to first reconcile from the image: {with_cache:?} with the baked cache, {without_cache:?} compiling"
    );

    // The whole lifecycle, from the image, with leader election, and the
    // plugin from a registry: pulled by digest with the pull Secret's
    // docker config, its signature verified, cached on a writable volume
    // (an emptyDir in a Deployment).
    let (replica, _registry) = run_from_registry(&image, &f, KRO, None).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let kro = f.wait_ready("mcp-01").await;
    assert_eq!(ready(&kro)["reason"], "ReconcileSuccess", "{kro:#}");
    assert!(f.flux_objects("HelmRelease", "mcp-01").get_opt("kro-helm-release").await.unwrap().is_some());
    for name in ["mcp-01", "cached", "compiled"] {
        f.delete_kro(name).await;
    }
    for name in ["mcp-01", "cached", "compiled"] {
        f.wait_gone(name).await;
    }
    assert!(f.flux_objects("HelmRelease", "mcp-01").get_opt("kro-helm-release").await.unwrap().is_none());
    eprintln!("resident memory of the image's host after the lifecycle: {:?} KiB", replica.process.rss_kib());
    let remaining: Vec<String> =
        f.access_requests("mcp-01").list(&Default::default()).await.unwrap().iter().map(|a| a.name_any()).collect();
    assert!(remaining.is_empty(), "AccessRequests left: {remaining:?}");
    assert!(replica.terminate().success(), "the image's process stops cleanly on SIGTERM");
}

/// `run` from the image, with leader election and `component` from a
/// registry: pulled by digest with the pull Secret's docker config, its
/// signature verified, cached on a writable volume (an emptyDir in a
/// Deployment), under `grant` (a `--plugin-grant` file) or the built-in
/// one. Returned once ready, with the manifest and the component in the
/// cache; the registry must live as long as the replica.
async fn run_from_registry(
    image: &Launcher,
    f: &Fixture,
    component: Component,
    grant: Option<&std::path::Path>,
) -> (Replica, PluginRegistry) {
    let registry = PluginRegistry::start().await;
    let binary = env!("CARGO_BIN_EXE_service-provider-host").as_ref();
    let pinned = registry.publish(binary, &plugin_path(component), "plugins/kro");
    registry.sign(&pinned, false);
    let cache = std::env::temp_dir().join(unique("image-plugin-cache"));
    std::fs::create_dir_all(&cache).unwrap();
    // The image's user is not this test's: let it write (test only).
    std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let there = |name: &str| image.path(&registry.dir().join(name), &format!("{IMAGE_DIR}/{name}"));
    let mut mounts =
        vec![(registry.dir().to_path_buf(), format!("{IMAGE_DIR}:ro")), (cache.clone(), "/var/cache/plugins".into())];
    let mut args = Vec::new();
    if let Some(grant) = grant {
        mounts.push((grant.to_path_buf(), "/etc/service-provider-host/grant.yaml:ro".into()));
        args = vec!["--plugin-grant".into(), image.path(grant, "/etc/service-provider-host/grant.yaml")];
    }
    let options = ReplicaOptions {
        leader_elect: true,
        plugin_source: Some(pinned.clone()),
        mounts,
        args,
        env: vec![
            ("DOCKER_CONFIG".into(), there("docker")),
            ("PLUGIN_VERIFY_KEY".into(), there("cosign.pub")),
            ("INSECURE_REGISTRIES".into(), registry.host().into()),
            ("PLUGIN_CACHE_DIR".into(), image.path(&cache, "/var/cache/plugins")),
        ],
        ..ReplicaOptions::new("sp-kro-0")
    };
    let replica = Replica::start(image, f, options);
    assert!(replica.wait_ready(WAIT).await, "{:?}", replica.readyz());
    eprintln!(
        "start to ready from the image with {} ({pinned}) pulled and verified: {:?}",
        component.file,
        replica.started.elapsed()
    );
    let blobs = std::fs::read_dir(cache.join("blobs/sha256")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(blobs, 2, "the manifest and the component are cached");
    (replica, registry)
}

/// A plugin written in Go needs nothing of its own from the image: guest-kro's
/// Go port, pulled from the registry, verified and compiled by the image's
/// host, takes a Kro to Ready and through deletion. The image's built-in
/// grant is for the components it ships, so the platform gives the port a
/// grant of its own: kro's identity, pinned to the port's digest.
#[tokio::test]
async fn the_image_runs_the_go_port_of_kro_from_the_registry() {
    let Some(image) = image() else { return };
    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    let digest = testbed::registry::sha256_digest(&std::fs::read(plugin_path(GO_KRO)).unwrap());
    let mut grant: serde_json::Value = serde_saphyr::from_str(service_provider_host::plugin::grant::DEFAULT).unwrap();
    let kro = grant["identities"].as_array_mut().unwrap().iter_mut().find(|i| i["plugin"] == "kro").unwrap();
    kro["digest"] = json!(digest);
    let grant_file = std::env::temp_dir().join(format!("{}.json", unique("go-kro-grant")));
    std::fs::write(&grant_file, grant.to_string()).unwrap();
    std::fs::set_permissions(&grant_file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (replica, _registry) = run_from_registry(&image, &f, GO_KRO, Some(&grant_file)).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let kro = f.wait_ready("mcp-01").await;
    assert_eq!(ready(&kro)["reason"], "ReconcileSuccess", "{kro:#}");
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(f.flux_objects("HelmRelease", "mcp-01").get_opt("kro-helm-release").await.unwrap().is_none());
    eprintln!("resident memory of the image's host with go-kro: {:?} KiB", replica.process.rss_kib());
    assert!(replica.terminate().success(), "the image's process stops cleanly on SIGTERM");
}

/// The arm64 binary (`SERVICE_PROVIDER_HOST_BINARY_AARCH64`, exported by
/// scripts/build-image.sh), run under qemu-user-static: it renders the seed
/// example exactly as this build does, and runs `init` and `run` through a
/// Kro's lifecycle on the test clusters.
#[tokio::test]
async fn the_arm64_binary_renders_and_serves_a_kro_under_emulation() {
    let Some(binary) = std::env::var_os("SERVICE_PROVIDER_HOST_BINARY_AARCH64").map(std::path::PathBuf::from) else {
        let required = std::env::var("SERVICE_PROVIDER_HOST_REQUIRE_IMAGE").is_ok_and(|v| v == "1");
        assert!(!required, "SERVICE_PROVIDER_HOST_BINARY_AARCH64 is not set: build it with scripts/build-image.sh");
        eprintln!("skipped: SERVICE_PROVIDER_HOST_BINARY_AARCH64 is not set (eval \"$(scripts/build-image.sh)\")");
        return;
    };
    // An ELF for aarch64 (e_machine 183), not this machine's.
    let header = std::fs::read(&binary).expect("the arm64 binary");
    assert_eq!(u16::from_le_bytes([header[18], header[19]]), 183, "{} is not an aarch64 binary", binary.display());
    // No binfmt_misc here: the emulator is named, in a wrapper the
    // launcher starts as the binary.
    let dir = testbed::process::RunDir::create("arm64").expect("a run directory");
    let wrapper = dir.path().join("service-provider-host");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec qemu-aarch64-static {} \"$@\"\n", binary.display())).unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let emulated = Launcher::Binary(wrapper);
    let native = Launcher::Binary(env!("CARGO_BIN_EXE_service-provider-host").into());

    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let render: Vec<OsString> = vec![
        "render".into(),
        "--plugin".into(),
        plugins::plugin_path(KRO).into(),
        "--object".into(),
        examples.join("kro.yaml").into(),
        "--provider-config".into(),
        examples.join("providerconfig.yaml").into(),
    ];
    let nowhere = std::path::Path::new("/nonexistent");
    let started = Instant::now();
    let arm64 = emulated.command(&render, nowhere, &[]).output().await;
    let took = started.elapsed();
    assert!(arm64.status.success(), "render under emulation: {}", String::from_utf8_lossy(&arm64.stderr));
    let here = native.command(&render, nowhere, &[]).output().await;
    // The same plan and status, but for the moment each was made.
    let timeless = |out: &[u8]| -> String {
        let text = String::from_utf8_lossy(out);
        text.lines().filter(|l| !l.trim_start().starts_with("lastTransitionTime:")).collect::<Vec<_>>().join("\n")
    };
    assert!(!arm64.stdout.is_empty());
    assert_eq!(timeless(&arm64.stdout), timeless(&here.stdout), "the same plan");
    eprintln!("render under qemu-aarch64-static: {took:?}");

    let f = Fixture::new(Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false }).await;
    let kubeconfig = f.env.platform.kubeconfig_path();
    reconciled_service_provider(&f, "service-provider-host:arm64").await;
    let kro = plugins::plugin_path(KRO).display().to_string();
    let init = ["init", "--environment=test", "--verbosity=INFO", "--provider-name", &f.provider, "--plugin", &kro];
    let out = emulated.command(&args(&init), &kubeconfig, &[("POD_NAMESPACE", &f.pod_ns)]).output().await;
    assert!(out.status.success(), "init under emulation: {}", String::from_utf8_lossy(&out.stderr));

    let replica = Replica::start(&emulated, &f, ReplicaOptions::new("arm64"));
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let kro = f.wait_ready("mcp-01").await;
    assert_eq!(ready(&kro)["reason"], "ReconcileSuccess", "{kro:#}");
    f.delete_kro("mcp-01").await;
    f.wait_gone("mcp-01").await;
    assert!(replica.terminate().success(), "the arm64 host stops cleanly on SIGTERM");
}
