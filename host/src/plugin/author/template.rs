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
    #[error("{} exists and is not empty; choose another directory (--dir)", path.display())]
    NotEmpty { path: PathBuf },
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

/// Writes a new plugin into `dir`, which must not exist or be empty;
/// returns the files written.
pub fn write(language: Language, names: &Names, dir: &Path) -> Result<Vec<PathBuf>, NewError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NewError::Io { path, source }
    };
    if dir.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(NewError::NotEmpty { path: dir.to_path_buf() });
    }
    let mut written = Vec::new();
    for (relative, text) in files(language, names) {
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
    fn names_that_cannot_be_kubernetes_names_are_refused() {
        for bad in ["", "Hello", "-a", "a-", "a_b", "1a", "a.b", &"a".repeat(41)] {
            assert!(Names::of(bad).is_err(), "{bad:?}");
        }
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
