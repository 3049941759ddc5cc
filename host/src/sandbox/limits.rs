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
    /// Maximum linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Maximum elements of any table (a `table.grow` is a host allocation).
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
    /// Maximum bytes of output the host accepts from one call.
    pub output_bytes: usize,
    /// Maximum objects (plus copies) one plan may ask for.
    pub objects: usize,
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
        }
    }
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    Memory,
    Table,
}

/// `StoreLimits` with every field set, plus a record of which limit a
/// refused growth hit, so a limit trap is reported as such instead of being
/// recognised by its message text.
pub struct Limiter {
    inner: StoreLimits,
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
        Limiter { inner, hit: None }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum);
        if !matches!(allowed, Ok(true)) {
            self.hit = Some(Hit::Memory);
        }
        allowed
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.inner.table_growing(current, desired, maximum);
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
}
