//! Registries a plugin author's build can reach, holding only what this
//! project publishes, in the form it is published in:
//!
//! - a cargo registry (a git index over `file://`, crate downloads from a
//!   directory, as cargo's own tests serve one) with the `.crate` that
//!   `cargo package` writes for the SDK, the file `cargo publish` uploads;
//! - a Go module proxy directory (`GOPROXY=file://…`) with module zips as
//!   the Go proxy serves them: the SDK (from a tag of its subdirectory) and
//!   the runtime package its bindings import, its code and go.mod
//!   unmodified from the wit-bindgen-go release cargo fetched.
//!
//! The author's build is pointed at them and at nothing of this clone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::Digest;

/// The crates.io index, as other registries name a dependency from it.
const CRATES_IO: &str = "https://github.com/rust-lang/crates.io-index";

fn run(command: &mut Command) -> Vec<u8> {
    let output = command.output().unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Packages `package` of this workspace with `cargo package` (verified by
/// building it for `target`) into `out`; returns the `.crate` file.
pub fn package_crate(workspace: &Path, package: &str, target: &str, out: &Path) -> PathBuf {
    run(Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args(["package", "-q", "--allow-dirty", "-p", package, "--target", target, "--target-dir"])
        .arg(out));
    let version = env!("CARGO_PKG_VERSION");
    out.join("package").join(format!("{package}-{version}.crate"))
}

/// A cargo registry in `dir` holding `crates`; returns the index URL for
/// `[registries.<name>] index = …`.
pub fn cargo_registry(dir: &Path, crates: &[PathBuf]) -> String {
    let index = dir.join("index");
    let downloads = dir.join("dl");
    std::fs::create_dir_all(&index).unwrap();
    let config = json!({ "dl": format!("file://{}/{{crate}}/{{version}}/download", downloads.display()) });
    std::fs::write(index.join("config.json"), config.to_string()).unwrap();
    for file in crates {
        let bytes = std::fs::read(file).unwrap();
        let unpacked = dir.join("unpacked");
        std::fs::create_dir_all(&unpacked).unwrap();
        run(Command::new("tar").arg("-xzf").arg(file).arg("-C").arg(&unpacked));
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        let metadata: Value = serde_json::from_slice(&run(Command::new(env!("CARGO"))
            .args(["metadata", "--no-deps", "--format-version", "1", "--offline", "--manifest-path"])
            .arg(unpacked.join(&stem).join("Cargo.toml"))))
        .unwrap();
        let package = &metadata["packages"][0];
        let (name, version) = (package["name"].as_str().unwrap(), package["version"].as_str().unwrap());
        let deps: Vec<Value> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .map(|d| {
                json!({
                    "name": d["rename"].as_str().unwrap_or(d["name"].as_str().unwrap()),
                    "package": d["rename"].is_string().then(|| d["name"].clone()),
                    "req": d["req"], "features": d["features"], "optional": d["optional"],
                    "default_features": d["uses_default_features"], "target": d["target"],
                    "kind": if d["kind"].is_null() { "normal" } else { "build" },
                    "registry": d["registry"].as_str().unwrap_or(CRATES_IO),
                })
            })
            .collect();
        let entry = json!({
            "name": name, "vers": version, "deps": deps,
            "cksum": hex(&sha2::Sha256::digest(&bytes)),
            "features": package["features"], "yanked": false,
        });
        let path = index.join(index_path(name));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut lines = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        writeln!(lines, "{entry}").unwrap();
        let download = downloads.join(name).join(version).join("download");
        std::fs::create_dir_all(download.parent().unwrap()).unwrap();
        std::fs::write(download, bytes).unwrap();
    }
    let git = |args: &[&str]| {
        run(Command::new("git")
            .current_dir(&index)
            .args(["-c", "user.name=registry", "-c", "user.email=registry@example.com"])
            .args(args));
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "index"]);
    format!("file://{}", index.display())
}

/// Where a crate's entry lives in an index (cargo's layout by name length).
fn index_path(name: &str) -> String {
    let lower = name.to_lowercase();
    match lower.len() {
        1 => format!("1/{lower}"),
        2 => format!("2/{lower}"),
        3 => format!("3/{}/{lower}", &lower[..1]),
        _ => format!("{}/{}/{lower}", &lower[..2], &lower[2..4]),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Adds `module@version` to the Go module proxy directory `proxy`, its zip
/// made from the files of `source` as the Go proxy makes one from a tag:
/// every regular file, under `<module>@<version>/`, except VCS metadata
/// and nested modules.
pub fn go_module(proxy: &Path, module: &str, version: &str, source: &Path) {
    let dir = proxy.join(module).join("@v");
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    collect(source, source, &mut files);
    files.sort();
    let zip_path = dir.join(format!("{version}.zip"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for relative in &files {
        zip.start_file(format!("{module}@{version}/{relative}"), options).unwrap();
        zip.write_all(&std::fs::read(source.join(relative)).unwrap()).unwrap();
    }
    zip.finish().unwrap();
    std::fs::copy(source.join("go.mod"), dir.join(format!("{version}.mod"))).unwrap();
    std::fs::write(
        dir.join(format!("{version}.info")),
        json!({"Version": version, "Time": "2026-01-01T00:00:00Z"}).to_string(),
    )
    .unwrap();
    let list = dir.join("list");
    let mut listed = std::fs::read_to_string(&list).unwrap_or_default();
    listed.push_str(&format!("{version}\n"));
    std::fs::write(list, listed).unwrap();
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            // A directory with its own go.mod is another module.
            if name == ".git" || name == ".hg" || (path.join("go.mod").exists() && path != root) {
                continue;
            }
            collect(root, &path, out);
        } else if kind.is_file() {
            out.push(path.strip_prefix(root).unwrap().to_string_lossy().to_string());
        }
    }
}

/// The runtime package the Go SDK's generated bindings import
/// (`go.bytecodealliance.org/pkg`), written into `out` by `plugin-build
/// go-runtime` (the one place that finds it in the wit-bindgen-go crate
/// cargo fetched: its go.mod, licence and code, unmodified), and the
/// version sdk-go requires.
pub fn go_runtime(workspace: &Path, out: &Path) -> String {
    run(Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args(["run", "-q", "-p", "plugin-build", "--", "go-runtime", "--out"])
        .arg(out));
    let sdk_go_mod = std::fs::read_to_string(workspace.join("sdk-go/go.mod")).unwrap();
    sdk_go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("require go.bytecodealliance.org/pkg "))
        .expect("sdk-go requires the runtime")
        .trim()
        .to_string()
}

/// An npm registry on a local port serving the tarballs `npm pack` wrote
/// (each package's one version), until dropped. Point a scope at it with
/// `@scope:registry=<url>` in the author's `.npmrc`; every other package
/// comes from the public registry.
pub struct NpmRegistry {
    pub url: String,
    /// The `sha512-…` integrity of each tarball served, as lockfiles
    /// record it.
    pub integrities: Vec<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl NpmRegistry {
    pub fn serve(tarballs: &[PathBuf]) -> NpmRegistry {
        use base64::Engine;
        use std::collections::BTreeMap;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut documents: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut integrities = Vec::new();
        for tarball in tarballs {
            let bytes = std::fs::read(tarball).unwrap();
            let manifest: Value =
                serde_json::from_slice(&run(Command::new("tar").arg("-xzOf").arg(tarball).arg("package/package.json")))
                    .unwrap();
            let (name, version) = (manifest["name"].as_str().unwrap(), manifest["version"].as_str().unwrap());
            let file = tarball.file_name().unwrap().to_string_lossy().to_string();
            let integrity =
                format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&bytes)));
            let mut published = manifest.clone();
            published["dist"] = json!({"tarball": format!("{url}/tarballs/{file}"), "integrity": integrity});
            integrities.push(integrity);
            let packument = json!({
                "name": name,
                "dist-tags": {"latest": version},
                "versions": {version: published},
            });
            documents.insert(format!("/{}", name.replace('/', "%2f")), packument.to_string().into_bytes());
            documents.insert(format!("/{name}"), packument.to_string().into_bytes());
            documents.insert(format!("/tarballs/{file}"), bytes);
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                answer_npm(stream, &documents);
            }
        });
        NpmRegistry { url, integrities, stop }
    }
}

impl Drop for NpmRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One request, one answer, then the connection closes.
fn answer_npm(mut stream: std::net::TcpStream, documents: &std::collections::BTreeMap<String, Vec<u8>>) {
    use std::io::{BufRead, BufReader};
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // The headers, up to the empty line.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/").split('?').next().unwrap_or("/");
    let head = |status: &str, length: usize, kind: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n")
    };
    let found = documents.get(path).or_else(|| documents.get(&path.replace("%2F", "%2f")));
    let _ = match found {
        Some(body) => {
            let kind = if path.starts_with("/tarballs/") { "application/octet-stream" } else { "application/json" };
            stream.write_all(head("200 OK", body.len(), kind).as_bytes()).and_then(|()| stream.write_all(body))
        }
        None => stream.write_all(head("404 Not Found", 0, "text/plain").as_bytes()),
    };
}
