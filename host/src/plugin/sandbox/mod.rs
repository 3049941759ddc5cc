//! The wasmtime sandbox that runs provider plugins.
//!
//! - One [`Engine`] per process, with epoch interruption always on; a ticker
//!   thread advances the epoch every [`EPOCH_TICK`].
//! - Preparing a plugin compiles it once (or loads it precompiled from the
//!   cache, see [`cache`]) and links it once into an `InstancePre`: that is
//!   [`Prepared`]. Reading its descriptor turns it into a [`Plugin`].
//! - Every call gets a fresh `Store` and instance: no state survives between
//!   reconciles, and a trap poisons only the store that is thrown away anyway.
//! - Calls are async. The guest yields to the executor at every epoch tick,
//!   and the whole call (instantiation included) runs under a
//!   `tokio::time::timeout`, so the deadline fires whatever the guest does:
//!   spinning, or sleeping in a WASI `poll` (async in this linker, so it
//!   never blocks a host thread either).
//! - Every store has all of [`Limits`]: memory, tables, instances, WASI
//!   handles; the limiter records which limit a trap came from. Input and
//!   output sizes are checked on the host side.
//! - The plugin gets a WASI context with nothing in it: no environment,
//!   arguments, files, sockets, name lookups or stdio. Rust's std links WASI
//!   imports even for pure code, so the linker must provide them, but they
//!   grant nothing.

mod cache;
mod descriptor;
mod error;
mod limits;
mod plugin;
mod stderr;
pub mod versions;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use error::{Bound, Cause, PluginError, Stopped};
pub use limits::{EPOCH_TICK, Limits};
use limits::{Hit, Limiter};
pub use plugin::Plugin;
use plugin::{Described, Inner};
use service_provider_sdk::contract as sdk;
use service_provider_sdk::convert::Convert;

use crate::metrics::Usage;
use stderr::StderrTail;
use versions::{Version, v0_1, v0_2};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Largest random buffer a guest may ask the host for in one WASI call.
const MAX_RANDOM_BYTES: u64 = 64 << 10;
/// How much of a call's stderr is kept (its tail), and how many characters
/// of it a trap's error shows.
const STDERR_BYTES: usize = 4 << 10;
const STDERR_WORDS: usize = 300;

/// Per-store state: an empty WASI context and the limiter.
struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
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

/// How many plugin calls may run at once (the controller runs a handful;
/// every call holds one slot of the pool until it returns or times out).
pub const CONCURRENT_CALLS: u32 = 64;

/// The instance pool: every call instantiates into slots that are reserved
/// once and reset after use, instead of mapping and unmapping memories,
/// tables and fiber stacks per call (most of a call's cost without it).
/// Sized from [`Limits::default`]'s per-store counts; the memory *size* a
/// call may reach stays with its store's limiter, the slots only reserve
/// address space.
fn pool() -> PoolingAllocationConfig {
    let limits = Limits::default();
    let per_call = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(CONCURRENT_CALLS)
        .total_stacks(CONCURRENT_CALLS)
        .total_core_instances(CONCURRENT_CALLS * 8)
        .total_memories(CONCURRENT_CALLS * 2)
        .total_tables(CONCURRENT_CALLS * 8)
        .max_core_instances_per_component(per_call(limits.instances))
        .max_memories_per_component(per_call(limits.memories))
        .max_tables_per_component(per_call(limits.tables))
        .max_memories_per_module(per_call(limits.memories))
        .max_tables_per_module(per_call(limits.tables))
        .table_elements(limits.table_elements)
        // A used memory goes back to the kernel (`madvise`) rather than
        // being zeroed in place: measured, zeroing even 256 KiB per call
        // cost more than the page faults it saves.
        .linear_memory_keep_resident(0)
        .table_keep_resident(0);
    pool
}

impl Sandbox {
    /// The process's sandbox: one engine (one instance pool, one epoch
    /// ticker) however many components a command loads (the plugin, a
    /// shadow, a canary, the current and the candidate of a preview).
    pub fn shared() -> Result<Self, PluginError> {
        static SHARED: std::sync::Mutex<Option<Sandbox>> = std::sync::Mutex::new(None);
        let mut shared = SHARED.lock().expect("not poisoned");
        if let Some(sandbox) = shared.as_ref() {
            return Ok(sandbox.clone());
        }
        let sandbox = Sandbox::new()?;
        *shared = Some(sandbox.clone());
        Ok(sandbox)
    }

    pub fn new() -> Result<Self, PluginError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // Bound guest recursion well below the async fiber's stack.
        config.max_wasm_stack(1 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool()));
        let engine = Engine::new(&config).map_err(|e| PluginError::Engine(e.into()))?;
        spawn_ticker(&engine);
        Ok(Sandbox { engine })
    }

    /// Compiles (or loads from `cache_dir`) a plugin component and links it.
    /// No plugin code runs yet.
    pub fn prepare(&self, wasm: &[u8], cache_dir: Option<&Path>) -> Result<Prepared, PluginError> {
        let digest = digest_of(wasm);
        let started = Instant::now();
        let component = match cache_dir {
            Some(dir) => cache::load_or_compile(&self.engine, wasm, &digest, dir)?,
            None => Component::new(&self.engine, wasm).map_err(|e| PluginError::Compile(e.into()))?,
        };
        let compile_time = started.elapsed();
        let version = self.version_of(&component, wasm)?;
        let mut linker = Linker::<State>::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| PluginError::Engine(e.into()))?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| PluginError::Incompatible(e.into()))?;
        let pre = match version {
            Version::V0_1 => v0_1::bindings::PluginPre::new(instance_pre).map(Pre::V0_1),
            Version::V0_2 => v0_2::bindings::PluginPre::new(instance_pre).map(Pre::V0_2),
        }
        .map_err(|e| PluginError::Incompatible(e.into()))?;
        Ok(Prepared { engine: self.engine.clone(), pre, compile_time, digest })
    }

    /// The contract version a component implements, from the provider
    /// interface it exports; unsupported versions are refused by name.
    fn version_of(&self, component: &Component, wasm: &[u8]) -> Result<Version, PluginError> {
        let component_type = component.component_type();
        let exported: Vec<&str> = component_type
            .exports(&self.engine)
            .map(|(name, _)| name)
            .filter(|name| name.starts_with(versions::PROVIDER_INTERFACE))
            .collect();
        if let Some(version) = exported.iter().find_map(|name| Version::of_export(name)) {
            return Ok(version);
        }
        let found = match (exported.first(), versions::declared_version(wasm)) {
            (Some(name), _) => {
                name.trim_start_matches(versions::PROVIDER_INTERFACE).trim_start_matches('@').to_string()
            }
            (None, Some(declared)) => declared,
            (None, None) => "none".to_string(),
        };
        Err(PluginError::Unsupported { found, oldest: versions::OLDEST, newest: versions::NEWEST })
    }

    /// Reads and prepares a plugin from a `.wasm` file.
    pub fn prepare_file(&self, path: &Path, cache_dir: Option<&Path>) -> Result<Prepared, PluginError> {
        let wasm = std::fs::read(path).map_err(|source| PluginError::Cache { path: path.to_path_buf(), source })?;
        self.prepare(&wasm, cache_dir)
    }

    /// Prepares a component and reads its descriptor.
    pub async fn load(&self, wasm: &[u8], cache_dir: Option<&Path>, limits: Limits) -> Result<Plugin, PluginError> {
        self.prepare(wasm, cache_dir)?.describe(limits).await
    }

    /// Prepares a plugin file and reads its descriptor.
    pub async fn load_file(
        &self,
        path: &Path,
        cache_dir: Option<&Path>,
        limits: Limits,
    ) -> Result<Plugin, PluginError> {
        self.prepare_file(path, cache_dir)?.describe(limits).await
    }
}

/// The `sha256:<hex>` digest of a component's bytes: what a grant's
/// identity may pin.
pub fn digest_of(wasm: &[u8]) -> String {
    sha256_digest(&<sha2::Sha256 as sha2::Digest>::digest(wasm))
}

/// `sha256:<hex>` of a finished SHA-256 (also of one hashed as it streamed).
pub fn sha256_digest(hash: &[u8]) -> String {
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
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

/// The linked component, with the bindings of its contract version.
#[derive(Clone)]
enum Pre {
    V0_1(v0_1::bindings::PluginPre<State>),
    V0_2(v0_2::bindings::PluginPre<State>),
}

/// A compiled and linked plugin whose descriptor has not been read yet:
/// cheap to clone (tests compile once per binary and describe per test).
#[derive(Clone)]
pub struct Prepared {
    engine: Engine,
    pre: Pre,
    compile_time: Duration,
    /// `sha256:<hex>` of the component's bytes.
    digest: String,
}

/// One call of the provider interface.
enum Call<'a> {
    Describe,
    Plan(&'a sdk::Input),
    Cleanup(&'a sdk::Input),
}

/// The provider interface's functions, as metrics and spans name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Describe,
    Plan,
    Cleanup,
}

impl crate::metrics::LabelValue for Method {
    fn label(self) -> &'static str {
        match self {
            Method::Describe => "describe",
            Method::Plan => "plan",
            Method::Cleanup => "cleanup",
        }
    }
}

/// What a call returned, in the newest contract's types.
enum Answer {
    Describe(Box<sdk::Descriptor>),
    Plan(Result<sdk::Plan, sdk::PlanError>),
    Cleanup(Result<sdk::CleanupPlan, sdk::PlanError>),
}

/// Instantiates with one version's bindings and makes one call, converting
/// the input to that version's types and the answer to the newest.
macro_rules! call_with {
    ($pre:expr, $store:expr, $call:expr) => {{
        let instance = $pre.instantiate_async(&mut $store).await?;
        let provider = instance.open_control_plane_service_provider_provider();
        match $call {
            Call::Describe => Answer::Describe(Box::new(provider.call_describe(&mut $store).await?.convert())),
            Call::Plan(input) => {
                Answer::Plan(provider.call_plan(&mut $store, &input.clone().convert()).await?.convert())
            }
            Call::Cleanup(input) => {
                Answer::Cleanup(provider.call_cleanup(&mut $store, &input.clone().convert()).await?.convert())
            }
        }
    }};
}

impl Prepared {
    /// Calls `describe` (under the same limits as every call, so a plugin
    /// that hangs there fails the start-up instead of hanging it).
    pub async fn describe(&self, limits: Limits) -> Result<Plugin, PluginError> {
        let (answer, mut described) = self.call("plugin", &limits, Call::Describe).await;
        let Answer::Describe(descriptor) = answer? else { unreachable!("describe answers describe") };
        described.output_bytes = plugin::serialized_len(&*descriptor);
        let inner =
            Inner { prepared: self.clone(), limits, descriptor: *descriptor, described: Described::new(described) };
        let plugin = Plugin { inner: Arc::new(inner), meter: None };
        plugin.check_size("a descriptor", described.output_bytes, 0)?;
        descriptor::check(plugin.descriptor(), &limits)
            .map_err(|reason| PluginError::Descriptor { plugin: plugin.name().to_string(), reason })?;
        Ok(plugin)
    }

    /// The contract version the plugin implements.
    pub fn contract_version(&self) -> &'static str {
        match self.pre {
            Pre::V0_1(_) => Version::V0_1.as_str(),
            Pre::V0_2(_) => Version::V0_2.as_str(),
        }
    }

    /// One call in a fresh store, under every limit, and what it used
    /// (all but the output, which the caller measures).
    async fn call(&self, plugin: &str, limits: &Limits, call: Call<'_>) -> (Result<Answer, PluginError>, Usage) {
        let started = Instant::now();
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits.handles);
        let stderr = StderrTail::new(STDERR_BYTES);
        let wasi = WasiCtx::builder()
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .max_random_size(MAX_RANDOM_BYTES)
            .build();
        let mut store = Store::new(&self.engine, State { wasi, table, limiter: Limiter::new(limits) });
        store.limiter(|s| &mut s.limiter);
        // What the plugin returns is counted while it is lifted out of the
        // sandbox and refused past the limit, before the host copies it.
        store.set_hostcall_fuel(limits.output_bytes);
        store.set_epoch_deadline(1);
        store.epoch_deadline_async_yield_and_update(1);
        let run = async {
            Ok::<_, wasmtime::Error>(match &self.pre {
                Pre::V0_1(pre) => call_with!(pre, store, call),
                Pre::V0_2(pre) => call_with!(pre, store, call),
            })
        };
        let plugin = plugin.to_string();
        let result = match tokio::time::timeout(limits.timeout, run).await {
            Err(_) => Err(PluginError::Timeout { plugin, budget: limits.timeout }),
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(match store.data().limiter.hit {
                Some(Hit::Memory) => PluginError::Limit {
                    plugin,
                    bound: Bound::Memory,
                    limit: format!("memory limit of {} MiB", limits.memory_bytes >> 20),
                },
                Some(Hit::Table) => PluginError::Limit {
                    plugin,
                    bound: Bound::Table,
                    limit: format!("table limit of {} elements", limits.table_elements),
                },
                None if hostcall_fuel_exhausted(&error) => PluginError::Limit {
                    plugin,
                    bound: Bound::Output,
                    limit: format!("output limit of {} bytes", limits.output_bytes),
                },
                None => PluginError::Trap { plugin, wrote: stderr.last_words(STDERR_WORDS), source: error.into() },
            }),
        };
        let usage =
            Usage { took: started.elapsed(), memory_bytes: store.data().limiter.memory_used(), output_bytes: 0 };
        (result, usage)
    }
}

/// Whether a call failed because the plugin handed back more than its
/// hostcall fuel (the output limit) allows. wasmtime keeps the error type
/// private, so its message is what tells.
fn hostcall_fuel_exhausted(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| cause.to_string().contains("fuel allocated for hostcalls has been exhausted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_that_is_not_a_plugin_is_refused() {
        let sandbox = Sandbox::new().unwrap();
        // The smallest valid component binary: header only, exports nothing.
        let empty = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        let err = sandbox.prepare(&empty, None).err().expect("must fail");
        assert_eq!(err.to_string(), "the plugin implements contract version none; this host supports 0.1.0 to 0.2.0");
    }

    #[test]
    fn garbage_bytes_are_a_clear_error() {
        let sandbox = Sandbox::new().unwrap();
        let err = sandbox.prepare(b"not wasm", None).err().expect("must fail");
        assert!(err.to_string().contains("compiling the component"), "{err}");
        assert!(std::error::Error::source(&err).is_some(), "the cause is kept");
    }
}
