//! The release's supply chain, checked statically: GitHub Actions does not
//! run where the tests run, so `.github/workflows/release.yaml` and the
//! phases of `scripts/release.sh` it calls are read and held to these rules
//! (docs/releasing.md says why each exists):
//!
//! - **Pinned actions.** Every `uses:` names a commit (40 hex digits), with
//!   the release it is as a `# vX.Y.Z` comment.
//! - **Strict tags.** Only a tag `v0.MINOR.PATCH` triggers the workflow; a
//!   job `check` matches it against `Cargo.toml`, `CHANGELOG.md` and the
//!   default branch, and every other job needs `check`.
//! - **Keys only where nothing builds.** A job is privileged when it names a
//!   secret, has an environment (whose secrets it gets), or may write
//!   anything (`id-token`, `packages`, `contents`, `attestations`, ...). A
//!   privileged job runs only the programs of [`PRIVILEGED_PROGRAMS`], the
//!   actions of [`PRIVILEGED_ACTIONS`], and the phases `publish` and `sdks`
//!   of `scripts/release.sh`, whose code holds no build command. Everything
//!   else (cargo, npm, pip, Go, rustup, apt, buildah builds, any other
//!   script) counts as building: a job `build` does it, with read
//!   permissions and no secret, and the privileged jobs need it.
//! - **Signed, with the transparency log.** No cosign call turns the log
//!   off, except the dry run's offline signing in the script; every file of
//!   the forge release goes out with its cosign bundle `<file>.sigstore.json`;
//!   build provenance is attested for the files and for the image index.
//!
//! The rules read commands as words, not as a shell would: they hold the
//! workflow to a plain style (one command per line or `&&`/`||`/`;`/`|`
//! chain), and anything they cannot place is treated as building.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Programs a privileged job may run, with the subcommands allowed (`None`:
/// any). None of them builds or fetches code.
const PRIVILEGED_PROGRAMS: &[(&str, Option<&[&str]>)] = &[
    ("mkdir", None),
    ("printf", None),
    ("echo", None),
    ("cat", None),
    ("rm", None),
    ("cd", None),
    ("umask", None),
    ("awk", None),
    ("sha256sum", None),
    ("test", None),
    ("[", None),
    ("exit", None),
    ("true", None),
    ("buildah", Some(&["login"])),
    ("git", Some(&["tag", "push"])),
    ("gh", Some(&["release"])),
    ("cosign", Some(&["sign", "sign-blob", "verify", "verify-blob", "public-key"])),
];

/// Actions a privileged job may use: none of them builds.
const PRIVILEGED_ACTIONS: &[&str] = &[
    "actions/checkout",
    "actions/download-artifact",
    "actions/upload-artifact",
    "sigstore/cosign-installer",
    "actions/attest-build-provenance",
];

/// The phases of `scripts/release.sh` a privileged job may run.
const PRIVILEGED_PHASES: &[&str] = &["publish", "sdks"];

/// What counts as building in the code of those phases, with the two
/// commands that look like it and do not build (`cargo publish
/// --no-verify`, `npm publish --ignore-scripts`).
const BUILD_WORDS: &[&str] = &[
    "cargo",
    "rustup",
    "npm",
    "npx",
    "pip",
    "pip3",
    "python",
    "python3",
    "go",
    "make",
    "scripts/task",
    "build-image.sh",
    "build-host-binary.sh",
    "build-flux-bins.sh",
    "cached-tool.sh",
    "apt-get",
    "apt",
    "curl",
    "wget",
];

/// The only trigger: a tag `v0.MINOR.PATCH` (GitHub's filter syntax; `check`
/// refuses leading zeros).
const TAG_PATTERN: &str = "v0.[0-9]+.[0-9]+";
/// The expression `check` tests the tag with.
const TAG_REGEX: &str = r"^v0\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `${…}` replaced by `$V`, and single-quoted text by `'Q'`, so that their
/// braces and bars are not read as the shell's.
fn neutralise(script: &str) -> String {
    let mut out = String::new();
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek() == Some(&'{') => {
                let mut depth = 0;
                for d in chars.by_ref() {
                    match d {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                out.push_str("$V");
            }
            '\'' => {
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
                out.push_str("'Q'");
            }
            _ => out.push(c),
        }
    }
    out
}

/// The commands of a shell script, each as its words (quotes dropped,
/// leading `sudo`, keywords and `NAME=value` assignments skipped).
fn commands(script: &str) -> Vec<Vec<String>> {
    let joined = script.replace("\\\n", " ");
    let lines: Vec<&str> = joined.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    let text = neutralise(&lines.join("\n"));
    let mut out = Vec::new();
    let separators = ["$(", "&&", "||", "\n", ";", "|", "(", ")", "{", "}", "`"];
    let mut segments = vec![text.as_str()];
    for sep in separators {
        segments = segments.into_iter().flat_map(|s| s.split(sep)).collect();
    }
    for segment in segments {
        let mut words = Vec::new();
        let mut raw = segment.split_whitespace();
        while let Some(word) = raw.next() {
            // Redirections are no words of the command: `>f`, `2>&1`, `<<<"$x"`, `> f`.
            let redirect = word.trim_start_matches(|c: char| c.is_ascii_digit());
            if redirect.starts_with(['>', '<']) {
                if redirect.trim_start_matches(['>', '<', '&']).is_empty() {
                    raw.next();
                }
                continue;
            }
            let word = word.trim_matches(|c| c == '"' || c == '\'');
            if !word.is_empty() {
                words.push(word.to_string());
            }
        }
        while let Some(first) = words.first() {
            let assignment = first.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            let keyword = ["sudo", "exec", "time", "!", "if", "then", "else", "elif", "fi", "do", "done", "while"]
                .contains(&first.as_str());
            if assignment || keyword {
                words.remove(0);
            } else {
                break;
            }
        }
        if !words.is_empty() {
            out.push(words);
        }
    }
    out
}

/// Why a command may not run in a privileged job, if it may not.
fn refused_in_privileged(words: &[String]) -> Option<String> {
    let program = words[0].as_str();
    let script = match program {
        "bash" | "sh" => words.get(1).map(String::as_str),
        _ => Some(program),
    };
    if script == Some("scripts/release.sh") {
        let at = if program == "scripts/release.sh" { 1 } else { 2 };
        let phase = words.get(at).map(String::as_str).unwrap_or("");
        return (!PRIVILEGED_PHASES.contains(&phase)).then(|| format!("scripts/release.sh {phase}"));
    }
    match PRIVILEGED_PROGRAMS.iter().find(|(name, _)| *name == program) {
        None => Some(words.join(" ")),
        Some((_, None)) => None,
        Some((_, Some(subcommands))) => {
            let sub = words.get(1).map(String::as_str).unwrap_or("");
            (!subcommands.contains(&sub)).then(|| words.join(" "))
        }
    }
}

fn text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn steps(job: &Value) -> Vec<&Value> {
    job.get("steps").and_then(Value::as_array).map(|s| s.iter().collect()).unwrap_or_default()
}

/// `owner/repo` of an action reference (`owner/repo/path@ref`).
fn action_name(uses: &str) -> String {
    let name = uses.split('@').next().unwrap_or("");
    name.split('/').take(2).collect::<Vec<_>>().join("/")
}

/// Why a job is privileged (empty when it is not).
fn privileges(job: &Value, workflow_permissions: Option<&Value>) -> Vec<String> {
    let mut why = Vec::new();
    if text(job).contains("secrets.") {
        why.push("names a secret".to_string());
    }
    if job.get("environment").is_some() {
        why.push("has an environment".to_string());
    }
    match job.get("permissions").or(workflow_permissions) {
        Some(Value::Object(map)) => {
            for (scope, level) in map {
                if level.as_str() == Some("write") {
                    why.push(format!("may write {scope}"));
                }
            }
        }
        Some(Value::String(all)) if all == "write-all" => why.push("may write everything".to_string()),
        _ => {}
    }
    why
}

/// The jobs a job needs, directly.
fn needs(job: &Value) -> Vec<String> {
    match job.get("needs") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).map(String::from).collect(),
        _ => Vec::new(),
    }
}

/// Every job a job needs, through the others.
fn needs_all(jobs: &serde_json::Map<String, Value>, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(next) = todo.pop() {
        for need in jobs.get(&next).map(needs).unwrap_or_default() {
            if seen.insert(need.clone()) {
                todo.push(need);
            }
        }
    }
    seen
}

/// The functions of a shell script: name → body.
fn functions(script: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in script.lines() {
        if let Some((name, body)) = current.as_mut() {
            if line == "}" {
                out.insert(name.clone(), std::mem::take(body));
                current = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
        } else if let Some(name) = line.strip_suffix("() {")
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            current = Some((name.to_string(), String::new()));
        }
    }
    out
}

/// Build commands in the code a privileged phase of the script runs: the
/// phase's function and every function it calls, transitively.
fn script_problems(script: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let functions = functions(script);
    for phase in PRIVILEGED_PHASES {
        if !functions.contains_key(*phase) {
            problems.push(format!("scripts/release.sh has no function {phase}()"));
            continue;
        }
        let mut seen = BTreeSet::new();
        let mut todo = vec![phase.to_string()];
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let body = &functions[&name];
            for words in commands(body) {
                let program = words[0].rsplit('/').next().unwrap_or("").to_string();
                let path_like = words[0].as_str();
                let sub = words.get(1).map(String::as_str).unwrap_or("");
                let allowed = (program == "cargo" && sub == "publish" && words.iter().any(|w| w == "--no-verify"))
                    || (program == "npm" && sub == "publish" && words.iter().any(|w| w == "--ignore-scripts"));
                let scripted =
                    words.iter().take(2).any(|w| BUILD_WORDS.iter().any(|b| w == b || w.ends_with(&format!("/{b}"))));
                let builds = BUILD_WORDS.contains(&program.as_str())
                    || BUILD_WORDS.contains(&path_like)
                    || scripted
                    || (program == "buildah" && ["bud", "build", "from", "run", "commit"].contains(&sub));
                if builds && !allowed {
                    problems.push(format!(
                        "scripts/release.sh {phase} runs `{}` (in {name}()): a phase with keys builds nothing",
                        words.join(" ")
                    ));
                }
            }
            // A function runs where it is a command's first word.
            todo.extend(commands(body).into_iter().map(|w| w[0].clone()).filter(|w| functions.contains_key(w)));
        }
    }
    // The transparency log is off only for the dry run's offline signing.
    let lines: Vec<&str> = script.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("--tlog-upload=false") {
            let dry_branch = line.trim_start().starts_with("offline_signing=(")
                && lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .is_some_and(|l| l.trim() == r#"if [ "$dry_run" = 1 ]; then"#);
            if !dry_branch {
                problems.push(format!(
                    "scripts/release.sh line {} turns cosign's transparency log off outside the dry run",
                    i + 1
                ));
            }
        }
        if line.contains("sign-blob") && !line.contains("--bundle") {
            problems.push(format!("scripts/release.sh line {}: sign-blob without a --bundle", i + 1));
        }
    }
    problems
}

/// Every `uses:` line pinned to a commit, with its release in a comment.
fn pin_problems(workflow: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in workflow.lines().enumerate() {
        let trimmed = line.trim_start().trim_start_matches("- ").trim_start();
        let Some(rest) = trimmed.strip_prefix("uses:") else { continue };
        let (reference, comment) = rest.split_once('#').unwrap_or((rest, ""));
        let reference = reference.trim().trim_matches(|c| c == '"' || c == '\'');
        let commit = reference.rsplit_once('@').map(|(_, c)| c).unwrap_or("");
        let pinned = commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
        let release = comment.trim();
        let tagged = release.strip_prefix('v').is_some_and(|v| {
            let parts: Vec<&str> = v.split('.').collect();
            parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        });
        if !pinned || !tagged {
            problems.push(format!(
                "line {}: `uses: {reference}` is not pinned to a commit with its release as `# vX.Y.Z`",
                i + 1
            ));
        }
    }
    problems
}

/// Every problem of the workflow (and of the script phases it runs).
fn problems(workflow_text: &str, script: &str) -> Vec<String> {
    let mut problems = pin_problems(workflow_text);
    for bad in ["tlog-upload=false", "insecure-ignore-tlog", "DRY_RUN"] {
        if workflow_text.contains(bad) {
            problems.push(format!("the workflow contains {bad}: a release signs with the transparency log"));
        }
    }
    let workflow: Value = match serde_saphyr::from_str(workflow_text) {
        Ok(w) => w,
        Err(e) => return vec![format!("the workflow does not parse: {e}")],
    };

    // The trigger: push of a tag v0.MINOR.PATCH, nothing else.
    let trigger = workflow.get("on");
    let tags = trigger.and_then(|on| on.get("push")).and_then(|push| push.get("tags"));
    let only_tags = trigger.and_then(Value::as_object).is_some_and(|on| on.len() == 1)
        && trigger.and_then(|on| on.get("push")).and_then(Value::as_object).is_some_and(|push| push.len() == 1);
    let strict = tags.and_then(Value::as_array).is_some_and(|t| t.len() == 1 && t[0].as_str() == Some(TAG_PATTERN));
    if !(only_tags && strict) {
        problems.push(format!("the workflow must run on `push: tags: [\"{TAG_PATTERN}\"]` only, not {:?}", trigger));
    }

    let workflow_permissions = workflow.get("permissions");
    let read_only = |permissions: Option<&Value>| match permissions {
        Some(Value::Object(map)) => map.values().all(|v| matches!(v.as_str(), Some("read" | "none"))),
        Some(Value::String(all)) => all == "read-all",
        _ => false,
    };
    if !read_only(workflow_permissions) {
        problems.push("the workflow's default permissions must be read-only (`permissions: {}`)".into());
    }

    let Some(jobs) = workflow.get("jobs").and_then(Value::as_object) else {
        problems.push("the workflow has no jobs".into());
        return problems;
    };

    // The tag's check.
    match jobs.get("check") {
        None => problems.push("no job `check` verifies the tag".into()),
        Some(check) => {
            let runs: String = steps(check).iter().filter_map(|s| str_at(s, "run")).collect::<Vec<_>>().join("\n");
            for needed in [TAG_REGEX, "Cargo.toml", "CHANGELOG.md", "merge-base --is-ancestor"] {
                if !runs.contains(needed) {
                    problems.push(format!("job `check` does not test the tag with `{needed}`"));
                }
            }
            let full_history = steps(check).iter().any(|s| {
                str_at(s, "uses").is_some_and(|u| action_name(u) == "actions/checkout")
                    && s.get("with").and_then(|w| w.get("fetch-depth")).is_some_and(|d| d.as_i64() == Some(0))
            });
            if !full_history {
                problems.push("job `check` must check out with `fetch-depth: 0` to see the default branch".into());
            }
        }
    }

    // Build and privileges.
    let mut built = false;
    for (name, job) in jobs {
        if name != "check" && !needs_all(jobs, name).contains("check") {
            problems.push(format!("job `{name}` does not need `check`"));
        }
        let privileged = privileges(job, workflow_permissions);
        let mut builds = Vec::new();
        for step in steps(job) {
            if let Some(uses) = str_at(step, "uses") {
                let action = action_name(uses);
                if !PRIVILEGED_ACTIONS.contains(&action.as_str()) {
                    builds.push(format!("uses {action}"));
                }
                if action == "sigstore/cosign-installer"
                    && step.get("with").and_then(|w| str_at(w, "cosign-release")) == Some("main")
                {
                    problems.push(format!("job `{name}` builds cosign from source (cosign-release: main)"));
                }
            }
            if let Some(run) = str_at(step, "run") {
                builds.extend(commands(run).iter().filter_map(|words| refused_in_privileged(words)));
            }
        }
        if job.get("uses").is_some() {
            builds.push("calls a reusable workflow".into());
        }
        if !privileged.is_empty() && !builds.is_empty() {
            problems.push(format!(
                "job `{name}` {} and runs what may build: {}",
                privileged.join(", "),
                builds.join("; ")
            ));
        }
        if name != "build" && !privileged.is_empty() && !needs_all(jobs, name).contains("build") {
            problems.push(format!("job `{name}` {} but does not need `build`", privileged.join(", ")));
        }
        if name == "build" {
            built = true;
            if !privileged.is_empty() {
                problems
                    .push(format!("job `build` {}: it must hold no secret and write nothing", privileged.join(", ")));
            }
            if !job.get("permissions").is_some_and(|p| read_only(Some(p))) {
                problems.push("job `build` must state read-only permissions".into());
            }
            let uploads = steps(job)
                .iter()
                .any(|s| str_at(s, "uses").is_some_and(|u| action_name(u) == "actions/upload-artifact"));
            if !uploads {
                problems.push("job `build` hands over nothing (actions/upload-artifact)".into());
            }
        }
    }
    if !built {
        problems.push("no job `build` builds the artifacts apart from the keys".into());
    }

    // Provenance: for the files and for the image index, by a job that may.
    let attest: Vec<(&String, &Value)> = jobs
        .iter()
        .flat_map(|(name, job)| steps(job).into_iter().map(move |s| (name, s)))
        .filter(|(_, s)| str_at(s, "uses").is_some_and(|u| action_name(u) == "actions/attest-build-provenance"))
        .collect();
    let with = |s: &Value, key: &str| s.get("with").and_then(|w| w.get(key)).is_some();
    if !attest.iter().any(|(_, s)| with(s, "subject-checksums") || with(s, "subject-path")) {
        problems.push("no build provenance is attested for the release's files".into());
    }
    if !attest.iter().any(|(_, s)| {
        with(s, "subject-digest") && s.get("with").and_then(|w| w.get("push-to-registry")) == Some(&Value::Bool(true))
    }) {
        problems.push("no build provenance is attested for the image index (subject-digest, push-to-registry)".into());
    }
    for (name, _) in &attest {
        let permissions = jobs[*name].get("permissions");
        for scope in ["id-token", "attestations"] {
            if permissions.and_then(|p| str_at(p, scope)) != Some("write") {
                problems.push(format!("job `{name}` attests provenance without `{scope}: write`"));
            }
        }
    }

    // The forge release: every file with its cosign bundle.
    let mut released = false;
    for job in jobs.values() {
        for run in steps(job).iter().filter_map(|s| str_at(s, "run")) {
            for words in commands(run) {
                if words.len() < 3 || words[0] != "gh" || words[1] != "release" || words[2] != "create" {
                    continue;
                }
                released = true;
                let mut files = Vec::new();
                let mut args = words[3..].iter();
                let mut tag = None;
                while let Some(arg) = args.next() {
                    if arg.starts_with('-') {
                        let takes_value = !arg.contains('=')
                            && ["--title", "-t", "--notes", "-n", "--notes-file", "-F", "--target", "--repo", "-R"]
                                .contains(&arg.as_str());
                        if takes_value {
                            args.next();
                        }
                    } else if tag.is_none() {
                        tag = Some(arg);
                    } else {
                        files.push(arg.as_str());
                    }
                }
                if files.is_empty() {
                    problems.push("the forge release names no files".into());
                }
                for file in &files {
                    if file.contains(['*', '?', '{', '[']) {
                        problems.push(format!("the forge release's file {file} is a pattern: name each file"));
                    } else if !file.ends_with(".sigstore.json")
                        && !files.contains(&format!("{file}.sigstore.json").as_str())
                    {
                        problems.push(format!("the forge release's file {file} goes out without {file}.sigstore.json"));
                    }
                }
                if !files.contains(&"SHA256SUMS") {
                    problems.push("the forge release has no SHA256SUMS".into());
                }
            }
        }
    }
    if !released {
        problems.push("no job makes the forge release (gh release create)".into());
    }

    problems.extend(script_problems(script));
    problems
}

#[test]
fn the_release_workflow_keeps_keys_away_from_builds() {
    let workflow = std::fs::read_to_string(root().join(".github/workflows/release.yaml")).expect("release.yaml");
    let script = std::fs::read_to_string(root().join("scripts/release.sh")).expect("scripts/release.sh");
    let problems = problems(&workflow, &script);
    assert!(problems.is_empty(), "the release workflow breaks its rules:\n{}", problems.join("\n"));
}

/// One job doing everything, as the workflow once did.
const ONE_JOB: &str = r#"
name: release
on:
  push:
    tags: ["v0.*"]
permissions:
  contents: write
  packages: write
jobs:
  release:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - run: rustup target add wasm32-wasip2
      - env:
          COSIGN_PRIVATE_KEY: ${{ secrets.COSIGN_PRIVATE_KEY }}
        run: |
          scripts/task release VERSION="${GITHUB_REF_NAME#v}"
          cosign sign --key k --tlog-upload=false "$image"
      - run: gh release create "$GITHUB_REF_NAME" --title x kro.wasm SHA256SUMS
"#;

const SCRIPT: &str = "publish() {\n  sign_file x\n}\nsign_file() {\n  \"$cosign\" sign-blob --bundle \"$1.sigstore.json\" \"$1\"\n}\nsdks() {\n  cargo publish --no-verify -p sdk\n}\n";

#[test]
fn the_check_refuses_one_job_with_keys_and_builds() {
    let problems = problems(ONE_JOB, SCRIPT);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("`uses: actions/checkout@v4` is not pinned"), "{problems:#?}");
    assert!(has("tags: [\"v0.[0-9]+.[0-9]+\"]"), "{problems:#?}");
    assert!(has("default permissions must be read-only"), "{problems:#?}");
    assert!(has("job `release` names a secret, may write contents, may write packages and runs what may build"));
    assert!(has("rustup target add wasm32-wasip2"), "{problems:#?}");
    assert!(has("no job `build`"), "{problems:#?}");
    assert!(has("no job `check`"), "{problems:#?}");
    assert!(has("contains tlog-upload=false"), "{problems:#?}");
    assert!(has("kro.wasm goes out without kro.wasm.sigstore.json"), "{problems:#?}");
    assert!(has("no build provenance is attested for the release's files"), "{problems:#?}");
}

#[test]
fn the_check_refuses_a_build_in_a_phase_with_keys() {
    let script = "publish() {\n  push\n}\npush() {\n  bash scripts/build-image.sh\n}\nsdks() {\n  cargo publish -p sdk\n  npm publish x.tgz\n}\nif [ \"$x\" ]; then\n  sign=(--tlog-upload=false)\nfi\n";
    let problems = script_problems(script);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("publish runs `bash scripts/build-image.sh` (in push())"), "{problems:#?}");
    assert!(has("sdks runs `cargo publish -p sdk`"), "{problems:#?}");
    assert!(has("sdks runs `npm publish x.tgz`"), "{problems:#?}");
    assert!(has("line 12 turns cosign's transparency log off"), "{problems:#?}");
    assert!(script_problems(SCRIPT).is_empty());
}

#[test]
fn commands_are_read_word_by_word() {
    let words = commands("A=1 sudo apt-get install -y x && echo \"$(cat f)\" | awk '{print $1; exit}'\n");
    let programs: Vec<&str> = words.iter().map(|w| w[0].as_str()).collect();
    assert_eq!(programs, ["apt-get", "echo", "cat", "awk"]);
    assert!(refused_in_privileged(&commands("bash scripts/release.sh build 0.2.0")[0]).is_some());
    assert!(refused_in_privileged(&commands("bash scripts/release.sh publish 0.2.0 r")[0]).is_none());
    assert!(refused_in_privileged(&commands("git push origin x")[0]).is_none());
    assert!(refused_in_privileged(&commands("git submodule update")[0]).is_some());
}
