//! `service-provider-host render` end to end: the binary, the plugin
//! components and the seeds' examples under `examples/` (Kro at the top,
//! Flux in `examples/flux/`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use host_test_support::plugins::{self, root};

/// A per-test-binary cache, so only the first render compiles the component.
fn cache() -> PathBuf {
    std::env::temp_dir().join(format!("sp-host-render-test-{}", std::process::id()))
}

fn render(args: &[&str]) -> (bool, String, String) {
    render_with(plugins::KRO, args)
}

fn render_with(component: plugins::Component, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .arg("render")
        .arg("--plugin")
        .arg(plugins::plugin_path(component))
        .arg("--plugin-cache-dir")
        .arg(cache())
        .args(args)
        .current_dir(root())
        .output()
        .expect("runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn render_json(args: &[&str]) -> Value {
    render_json_with(plugins::KRO, args)
}

fn render_json_with(component: plugins::Component, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let (ok, stdout, stderr) = render_with(component, &all);
    assert!(ok, "render failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not one JSON document ({e}): {stdout}"))
}

fn applied<'a>(doc: &'a Value, kind: &str) -> &'a Value {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s.pointer("/apply/object").filter(|o| o["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} applied in {doc:#}"))
}

fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = cache().join("inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_seed_example_renders_flux_objects_and_secret_copies() {
    let doc = render_json(&["--object", "examples/kro.yaml", "--provider-config", "examples/providerconfig.yaml"]);
    assert_eq!(doc["result"], "planned");
    let tenant = doc["instance"]["tenantNamespace"].as_str().unwrap();
    assert!(tenant.starts_with("mcp--"));

    let repo = applied(&doc, "OCIRepository");
    assert_eq!(repo["metadata"]["namespace"], tenant);
    assert_eq!(repo["spec"]["ref"]["tag"], "0.9.3");
    assert_eq!(repo["spec"]["secretRef"]["name"], "sp-kro-my-registry-secret");
    let release = applied(&doc, "HelmRelease");
    assert_eq!(release["spec"]["targetNamespace"], "kro-system");
    assert_eq!(release["spec"]["chartRef"]["name"], "kro-oci-repository");

    let copies: Vec<&Value> = doc["steps"].as_array().unwrap().iter().filter_map(|s| s.get("copy")).collect();
    assert_eq!(copies.len(), 2);
    assert_eq!(copies[0]["target"]["name"], "sp-kro-my-registry-secret");
    assert_eq!(copies[1]["target"]["cluster"], "control-plane");
    assert_eq!(copies[1]["target"]["namespace"], "kro-system");

    // Host order: namespaces, then copies, then the rest.
    let order: Vec<String> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.pointer("/apply/object/kind").and_then(Value::as_str).unwrap_or("copy").to_string())
        .collect();
    assert_eq!(order, ["Namespace", "copy", "copy", "OCIRepository", "HelmRelease"]);

    assert_eq!(doc["status"]["phase"], "Progressing");
    assert_eq!(doc["requeueAfterSeconds"], 300);
}

#[test]
fn ready_flux_objects_render_a_ready_status() {
    let doc = render_json(&[
        "--object",
        "examples/kro.yaml",
        "--provider-config",
        "examples/providerconfig.yaml",
        "--observed",
        "examples/observed/ready",
    ]);
    assert_eq!(doc["status"]["phase"], "Ready");
    assert_eq!(doc["status"]["conditions"][0]["reason"], "ReconcileSuccess");
}

#[test]
fn an_unknown_version_renders_progressing_with_the_offered_versions() {
    let doc = render_json(&[
        "--object",
        "examples/kro-unknown-version.yaml",
        "--provider-config",
        "examples/providerconfig.yaml",
    ]);
    assert_eq!(doc["result"], "invalid-input");
    assert!(doc.get("steps").is_none(), "nothing is applied");
    let status = &doc["status"];
    assert_eq!(status["phase"], "Progressing");
    assert_eq!(status["observedGeneration"], 2);
    let ready = &status["conditions"][0];
    assert_eq!(ready["type"], "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ReconcileError");
    assert!(ready["message"].as_str().unwrap().ends_with("available versions are: v0.9.1, v0.9.3, v0.9.4"), "{ready}");
}

#[test]
fn deletion_renders_blocked_then_teardown() {
    let blocked = render_json(&[
        "--object",
        "examples/kro.yaml",
        "--provider-config",
        "examples/providerconfig.yaml",
        "--observed",
        "examples/observed/rgds",
        "--deleting",
    ]);
    assert_eq!(blocked["result"], "blocked");
    assert_eq!(blocked["status"]["phase"], "Terminating");
    assert!(blocked["message"].as_str().unwrap().contains("waiting for 2 kro ResourceGraphDefinition(s)"));

    let teardown = render_json(&["--object", "examples/kro.yaml", "--deleting", "--without-control-plane"]);
    assert_eq!(teardown["result"], "teardown");
    let kinds: Vec<&str> = teardown["delete"].as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["HelmRelease", "OCIRepository"]);
    assert_eq!(teardown["status"]["phase"], "Terminating");
}

#[test]
fn a_missing_provider_config_is_actionable() {
    let doc = render_json(&["--object", "examples/kro.yaml"]);
    assert_eq!(doc["result"], "no-provider-config");
    let message = doc["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains("ProviderConfig \"kro\""), "{message}");
    assert!(message.contains("platform cluster"), "{message}");
}

#[test]
fn malformed_helm_values_are_a_clear_status_message() {
    let pc = std::fs::read_to_string(root().join("examples/providerconfig.yaml"))
        .unwrap()
        .replace("imagePullSecrets:\n          - name: my-registry-secret", "imagePullSecrets: my-registry-secret");
    assert!(pc.contains("imagePullSecrets: my-registry-secret"));
    let path = temp_file("bad-values.yaml", &pc);
    let doc = render_json(&["--object", "examples/kro.yaml", "--provider-config", s(&path)]);
    assert_eq!(doc["result"], "invalid-input");
    let message = doc["message"].as_str().unwrap();
    assert!(message.starts_with("failed to parse helm values: "), "{message}");
}

#[test]
fn a_malformed_object_is_a_clear_error_not_a_crash() {
    let wrong_type = temp_file(
        "wrong-type.yaml",
        "apiVersion: kro.services.open-control-plane.io/v1alpha1\nkind: Kro\nmetadata:\n  name: a\n  namespace: b\nspec:\n  version: [1, 2]\n",
    );
    let doc = render_json(&["--object", s(&wrong_type), "--provider-config", "examples/providerconfig.yaml"]);
    assert_eq!(doc["result"], "invalid-input");
    assert!(doc["message"].as_str().unwrap().starts_with("invalid Kro object: "), "{doc}");

    let no_name = temp_file("no-name.yaml", "kind: Kro\nspec:\n  version: v0.9.3\n");
    let (ok, _, stderr) = render(&["--object", s(&no_name), "--provider-config", "examples/providerconfig.yaml"]);
    assert!(!ok);
    assert!(stderr.contains("metadata.name is missing"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let not_yaml = temp_file("not-yaml.yaml", "spec: [unclosed\n");
    let (ok, _, stderr) = render(&["--object", s(&not_yaml)]);
    assert!(!ok);
    assert!(stderr.contains("not-yaml.yaml"), "{stderr}");
}

#[test]
fn yaml_is_the_default_output() {
    let (ok, stdout, stderr) =
        render(&["--object", "examples/kro.yaml", "--provider-config", "examples/providerconfig.yaml"]);
    assert!(ok, "{stderr}");
    let doc: Value = serde_saphyr::from_str(&stdout).expect("YAML");
    assert_eq!(doc["result"], "planned");
}

/// A plugin whose `describe()` sleeps in WASI fails the command at its
/// deadline with one clear line, instead of hanging the start-up.
#[test]
fn a_plugin_whose_describe_hangs_fails_clearly() {
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
        .arg("render")
        .arg("--plugin")
        .arg(plugins::plugin_path(plugins::SLEEPY_DESCRIBE))
        .args(["--plugin-timeout-ms", "500", "--object", "examples/kro.yaml"])
        .env("RUST_BACKTRACE", "1")
        .current_dir(root())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("exceeded its time budget of 500ms"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line, no backtrace: {stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
}

/// What the grant refuses is shown the way the host would report it.
#[test]
fn a_refused_plan_renders_the_rule() {
    let identities = "identities:\n  - plugin: kro\n    service: {group: kro.services.open-control-plane.io, kind: Kro}\n    providerConfig: {group: kro.services.open-control-plane.io, kind: ProviderConfig}\n    finalizer: kro.services.open-control-plane.io/finalizer\n    crds: [kroes.kro.services.open-control-plane.io, providerconfigs.kro.services.open-control-plane.io]\n";
    let grant =
        temp_file("no-helm-releases.yaml", &format!("{identities}write: []\ncopy: {{targets: [], sources: {{}}}}\n"));
    let doc = render_json(&[
        "--object",
        "examples/kro.yaml",
        "--provider-config",
        "examples/providerconfig.yaml",
        "--plugin-grant",
        s(&grant),
        "--ungranted-requests",
        "drop",
    ]);
    assert_eq!(doc["result"], "refused", "{doc:#}");
    assert_eq!(doc["reason"], "CapabilityDenied");
    assert!(doc["message"].as_str().unwrap().contains("(rule not-granted)"), "{doc:#}");
    assert_eq!(doc["status"]["conditions"][0]["reason"], "CapabilityDenied");
    let not_granted = doc["notGranted"].as_array().expect("the refused observations are listed");
    assert!(not_granted.iter().any(|r| r.as_str().unwrap().contains("oci-repository")), "{doc:#}");
}

/// The refusals of a real run, offline: a plan that uses source-controller's
/// cloud identity, a deletion through a plural that ends the path, and a
/// plugin whose identity is not what the grant pins.
#[test]
fn render_shows_the_hosts_refusals_offline() {
    let grant = temp_file("hostile-grant.json", &plugins::grant_text_for("hostile"));
    // The seed's ProviderConfig, with the registry the hostile plugin's
    // sources name among its charts (the grant allows only those).
    let seed = std::fs::read_to_string(plugins::root().join("examples/providerconfig.yaml")).unwrap();
    let more = "    - version: v1\n      chartVersion: \"1\"\n      chartURL: oci://registry.example/charts/x\n";
    let config = temp_file("hostile-providerconfig.yaml", &format!("{seed}{more}"));
    let render_hostile = |name: &str, deleting: bool| {
        let object = format!(
            "apiVersion: kro.services.open-control-plane.io/v1alpha1\nkind: Kro\nmetadata: {{name: {name}, namespace: default}}\nspec: {{version: v1}}\n"
        );
        let object = temp_file(&format!("{name}.yaml"), &object);
        let mut args = vec!["--object", s(&object), "--provider-config", s(&config)];
        args.extend(["--plugin-grant", s(&grant), "--ungranted-requests", "drop"]);
        if deleting {
            args.push("--deleting");
        }
        render_json_with(plugins::HOSTILE, &args)
    };
    let doc = render_hostile("flux-cloud-identity", false);
    assert_eq!(
        (doc["result"].as_str(), doc["reason"].as_str()),
        (Some("refused"), Some("CapabilityDenied")),
        "{doc:#}"
    );
    assert!(doc["message"].as_str().unwrap().contains("field /spec/provider must be one of [\"generic\"]"), "{doc:#}");
    let doc = render_hostile("url-delete-collection", true);
    assert_eq!((doc["result"].as_str(), doc["reason"].as_str()), (Some("refused"), Some("PluginError")), "{doc:#}");
    assert!(doc["message"].as_str().unwrap().contains("plural \"helmreleases#\""), "{doc:#}");

    let (ok, _, stderr) = render_with(
        plugins::IMPOSTOR,
        &["--object", "examples/kro.yaml", "--provider-config", "examples/providerconfig.yaml"],
    );
    assert!(!ok && stderr.contains("is not what the plugin grant pins"), "{stderr}");
    assert!(stderr.contains("ocirepositories.source.toolkit.fluxcd.io"), "{stderr}");
}

/// A grant can give an identity to exactly one component: its digest.
#[test]
fn an_identity_pinned_to_a_digest_is_given_only_to_those_bytes() {
    let wasm = std::fs::read(plugins::plugin_path(plugins::KRO)).unwrap();
    let grant_with = |digest: &str| {
        let mut grant: Value = serde_saphyr::from_str(service_provider_host::plugin::grant::DEFAULT).unwrap();
        for identity in grant["identities"].as_array_mut().unwrap() {
            identity["digest"] = Value::from(digest);
        }
        temp_file(&format!("pinned-{}.json", &digest[7..15]), &grant.to_string())
    };
    let with_grant = |grant: &PathBuf| {
        let examples = ["--object", "examples/kro.yaml", "--provider-config", "examples/providerconfig.yaml"];
        let mut all: Vec<String> = examples.iter().map(|a| a.to_string()).collect();
        all.extend(["--plugin-grant".to_string(), s(grant).to_string()]);
        all
    };
    let right = with_grant(&grant_with(&service_provider_host::plugin::sandbox::digest_of(&wasm)));
    let doc = render_json(&right.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(doc["result"], "planned", "{doc:#}");
    let wrong = with_grant(&grant_with(&format!("sha256:{}", "0".repeat(64))));
    let (ok, _, stderr) = render(&wrong.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !ok && stderr.contains("its digest is sha256:") && stderr.contains("the grant pins sha256:0000"),
        "{stderr}"
    );
}

/// One plugin's examples, for the checks every plugin gets.
struct Examples {
    plugin: plugins::Component,
    object: &'static str,
    unknown_version: &'static str,
    provider_config: &'static str,
    ready: &'static str,
    blocking: &'static str,
    blocked: &'static str,
}

const EXAMPLES: [Examples; 2] = [
    Examples {
        plugin: plugins::KRO,
        object: "examples/kro.yaml",
        unknown_version: "examples/kro-unknown-version.yaml",
        provider_config: "examples/providerconfig.yaml",
        ready: "examples/observed/ready",
        blocking: "examples/observed/rgds",
        blocked: "ResourceGraphDefinition",
    },
    Examples {
        plugin: plugins::FLUX,
        object: "examples/flux/flux.yaml",
        unknown_version: "examples/flux/flux-unknown-version.yaml",
        provider_config: "examples/flux/providerconfig.yaml",
        ready: "examples/flux/observed/ready",
        blocking: "examples/flux/observed/blocking",
        blocked: "1 GitRepository, 1 Kustomization",
    },
];

/// Every plugin's seed example plans under the built-in grant, gets Ready
/// when its Flux objects are, lists the offer for an unknown version, and
/// blocks then tears down on deletion.
#[test]
fn every_plugin_renders_its_examples() {
    for ex in EXAMPLES {
        let name = ex.plugin.file;
        let base = ["--object", ex.object, "--provider-config", ex.provider_config];
        let planned = render_json_with(ex.plugin, &base);
        assert_eq!(planned["result"], "planned", "{name}: {planned:#}");
        assert!(planned.get("notGranted").is_none(), "{name}: the built-in grant covers it: {planned:#}");
        let first = &planned["steps"][0];
        assert!(
            first.pointer("/apply/object/kind") == Some(&Value::from("Namespace")) || first.get("copy").is_some(),
            "{name}"
        );

        let ready = render_json_with(ex.plugin, &[&base[..], &["--observed", ex.ready]].concat());
        assert_eq!(ready["status"]["phase"], "Ready", "{name}: {ready:#}");

        let unknown =
            render_json_with(ex.plugin, &["--object", ex.unknown_version, "--provider-config", ex.provider_config]);
        assert_eq!(unknown["result"], "invalid-input", "{name}");
        assert!(unknown["message"].as_str().unwrap().contains("available versions are"), "{name}: {unknown:#}");

        let blocked = render_json_with(ex.plugin, &[&base[..], &["--observed", ex.blocking, "--deleting"]].concat());
        assert_eq!(blocked["result"], "blocked", "{name}: {blocked:#}");
        assert!(blocked["message"].as_str().unwrap().contains(ex.blocked), "{name}: {blocked:#}");
        let teardown = render_json_with(ex.plugin, &[&base[..], &["--deleting"]].concat());
        assert_eq!(teardown["result"], "teardown", "{name}");
        assert_eq!(teardown["delete"][0]["kind"], "HelmRelease", "{name}: the release goes first");
    }
}

/// `render` with guest-kro's Go port (examples/go-kro) prints what it
/// prints with guest-kro, for each of the Kro examples' renders: a plugin
/// written in Go needs nothing of its own from the host.
#[test]
fn the_go_port_of_kro_renders_what_guest_kro_renders() {
    let ex = &EXAMPLES[0];
    let base = ["--object", ex.object, "--provider-config", ex.provider_config];
    let unknown = ["--object", ex.unknown_version, "--provider-config", ex.provider_config];
    let renders: [Vec<&str>; 5] = [
        base.to_vec(),
        [&base[..], &["--observed", ex.ready]].concat(),
        unknown.to_vec(),
        [&base[..], &["--observed", ex.blocking, "--deleting"]].concat(),
        [&base[..], &["--deleting"]].concat(),
    ];
    // The one thing that differs between two renders: when they ran.
    let timeless = |mut doc: Value| {
        for condition in doc.pointer_mut("/status/conditions").and_then(Value::as_array_mut).into_iter().flatten() {
            condition.as_object_mut().unwrap().remove("lastTransitionTime");
        }
        doc
    };
    for args in renders {
        let rust = timeless(render_json_with(plugins::KRO, &args));
        let go = timeless(render_json_with(plugins::GO_KRO, &args));
        assert_eq!(go, rust, "render {args:?}");
    }
}
