//! The shape of `host/src`, checked: three wings (the Wasm side in
//! `plugin/`, one reconcile in `reconcile/`, the controller in
//! `controller/`) on the cluster side's ground. Dependencies between rooms
//! (a wing's children, the other top-level modules) point one way: no room
//! imports a room that imports it back, directly or through others; the
//! wings call downwards only (controller → reconcile → plugin), a step of
//! the reconcile never reaches back into the paths that call it, and the
//! leaves stay leaves. How a room is cut into files is a matter of
//! cohesion, for the review of the change: a line limit would split by size.
//!
//! `floors` checks the locked versions of the sandbox's dependencies
//! against security floors; `release_workflow` checks that the release
//! workflow keeps its keys away from the code that builds.
//!
//! Run alone with `task lint` or `cargo test -p service-provider-host --test architecture`.

#[path = "architecture/floors.rs"]
mod floors;
#[path = "architecture/release_workflow.rs"]
mod release_workflow;

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

/// The three wings of the host: the Wasm side, one reconcile, the
/// controller around it. Each child of a wing is a room of its own; the
/// other top-level modules are the cluster side's ground.
const WINGS: &[&str] = &["plugin", "reconcile", "controller"];

/// The module a file defines, as a path from the crate root
/// (`reconcile/apply/copy.rs` → `reconcile::apply::copy`, a `mod.rs` its
/// folder's); empty for the crate roots.
fn module_path(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src()).expect("under src");
    let mut path: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
    let last = path.pop().expect("a file name");
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
    match stem.as_str() {
        "mod" => {}
        "lib" | "main" if path.is_empty() => {}
        _ => path.push(stem),
    }
    path
}

/// The room a module lies in: a wing's child (`reconcile::apply::copy` →
/// `reconcile/apply`), a wing's own `mod.rs`, or a top-level module; `None`
/// for the crate roots.
fn room_of_module(path: &[String]) -> Option<String> {
    let first = path.first()?;
    match path.get(1) {
        Some(second) if WINGS.contains(&first.as_str()) => Some(format!("{first}/{second}")),
        _ => Some(first.clone()),
    }
}

/// The room a referenced path (`crate::reconcile::Shared`) lands in: the
/// deepest room it names; a name the crate root re-exports (`crate::Error`)
/// is `error`'s.
fn room_of_reference(path: &[String], rooms: &BTreeSet<String>) -> Option<String> {
    let first = path.first()?;
    if let Some(second) = path.get(1)
        && WINGS.contains(&first.as_str())
        && rooms.contains(&format!("{first}/{second}"))
    {
        return Some(format!("{first}/{second}"));
    }
    Some(if rooms.contains(first) { first.clone() } else { "error".to_string() })
}

/// Code of `text` without its comment lines and without the unit tests at
/// its end (they may use whatever they test with).
fn code(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        if line.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if !line.starts_with("//") {
            code.push_str(line);
            code.push('\n');
        }
    }
    code
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses one use tree (`a::b`, `a::{self, b::{c, d}}`, `a as b`, `*`)
/// below `prefix` into the paths it names; returns the rest of `text`.
fn use_tree<'t>(text: &'t str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'t str {
    let text = text.trim_start();
    if let Some(mut rest) = text.strip_prefix('{') {
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('}') {
                return after;
            }
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
                continue;
            }
            let before = rest.len();
            rest = use_tree(rest, prefix, out);
            if rest.len() == before {
                // Not a tree (a `*`, a stray character): step over it.
                rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..];
            }
            if rest.is_empty() {
                return rest;
            }
        }
    }
    let ident: String = text.chars().take_while(|c| is_ident(*c)).collect();
    if ident.is_empty() {
        out.push(prefix.to_vec());
        return text;
    }
    let mut path = prefix.to_vec();
    if ident != "self" {
        path.push(ident.clone());
    }
    let rest = &text[ident.len()..];
    if let Some(after) = rest.strip_prefix("::") {
        return use_tree(after, &path, out);
    }
    out.push(path);
    // `x as y`: the alias names nothing new.
    match rest.trim_start().strip_prefix("as ") {
        Some(alias) => alias.trim_start().trim_start_matches(is_ident),
        None => rest,
    }
}

/// The paths the code of `file` names from the crate root: every
/// `crate::…` (groups included) and every `super::…`, resolved from the
/// file's own module.
fn references(file: &Path, text: &str) -> BTreeSet<Vec<String>> {
    let code = code(text);
    let module = module_path(file);
    let mut out = Vec::new();
    for (anchor, relative) in [("crate::", false), ("super::", true)] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(anchor) {
            // Not part of a longer path (`some_crate::`, `super::super::`).
            let before = rest[..at].chars().last();
            rest = &rest[at + anchor.len()..];
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            let mut base = if relative { module.clone() } else { Vec::new() };
            if relative {
                base.pop();
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after;
                }
            }
            rest = use_tree(rest, &base, &mut out);
        }
    }
    out.into_iter().filter(|path| !path.is_empty()).collect()
}

/// Room → the rooms its code references, for every room of the crate.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    // The binary (`src/bin/`) is the front door, a crate of its own that
    // uses the library from outside: not a room of the house.
    files.retain(|f| !f.starts_with(src().join("bin")));
    let rooms: BTreeSet<String> = files.iter().filter_map(|f| room_of_module(&module_path(f))).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = rooms.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let Some(room) = room_of_module(&module_path(file)) else { continue };
        let text = std::fs::read_to_string(file).expect("readable source file");
        for path in references(file, &text) {
            let Some(target) = room_of_reference(&path, &rooms) else { continue };
            if target != room {
                graph.get_mut(&room).expect("known room").insert(target);
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
fn rooms_have_no_circles() {
    let graph = graph();
    assert!(graph.len() > 25, "found the rooms: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import circle between host rooms: {}", cycle.join(" → "));
    }
    // The leaves stay leaves: at most the ground floor below them.
    for leaf in ["resource", "owner", "metrics", "syntax", "keys"] {
        let above: Vec<&String> = graph[leaf].iter().filter(|m| !GROUND.contains(&m.as_str())).collect();
        assert!(above.is_empty(), "{leaf} must not import from the crate but {GROUND:?}, yet uses {above:?}");
    }
}

/// What every module may use: names and apiVersions ([`syntax`]), the
/// keys of what the host keeps per instance ([`keys`]), the metrics label
/// trait.
const GROUND: &[&str] = &["syntax", "keys", "metrics"];

/// The wing a room belongs to, if any.
fn wing(room: &str) -> Option<&str> {
    let first = room.split('/').next()?;
    WINGS.iter().copied().find(|w| *w == first)
}

/// The breaches of the one-way rule between the wings in `graph`, as
/// `from → to`: nothing but the controller uses the controller; the Wasm
/// side uses no other wing; the cluster side's ground uses neither the
/// reconcile nor the controller, but `render`, which runs the reconcile's
/// steps on files.
fn wrong_way(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, targets) in graph {
        for to in targets {
            let (from_wing, to_wing) = (wing(from), wing(to));
            let wrong = match (from_wing, to_wing) {
                (Some(a), Some(b)) if a == b => false,
                (_, Some("controller")) => true,
                (Some("plugin"), _) => !GROUND.contains(&to.as_str()),
                (Some("reconcile"), Some(_)) => false,
                (None, Some("reconcile")) => from != "render",
                _ => false,
            };
            if wrong {
                found.push(format!("{from} → {to}"));
            }
        }
    }
    found
}

#[test]
fn the_wings_point_one_way() {
    let graph = graph();
    let wrong = wrong_way(&graph);
    assert!(wrong.is_empty(), "imports against the wings' one-way rule: {wrong:?}");
}

/// The rooms of `reconcile/` that are its paths, not its steps: the entry
/// point, the live, the deletion and the preview path, how an instance reaches its
/// clusters, which component reconciles it, and the whole they share (its
/// parts, such as `memory`, may be handed to a step).
const PATHS: &[&str] = &[
    "reconcile",
    "reconcile/live",
    "reconcile/deletion",
    "reconcile/preview",
    "reconcile/reach",
    "reconcile/rollout",
    "reconcile/shared",
];

/// The steps of the reconcile (`reconcile/access`, `gather`, `apply`,
/// `status`, and what they share) take named values from the paths and
/// hand named values back; none reaches into a path or the shared whole.
#[test]
fn a_step_does_not_reach_back_into_the_reconcile() {
    let graph = graph();
    let steps: Vec<&String> =
        graph.keys().filter(|room| wing(room) == Some("reconcile") && !PATHS.contains(&room.as_str())).collect();
    assert!(steps.len() >= 5, "found the steps: {steps:?}");
    for step in steps {
        let back: Vec<&String> = graph[step].iter().filter(|to| PATHS.contains(&to.as_str())).collect();
        assert!(back.is_empty(), "{step} reaches back into the reconcile's paths: {back:?}");
    }
}

/// What a file of the Wasm side breaks of its walls: a use of kube or
/// k8s-openapi, or a room outside `plugin/` but the ground floor (for the
/// sandbox, outside `plugin/sandbox`).
fn breaches(file: &Path, text: &str) -> Vec<String> {
    let code = code(text);
    let inside = if file.starts_with(src().join("plugin/sandbox")) { "plugin/sandbox" } else { "plugin" };
    let mut found: Vec<String> = references(file, text)
        .into_iter()
        .filter(|path| {
            let room = room_of_reference(path, &rooms()).unwrap_or_default();
            let within = room == inside || room.starts_with(&format!("{inside}/"));
            !within && !GROUND.contains(&room.as_str())
        })
        .map(|path| format!("crate::{}", path.join("::")))
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

fn rooms() -> BTreeSet<String> {
    graph().into_keys().collect()
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
        let breaches = breaches(file, &text);
        assert!(breaches.is_empty(), "{} reaches out of its walls: {breaches:?}", file.display());
    }
}

#[test]
fn the_checker_sees_circles_groups_and_wrong_ways() {
    let file = src().join("reconcile/apply/copy.rs");
    let text = "use crate::{Error, plugin::{self, plan::Step as S}, syntax};\n\
                use super::{budget, prune::Plan};\nuse super::super::Shared;\n\
                let x = crate::reconcile::status::now();\n// crate::commented\n\
                #[cfg(test)]\nmod tests {\n    use crate::controller::Settings;\n}";
    let paths: BTreeSet<String> = references(&file, text).into_iter().map(|p| p.join("::")).collect();
    let expected = [
        "Error",
        "plugin",
        "plugin::plan::Step",
        "syntax",
        "reconcile::apply::budget",
        "reconcile::apply::prune::Plan",
        "reconcile::Shared",
        "reconcile::status::now",
    ];
    assert_eq!(paths, expected.iter().map(|p| p.to_string()).collect::<BTreeSet<_>>());
    let rooms = rooms();
    let room = |p: &[&str]| room_of_reference(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &rooms);
    assert_eq!(room(&["reconcile", "Shared"]).as_deref(), Some("reconcile"));
    assert_eq!(room(&["reconcile", "apply", "copy"]).as_deref(), Some("reconcile/apply"));
    assert_eq!(room(&["Error"]).as_deref(), Some("error"));
    assert_eq!(module_path(&file), ["reconcile", "apply", "copy"]);
    assert_eq!(module_path(&src().join("reconcile/apply/mod.rs")), ["reconcile", "apply"]);

    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&graph), None);

    // The one-way rule between the wings.
    let edges = |pairs: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            graph.entry(from.to_string()).or_default().insert(to.to_string());
        }
        graph
    };
    let fine = edges(&[
        ("controller/run", "reconcile"),
        ("reconcile/live", "plugin/plan"),
        ("reconcile/apply", "clusters"),
        ("render", "reconcile/gather"),
        ("plugin/grant", "syntax"),
    ]);
    assert!(wrong_way(&fine).is_empty(), "{:?}", wrong_way(&fine));
    let wrong = edges(&[
        ("reconcile/live", "controller"),
        ("plugin/plan", "clusters"),
        ("stores", "reconcile/apply"),
        ("error", "reconcile/status"),
    ]);
    assert_eq!(
        wrong_way(&wrong),
        [
            "error → reconcile/status",
            "plugin/plan → clusters",
            "reconcile/live → controller",
            "stores → reconcile/apply"
        ]
    );

    // The walls of the Wasm side.
    let grant = src().join("plugin/grant/mod.rs");
    let inside = "use crate::plugin::sandbox::Limits;\nuse crate::syntax;\n// kube::Client in a comment\nlet ns = \"kube-system\";";
    assert!(breaches(&grant, inside).is_empty(), "{:?}", breaches(&grant, inside));
    let out = "use kube::Client;\nuse crate::reconcile::status::MAX;\nfn f(_: k8s_openapi::ByteString) {}";
    assert_eq!(breaches(&grant, out), ["crate::reconcile::status::MAX", "kube", "k8s_openapi"]);
    let sandbox = src().join("plugin/sandbox/mod.rs");
    let reaching = "use crate::plugin::grant::Effective;\nuse super::Error;\nuse crate::plugin::sandbox::limits::X;";
    assert_eq!(breaches(&sandbox, reaching), ["crate::plugin::Error", "crate::plugin::grant::Effective"]);
}
