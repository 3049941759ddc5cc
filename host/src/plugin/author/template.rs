//! `plugin new`: a plugin to start from, in one command. Each language's
//! template (`host/templates/<lang>` and `shared/`) is a working plugin: its CRDs, its
//! grant, native tests, shared cases (`testdata/cases.json`, the same for
//! every language), a build that needs the language's toolchain, the
//! published SDK and this CLI, and the files `render` takes.

use std::path::{Path, PathBuf};

/// The languages a plugin can be started in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Rust,
    Go,
    Ts,
}

macro_rules! files {
    ($lang:literal: $($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../../templates/", $lang, "/", $path)))),*]
    };
}

const SHARED: &[(&str, &str)] = files!("shared":
    "testdata/cases.json",
    "crds/__PLURAL__.__GROUP__.yaml",
    "crds/providerconfigs.__GROUP__.yaml",
    "examples/__NAME__.yaml",
    "examples/provider-config.yaml",
    "grant.yaml",
);

const RUST: &[(&str, &str)] = files!("rust":
    "Cargo.toml", "src/lib.rs", "tests/shared.rs", "README.md", ".gitignore",
);

const GO: &[(&str, &str)] = files!("go":
    "go.mod", "main.go", "main_test.go", "build.sh", "README.md", ".gitignore",
);

const TS: &[(&str, &str)] = files!("ts":
    "package.json", "tsconfig.json", "crds.mjs", "src/plugin.ts", "src/plugin.test.ts", "README.md", ".gitignore",
);

/// Why a plugin could not be started.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error(
        "{name:?} cannot name a plugin: use 1 to 40 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
    )]
    Name { name: String },
    #[error(
        "{group:?} is not an API group: a DNS subdomain of lowercase letters, digits, '-' and '.' with at least one '.'"
    )]
    Group { group: String },
    #[error("{} exists and is not empty; choose another directory (--dir)", path.display())]
    NotEmpty { path: PathBuf },
    #[error(
        "{} holds no {what} (a clone of service-provider-host, or the SDK's own directory, is expected)",
        path.display()
    )]
    NoSdk { path: PathBuf, what: &'static str },
    #[error("writing {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The names a template's placeholders stand for, from the plugin's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// `hello-world`: the plugin's `describe().name`, crate or module.
    pub name: String,
    /// `HelloWorld`: the service kind.
    pub kind: String,
    /// `helloworld` and `helloworlds`: the kind's REST names.
    pub singular: String,
    pub plural: String,
    /// `hello-world.services.example.com`: the API group, to be replaced
    /// by one of the author's domain.
    pub group: String,
    /// `hello_world`: the Rust library (and component file) name.
    pub crate_name: String,
}

impl Names {
    pub fn of(name: &str) -> Result<Names, NewError> {
        let valid = (1..=40).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(NewError::Name { name: name.to_string() });
        }
        let kind = name
            .split('-')
            .filter(|part| !part.is_empty())
            .map(|part| {
                let mut chars = part.chars();
                chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
            })
            .collect();
        let singular = name.replace('-', "");
        Ok(Names {
            name: name.to_string(),
            kind,
            plural: format!("{singular}s"),
            singular,
            group: format!("{name}.services.example.com"),
            crate_name: name.replace('-', "_"),
        })
    }

    /// These names in API group `group` (one of the author's domain)
    /// instead of `<name>.services.example.com`.
    pub fn in_group(mut self, group: &str) -> Result<Names, NewError> {
        if !crate::syntax::api_group(group) || !group.contains('.') {
            return Err(NewError::Group { group: group.to_string() });
        }
        self.group = group.to_string();
        Ok(self)
    }

    fn fill(&self, text: &str) -> String {
        text.replace("__NAME__", &self.name)
            .replace("__KIND__", &self.kind)
            .replace("__SINGULAR__", &self.singular)
            .replace("__PLURAL__", &self.plural)
            .replace("__GROUP__", &self.group)
            .replace("__CRATE__", &self.crate_name)
    }
}

/// The files of a new plugin: relative path and content.
pub fn files(language: Language, names: &Names) -> Vec<(PathBuf, String)> {
    let own = match language {
        Language::Rust => RUST,
        Language::Go => GO,
        Language::Ts => TS,
    };
    SHARED.iter().chain(own).map(|(path, text)| (PathBuf::from(names.fill(path)), names.fill(text))).collect()
}

/// Where a new plugin's SDK comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// Its registry: crates.io, the Go module proxy, npmjs.com.
    Published,
    /// A directory on this machine: a clone of this repository (its
    /// `sdk/`, `sdk-go/` or `sdk-ts/`), or the SDK's own directory (an
    /// unpacked release artifact); before a version is published, or to try
    /// an unreleased one.
    Local(PathBuf),
}

/// What names the SDK of `language` in a directory: its manifest, and a
/// line the manifest has.
fn sdk_manifest(language: Language) -> (&'static str, &'static str, &'static str) {
    match language {
        Language::Rust => ("sdk", "Cargo.toml", "name = \"service-provider-sdk\""),
        Language::Go => ("sdk-go", "go.mod", "module open-control-plane.io/service-provider-host/sdk-go"),
        Language::Ts => ("sdk-ts", "package.json", "\"name\": \"@open-control-plane/service-provider-sdk\""),
    }
}

/// The absolute directory of `language`'s SDK at `path`: `path` itself if
/// it is that SDK, else its subdirectory in a clone.
pub fn local_sdk(language: Language, path: &Path) -> Result<PathBuf, NewError> {
    let (subdirectory, manifest, line) = sdk_manifest(language);
    let is_sdk = |dir: &Path| std::fs::read_to_string(dir.join(manifest)).is_ok_and(|text| text.contains(line));
    let found = [path.to_path_buf(), path.join(subdirectory)].into_iter().find(|dir| is_sdk(dir));
    let what = match language {
        Language::Rust => "Rust SDK (sdk/Cargo.toml)",
        Language::Go => "Go SDK (sdk-go/go.mod)",
        Language::Ts => "TypeScript SDK (sdk-ts/package.json)",
    };
    let found = found.ok_or_else(|| NewError::NoSdk { path: path.to_path_buf(), what })?;
    std::fs::canonicalize(&found).map_err(|source| NewError::Io { path: found, source })
}

/// The template's files taking the SDK from `dir` instead of its registry.
fn with_local_sdk(language: Language, files: &mut [(PathBuf, String)], dir: &Path) -> Vec<(PathBuf, String)> {
    let at = dir.display().to_string();
    let edit = |name: &str, files: &mut [(PathBuf, String)], from: &str, to: &str| {
        for (path, text) in files.iter_mut().filter(|(p, _)| p == Path::new(name)) {
            assert!(text.contains(from), "the template's {} names its SDK as {from}", path.display());
            *text = text.replace(from, to);
        }
    };
    match language {
        Language::Rust => {
            let path = format!("service-provider-sdk = {{ path = {at:?} }}");
            edit("Cargo.toml", files, "service-provider-sdk = \"0.2\"", &path);
            Vec::new()
        }
        Language::Go => {
            let module = "open-control-plane.io/service-provider-host/sdk-go";
            let replace = format!("require {module} v0.2.0\n\nreplace {module} => {at}");
            edit("go.mod", files, &format!("require {module} v0.2.0"), &replace);
            Vec::new()
        }
        Language::Ts => {
            let file = format!("\"@open-control-plane/service-provider-sdk\": \"file:{at}\"");
            edit("package.json", files, "\"@open-control-plane/service-provider-sdk\": \"^0.2.0\"", &file);
            // Copied in as a package (its `prepare` writes the contract's
            // WIT into it), not linked: componentize-qjs reads it under
            // the module root.
            vec![(PathBuf::from(".npmrc"), "install-links=true\n".to_string())]
        }
    }
}

/// Writes a new plugin into `dir`, which must not exist or be empty, with
/// its SDK from `sdk`; returns the files written.
pub fn write_with(language: Language, names: &Names, dir: &Path, sdk: &Sdk) -> Result<Vec<PathBuf>, NewError> {
    let mut files = files(language, names);
    if let Sdk::Local(path) = sdk {
        let sdk_dir = local_sdk(language, path)?;
        let extra = with_local_sdk(language, &mut files, &sdk_dir);
        files.extend(extra);
    }
    write_files(files, dir)
}

/// Writes a new plugin into `dir`, which must not exist or be empty;
/// returns the files written.
pub fn write(language: Language, names: &Names, dir: &Path) -> Result<Vec<PathBuf>, NewError> {
    write_with(language, names, dir, &Sdk::Published)
}

fn write_files(files: Vec<(PathBuf, String)>, dir: &Path) -> Result<Vec<PathBuf>, NewError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NewError::Io { path, source }
    };
    if dir.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(NewError::NotEmpty { path: dir.to_path_buf() });
    }
    let mut written = Vec::new();
    for (relative, text) in files {
        let path = dir.join(&relative);
        std::fs::create_dir_all(path.parent().expect("a file in a directory")).map_err(io(&path))?;
        std::fs::write(&path, text).map_err(io(&path))?;
        #[cfg(unix)]
        if relative.extension().is_some_and(|e| e == "sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io(&path))?;
        }
        written.push(relative);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_gives_the_kind_and_rest_names() {
        let names = Names::of("hello-world").unwrap();
        assert_eq!(names.kind, "HelloWorld");
        assert_eq!(names.plural, "helloworlds");
        assert_eq!(names.crate_name, "hello_world");
        assert_eq!(names.group, "hello-world.services.example.com");
    }

    #[test]
    fn a_plugin_can_be_started_in_the_authors_own_group() {
        let names = Names::of("greeter").unwrap().in_group("greeter.example.org").unwrap();
        for (path, text) in files(Language::Rust, &names) {
            assert!(!text.contains("services.example.com"), "{}", path.display());
        }
        assert!(files(Language::Rust, &names).iter().any(|(p, _)| p.ends_with("greeters.greeter.example.org.yaml")));
        for bad in ["example", "Greeter.example.org", "greeter..org", "-greeter.org"] {
            assert!(Names::of("greeter").unwrap().in_group(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_that_cannot_be_kubernetes_names_are_refused() {
        for bad in ["", "Hello", "-a", "a-", "a_b", "1a", "a.b", &"a".repeat(41)] {
            assert!(Names::of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_template_can_take_its_sdk_from_a_clone() {
        let clone = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let names = Names::of("greeter").unwrap();
        let text = |language, path: &str| {
            let mut files = files(language, &names);
            let sdk = local_sdk(language, &clone).unwrap();
            let extra = with_local_sdk(language, &mut files, &sdk);
            let all: Vec<_> = files.into_iter().chain(extra).collect();
            all.into_iter().find(|(p, _)| p == Path::new(path)).map(|(_, t)| t).unwrap()
        };
        let rust = text(Language::Rust, "Cargo.toml");
        assert!(rust.contains("service-provider-sdk = { path = \"/") && rust.contains("/sdk\" }"), "{rust}");
        let go = text(Language::Go, "go.mod");
        assert!(go.contains("replace open-control-plane.io/service-provider-host/sdk-go => /"), "{go}");
        let ts = text(Language::Ts, "package.json");
        assert!(ts.contains("\"file:/") && ts.contains("/sdk-ts\""), "{ts}");
        assert_eq!(text(Language::Ts, ".npmrc"), "install-links=true\n");
        // The SDK's own directory works too; anything else is refused.
        assert!(local_sdk(Language::Go, &clone.join("sdk-go")).is_ok());
        let err = local_sdk(Language::Rust, &clone.join("docs")).unwrap_err().to_string();
        assert!(err.contains("holds no Rust SDK"), "{err}");
    }

    #[test]
    fn every_placeholder_is_filled() {
        let names = Names::of("greeter").unwrap();
        for language in [Language::Rust, Language::Go, Language::Ts] {
            for (path, text) in files(language, &names) {
                assert!(!path.to_string_lossy().contains("__"), "{}", path.display());
                assert!(
                    !text.contains("__NAME__")
                        && !text.contains("__KIND__")
                        && !text.contains("__GROUP__")
                        && !text.contains("__PLURAL__")
                        && !text.contains("__SINGULAR__")
                        && !text.contains("__CRATE__"),
                    "{}",
                    path.display()
                );
            }
        }
    }
}
