//! `--plugin oci://…@sha256:…`: the Kro plugin pulled by digest from an
//! authenticated registry, its cosign signature verified, the lifecycle to
//! Ready; a restart without the registry starts from the cache; and every
//! way an artifact can be wrong is refused with one line before anything is
//! compiled.

use std::path::{Path, PathBuf};
use std::process::Command;

use host_test_support::oci::PluginRegistry;
use host_test_support::plugins::{self, KRO, KRO_0_1, WORKLOAD_ECHO};
use host_test_support::process::{Replica, ReplicaOptions};
use host_test_support::*;
use serde_json::json;
use testbed::registry::Artifact;

use super::binary;

fn host() -> PathBuf {
    env!("CARGO_BIN_EXE_service-provider-host").into()
}

fn cache_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `precompile` of `plugin` (the fetch path of `init` and `run`, without a
/// cluster): success, and stderr.
fn precompile(r: &PluginRegistry, plugin: &str, cache: &Path, extra: &[&str], docker: &Path) -> (bool, String) {
    let out = Command::new(host())
        .args(["precompile", "--plugin-cache-dir"])
        .arg(cache)
        .args(["--insecure-registry", r.host()])
        .args(extra)
        .arg(plugin)
        .env("DOCKER_CONFIG", docker)
        .env_remove("PLUGIN_VERIFY_KEY")
        .output()
        .expect("the host runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Refused: one line naming `reason`, exit non-zero, nothing compiled.
fn refused(r: &PluginRegistry, plugin: &str, extra: &[&str], docker: &Path, reason: &str) {
    let cache = cache_dir("refused");
    let (ok, stderr) = precompile(r, plugin, &cache, extra, docker);
    assert!(!ok, "{plugin} was accepted");
    assert!(stderr.contains(reason), "{plugin}: expected {reason:?} in {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    // Where the host keeps its artifacts (none yet: no such directory).
    let compiled: Vec<_> = std::fs::read_dir(cache.join("precompiled"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert!(compiled.is_empty(), "compiled despite the refusal: {compiled:?}");
    eprintln!("refused as expected: {}", stderr.trim_end());
}

testbed::real_flux_test! {
    async fn a_plugin_pulled_by_digest_and_verified_reaches_ready_and_restarts_from_the_cache() {
        let r = PluginRegistry::start().await;
        let pinned = r.publish(&host(), &plugins::plugin_path(KRO), "plugins/kro");
        r.sign(&pinned, false);
        let f = Fixture::new(Options { instances: vec!["mcp-01".into(), "mcp-02".into()], flux_ready: true, workload: false }).await;
        f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
        let cache = cache_dir("plugin-cache");
        let env = vec![
            ("DOCKER_CONFIG".to_string(), r.docker_config().display().to_string()),
            ("PLUGIN_VERIFY_KEY".to_string(), r.key().display().to_string()),
            ("INSECURE_REGISTRIES".to_string(), r.host().to_string()),
            ("PLUGIN_CACHE_DIR".to_string(), cache.display().to_string()),
        ];
        let start = |pod: &str, log: &Path| {
            let options = ReplicaOptions {
                plugin_source: Some(pinned.clone()),
                env: env.clone(),
                log: Some(log.to_path_buf()),
                ..ReplicaOptions::new(pod)
            };
            Replica::start(&binary(), &f, options)
        };

        let first_log = cache.join("first.log");
        let first = start("replica-0", &first_log);
        assert!(first.wait_ready(WAIT).await, "{}", std::fs::read_to_string(&first_log).unwrap_or_default());
        let cold = first.started.elapsed();
        f.create_kro("mcp-01", "v0.9.1").await;
        f.wait_ready("mcp-01").await;
        let cold_rss = first.process.rss_kib();
        assert!(first.terminate().success());
        let log = std::fs::read_to_string(&first_log).unwrap();
        assert!(log.contains("plugin fetched") && log.contains("from_cache=false") && log.contains("verified=true"), "{log}");

        // Without the registry: the manifest, the signature and the
        // component come from the cache, each checked again.
        r.registry.stop();
        let second_log = cache.join("second.log");
        let second = start("replica-1", &second_log);
        assert!(second.wait_ready(WAIT).await, "{}", std::fs::read_to_string(&second_log).unwrap_or_default());
        let cached = second.started.elapsed();
        f.create_kro("mcp-02", "v0.9.1").await;
        f.wait_ready("mcp-02").await;
        let log = std::fs::read_to_string(&second_log).unwrap();
        assert!(log.contains("from_cache=true"), "{log}");
        eprintln!("start to ready with a plugin from the registry: {cold:?} pulled, verified and compiled; {cached:?} from the cache");
        eprintln!(
            "resident memory after a reconcile: {cold_rss:?} KiB having compiled in-process, {:?} KiB from the cache",
            second.process.rss_kib()
        );
        for name in ["mcp-01", "mcp-02"] {
            f.delete_kro(name).await;
            f.wait_gone(name).await;
        }
        assert!(second.terminate().success());
    }
}

testbed::real_flux_test! {
    async fn every_wrong_artifact_reference_or_signature_is_refused_in_one_line() {
        let r = PluginRegistry::start().await;
        let docker = r.docker_config();
        let kro = r.publish(&host(), &plugins::plugin_path(KRO), "plugins/kro");
        r.sign(&kro, false);
        let key = r.key().display().to_string();
        let verify: &[&str] = &["--plugin-verify-key", &key];

        // Signed, in both of cosign's formats, and read with credentials.
        let legacy = r.publish(&host(), &plugins::plugin_path(KRO_0_1), "plugins/kro-legacy");
        r.sign(&legacy, true);
        for pinned in [&kro, &legacy] {
            let (ok, stderr) = precompile(&r, pinned, &cache_dir("ok"), verify, &docker);
            assert!(ok, "{pinned}: {stderr}");
        }

        // References.
        let tag = format!("oci://{}/plugins/kro:test", r.host());
        refused(&r, &tag, &[], &docker, "has no digest");
        let (ok, stderr) = precompile(&r, &tag, &cache_dir("tag"), &["--allow-mutable-plugin-reference"], &docker);
        assert!(ok, "a tag with the opt-in: {stderr}");
        let last = kro.chars().last().unwrap();
        let unknown = format!("{}{}", &kro[..kro.len() - 1], if last == '0' { '1' } else { '0' });
        refused(&r, &unknown, &[], &docker, "not found in the registry");

        // Credentials.
        refused(&r, &kro, &[], &r.no_credentials(), "refused access: HTTP 401; give credentials");
        let wrong = r.dir().join("wrong");
        std::fs::create_dir_all(&wrong).unwrap();
        let config = json!({"auths": {r.host(): {"auth": "ZW52dGVzdDpub3Bl"}}}).to_string(); // envtest:nope
        std::fs::write(wrong.join("config.json"), config).unwrap();
        refused(&r, &kro, &[], &wrong, "were not accepted");

        // Artifacts that are not a plugin.
        let component = std::fs::read(plugins::plugin_path(KRO)).unwrap();
        let core_module = b"\0asm\x01\0\0\0".to_vec();
        let wasm_config: &[u8] = b"{}";
        let cases: [(&str, Artifact, &str); 3] = [
            (
                "image",
                Artifact { config: ("application/vnd.oci.image.config.v1+json", b"{}"), layers: &[("application/wasm", &component)], annotations: json!({}) },
                "config media type is application/vnd.oci.image.config.v1+json",
            ),
            (
                "core",
                Artifact { config: ("application/vnd.wasm.config.v0+json", wasm_config), layers: &[("application/wasm", &core_module)], annotations: json!({}) },
                "core WebAssembly module, not a component",
            ),
            (
                "two",
                Artifact { config: ("application/vnd.wasm.config.v0+json", wasm_config), layers: &[("application/wasm", &component), ("application/wasm", &core_module)], annotations: json!({}) },
                "2 layers",
            ),
        ];
        for (repository, artifact, reason) in cases {
            let pushed = r.registry.push_artifact(&format!("bad/{repository}"), "v1", &artifact).await.unwrap();
            let pinned = format!("oci://{}/bad/{repository}@{}", r.host(), pushed.digest);
            refused(&r, &pinned, &[], &docker, reason);
        }

        // A registry that serves other bytes for a digest: a valid
        // signature over the manifest does not make the layer right.
        let echo = r.publish(&host(), &plugins::plugin_path(WORKLOAD_ECHO), "plugins/echo");
        r.sign(&echo, false);
        let layer = service_provider_host::plugin::sandbox::digest_of(&std::fs::read(plugins::plugin_path(WORKLOAD_ECHO)).unwrap());
        let blob = r.registry.blob_file(&layer);
        let mut bytes = std::fs::read(&blob).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&blob, bytes).unwrap();
        refused(&r, &echo, verify, &docker, "the bytes the registry sent do not hash to sha256:");

        // Signatures: none, another key's, and a file under verification.
        let unsigned = r.publish(&host(), &plugins::plugin_path(KRO_0_1), "plugins/unsigned");
        refused(&r, &unsigned, verify, &docker, "no cosign signature found");
        let other = r.other_key().display().to_string();
        refused(&r, &kro, &["--plugin-verify-key", &other], &docker, "made with another key");
        let file = plugins::plugin_path(KRO).display().to_string();
        refused(&r, &file, verify, &docker, "files carry no signature");

        // The registry gone, nothing cached.
        r.registry.stop();
        refused(&r, &kro, &[], &docker, "is unreachable");
    }
}

testbed::real_flux_test! {
    /// A key signs digests, not tags: a registry that moves a tag back to an
    /// older digest the key once signed (a release with a known hole) would
    /// pass the check. So with a key a tag is refused, even with the opt-in.
    async fn a_tag_is_refused_with_a_verification_key_because_the_registry_can_move_it_back() {
        let r = PluginRegistry::start().await;
        let docker = r.docker_config();
        let key = r.key().display().to_string();
        let old = r.publish(&host(), &plugins::plugin_path(KRO_0_1), "plugins/kro");
        r.sign(&old, false);
        let current = r.publish(&host(), &plugins::plugin_path(KRO), "plugins/kro");
        r.sign(&current, false);
        // The registry moves the tag back to the old, signed release.
        assert_eq!(r.publish(&host(), &plugins::plugin_path(KRO_0_1), "plugins/kro"), old);

        let tag = format!("oci://{}/plugins/kro:test", r.host());
        let opt_in = ["--allow-mutable-plugin-reference", "--plugin-verify-key", key.as_str()];
        let (ok, stderr) = precompile(&r, &tag, &cache_dir("rolled-back"), &opt_in, &docker);
        assert!(!ok, "{tag} with a key was accepted; the registry had moved it back to {old}: {stderr}");
        refused(&r, &tag, &opt_in, &docker, "with --plugin-verify-key");

        // Pinned, the current release verifies as before.
        let (ok, stderr) = precompile(&r, &current, &cache_dir("pinned"), &["--plugin-verify-key", &key], &docker);
        assert!(ok, "{current}: {stderr}");
    }
}
