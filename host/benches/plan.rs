//! Prints the plugin performance figures: component size, cold compile time,
//! precompiled-cache load time, and the median latency of one `plan` call
//! through the component (fresh store and instance per call, as the operator
//! does) against the same logic called natively.
//!
//! Run with `task bench` (release build). Needs the Kro component built
//! (`task build-plugins`) or `KRO_PLUGIN_WASM` set.

use std::time::{Duration, Instant};

use guest_kro::KroProvider;
use guest_kro::cases;
use host_test_support::plugins::{KRO, plugin_path};
use service_provider_host::sandbox::{Limits, Sandbox};
use service_provider_sdk::contract::Provider;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let start = Instant::now();
    let r = f();
    (start.elapsed(), r)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = plugin_path(KRO);
    let wasm = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `task build-plugins`)", path.display()));
    let sandbox = Sandbox::new().expect("engine");

    const COMPILES: usize = 5;
    let compiles: Vec<Duration> =
        (0..COMPILES).map(|_| time(|| sandbox.prepare(&wasm, None).expect("compiles")).0).collect();

    let cache = std::env::temp_dir().join(format!("sp-host-bench-{}", std::process::id()));
    sandbox.prepare(&wasm, Some(&cache)).expect("fills the cache");
    let cached: Vec<Duration> =
        (0..COMPILES).map(|_| time(|| sandbox.prepare(&wasm, Some(&cache)).expect("loads")).0).collect();
    let _ = std::fs::remove_dir_all(&cache);

    let plugin = sandbox.prepare(&wasm, None).expect("compiles").describe(Limits::default()).await.expect("loads");
    // The realistic reconcile: seed example, Flux objects observed Ready.
    let case = cases::all().into_iter().find(|c| c.name == "v0.9.3 all ready").expect("case");
    let input = case.input;
    let input_bytes = input.object.len()
        + input.provider_config.as_ref().map_or(0, String::len)
        + input.observed.iter().flat_map(|o| &o.objects).map(String::len).sum::<usize>();

    // More calls (`BENCH_CALLS=20000`) for a profile of the call itself.
    let calls: usize = std::env::var("BENCH_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(500);
    for _ in 0..20 {
        plugin.plan(&input).await.expect("no trap").expect("plans");
        KroProvider::plan(&input).expect("plans");
    }
    let mut component = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        plugin.plan(&input).await.expect("no trap").expect("plans");
        component.push(start.elapsed());
    }
    let native: Vec<Duration> = (0..calls).map(|_| time(|| KroProvider::plan(&input).expect("plans")).0).collect();
    let (c, n) = (median(component), median(native));

    println!("plugin                       {}", path.display());
    println!("component size               {} bytes", wasm.len());
    println!("cold compile (median of {COMPILES})    {:.1} ms", median(compiles).as_secs_f64() * 1e3);
    println!("cached load (median of {COMPILES})     {:.2} ms", median(cached).as_secs_f64() * 1e3);
    println!("plan input                   {input_bytes} bytes of JSON");
    println!("plan via component (median of {calls}, fresh store each)  {:.1} µs", c.as_secs_f64() * 1e6);
    println!("plan natively (median of {calls})                         {:.1} µs", n.as_secs_f64() * 1e6);
    println!("component / native           {:.1}x", c.as_secs_f64() / n.as_secs_f64());
}
