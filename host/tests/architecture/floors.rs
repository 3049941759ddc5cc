//! Security floors of the dependencies the sandbox rests on: the version
//! in `Cargo.lock` of each crate below must be at least the one named,
//! the first of its line with the fixes for the advisories given. The
//! advisory database itself is not reachable offline where CI runs, so a
//! fix that must not be lost again is pinned here, with its reason, when
//! the dependency is updated for it.

use std::path::PathBuf;

/// Crate, the lowest version allowed, and why.
const FLOORS: &[(&str, &str, &str)] = &[
    (
        "wasmtime",
        "48.0.10",
        "48.0.9 fixed the 48 LTS line's advisories, among them ones for builds without the gc and \
         threads features (ours); 48.0.11 is not served by the registry here: its \
         wasmtime-internal-wit-bindgen is missing",
    ),
    ("wasmtime-environ", "48.0.10", "compiled with wasmtime: its validation is part of the same fixes"),
    ("cranelift-codegen", "0.135.10", "the code generator of wasmtime 48.0.10"),
];

/// Every locked version of each package in a `Cargo.lock` (a package can
/// be locked at several versions).
fn locked(lock: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut name = None;
    for line in lock.lines() {
        if line == "[[package]]" {
            name = None;
        } else if let Some(value) = line.strip_prefix("name = ") {
            name = Some(value.trim_matches('"').to_string());
        } else if let (Some(value), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            out.push((n, value.trim_matches('"').to_string()));
        }
    }
    out
}

/// `major.minor.patch` as numbers; a pre-release sorts as its release's
/// predecessor (`48.0.10-rc.1` is below `48.0.10`).
fn version(text: &str) -> (u64, u64, u64, bool) {
    let (core, pre) = match text.split_once('-') {
        Some((core, _)) => (core, true),
        None => (text, false),
    };
    let mut parts = core.split('.').map(|p| p.parse::<u64>().unwrap_or_else(|_| panic!("version {text}")));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next(), !pre)
}

fn below_floor(lock: &str) -> Vec<String> {
    let mut found = Vec::new();
    let locked = locked(lock);
    for (krate, floor, why) in FLOORS {
        let versions: Vec<&String> = locked.iter().filter(|(n, _)| n == krate).map(|(_, v)| v).collect();
        assert!(!versions.is_empty(), "{krate} has a floor but is not in Cargo.lock: drop its floor");
        for v in versions {
            if version(v) < version(floor) {
                found.push(format!("{krate} {v} is below {floor}: {why}"));
            }
        }
    }
    found
}

#[test]
fn the_lock_holds_no_version_below_a_security_floor() {
    let lock = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    let lock = std::fs::read_to_string(&lock).expect("Cargo.lock");
    let below = below_floor(&lock);
    assert!(below.is_empty(), "update these dependencies:\n{}", below.join("\n"));
}

#[test]
fn the_floor_check_sees_an_old_wasmtime() {
    let lock = "[[package]]\nname = \"wasmtime\"\nversion = \"48.0.8\"\n\n[[package]]\nname = \"wasmtime-environ\"\nversion = \"48.0.10\"\n\n[[package]]\nname = \"cranelift-codegen\"\nversion = \"0.135.10\"\n";
    let below = below_floor(lock);
    assert_eq!(below.len(), 1, "{below:?}");
    assert!(below[0].starts_with("wasmtime 48.0.8 is below 48.0.10"), "{below:?}");
    assert!(version("48.0.10-rc.1") < version("48.0.10"));
    assert!(version("48.0.10") < version("48.0.11"));
    assert!(version("49.0.0") > version("48.0.11"));
}
