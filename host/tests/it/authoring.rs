//! A plugin author outside this repository: from `plugin new` in an empty
//! directory to a component that passes `plugin test`, renders, and
//! travels through a registry by digest, with only the language's
//! toolchain, the SDK as published (a cargo registry holding the packaged
//! crate, a Go module proxy holding the module zips) and this CLI, copied
//! out of the clone. No path the author's build sees leads into this
//! clone: the environment is built from scratch and checked.
//!
//! The time from `plugin new` to a rendered plan is printed per language
//! (`authoring: …`): cold on a first run, warm when the toolchains'
//! caches hold the dependencies.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use host_test_support::oci::PluginRegistry;
use host_test_support::process::{Launcher, Replica, ReplicaOptions};
use host_test_support::{Fixture, Options, Service, docs, registries};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The SDKs as published, once per process: a cargo registry and a Go
/// module proxy in a directory of their own.
struct Published {
    dir: tempfile::TempDir,
    cargo_index: String,
    npm: registries::NpmRegistry,
}

static PUBLISHED: OnceCell<Published> = OnceCell::const_new();

async fn published() -> &'static Published {
    PUBLISHED
        .get_or_init(|| async {
            tokio::task::spawn_blocking(|| {
                let dir = tempfile::Builder::new().prefix("published-").tempdir().unwrap();
                let workspace = workspace();
                // The .crate `cargo publish` would upload, verified by a
                // build for the plugin target.
                let packaged = registries::package_crate(
                    &workspace,
                    "service-provider-sdk",
                    "wasm32-wasip2",
                    &workspace.join("target/authoring-package"),
                );
                let cargo_index = registries::cargo_registry(&dir.path().join("cargo"), &[packaged]);
                let proxy = dir.path().join("goproxy");
                registries::go_module(
                    &proxy,
                    "open-control-plane.io/service-provider-host/sdk-go",
                    &format!("v{}", env!("CARGO_PKG_VERSION")),
                    &workspace.join("sdk-go"),
                );
                let runtime = dir.path().join("go-runtime");
                let version = registries::go_runtime(&workspace, &runtime);
                registries::go_module(&proxy, "go.bytecodealliance.org/pkg", &version, &runtime);
                // The tarball `npm publish` would upload (its prepare step
                // puts the contract's WIT in).
                let npm = dir.path().join("npm");
                std::fs::create_dir_all(&npm).unwrap();
                let packed = Command::new("npm")
                    .args(["pack", "--silent", "--pack-destination"])
                    .arg(&npm)
                    .current_dir(workspace.join("sdk-ts"))
                    .output()
                    .expect("npm runs");
                assert!(packed.status.success(), "npm pack: {}", String::from_utf8_lossy(&packed.stderr));
                let tarball = npm.join(String::from_utf8(packed.stdout).unwrap().trim());
                let npm = registries::NpmRegistry::serve(&[tarball]);
                Published { dir, cargo_index, npm }
            })
            .await
            .unwrap()
        })
        .await
}

/// An author's machine: a directory outside the clone, the CLI copied into
/// its `bin/`, and an environment holding nothing of the clone.
struct Author {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Author {
    fn new() -> Author {
        let dir = tempfile::Builder::new().prefix("author-").tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        // A link, not a copy: a copy's file is open for writing while other
        // tests' threads fork, and a child that inherited it until its own
        // exec makes running the copy fail with ETXTBSY ("Text file busy").
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_service-provider-host"), bin.join("service-provider-host"))
            .unwrap();
        let root = workspace();
        let path: Vec<String> = std::iter::once(bin.display().to_string())
            .chain(std::env::var("PATH").unwrap_or_default().split(':').map(String::from))
            .filter(|p| !p.is_empty() && !Path::new(p).starts_with(&root))
            .collect();
        let home = std::env::var("HOME").unwrap();
        let mut env = vec![("PATH".to_string(), path.join(":")), ("HOME".to_string(), home.clone())];
        for key in ["CARGO_HOME", "RUSTUP_HOME", "GOPATH", "GOMODCACHE", "GOCACHE", "TMPDIR"] {
            if let Ok(value) = std::env::var(key) {
                env.push((key.to_string(), value));
            }
        }
        // Build caches that outlive the run (warm builds), outside the clone.
        let cache = Path::new(&home).join(".cache/service-provider-host/authoring");
        env.push(("CARGO_TARGET_DIR".into(), cache.join("cargo-target").display().to_string()));
        env.push(("CARGO_TERM_COLOR".into(), "never".into()));
        for (key, value) in &env {
            assert!(!value.contains(root.to_str().unwrap()), "{key}={value} leads into the clone");
        }
        Author { dir, env }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `program` in `dir` with the author's environment and `extra`.
    fn run(&self, dir: &Path, program: &str, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let program = match program {
            "service-provider-host" => self.path().join("bin/service-provider-host").display().to_string(),
            other => other.to_string(),
        };
        let output = Command::new(&program)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(extra.iter().copied())
            .output()
            .unwrap_or_else(|e| panic!("running {program}: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?} in {} failed:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

fn as_str(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn yaml(text: &[u8]) -> Value {
    serde_saphyr::from_str(std::str::from_utf8(text).unwrap()).unwrap()
}

/// The README the template wrote, its commands run as written in the
/// project with the author's environment (and `env`, what the test's
/// registries need).
fn run_readme(author: &Author, project: &Path, env: &[(&str, &str)]) {
    let text = std::fs::read_to_string(project.join("README.md")).unwrap();
    let blocks = docs::parse("the template's README.md", &text);
    assert_eq!(docs::skipped(&blocks), Vec::<String>::new(), "a template's README runs whole");
    let substitutions = env.iter().fold(docs::Substitutions::default(), |s, (k, v)| s.env(k, *v));
    docs::run(&blocks, project, &author.env, &substitutions);
}

/// What every template must do once built: pass `plugin test`, print a
/// grant that is its template's grant pinned to the build, render under
/// it, and travel through a registry by digest, signed.
async fn conform_render_and_publish(author: &Author, project: &Path, wasm: &Path, started: Instant) -> Duration {
    let wasm = wasm.to_str().unwrap();
    let host = "service-provider-host";
    let report = author.run(project, host, &["plugin", "test", wasm, "testdata/cases.json"], &[]);
    let report = String::from_utf8_lossy(&report.stdout).to_string();
    assert!(report.contains("PASS  cases                3 case(s)") && report.ends_with("conformant\n"), "{report}");

    let grant = author.run(project, host, &["plugin", "grant", wasm], &[]);
    std::fs::write(project.join("granted.yaml"), &grant.stdout).unwrap();
    let mut printed = yaml(&grant.stdout);
    let digest = printed["identities"][0]["digest"].take();
    printed["identities"][0].as_object_mut().unwrap().remove("digest");
    assert_eq!(printed, yaml(&std::fs::read(project.join("grant.yaml")).unwrap()), "the template's grant");
    assert!(digest.as_str().is_some_and(|d| d.starts_with("sha256:")), "{digest}");

    let name = project.file_name().unwrap().to_str().unwrap();
    let render_args = |plugin: &str| {
        let files = ["--object", "examples/greeter.yaml", "--provider-config", "examples/provider-config.yaml"];
        let mut args = vec!["render".to_string(), "--plugin".into(), plugin.into(), "--plugin-grant".into()];
        args.extend(["granted.yaml", "-o", "json"].into_iter().chain(files).map(String::from));
        args
    };
    let rendered = author.run(project, host, &as_str(&render_args(wasm)), &[]);
    let took = started.elapsed();
    let rendered: Value = serde_json::from_slice(&rendered.stdout).unwrap();
    assert_eq!(rendered["result"], "planned", "{rendered:#}");
    assert_eq!(rendered["status"]["phase"], "Ready", "{rendered:#}");
    assert_eq!(rendered["steps"][0]["apply"]["object"]["kind"], "ConfigMap", "{rendered:#}");

    // Pushed, signed, and read back by digest with the signature checked.
    let registry = PluginRegistry::start().await;
    let pinned = registry.publish(&author.path().join("bin/service-provider-host"), Path::new(wasm), name);
    registry.sign(&pinned, false);
    let key = registry.key();
    let docker = registry.docker_config();
    let pull = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--insecure-registry", registry.host(), "--plugin-verify-key", key.to_str().unwrap()]);
        author.run(project, host, &all, &[("DOCKER_CONFIG", docker.to_str().unwrap())])
    };
    let inspected = yaml(&pull(&["plugin", "inspect", &pinned]).stdout);
    assert_eq!(inspected["componentDigest"], digest, "{inspected:#?}");
    assert_eq!(inspected["reference"], pinned.as_str());
    let from_registry = pull(&as_str(&render_args(&pinned)));
    let from_registry: Value = serde_json::from_slice(&from_registry.stdout).unwrap();
    assert_eq!(from_registry["steps"], rendered["steps"]);
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_plugin_started_outside_the_repository_builds_tests_renders_and_travels_by_digest() {
    let published = published().await;
    let author = Author::new();
    let started = Instant::now();
    author.run(author.path(), "service-provider-host", &["plugin", "new", "greeter", "--lang", "rust"], &[]);
    let project = author.path().join("greeter");
    // The SDK from the local registry in place of crates.io, as an author
    // would have it from crates.io.
    std::fs::create_dir_all(project.join(".cargo")).unwrap();
    std::fs::write(
        project.join(".cargo/config.toml"),
        format!(
            "[registries.published]\nindex = \"{}\"\n\n[patch.crates-io]\nservice-provider-sdk = {{ version = \"{}\", registry = \"published\" }}\n",
            published.cargo_index,
            env!("CARGO_PKG_VERSION")
        ),
    )
    .unwrap();
    let tested = author.run(&project, "cargo", &["test"], &[]);
    let tests = String::from_utf8_lossy(&tested.stdout);
    assert!(tests.contains("the_shared_cases_get_their_answers ... ok"), "{tests}");
    let build = Instant::now();
    author.run(&project, "cargo", &["build", "--release", "--target", "wasm32-wasip2"], &[]);
    let build = build.elapsed();
    let target = author.env.iter().find(|(k, _)| k == "CARGO_TARGET_DIR").unwrap().1.clone();
    let wasm = Path::new(&target).join("wasm32-wasip2/release/greeter.wasm");
    // The SDK crate came from the registry, not from a path.
    let lock = std::fs::read_to_string(project.join("Cargo.lock")).unwrap();
    let sdk = lock.split("[[package]]").find(|p| p.contains("name = \"service-provider-sdk\"")).unwrap();
    assert!(sdk.contains(&format!("source = \"registry+{}\"", published.cargo_index)), "{sdk}");
    let took = conform_render_and_publish(&author, &project, &wasm, started).await;
    eprintln!("authoring: rust, plugin new to a rendered plan in {took:.1?} (component build {build:.1?})");
    run_readme(&author, &project, &[]);

    runs_to_ready_under_its_grant(&author, &project, &wasm).await;

    // A build that asks for one rule more, under the grant re-pinned to its
    // digest (what a platform does that accepts the new build and nothing
    // else): refused at load, naming the rule.
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
    let more = lib.replacen(
        "capabilities: vec![Capability {",
        "capabilities: vec![Capability { cluster: Cluster::Platform, api: ApiKind::new(\"\", \"v1\", \"ServiceAccount\", \"serviceaccounts\", true), scope: NamespaceScope::Tenant, names: vec![] }, Capability {",
        1,
    );
    assert_ne!(lib, more);
    std::fs::write(project.join("src/lib.rs"), more).unwrap();
    author.run(&project, "cargo", &["build", "--release", "--target", "wasm32-wasip2"], &[]);
    let inspected = yaml(
        &author.run(&project, "service-provider-host", &["plugin", "inspect", wasm.to_str().unwrap()], &[]).stdout,
    );
    let granted = std::fs::read_to_string(project.join("granted.yaml")).unwrap();
    let pinned = yaml(granted.as_bytes())["identities"][0]["digest"].as_str().unwrap().to_string();
    let repinned = granted.replace(&pinned, inspected["componentDigest"].as_str().unwrap());
    std::fs::write(project.join("repinned.yaml"), repinned).unwrap();
    let refused = Command::new(author.path().join("bin/service-provider-host"))
        .args(["render", "--plugin", wasm.to_str().unwrap(), "--plugin-grant", "repinned.yaml"])
        .args(["--object", "examples/greeter.yaml", "--provider-config", "examples/provider-config.yaml"])
        .current_dir(&project)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a plugin asking for more than its grant loaded");
    assert!(stderr.contains("asks for more than its grant gives") && stderr.contains("ServiceAccount"), "{stderr}");
}

/// The template's component under the grant `plugin grant` printed for it,
/// installed by `init` and run by `run` on the test API servers: a Greeter
/// goes Ready with its ConfigMap in the tenant namespace, and its deletion
/// takes the ConfigMap with it.
async fn runs_to_ready_under_its_grant(author: &Author, project: &Path, wasm: &Path) {
    let service = Service { group: "greeter.services.example.com", kind: "Greeter", plural: "greeters" };
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::with_service(options, service).await;
    let host = Launcher::Binary(author.path().join("bin/service-provider-host"));
    let grant = project.join("granted.yaml").display().to_string();
    let plugin = wasm.display().to_string();
    let init: Vec<std::ffi::OsString> = [
        "init",
        "--environment=test",
        "--provider-name",
        &f.provider,
        "--plugin",
        &plugin,
        "--plugin-grant",
        &grant,
        "--register-service-kind=false",
    ]
    .iter()
    .map(Into::into)
    .collect();
    let kubeconfig = f.env.platform.kubeconfig_path();
    let out = host.command(&init, &kubeconfig, &[("POD_NAMESPACE", &f.pod_ns)]).output().await;
    assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
    let mut options = ReplicaOptions::new("greeter");
    options.plugin_source = Some(plugin);
    options.args = vec!["--plugin-grant".into(), grant];
    let replica = Replica::start(&host, &f, options);

    let object = |value: Value| -> DynamicObject { serde_json::from_value(value).unwrap() };
    let provider_config = object(json!({
        "apiVersion": "greeter.services.example.com/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": f.provider}, "spec": {},
    }));
    let configs: Api<DynamicObject> = Api::all_with(f.platform.clone(), &service.provider_config());
    configs.create(&PostParams::default(), &provider_config).await.expect("ProviderConfig");
    let greeter = object(json!({
        "apiVersion": "greeter.services.example.com/v1alpha1", "kind": "Greeter",
        "metadata": {"name": "mcp-01", "namespace": f.ns}, "spec": {"greeting": "hello from outside"},
    }));
    f.instances().create(&PostParams::default(), &greeter).await.expect("Greeter");
    let ready = f.wait_ready("mcp-01").await;
    assert_eq!(ready["status"]["conditions"][0]["reason"], "Greeted", "{ready:#}");
    let config_maps: Api<ConfigMap> = Api::namespaced(f.platform.clone(), &f.tenant("mcp-01"));
    let greeting = config_maps.get("greeter").await.expect("the plugin's ConfigMap");
    assert_eq!(greeting.data.unwrap()["greeting"], "hello from outside");

    f.instances().delete("mcp-01", &DeleteParams::default()).await.expect("delete");
    f.wait_gone("mcp-01").await;
    assert!(config_maps.get_opt("greeter").await.unwrap().is_none(), "the ConfigMap outlived its Greeter");
    assert!(replica.terminate().success(), "run stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_plugin_started_outside_the_repository_builds_tests_renders_and_travels_by_digest() {
    let published = published().await;
    let author = Author::new();
    let proxy = format!("file://{}/goproxy,https://proxy.golang.org", published.dir.path().display());
    // Our modules are not in the public checksum database (the test's
    // proxy stands in for the public one).
    let go_env = [
        ("GOPROXY", proxy.as_str()),
        ("GONOSUMDB", "open-control-plane.io,go.bytecodealliance.org"),
        ("GOFLAGS", "-mod=mod"),
        // Go's own default (this machine's Go is configured `local`): a go
        // older than a module asks for fetches the toolchain it names.
        ("GOTOOLCHAIN", "auto"),
    ];
    let started = Instant::now();
    author.run(
        author.path(),
        "service-provider-host",
        &["plugin", "new", "greeter", "--lang", "go", "--dir", "greeter-go"],
        &[],
    );
    let project = author.path().join("greeter-go");
    author.run(&project, "go", &["mod", "tidy"], &go_env);
    // The Go the template asks for (the runtime package's minimum) is
    // fetched by the installed one.
    let version = author.run(&project, "go", &["version"], &go_env);
    assert!(
        String::from_utf8_lossy(&version.stdout).contains("go1.27.1"),
        "{}",
        String::from_utf8_lossy(&version.stdout)
    );
    let tested = author.run(&project, "go", &["test", "-v", "./..."], &go_env);
    assert!(String::from_utf8_lossy(&tested.stdout).contains("--- PASS: TestSharedCases"));
    let build = Instant::now();
    author.run(&project, "sh", &["build.sh"], &go_env);
    let build = build.elapsed();
    let took = conform_render_and_publish(&author, &project, &project.join("greeter.wasm"), started).await;
    eprintln!("authoring: go, plugin new to a rendered plan in {took:.1?} (component build {build:.1?})");
    run_readme(&author, &project, &go_env);
    // The newest Go release this project claims builds it too.
    let env: Vec<(&str, &str)> =
        go_env.iter().map(|&(k, v)| if k == "GOTOOLCHAIN" { (k, "go1.27.4") } else { (k, v) }).collect();
    author.run(&project, "go", &["test", "./..."], &env);
    author.run(&project, "sh", &["build.sh"], &env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_plugin_started_outside_the_repository_builds_tests_renders_and_travels_by_digest() {
    let published = published().await;
    let author = Author::new();
    let started = Instant::now();
    author.run(
        author.path(),
        "service-provider-host",
        &["plugin", "new", "greeter", "--lang", "ts", "--dir", "greeter-ts"],
        &[],
    );
    let project = author.path().join("greeter-ts");
    // The SDK's scope from the local registry, as an author would have it
    // from npmjs.com; TypeScript and componentize-qjs from the public one.
    std::fs::write(project.join(".npmrc"), format!("@open-control-plane:registry={}/\n", published.npm.url)).unwrap();
    author.run(&project, "npm", &["install", "--no-audit", "--no-fund"], &[]);
    // The SDK installed is the packed tarball, byte for byte.
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("package-lock.json")).unwrap()).unwrap();
    let sdk = &lock["packages"]["node_modules/@open-control-plane/service-provider-sdk"];
    assert_eq!(sdk["integrity"], published.npm.integrities[0].as_str(), "{sdk:#}");
    let tested = author.run(&project, "npm", &["test"], &[]);
    let tests = String::from_utf8_lossy(&tested.stdout);
    assert!(tests.contains("ok 3 - the shared cases get their answers") && tests.contains("# fail 0"), "{tests}");
    let build = Instant::now();
    author.run(&project, "npm", &["run", "build"], &[]);
    let build = build.elapsed();
    // componentize-qjs 0.4.5 does not build reproducibly (its engine
    // snapshot differs by a few bytes each time): the digest pinned is the
    // pushed build's, as the guide says.
    let wasm = project.join("greeter.wasm");
    let took = conform_render_and_publish(&author, &project, &wasm, started).await;
    eprintln!("authoring: typescript, plugin new to a rendered plan in {took:.1?} (component build {build:.1?})");
    run_readme(&author, &project, &[]);
}

/// `docs/plugin-guide.md`'s path, as written, on an author's machine: from
/// `plugin new` to a signed component in a registry and the grant read
/// from there. What stands in for the author's world, and nothing else:
/// - crates.io: the SDK crate from the local registry (a cargo config in
///   the author's directory, as for the Rust template);
/// - `registry.example.com`: a local registry (plain HTTP, so
///   `INSECURE_REGISTRIES` names it and `cosign` gets
///   `--allow-http-registry`), its credentials in `DOCKER_CONFIG`;
/// - `COSIGN_PASSWORD` empty, so `cosign generate-key-pair` asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_guides_path_runs_as_written() {
    let published = published().await;
    let author = Author::new();
    std::fs::create_dir_all(author.path().join(".cargo")).unwrap();
    std::fs::write(
        author.path().join(".cargo/config.toml"),
        format!(
            "[registries.published]\nindex = \"{}\"\n\n[patch.crates-io]\nservice-provider-sdk = {{ version = \"{}\", registry = \"published\" }}\n",
            published.cargo_index,
            env!("CARGO_PKG_VERSION")
        ),
    )
    .unwrap();
    let registry = PluginRegistry::start().await;
    let cosign = testbed::bins::FluxBinaries::locate().expect("cosign is built").cosign;
    let wrapper = author.path().join("bin/cosign");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = sign ] && {{ shift; exec {} sign --allow-http-registry \"$@\"; }}\nexec {} \"$@\"\n",
            cosign.display(),
            cosign.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let blocks = docs::page("docs/plugin-guide.md");
    eprintln!("docs: plugin-guide.md skips {:?}", docs::skipped(&blocks));
    let substitutions = docs::Substitutions::default()
        .text("registry.example.com", registry.host())
        .env("INSECURE_REGISTRIES", registry.host())
        .env("DOCKER_CONFIG", registry.docker_config().display().to_string())
        .env("COSIGN_PASSWORD", "");
    let out = docs::run(&blocks, author.path(), &author.env, &substitutions);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("conformant"), "plugin test passed: {stdout}");
    let grant =
        std::fs::read_to_string(author.path().join("greeter/greeter-grant.yaml")).expect("the grant handed over");
    assert!(grant.contains("digest: sha256:"), "{grant}");
    let reference = format!("oci://{}/plugins/greeter@sha256:", registry.host());
    assert!(stdout.contains(&reference), "the pinned reference printed: {stdout}");
}

/// `plugin test` over what this repository ships, each with its cases:
/// under the built-in grant guest-kro and its Go port with guest-kro's
/// cases, guest-flux with its own; under go-hello's grant go-hello and its
/// TypeScript port with go-hello's. A case whose expected answer is wrong
/// fails the run, naming it.
#[test]
fn the_shipped_plugins_pass_plugin_test_and_a_wrong_answer_fails_it() {
    use host_test_support::plugins::{self, FLUX, GO_HELLO, GO_KRO, KRO, TS_HELLO};
    use service_provider_sdk::testing::Fixture as Case;
    let dir = tempfile::tempdir().unwrap();
    let kro_cases = plugins::root().join("examples/go-kro/testdata/cases.json");
    let flux_cases = dir.path().join("flux.json");
    let cases = guest_flux::cases::all();
    let fixtures: Vec<Case> = cases.iter().map(Case::answered_by::<guest_flux::FluxProvider>).collect();
    std::fs::write(&flux_cases, serde_json::to_string(&fixtures).unwrap()).unwrap();
    let built_in = plugins::root().join("host/src/plugin/grant/default.yaml");
    let hello_grant = plugins::root().join("examples/go-hello/grant.yaml");
    let hello_cases = plugins::root().join("examples/go-hello/testdata/cases.json");
    let test = |plugin: &Path, cases: &Path, grant: &Path| {
        Command::new(env!("CARGO_BIN_EXE_service-provider-host"))
            .args(["plugin", "test"])
            .args([plugin, cases])
            .arg("--plugin-grant")
            .arg(grant)
            .output()
            .unwrap()
    };
    for (plugin, cases, grant) in [
        (KRO, &kro_cases, &built_in),
        (GO_KRO, &kro_cases, &built_in),
        (FLUX, &flux_cases, &built_in),
        (GO_HELLO, &hello_cases, &hello_grant),
        (TS_HELLO, &hello_cases, &hello_grant),
    ] {
        let out = test(&plugins::plugin_path(plugin), cases, grant);
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && report.ends_with("conformant\n"),
            "{report}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!report.contains("FAIL"), "{report}");
    }

    let mut wrong: Value = serde_json::from_str(&std::fs::read_to_string(&kro_cases).unwrap()).unwrap();
    wrong[0]["expected"]["ok"]["requeueAfterSeconds"] = json!(1);
    let wrong_cases = dir.path().join("wrong.json");
    std::fs::write(&wrong_cases, wrong.to_string()).unwrap();
    let out = test(&plugins::plugin_path(KRO), &wrong_cases, &built_in);
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let name = wrong[0]["name"].as_str().unwrap();
    assert!(report.contains("FAIL  cases") && report.contains(&format!("case {name:?}: answers differ")), "{report}");
}
