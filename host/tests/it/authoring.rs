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
use host_test_support::registries;
use serde_json::Value;
use tokio::sync::OnceCell;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The SDKs as published, once per process: a cargo registry and a Go
/// module proxy in a directory of their own.
struct Published {
    dir: tempfile::TempDir,
    cargo_index: String,
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
                let (runtime, version) = registries::go_runtime_source(&workspace);
                registries::go_module(&proxy, "go.bytecodealliance.org/pkg", &version, &runtime);
                Published { dir, cargo_index }
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
        std::fs::copy(env!("CARGO_BIN_EXE_service-provider-host"), bin.join("service-provider-host")).unwrap();
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

fn yaml(text: &[u8]) -> Value {
    serde_saphyr::from_str(std::str::from_utf8(text).unwrap()).unwrap()
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
    let object = format!("examples/{}.yaml", name.trim_end_matches("-go"));
    let render_args = |plugin: &str| {
        [
            "render",
            "--plugin",
            plugin,
            "--plugin-grant",
            "granted.yaml",
            "--object",
            &object,
            "--provider-config",
            "examples/provider-config.yaml",
            "-o",
            "json",
        ]
        .map(String::from)
    };
    let rendered = author.run(project, host, &render_args(wasm).each_ref().map(|s| s.as_str()), &[]);
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
    let from_registry = pull(&render_args(&pinned).each_ref().map(|s| s.as_str()));
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
    // The newest Go release this project claims builds it too.
    let env: Vec<(&str, &str)> =
        go_env.iter().map(|&(k, v)| if k == "GOTOOLCHAIN" { (k, "go1.27.4") } else { (k, v) }).collect();
    author.run(&project, "go", &["test", "./..."], &env);
    author.run(&project, "sh", &["build.sh"], &env);
}
