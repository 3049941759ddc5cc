//! A component of a core module built by a language whose compiler writes
//! WASI preview 1 modules, such as mainline Go (`GOOS=wasip1
//! -buildmode=c-shared`): the contract's type information is embedded, the
//! WASI preview 1 reactor adapter wraps the module (the one matching the
//! host's wasmtime-wasi, from the crate
//! `wasi-preview1-component-adapter-provider`), and the
//! `service-provider:contract` section the Rust SDK also writes is
//! appended. Used by the host's `plugin componentize` (what a Go author
//! runs) and by `tools/plugin-build` (this repository's Go builds).

use anyhow::{Context, Result};
use wasm_encoder::{Encode, Section};
use wit_parser::{PackageId, Resolve};

/// The contract a component is made for: a parsed WIT package.
pub struct Contract {
    resolve: Resolve,
    package: PackageId,
}

impl Contract {
    /// The contract from one WIT file's text (`path` names it in errors).
    pub fn from_text(path: &str, wit: &str) -> Result<Contract> {
        let mut resolve = Resolve::default();
        let package = resolve.push_str(path, wit).with_context(|| format!("reading the WIT {path}"))?;
        Ok(Contract { resolve, package })
    }

    /// The contract in a WIT directory (`wit/v0.2.0`).
    pub fn from_dir(dir: &std::path::Path) -> Result<Contract> {
        let mut resolve = Resolve::default();
        let (package, _) = resolve.push_path(dir).with_context(|| format!("reading the WIT in {}", dir.display()))?;
        Ok(Contract { resolve, package })
    }

    /// Makes a component of `core` (a core Wasm module exporting the
    /// functions of `world`); fails if it does not fit that world.
    pub fn componentize(&self, core: &[u8], world: &str) -> Result<Vec<u8>> {
        let world = self.resolve.select_world(&[self.package], Some(world))?;
        let version =
            self.resolve.packages[self.package].name.version.clone().context("the contract package has no version")?;
        let mut module = core.to_vec();
        wit_component::embed_component_metadata(
            &mut module,
            &self.resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .context("not a core Wasm module")?;
        let mut component = wit_component::ComponentEncoder::default()
            .module(&module)
            .context("not a core Wasm module")?
            .adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )?
            .validate(true)
            .encode()
            .context("the module does not fit the contract's plugin world")?;
        // The version the host names when it cannot load a plugin.
        let section = wasm_encoder::CustomSection {
            name: "service-provider:contract".into(),
            data: version.to_string().into_bytes().into(),
        };
        component.push(section.id());
        section.encode(&mut component);
        Ok(component)
    }
}
