//! `plugin-build`: the steps that turn a plugin written in another language
//! than Rust into a component the host loads. Today that language is Go
//! (mainline Go ≥ 1.24, `//go:wasmexport`):
//!
//! - `go-bindings` writes the Go bindings of a contract version (the Go
//!   generator of wit-bindgen, as a library: no `wit-bindgen-cli` install),
//!   or with `--check` fails when the committed ones are stale;
//! - `go-runtime` writes the runtime package those bindings import
//!   (`go.bytecodealliance.org/pkg`), unmodified from the `wit-bindgen-go`
//!   crate cargo fetched, because the Go module proxy this repository's CI
//!   reaches does not serve it;
//! - `componentize` makes a component of the core module `go build` wrote
//!   (`GOOS=wasip1 -buildmode=c-shared`), as the host's `plugin
//!   componentize` does for authors (both through `plugin-componentize`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use clap::{Parser, Subcommand};
use wit_parser::{Resolve, WorldId};

#[derive(Parser)]
#[command(about = "Build service-provider plugins written in Go into components")]
struct Cli {
    #[command(subcommand)]
    command: Step,
}

#[derive(Subcommand)]
enum Step {
    /// Write (or check) the Go bindings of a contract version.
    GoBindings {
        /// The contract's WIT directory, e.g. `wit/v0.2.0`.
        #[arg(long)]
        wit: PathBuf,
        /// The world the plugin implements.
        #[arg(long, default_value = "plugin")]
        world: String,
        /// The Go import path the bindings live under.
        #[arg(long)]
        package: String,
        /// The directory of that import path.
        #[arg(long)]
        out: PathBuf,
        /// Compare instead of writing; fail if anything differs.
        #[arg(long)]
        check: bool,
    },
    /// Write the Go runtime package the bindings import.
    GoRuntime {
        /// Where the module goes (its `go.mod` at the top).
        #[arg(long)]
        out: PathBuf,
    },
    /// Make a component of a core module built with `-buildmode=c-shared`.
    Componentize {
        #[arg(long)]
        wit: PathBuf,
        #[arg(long, default_value = "plugin")]
        world: String,
        /// The core module (`GOOS=wasip1 GOARCH=wasm`).
        #[arg(long)]
        core: PathBuf,
        /// The component to write.
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Step::GoBindings { wit, world, package, out, check } => go_bindings(&wit, &world, &package, &out, check),
        Step::GoRuntime { out } => go_runtime(&out),
        Step::Componentize { wit, world, core, out } => componentize(&wit, &world, &core, &out),
    }
}

fn load(wit: &Path, world: &str) -> Result<(Resolve, WorldId)> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_path(wit).with_context(|| format!("reading the WIT in {}", wit.display()))?;
    let id = resolve.select_world(&[package], Some(world))?;
    Ok((resolve, id))
}

/// The bindings as files, by path relative to `--out`.
fn generate(wit: &Path, world: &str, package: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let (mut resolve, id) = load(wit, world)?;
    // Formatted here rather than by the generator, which formats only when
    // it finds `gofmt`: the same bytes on every machine, or an error.
    let options = wit_bindgen_go::Opts {
        pkg_name: Some(package.to_string()),
        format: wit_bindgen_go::Format::False,
        quiet: true,
        ..Default::default()
    };
    let mut files = wit_bindgen_core::Files::default();
    options.build().generate(&mut resolve, id, &mut files)?;
    files
        .iter()
        .map(|(name, bytes)| {
            let bytes = if name.ends_with(".go") { gofmt(bytes)? } else { bytes.to_vec() };
            Ok((name.to_string(), bytes))
        })
        .collect()
}

fn gofmt(source: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new("gofmt")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running gofmt (it comes with Go)")?;
    child.stdin.take().expect("piped").write_all(source)?;
    let output = child.wait_with_output()?;
    ensure!(output.status.success(), "gofmt: {}", String::from_utf8_lossy(&output.stderr));
    Ok(output.stdout)
}

fn go_bindings(wit: &Path, world: &str, package: &str, out: &Path, check: bool) -> Result<()> {
    let files = generate(wit, world, package)?;
    if check {
        let stale: Vec<&str> = files
            .iter()
            .filter(|(name, bytes)| std::fs::read(out.join(name)).ok().as_deref() != Some(bytes.as_slice()))
            .map(|(name, _)| name.as_str())
            .collect();
        if !stale.is_empty() {
            bail!(
                "the Go bindings in {} are stale ({}): run `task go-bindings` and commit the result",
                out.display(),
                stale.join(", ")
            );
        }
        return Ok(());
    }
    for (name, bytes) in &files {
        let path = out.join(name);
        std::fs::create_dir_all(path.parent().expect("a file under --out"))?;
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Where cargo unpacked the `wit-bindgen-go` crate this tool was built
/// with: asked from `cargo metadata`, so it is the version in Cargo.lock.
fn wit_bindgen_go_source() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .output()
        .context("running cargo metadata")?;
    ensure!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == "wit-bindgen-go"))
        .context("cargo metadata lists no wit-bindgen-go")?;
    let manifest = package["manifest_path"].as_str().context("a manifest path")?;
    Ok(Path::new(manifest).parent().context("the crate directory")?.join("src/pkg"))
}

/// The runtime module as released: its `go` line (1.27.1 in the release
/// wit-bindgen-go 0.63 carries) is what every build of a Go plugin then
/// needs, here as for authors who fetch it from a module proxy.
fn go_runtime(out: &Path) -> Result<()> {
    let source = wit_bindgen_go_source()?;
    let go_mod = std::fs::read_to_string(source.join("go.mod")).context("the runtime's go.mod")?;
    ensure!(go_mod.contains("module go.bytecodealliance.org/pkg"), "unexpected runtime module in {}", source.display());
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("go.mod"), go_mod)?;
    std::fs::copy(source.join("LICENSE"), out.join("LICENSE"))?;
    copy_tree(&source.join("wit"), &out.join("wit"))
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn componentize(wit: &Path, world: &str, core: &Path, out: &Path) -> Result<()> {
    let core = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let component = plugin_componentize::Contract::from_dir(wit)?.componentize(&core, world)?;
    std::fs::write(out, component).with_context(|| format!("writing {}", out.display()))
}
