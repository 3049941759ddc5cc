//! The plugin as the commands load it: fetched by [`crate::plugin::source`] (a file,
//! or pulled and verified from a registry), compiled in the [`crate::plugin::sandbox`]
//! with the precompiled cache when there is one, and intersected with the
//! operator's grant into a [`Planner`]; and `precompile`, which fills that
//! cache ahead of time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plugin::grant::{Effective, Grant, GrantError};
use crate::plugin::oci::{self, SourceError};
use crate::plugin::plan::Planner;
use crate::plugin::sandbox::{Limits, PluginError, Sandbox};
use crate::plugin::source::PluginSource;

/// What the `--plugin*` flags say.
pub struct Load<'a> {
    /// A component file, or an `oci://` reference.
    pub plugin: &'a str,
    /// The operator's grant file (the default grant without one).
    pub grant: Option<&'a Path>,
    /// Where precompiled components are kept.
    pub cache_dir: Option<&'a Path>,
    pub limits: Limits,
    pub registry: &'a oci::Options,
    /// What becomes of requests the grant does not give.
    pub ungranted: Ungranted,
    /// Which component of the host this is: what a refusal advises.
    pub role: Role,
}

/// Which of a host's components is loaded, for the flag a refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `--plugin` (of `run`, `init`, `render`; the candidate of `diff`).
    Plugin,
    /// `--shadow-plugin`.
    Shadow,
    /// `--plugin-canary`.
    Canary,
    /// `diff --current-plugin`.
    Current,
}

impl Role {
    /// The flag that gives this component its grant.
    pub fn grant_flag(self) -> &'static str {
        match self {
            Role::Plugin => "--plugin-grant",
            Role::Shadow => "--shadow-plugin-grant",
            Role::Canary => "--plugin-canary-grant",
            Role::Current => "--current-plugin-grant",
        }
    }

    /// What to do about requests its grant does not give.
    fn advice(self) -> String {
        let widen = format!("widen the grant for it ({})", self.grant_flag());
        match self {
            Role::Plugin => format!("{widen}, or load it without those requests (--ungranted-requests=drop)"),
            _ => widen,
        }
    }
}

/// What loading does with a component that asks for more than its grant
/// gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ungranted {
    /// Refuse the component, naming every request the grant does not give:
    /// a plugin upgrade that asks for more is stopped at its rollout, and
    /// widening the grant is the operator's explicit act.
    #[default]
    Refuse,
    /// Load it without them, one log line each (what the host did before a
    /// grant could be exceeded by an upgrade; for development and previews).
    Drop,
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A plugin file that is not there; `found` are the components next to it.
    #[error("plugin {} does not exist; choose one with --plugin or PLUGIN{}", path.display(), listed(found))]
    Missing { path: PathBuf, found: Vec<String> },
    /// The component does not compile or does not describe itself.
    #[error("{verb} plugin {origin}")]
    Plugin {
        verb: &'static str,
        origin: String,
        #[source]
        source: PluginError,
    },
    /// The sandbox engine could not be set up.
    #[error(transparent)]
    Engine(PluginError),
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// The component is not the plugin its grant's identity names (another
    /// name, or another digest): `flag` gives it a grant of its own.
    #[error(
        "{source}; give it a grant that names it ({flag}; for a new build of kro or flux: `plugin grant --built-in`)"
    )]
    NotGranted {
        #[source]
        source: GrantError,
        flag: &'static str,
    },
    /// The component asks for what its grant does not give.
    #[error("plugin {plugin} {origin} asks for more than its grant gives: {}; {advice}", refused.join("; "))]
    Ungranted { plugin: String, origin: String, refused: Vec<String>, advice: String },
    /// `precompile` found nothing to compile.
    #[error("no plugin components (.wasm) found in the given paths")]
    Nothing,
    #[error("reading {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn listed(found: &[String]) -> String {
    match found {
        [] => String::new(),
        found => format!(": {}", found.join(", ")),
    }
}

/// Loads the plugin and intersects its requests with the grant; what is not
/// granted refuses the component, or is logged one line each
/// ([`Ungranted`]).
pub async fn planner(load: Load<'_>) -> Result<Planner, LoadError> {
    let (plugin, component) = fetched(load.plugin, load.registry, load.cache_dir, load.limits).await?;
    let grant = Grant::load(load.grant)?;
    if load.grant.is_none() && crate::plugin::grant::SHIPPED.is_none() {
        tracing::warn!(
            plugin = %plugin.name(),
            "a development build: its built-in grant pins no component digests, so it trusts a plugin by its name; the released image gives the built-in identities only to the components it ships"
        );
    }
    let granted = Effective::for_component(plugin.descriptor(), plugin.digest(), grant).map_err(|e| match e {
        GrantError::Identity { .. } | GrantError::NoIdentity { .. } | GrantError::OtherPlugin { .. } => {
            LoadError::NotGranted { source: e, flag: load.role.grant_flag() }
        }
        other => LoadError::Grant(other),
    })?;
    if load.ungranted == Ungranted::Refuse && !granted.refused.is_empty() {
        let (plugin, origin) = (plugin.name().to_string(), component.origin.to_string());
        return Err(LoadError::Ungranted { plugin, origin, refused: granted.refused, advice: load.role.advice() });
    }
    for refused in &granted.refused {
        tracing::warn!(plugin = %plugin.name(), "not granted: {refused}");
    }
    Ok(Planner { plugin, granted: Arc::new(granted) })
}

/// A component as the authoring commands read it, without a grant: the
/// loaded plugin, and its digest-pinned reference when it was pulled.
pub async fn component(
    plugin: &str,
    registry: &oci::Options,
    limits: Limits,
) -> Result<(crate::plugin::sandbox::Plugin, Option<String>), LoadError> {
    let (loaded, component) = fetched(plugin, registry, None, limits).await?;
    Ok((loaded, component.pulled.then_some(component.origin)))
}

/// `plugin` read or pulled and compiled (with the precompiled cache when
/// there is one): the loaded plugin and where it came from.
async fn fetched(
    plugin: &str,
    registry: &oci::Options,
    cache_dir: Option<&Path>,
    limits: Limits,
) -> Result<(crate::plugin::sandbox::Plugin, Fetched), LoadError> {
    let source = PluginSource::parse(plugin, registry)?;
    if let Some(path) = source.file()
        && !path.is_file()
    {
        return Err(LoadError::Missing { path: path.to_path_buf(), found: components_beside(path) });
    }
    let component = source.fetch(registry).await?;
    let sandbox = Sandbox::shared().map_err(LoadError::Engine)?;
    let loaded = match sandbox.load(&component.wasm, cache_dir, limits).await {
        // The cache cannot be written (a read-only image whose artifacts
        // were compiled for another CPU): compile in memory instead.
        Err(PluginError::Cache { path, source }) => {
            tracing::warn!(cache = %path.display(), error = %source, "the plugin cache is not usable; compiling the plugin in memory");
            sandbox.load(&component.wasm, None, limits).await
        }
        // Others may change it: nothing is loaded from it (`precompile`
        // fails instead), and the start goes on, only slower.
        Err(error @ PluginError::UnsafeCache { .. }) => {
            tracing::warn!(error = %error, "compiling the plugin in memory");
            sandbox.load(&component.wasm, None, limits).await
        }
        other => other,
    }
    .map_err(|source| LoadError::Plugin { verb: "loading", origin: component.origin.clone(), source })?;
    Ok((loaded, Fetched { origin: component.origin, pulled: source.file().is_none() }))
}

/// Where a fetched component came from.
struct Fetched {
    /// The file, or the digest-pinned reference.
    origin: String,
    /// Whether it was pulled from a registry.
    pulled: bool,
}

/// The `.wasm` files in the directory of a missing plugin, to name them.
fn components_beside(path: &Path) -> Vec<String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// One plugin `precompile` compiled into the cache.
pub struct Compiled {
    pub origin: String,
    pub name: String,
    pub took: Duration,
}

/// Compiles every plugin named (files, directories of `.wasm` files,
/// `oci://` references) into `cache_dir`, calling `done` after each.
pub async fn precompile(
    plugins: &[String],
    cache_dir: &Path,
    registry: &oci::Options,
    mut done: impl FnMut(Compiled) -> std::io::Result<()>,
) -> Result<(), LoadError> {
    let mut sources = Vec::new();
    for text in plugins {
        let source = PluginSource::parse(text, registry)?;
        match source.file().filter(|path| path.is_dir()) {
            Some(dir) => {
                let entries =
                    std::fs::read_dir(dir).map_err(|source| LoadError::Io { path: dir.to_path_buf(), source })?;
                let mut wasm: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "wasm"))
                    .collect();
                wasm.sort();
                sources.extend(wasm.into_iter().map(PluginSource::File));
            }
            None => sources.push(source),
        }
    }
    if sources.is_empty() {
        return Err(LoadError::Nothing);
    }
    let sandbox = Sandbox::shared().map_err(LoadError::Engine)?;
    for source in sources {
        let started = Instant::now();
        let component = source.fetch(registry).await?;
        let origin = component.origin.to_string();
        let plugin = sandbox
            .load(&component.wasm, Some(cache_dir), Limits::default())
            .await
            .map_err(|source| LoadError::Plugin { verb: "precompiling", origin: origin.clone(), source })?;
        let compiled = Compiled { origin, name: plugin.name().to_string(), took: started.elapsed() };
        done(compiled).map_err(|source| LoadError::Io { path: "stdout".into(), source })?;
    }
    Ok(())
}
