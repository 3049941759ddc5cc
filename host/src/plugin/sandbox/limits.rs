//! The resource limits of one plugin call, and the limiter that enforces
//! them and remembers which one was hit.

use std::time::Duration;

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// How often the epoch advances; the granularity of plugin deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Resource limits applied to every plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call, instantiation included.
    pub timeout: Duration,
    /// Maximum linear memory of one call, in bytes: all its memories
    /// together (a component may have several).
    pub memory_bytes: usize,
    /// Maximum table elements of one call, all its tables together (a
    /// `table.grow` is a host allocation).
    pub table_elements: usize,
    /// Maximum core instances, tables and memories in one store: a plugin
    /// component needs a handful; thousands would be host memory.
    pub instances: usize,
    pub tables: usize,
    pub memories: usize,
    /// Maximum live WASI resource handles (streams, pollables) in one call.
    pub handles: usize,
    /// Maximum bytes of input the host hands to one call.
    pub input_bytes: usize,
    /// Maximum bytes of output the host accepts from one call: what the
    /// plugin returns is not even copied out of the sandbox past this
    /// (wasmtime's hostcall fuel, counted while lifting).
    pub output_bytes: usize,
    /// Maximum objects (plus copies) one plan may ask for.
    pub objects: usize,
    /// Maximum capabilities, observations and token rules (each) of a
    /// descriptor.
    pub descriptor_entries: usize,
    /// Maximum CRDs a descriptor brings.
    pub descriptor_crds: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(2),
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            instances: 32,
            tables: 32,
            memories: 8,
            handles: 1_000,
            input_bytes: 8 << 20,
            output_bytes: 4 << 20,
            objects: 256,
            descriptor_entries: 64,
            descriptor_crds: 16,
        }
    }
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    Memory,
    Table,
}

/// `StoreLimits` with every field set, plus one budget for all memories
/// and one for all tables of a call (`StoreLimits` bounds each on its own,
/// so eight memories could take eight times the limit), and a record of
/// which limit a refused growth hit, so a limit trap is reported as such
/// instead of being recognised by its message text.
pub struct Limiter {
    inner: StoreLimits,
    /// Bytes of all memories, and elements of all tables, granted so far.
    memory_total: usize,
    table_total: usize,
    memory_budget: usize,
    table_budget: usize,
    pub hit: Option<Hit>,
}

impl Limiter {
    pub fn new(limits: &Limits) -> Self {
        let inner = StoreLimitsBuilder::new()
            .memory_size(limits.memory_bytes)
            .table_elements(limits.table_elements)
            .instances(limits.instances)
            .tables(limits.tables)
            .memories(limits.memories)
            .trap_on_grow_failure(true)
            .build();
        Limiter {
            inner,
            memory_total: 0,
            table_total: 0,
            memory_budget: limits.memory_bytes,
            table_budget: limits.table_elements,
            hit: None,
        }
    }
}

/// Grows `total` by what one memory or table grows by, if `budget` allows
/// it and so does `each` (the per-memory or per-table check).
fn grow(
    total: &mut usize,
    budget: usize,
    current: usize,
    desired: usize,
    each: wasmtime::Result<bool>,
) -> wasmtime::Result<bool> {
    let after = total.saturating_add(desired.saturating_sub(current));
    if after > budget {
        return Err(wasmtime::Error::msg("forcing a growth past the call's budget to be a trap"));
    }
    if matches!(each, Ok(true)) {
        *total = after;
    }
    each
}

impl Limiter {
    /// Bytes of all the call's memories so far: memories only grow, so at
    /// the end of a call this is its peak.
    pub fn memory_used(&self) -> usize {
        self.memory_total
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let each = self.inner.memory_growing(current, desired, maximum);
        let allowed = grow(&mut self.memory_total, self.memory_budget, current, desired, each);
        if !matches!(allowed, Ok(true)) {
            self.hit = Some(Hit::Memory);
        }
        allowed
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let each = self.inner.table_growing(current, desired, maximum);
        let allowed = grow(&mut self.table_total, self.table_budget, current, desired, each);
        if !matches!(allowed, Ok(true)) {
            self.hit = Some(Hit::Table);
        }
        allowed
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_growth_is_remembered() {
        let limits = Limits { memory_bytes: 1 << 20, table_elements: 10, ..Limits::default() };
        let mut limiter = Limiter::new(&limits);
        assert!(limiter.memory_growing(0, 1 << 19, None).unwrap());
        assert_eq!(limiter.hit, None);
        assert!(limiter.memory_growing(0, 2 << 20, None).is_err(), "traps instead of returning -1");
        assert_eq!(limiter.hit, Some(Hit::Memory));
        let mut limiter = Limiter::new(&limits);
        assert!(limiter.table_growing(0, 11, None).is_err());
        assert_eq!(limiter.hit, Some(Hit::Table));
        assert_eq!(limiter.instances(), limits.instances);
    }

    /// A core module in a store limited like a plugin call's.
    fn run(limits: &Limits, wat: &str) -> (wasmtime::Result<i32>, Option<Hit>) {
        use wasmtime::{Engine, Instance, Module, Store};
        let engine = Engine::default();
        let module = Module::new(&engine, wat::parse_str(wat).expect("valid WAT")).expect("compiles");
        let mut store = Store::new(&engine, Limiter::new(limits));
        store.limiter(|l| l);
        let result = Instance::new(&mut store, &module, &[])
            .and_then(|i| i.get_typed_func::<(), i32>(&mut store, "run"))
            .and_then(|f| f.call(&mut store, ()));
        (result, store.data().hit)
    }

    #[test]
    fn a_table_grown_to_two_billion_elements_traps_instead_of_allocating() {
        let limits = Limits::default();
        let grow = r#"(module (table 1 funcref)
            (func (export "run") (result i32) (table.grow 0 (ref.null func) (i32.const 2147483647))))"#;
        let (result, hit) = run(&limits, grow);
        assert!(result.is_err(), "{result:?}");
        assert_eq!(hit, Some(Hit::Table));
    }

    #[test]
    fn memory_beyond_the_limit_traps() {
        let limits = Limits { memory_bytes: 1 << 20, ..Limits::default() };
        let grow = r#"(module (memory 1) (func (export "run") (result i32) (memory.grow (i32.const 100))))"#;
        let (result, hit) = run(&limits, grow);
        assert!(result.is_err(), "{result:?}");
        assert_eq!(hit, Some(Hit::Memory));
    }

    #[test]
    fn all_memories_and_tables_of_a_call_share_one_budget() {
        let limits = Limits { memory_bytes: 4 << 16, table_elements: 100, ..Limits::default() };
        // Three memories of three pages each: every one within the limit of
        // four pages, all of them together over it.
        let memories = r#"(module (memory 1) (memory 1) (memory 1)
            (func (export "run") (result i32)
              (drop (memory.grow 0 (i32.const 2)))
              (drop (memory.grow 1 (i32.const 2)))
              (memory.grow 2 (i32.const 2))))"#;
        let (result, hit) = run(&limits, memories);
        assert!(result.is_err(), "{result:?}");
        assert_eq!(hit, Some(Hit::Memory));
        let tables = r#"(module (table 40 funcref) (table 40 funcref)
            (func (export "run") (result i32) (table.grow 1 (ref.null func) (i32.const 30))))"#;
        let (result, hit) = run(&limits, tables);
        assert!(result.is_err(), "{result:?}");
        assert_eq!(hit, Some(Hit::Table));
        let fits = r#"(module (memory 1) (memory 1) (func (export "run") (result i32) (memory.grow 1 (i32.const 2))))"#;
        assert_eq!(run(&limits, fits).0.unwrap(), 1);
    }

    #[test]
    fn too_many_memories_or_tables_fail_to_instantiate() {
        let limits = Limits { memories: 2, tables: 2, ..Limits::default() };
        let memories = r#"(module (memory 1) (memory 1) (memory 1) (func (export "run") (result i32) (i32.const 0)))"#;
        assert!(run(&limits, memories).0.is_err());
        let tables = r#"(module (table 1 funcref) (table 1 funcref) (table 1 funcref) (func (export "run") (result i32) (i32.const 0)))"#;
        assert!(run(&limits, tables).0.is_err());
        let fine = r#"(module (memory 1) (table 1 funcref) (func (export "run") (result i32) (i32.const 7)))"#;
        assert_eq!(run(&limits, fine).0.unwrap(), 7);
    }
}
