//! The command blocks of the documentation, run as written.
//!
//! A page's ```` ```sh ```` blocks are what a reader types. The tests run
//! them in order, in one `bash -euo pipefail` per page, from a directory of
//! the test's (a fresh author's machine, a copy of the repository), so a
//! command a page shows that fails, or a flag that does not exist, fails
//! CI. A block a test bed cannot run says so on the line before it:
//!
//! ```text
//! <!-- ci: skip: why -->
//! ```
//!
//! and [`skipped`] lists every such block with its reason, so the tests can
//! print them. What differs from a reader's machine is a small set of
//! [`Substitutions`], named by each test: a registry address for
//! `registry.example.com`, environment variables (a kubeconfig, the
//! registry's credentials), nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directive that keeps a block from running, with its reason.
const SKIP: &str = "<!-- ci: skip:";

/// One fenced `sh` block of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The page, as the repository names it (`docs/plugin-guide.md`).
    pub page: String,
    /// The line of the opening fence (1-based).
    pub line: usize,
    /// The commands, their indentation (a block inside a list) removed.
    pub text: String,
    /// Why CI does not run it, if it does not.
    pub skip: Option<String>,
}

/// Every `sh` block of `text` (the page `page`), in order.
pub fn parse(page: &str, text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((number, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            let indent = line.len() - trimmed.len();
            let info = trimmed.trim_start_matches('`').trim();
            let mut body = Vec::new();
            for (_, inner) in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    break;
                }
                body.push(inner.get(indent..).unwrap_or(inner.trim_start()));
            }
            if info == "sh" {
                let skip = previous
                    .trim()
                    .strip_prefix(SKIP)
                    .and_then(|rest| rest.strip_suffix("-->"))
                    .map(|why| why.trim().to_string());
                blocks.push(Block { page: page.into(), line: number + 1, text: body.join("\n"), skip });
            }
            previous = "";
            continue;
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    blocks
}

/// The `sh` blocks of the repository's `page`.
pub fn page(page: &str) -> Vec<Block> {
    let path = crate::plugins::root().join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(page, &text)
}

/// The blocks CI does not run, as `page:line: reason` lines.
pub fn skipped(blocks: &[Block]) -> Vec<String> {
    blocks.iter().filter_map(|b| Some(format!("{}:{}: {}", b.page, b.line, b.skip.as_deref()?))).collect()
}

/// What a test bed puts in place of a reader's machine: text replaced in
/// the commands, and environment variables set for them.
#[derive(Debug, Clone, Default)]
pub struct Substitutions {
    pub text: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

impl Substitutions {
    pub fn text(mut self, from: &str, to: &str) -> Self {
        self.text.push((from.into(), to.into()));
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    fn apply(&self, text: &str) -> String {
        self.text.iter().fold(text.to_string(), |text, (from, to)| text.replace(from, to))
    }
}

/// The script a page's runnable blocks make: each announced on stderr with
/// its place, so a failure names the block it happened in.
pub fn script(blocks: &[Block], substitutions: &Substitutions) -> String {
    let mut script = String::from("set -euo pipefail\n");
    for block in blocks.iter().filter(|b| b.skip.is_none()) {
        script.push_str(&format!("echo {} >&2\n", shell_quoted(&format!("::docs {}:{}", block.page, block.line))));
        script.push_str(&substitutions.apply(&block.text));
        script.push('\n');
    }
    script
}

/// `text` as one word of a shell command.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Runs the runnable `blocks` in `dir` with `env` (a reader's environment)
/// and the substitutions; panics naming the block that failed, with its
/// output.
pub fn run(blocks: &[Block], dir: &Path, env: &[(String, String)], substitutions: &Substitutions) -> Output {
    assert!(blocks.iter().any(|b| b.skip.is_none()), "no block to run in {blocks:?}");
    let script = script(blocks, substitutions);
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(substitutions.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("bash runs");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let failed = stderr.lines().rev().find_map(|l| l.strip_prefix("::docs ")).unwrap_or("before any block");
        panic!(
            "the documented commands of {failed} failed ({}):\n--- stdout\n{}\n--- stderr\n{stderr}\n--- script\n{script}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    out
}

/// A directory to run a page in: holds nothing, or what a test copies in.
pub fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().expect("a scratch directory")
}

/// Copies the repository's directories `dirs` into `to`, with `replace`'s
/// text substitutions in every file (the files a page's commands apply).
pub fn copy_tree(dirs: &[&str], to: &Path, substitutions: &Substitutions) {
    for dir in dirs {
        let mut pending = vec![crate::plugins::root().join(dir)];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display())) {
                let path = entry.unwrap().path();
                let relative = path.strip_prefix(crate::plugins::root()).unwrap();
                if path.is_dir() {
                    // What a build put beside the sources is not the page's.
                    if BUILT.iter().any(|b| path.file_name().is_some_and(|n| n == *b)) {
                        continue;
                    }
                    std::fs::create_dir_all(to.join(relative)).unwrap();
                    pending.push(path);
                } else {
                    std::fs::create_dir_all(to.join(relative).parent().unwrap()).unwrap();
                    let bytes = std::fs::read(&path).unwrap();
                    match String::from_utf8(bytes) {
                        Ok(text) => std::fs::write(to.join(relative), substitutions.apply(&text)).unwrap(),
                        Err(binary) => std::fs::write(to.join(relative), binary.into_bytes()).unwrap(),
                    }
                }
            }
        }
    }
}

/// Build outputs inside the copied folders (the TypeScript example's
/// packages and bundle), left out of a copy.
const BUILT: &[&str] = &["node_modules", "dist", "target"];

/// `path` relative to the repository's root.
pub fn in_repository(path: &str) -> PathBuf {
    crate::plugins::root().join(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_with_their_line_indentation_and_skip_reason() {
        let page = "# T\n\n```sh\necho one\n```\n\n1. a step\n\n   ```sh\n   echo two \\\n     --flag\n   ```\n\n<!-- ci: skip: needs a forge -->\n```sh\ngit push\n```\n\n```text\nnot run\n```\n";
        let blocks = parse("t.md", page);
        assert_eq!(blocks.len(), 3, "{blocks:#?}");
        assert_eq!((blocks[0].line, blocks[0].text.as_str(), blocks[0].skip.as_deref()), (3, "echo one", None));
        assert_eq!(blocks[1].text, "echo two \\\n  --flag");
        assert_eq!(blocks[2].skip.as_deref(), Some("needs a forge"));
        assert_eq!(skipped(&blocks), ["t.md:15: needs a forge"]);
        let substitutions = Substitutions::default().text("two", "2");
        let script = script(&blocks, &substitutions);
        assert!(script.contains("echo 2") && !script.contains("git push"), "{script}");
    }

    #[test]
    fn a_failing_block_is_named() {
        let blocks = parse("the author's t.md", "```sh\ntrue\n```\n\n```sh\nfalse\n```\n");
        let dir = scratch("docs-test-");
        let env = [("PATH".to_string(), std::env::var("PATH").unwrap())];
        let failed = std::panic::catch_unwind(|| run(&blocks, dir.path(), &env, &Substitutions::default()));
        let message = *failed.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("of the author's t.md:5 failed"), "{message}");
    }
}
