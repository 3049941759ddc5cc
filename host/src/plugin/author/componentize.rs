//! `plugin componentize`: a component of a core module built by a language
//! whose compiler writes WASI preview 1 modules, such as mainline Go
//! (`GOOS=wasip1 -buildmode=c-shared`). The contract's type information is
//! embedded, the WASI preview 1 reactor adapter wraps the module (the one
//! matching the host's wasmtime-wasi, from the crate
//! `wasi-preview1-component-adapter-provider`), and the contract version
//! section the Rust SDK also writes is appended: what the author needs
//! besides their language's toolchain is this CLI.

use anyhow::{Context, Result};
use wasm_encoder::{Encode, Section};

/// The newest contract, the one the SDKs implement.
const WIT: &str = include_str!("../../../../wit/v0.2.0/service-provider.wit");

/// Makes a component of `core` (a core Wasm module exporting the contract's
/// functions); fails if it does not fit the contract's `plugin` world.
pub fn componentize(core: &[u8]) -> Result<Vec<u8>> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve.push_str("service-provider.wit", WIT).context("the contract's WIT")?;
    let world = resolve.select_world(&[package], Some("plugin"))?;
    let version = resolve.packages[package].name.version.clone().context("the contract package has no version")?;
    let mut module = core.to_vec();
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8, false)
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
    let section = wasm_encoder::CustomSection {
        name: "service-provider:contract".into(),
        data: version.to_string().into_bytes().into(),
    };
    component.push(section.id());
    section.encode(&mut component);
    Ok(component)
}
