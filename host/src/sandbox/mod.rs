//! The wasmtime sandbox that runs provider plugins.
//!
//! - One [`Engine`] per process, with epoch interruption always on; a ticker
//!   thread advances the epoch every [`EPOCH_TICK`].
//! - A plugin is compiled once (or loaded precompiled from the cache, see
//!   [`cache`]) and linked once into an `InstancePre`.
//! - Every call gets a fresh `Store` and instance: no state survives between
//!   reconciles, and a trap (deadline, memory, guest bug) poisons only the
//!   store that is thrown away anyway.
//! - Every store has a deadline and a memory limit ([`Limits`]).
//! - The plugin gets a WASI context with nothing in it: no environment,
//!   arguments, files, sockets or stdio. Rust's std links WASI imports even
//!   for pure code, so the linker must provide them, but they grant nothing.

mod cache;
mod convert;

use convert::Convert;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use service_provider_sdk::contract as sdk;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::Error;

pub(crate) mod bindings {
    wasmtime::component::bindgen!({ world: "plugin", path: "../wit" });
}

/// How often the epoch advances; the granularity of plugin deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Resource limits applied to every plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call.
    pub timeout: Duration,
    /// Maximum linear memory of the instance, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout: Duration::from_secs(2), memory_bytes: 64 << 20 }
    }
}

impl Limits {
    /// The epoch deadline in ticks: one extra tick because the current tick
    /// is already partly over when the call starts.
    fn deadline_ticks(&self) -> u64 {
        (self.timeout.as_millis() / EPOCH_TICK.as_millis()) as u64 + 1
    }
}

/// Per-store state: an empty WASI context and the memory limiter.
struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The process-wide engine and its epoch ticker.
#[derive(Clone)]
pub struct Sandbox {
    engine: Engine,
}

impl Sandbox {
    pub fn new() -> Result<Self, Error> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // Bound guest recursion well below the host thread's stack.
        config.max_wasm_stack(1 << 20);
        let engine = Engine::new(&config).map_err(|e| Error::Sandbox(format!("creating the engine: {}", chain(&e))))?;
        spawn_ticker(&engine);
        Ok(Sandbox { engine })
    }

    /// Compiles (or loads from `cache_dir`) a plugin component and links it.
    pub fn load(&self, wasm: &[u8], cache_dir: Option<&Path>, limits: Limits) -> Result<Plugin, Error> {
        let started = Instant::now();
        let component = match cache_dir {
            Some(dir) => cache::load_or_compile(&self.engine, wasm, dir)?,
            None => Component::new(&self.engine, wasm)
                .map_err(|e| Error::Plugin(format!("compiling the component: {}", chain(&e))))?,
        };
        let compile_time = started.elapsed();
        let mut linker = Linker::<State>::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| Error::Sandbox(format!("linking WASI: {}", chain(&e))))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(bindings::PluginPre::new)
            .map_err(|e| Error::Plugin(format!("the component does not fit the plugin world: {}", chain(&e))))?;
        let mut plugin = Plugin {
            inner: Arc::new(PluginInner { engine: self.engine.clone(), pre, limits }),
            descriptor: None,
            compile_time,
        };
        plugin.descriptor = Some(plugin.call(|p, s| p.call_describe(s))?.convert());
        Ok(plugin)
    }

    /// Reads and loads a plugin from a `.wasm` file.
    pub fn load_file(&self, path: &Path, cache_dir: Option<&Path>, limits: Limits) -> Result<Plugin, Error> {
        let wasm = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        self.load(&wasm, cache_dir, limits)
    }
}

/// Advances the epoch until the engine is dropped. Holds only a weak
/// reference so the engine's lifetime stays with its users.
fn spawn_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}

struct PluginInner {
    engine: Engine,
    pre: bindings::PluginPre<State>,
    limits: Limits,
}

/// A loaded plugin: cheap to clone, safe to call from many threads.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
    descriptor: Option<sdk::Descriptor>,
    compile_time: Duration,
}

type Provider = bindings::exports::open_control_plane::service_provider::provider::Guest;

impl Plugin {
    /// What the plugin declared about itself (read once at load).
    pub fn descriptor(&self) -> &sdk::Descriptor {
        self.descriptor.as_ref().expect("set in Sandbox::load")
    }

    /// How long compiling (or loading the precompiled) component took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    pub fn plan(&self, input: &sdk::Input) -> Result<Result<sdk::Plan, sdk::PlanError>, Error> {
        let input = input.clone().convert();
        Ok(self.call(|p, s| p.call_plan(s, &input))?.convert())
    }

    pub fn cleanup(&self, input: &sdk::Input) -> Result<Result<sdk::CleanupPlan, sdk::PlanError>, Error> {
        let input = input.clone().convert();
        Ok(self.call(|p, s| p.call_cleanup(s, &input))?.convert())
    }

    /// One call in a fresh store with a deadline and a memory limit.
    fn call<R>(&self, f: impl FnOnce(&Provider, &mut Store<State>) -> wasmtime::Result<R>) -> Result<R, Error> {
        let limits = self.inner.limits;
        let state = State {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .trap_on_grow_failure(true)
                .instances(16)
                .build(),
        };
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(limits.deadline_ticks());
        let instance = self.inner.pre.instantiate(&mut store).map_err(|e| self.failure(&e))?;
        f(instance.open_control_plane_service_provider_provider(), &mut store).map_err(|e| self.failure(&e))
    }

    /// Words a failed call so an operator knows what happened to whom.
    fn failure(&self, error: &wasmtime::Error) -> Error {
        let name = self.descriptor.as_ref().map_or("plugin", |d| d.name.as_str());
        let limits = self.inner.limits;
        let message = match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => {
                format!("plugin {name} exceeded its time budget of {:?}", limits.timeout)
            }
            _ if chain(error).contains("forcing trap when growing memory") => {
                format!("plugin {name} exceeded its memory limit of {} MiB", limits.memory_bytes >> 20)
            }
            _ => format!("plugin {name} failed: {}", chain(error)),
        };
        Error::Plugin(message)
    }
}

/// The whole cause chain of a wasmtime error on one line.
fn chain(error: &wasmtime::Error) -> String {
    error.chain().map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_has_one_tick_of_slack() {
        let limits = Limits { timeout: Duration::from_millis(100), memory_bytes: 0 };
        assert_eq!(limits.deadline_ticks(), 11);
        assert_eq!(Limits::default().deadline_ticks(), 201);
    }

    #[test]
    fn a_component_that_is_not_a_plugin_is_refused() {
        let sandbox = Sandbox::new().unwrap();
        // An empty component: valid, but exports nothing.
        let empty = wat_component();
        let err = sandbox.load(&empty, None, Limits::default()).err().expect("must fail");
        assert!(err.to_string().contains("does not fit the plugin world"), "{err}");
    }

    #[test]
    fn garbage_bytes_are_a_clear_error() {
        let sandbox = Sandbox::new().unwrap();
        let err = sandbox.load(b"not wasm", None, Limits::default()).err().expect("must fail");
        assert!(err.to_string().contains("compiling the component"), "{err}");
    }

    /// The smallest valid component binary: header only.
    fn wat_component() -> Vec<u8> {
        vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    }
}
