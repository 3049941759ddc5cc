//! Prints the plugin performance figures of guest-kro (Rust) and its Go port
//! (examples/go-kro) side by side: component size, cold compile time,
//! precompiled-cache load time, and the median latency of one `plan` call
//! through the component (fresh store and instance per call, as the operator
//! does), against the same logic called natively. Measurements alternate
//! between the two components, so a machine whose speed changes during the
//! run skews both alike.
//!
//! Then the cost of a shadow plugin (`run --shadow-plugin`) on a reconcile:
//! the plugin's checked plan alone, against that plus the shadow's (the
//! next Kro version, `tests/plugins/kro-next`) and their comparison, which
//! is what a shadow adds to each reconcile; alternated, medians.
//!
//! Run with `task bench` (release build). Needs the components built
//! (`task build-plugins build-go-plugins`) or `KRO_PLUGIN_WASM` and
//! `GO_KRO_PLUGIN_WASM` set.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use guest_kro::KroProvider;
use guest_kro::cases;
use host_test_support::plugins::{Component, GO_KRO, KRO, KRO_NEXT, planner, plugin_path};
use service_provider_host::plugin::plan::{self, compare};
use service_provider_host::plugin::sandbox::{Limits, Plugin, Sandbox};
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One component under measurement, and its samples.
struct Subject {
    label: &'static str,
    path: PathBuf,
    wasm: Vec<u8>,
    compiles: Vec<Duration>,
    cached: Vec<Duration>,
    plans: Vec<Duration>,
}

impl Subject {
    fn new(label: &'static str, component: Component) -> Self {
        let path = plugin_path(component);
        let wasm = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Subject { label, path, wasm, compiles: Vec::new(), cached: Vec::new(), plans: Vec::new() }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut subjects = vec![Subject::new("guest-kro (Rust)", KRO), Subject::new("go-kro (Go)", GO_KRO)];
    let sandbox = Sandbox::new().expect("engine");

    const COMPILES: usize = 5;
    let cache = std::env::temp_dir().join(format!("sp-host-bench-{}", std::process::id()));
    for s in &subjects {
        sandbox.prepare(&s.wasm, Some(&cache)).expect("fills the cache");
    }
    for _ in 0..COMPILES {
        for s in &mut subjects {
            s.compiles.push(time(|| sandbox.prepare(&s.wasm, None).expect("compiles")).0);
            s.cached.push(time(|| sandbox.prepare(&s.wasm, Some(&cache)).expect("loads")).0);
        }
    }
    let _ = std::fs::remove_dir_all(&cache);

    let mut plugins: Vec<Plugin> = Vec::new();
    for s in &subjects {
        let prepared = sandbox.prepare(&s.wasm, None).expect("compiles");
        plugins.push(prepared.describe(Limits::default()).await.expect("loads"));
    }
    // The realistic reconcile: seed example, Flux objects observed Ready.
    let case = cases::all().into_iter().find(|c| c.name == "v0.9.3 all ready").expect("case");
    let input = case.input;
    let input_bytes = input.object.len()
        + input.provider_config.as_ref().map_or(0, String::len)
        + input.observed.iter().flat_map(|o| &o.objects).map(String::len).sum::<usize>();

    // More calls (`BENCH_CALLS=20000`) for a profile of the call itself.
    let calls: usize = std::env::var("BENCH_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(500);
    for _ in 0..20 {
        for plugin in &plugins {
            plugin.plan(&input).await.expect("no trap").expect("plans");
        }
        KroProvider::plan(&input).expect("plans");
    }
    for _ in 0..calls {
        for (s, plugin) in subjects.iter_mut().zip(&plugins) {
            let start = Instant::now();
            plugin.plan(&input).await.expect("no trap").expect("plans");
            s.plans.push(start.elapsed());
        }
    }
    let native = median((0..calls).map(|_| time(|| KroProvider::plan(&input).expect("plans")).0).collect());

    println!(
        "plan input: {input_bytes} bytes of JSON (case \"v0.9.3 all ready\"); medians of {COMPILES} compiles, {calls} calls"
    );
    println!(
        "{:<18} {:>12} {:>14} {:>13} {:>12} {:>10}",
        "plugin", "size (bytes)", "cold compile", "cached load", "plan", "/ native"
    );
    for s in subjects {
        let plan = median(s.plans);
        println!(
            "{:<18} {:>12} {:>11.1} ms {:>10.2} ms {:>9.1} µs {:>9.1}x",
            s.label,
            s.wasm.len(),
            ms(median(s.compiles)),
            ms(median(s.cached)),
            us(plan),
            plan.as_secs_f64() / native.as_secs_f64()
        );
        eprintln!("  {}: {}", s.label, s.path.display());
    }
    println!("{:<18} {:>12} {:>14} {:>13} {:>9.1} µs", "guest-kro native", "-", "-", "-", us(native));
    shadow_cost(&sandbox, &input, calls).await;
}

/// A reconcile's plugin work with and without a shadow beside it.
async fn shadow_cost(sandbox: &Sandbox, input: &service_provider_sdk::contract::Input, calls: usize) {
    let load = |component: Component| async move {
        let wasm = std::fs::read(plugin_path(component)).expect("the component");
        let prepared = sandbox.prepare(&wasm, None).expect("compiles");
        planner(prepared.describe(Limits::default()).await.expect("loads"))
    };
    let (stable, shadow) = (load(KRO).await, load(KRO_NEXT).await);
    let (mut alone, mut shadowed) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let start = Instant::now();
        let answer = plan::reconcile(&stable, input).await;
        alone.push(start.elapsed());
        let start = Instant::now();
        let answer_again = plan::reconcile(&stable, input).await;
        let theirs = compare::Answer::of(plan::reconcile(&shadow, input).await);
        let differences = compare::compare(&compare::Answer::of_ref(&answer_again), &theirs);
        shadowed.push(start.elapsed());
        assert!(answer.is_ok() && !differences.is_empty(), "the shadow differs from the plugin");
    }
    let (alone, shadowed) = (median(alone), median(shadowed));
    println!(
        "checked plan: {:.1} µs; with a shadow (its checked plan and the comparison): {:.1} µs, +{:.1} µs per reconcile",
        us(alone),
        us(shadowed),
        us(shadowed.saturating_sub(alone))
    );
}
