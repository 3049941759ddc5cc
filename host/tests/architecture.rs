//! The shape of `host/src`, checked: dependencies between the top-level
//! modules point one way (no module imports a module that imports it back,
//! directly or through others), and the leaves stay leaves. How a module is
//! cut into files is a matter of cohesion, for the review of the change: a
//! line limit would split by size.
//!
//! Run alone with `task lint` or `cargo test -p service-provider-host --test architecture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`apply/prune.rs` → `apply`);
/// `None` for the crate roots.
fn module_of(file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src()).expect("under src");
    let first = relative.components().next()?.as_os_str().to_string_lossy().to_string();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(name) => Some(name.to_string()),
        None => Some(first),
    }
}

/// The top-level modules named after `crate::` in code (comments skipped),
/// including every item of a `crate::{a, b::c}` group.
fn crate_references(text: &str) -> BTreeSet<String> {
    let code: String =
        text.lines().filter(|line| !line.trim_start().starts_with("//")).map(|line| format!("{line}\n")).collect();
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        // Not part of a longer path such as `some_crate::`.
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut at_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        if !item.is_empty() {
                            found.insert(std::mem::take(&mut item));
                        }
                        at_start = true;
                    }
                    c if at_start && (c.is_alphanumeric() || c == '_') => item.push(c),
                    _ if at_start && !item.is_empty() => {
                        found.insert(std::mem::take(&mut item));
                        at_start = false;
                    }
                    _ => {}
                }
            }
            if !item.is_empty() {
                found.insert(item);
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.insert(name);
        }
    }
    found
}

/// Module → the modules it references, for every module of the crate.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let Some(module) = module_of(file) else { continue };
        let text = std::fs::read_to_string(file).expect("readable source file");
        for target in crate_references(&text) {
            // `crate::Error` and friends are re-exports of `error`.
            let target = if modules.contains(&target) { target } else { "error".to_string() };
            if target != module {
                graph.get_mut(&module).expect("known module").insert(target);
            }
        }
    }
    graph
}

/// A cycle through `graph`, if there is one, as the list of modules on it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn module_dependencies_have_no_cycles() {
    let graph = graph();
    assert!(graph.len() > 10, "found the modules: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle between host modules: {}", cycle.join(" → "));
    }
    // The leaves stay leaves: at most the ground floor below them.
    for leaf in ["resource", "owner", "metrics", "syntax"] {
        let above: Vec<&String> = graph[leaf].iter().filter(|m| !GROUND.contains(&m.as_str())).collect();
        assert!(above.is_empty(), "{leaf} must not import from the crate but {GROUND:?}, yet uses {above:?}");
    }
}

/// What every module may use: names and apiVersions ([`syntax`]), the
/// metrics label trait.
const GROUND: &[&str] = &["syntax", "metrics"];

/// Code of `text` without its comment lines.
fn code(text: &str) -> String {
    text.lines().filter(|line| !line.trim_start().starts_with("//")).map(|line| format!("{line}\n")).collect()
}

/// What a file of the Wasm side breaks of its walls: a use of kube or
/// k8s-openapi, or a host module outside `plugin/` but the ground floor.
fn breaches(text: &str) -> Vec<String> {
    let code = code(text);
    let mut found: Vec<String> = crate_references(text)
        .into_iter()
        .filter(|m| m != "plugin" && !GROUND.contains(&m.as_str()))
        .map(|m| format!("crate::{m}"))
        .collect();
    for library in ["kube", "k8s_openapi", "kube_runtime", "kube_client"] {
        let used = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .any(|word| word.strip_prefix(library).is_some_and(|rest| rest.starts_with("::")));
        if used {
            found.push(library.to_string());
        }
    }
    found
}

/// The Wasm side (`plugin/`: loading, the sandbox, OCI, the grant, plan
/// checks) is where the untrusted code is handled: it knows no cluster.
/// Nothing in it uses kube, nor a module of the cluster side; the sandbox
/// within it not even the rest of `plugin/` but the contract versions it
/// serves (it knows nothing of grants or plans).
#[test]
fn the_wasm_side_knows_no_cluster() {
    let mut files = Vec::new();
    rust_files(&src().join("plugin"), &mut files);
    assert!(files.len() > 20, "found the plugin side: {files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source file");
        let breaches = breaches(&text);
        assert!(breaches.is_empty(), "{} reaches out of plugin/: {breaches:?}", file.display());
        if file.starts_with(src().join("plugin/sandbox")) {
            let code = code(&text);
            for other in ["grant", "plan", "load", "oci", "source", "Error"] {
                let path = format!("crate::plugin::{other}");
                assert!(!code.contains(&path), "{} (the sandbox) uses {path}", file.display());
            }
        }
    }
}

#[test]
fn the_checker_sees_cycles_and_groups() {
    let refs = crate_references(
        "use crate::{Error, apply::{self, Change}, plan};\nlet x = crate::status::now();\n// crate::commented",
    );
    assert_eq!(refs, BTreeSet::from(["Error".into(), "apply".into(), "plan".into(), "status".into()]));
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&graph), None);
    // The walls of the Wasm side.
    let inside = "use crate::plugin::grant::Denial;\nuse crate::syntax;\n// kube::Client in a comment\nlet ns = \"kube-system\";";
    assert!(breaches(inside).is_empty(), "{:?}", breaches(inside));
    let out = "use kube::Client;\nuse crate::status::MAX;\nfn f(_: k8s_openapi::ByteString) {}";
    assert_eq!(breaches(out), ["crate::status", "kube", "k8s_openapi"]);
}
