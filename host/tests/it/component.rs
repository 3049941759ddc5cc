//! The plugins as real WebAssembly components: every shared case of each
//! plugin (`guest_kro::cases`, `guest_flux::cases`) must give exactly the
//! answer its native library gives; the sandbox must contain a misbehaving
//! plugin; plugins of older contract versions keep working and unknown
//! versions are refused.
//!
//! Needs the components built first (`task build-plugins`, which `task test`
//! and `.ci/run` do); the paths can be overridden with `KRO_PLUGIN_WASM`,
//! `FLUX_PLUGIN_WASM`, `MISBEHAVING_PLUGIN_WASM`, ...

use std::time::{Duration, Instant};

use guest_flux::FluxProvider;
use guest_kro::KroProvider;
use guest_kro::cases::{self, Call};
use host_test_support::parity::{assert_parity, normalized};
use host_test_support::plugins::{self, MISBEHAVING};
use service_provider_host::plugin::sandbox::{Limits, Plugin};
use service_provider_sdk::contract::{Input, PlanError, Provider};

/// Compiled once per test binary: a debug-build compile takes seconds.
fn kro() -> Plugin {
    plugins::plugin()
}

fn misbehaving(limits: Limits) -> Plugin {
    plugins::load(MISBEHAVING, limits)
}

#[test]
fn the_component_describes_itself_like_the_library() {
    assert_eq!(kro().descriptor(), &KroProvider::describe());
}

/// Every shared case gives the same answer through the component as
/// natively: for each plugin, the same generic harness on its own cases.
#[tokio::test]
async fn every_shared_case_gives_identical_answers_through_the_component() {
    assert_parity::<KroProvider>(&kro(), cases::all()).await;
    assert_parity::<FluxProvider>(&plugins::flux_plugin(), guest_flux::cases::all()).await;
}

/// guest-kro ported to Go (examples/go-kro) describes itself exactly as
/// guest-kro does and gives the same answer on every shared case: the same
/// objects, copies, status, requeue and error texts.
#[tokio::test]
async fn the_go_port_of_kro_answers_every_case_like_guest_kro() {
    assert_parity::<KroProvider>(&plugins::go_kro_plugin(), cases::all()).await;
}

#[tokio::test]
async fn garbage_input_is_an_error_not_a_trap() {
    let base = cases::input(cases::kro("mcp-01", "default", "v0.9.3"), Some(cases::provider_config()));
    let variants: Vec<(&str, Input)> = vec![
        ("object is not JSON", Input { object: "{not json".into(), ..base.clone() }),
        ("object is an array", Input { object: "[]".into(), ..base.clone() }),
        ("config is not JSON", Input { provider_config: Some("\u{0}".into()), ..base.clone() }),
        ("config without spec", Input { provider_config: Some("{}".into()), ..base.clone() }),
        ("observed is not JSON", {
            let mut i = base.clone();
            i.observed = vec![service_provider_sdk::contract::Observed {
                id: "helm-release".into(),
                objects: vec!["}{".into()],
            }];
            i
        }),
    ];
    // The Rust component and its Go port alike.
    for (which, plugin) in [("guest-kro", kro()), ("go-kro", plugins::go_kro_plugin())] {
        for (name, input) in &variants {
            let answer = plugin.plan(input).await.unwrap_or_else(|e| panic!("{name}: trapped: {e}"));
            match &answer {
                Err(PlanError::InvalidInput(i)) => assert!(!i.message.is_empty(), "{name}"),
                Err(PlanError::Transient(m)) => assert!(m.contains("not a JSON document"), "{name}: {m}"),
                Ok(plan) => panic!("{name}: expected an error, got {plan:?}"),
            }
            assert_eq!(normalized(&answer), normalized(&KroProvider::plan(input)), "{which}: {name}");
        }
    }
}

#[tokio::test]
async fn a_plugin_that_never_returns_is_stopped_at_its_deadline() {
    let limits = Limits { timeout: Duration::from_millis(200), ..Limits::default() };
    let plugin = misbehaving(limits);
    let input = cases::input(cases::kro("mcp-01", "default", "v1"), None);
    let started = Instant::now();
    let err = plugin.plan(&input).await.expect_err("must be interrupted");
    let elapsed = started.elapsed();
    assert!(err.to_string().contains("exceeded its time budget of 200ms"), "{err}");
    assert!(elapsed >= Duration::from_millis(200), "stopped too early: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "stopped too late: {elapsed:?}");
    // A fresh store per call: the plugin is usable again afterwards.
    let again = plugin.plan(&input).await.expect_err("interrupted again");
    assert!(again.to_string().contains("time budget"), "{again}");
}

#[tokio::test]
async fn a_plugin_that_hoards_memory_is_stopped_at_its_limit() {
    let limits = Limits { memory_bytes: 32 << 20, timeout: Duration::from_secs(10), ..Limits::default() };
    let plugin = misbehaving(limits);
    let input = cases::input(cases::kro("mcp-01", "default", "v1"), None);
    let err = plugin.cleanup(&input).await.expect_err("must hit the memory limit");
    assert!(err.to_string().contains("exceeded its memory limit of 32 MiB"), "{err}");
}

/// A plugin that panics traps, and the error says what it wrote to stderr
/// (its panic message); a plugin that floods stderr neither traps nor
/// grows the host: only the tail is kept.
#[tokio::test]
async fn a_panic_message_reaches_the_error_and_a_flood_of_stderr_is_dropped() {
    // Writing 10 MiB through a debug build's WASI takes about a second:
    // on a loaded machine more than the default budget, which this test
    // is not about.
    let plugin = misbehaving(Limits { timeout: Duration::from_secs(30), ..Limits::default() });
    let asking = |word: &str| cases::input(serde_json::json!({"spec": {"say": word}}), None);
    let err = plugin.plan(&asking("please panic")).await.expect_err("traps");
    let text = err.to_string();
    assert!(text.starts_with("plugin misbehaving failed, having written: "), "{text}");
    assert!(text.contains("panicked at") && text.contains("asked to panic, with 31 bytes of input"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");

    let started = Instant::now();
    let answer = plugin.plan(&asking("please shout")).await.expect("no trap");
    assert!(matches!(&answer, Err(PlanError::Transient(m)) if m == "shouted 10 MiB"), "{answer:?}");
    eprintln!("10 MiB of stderr in {:?}", started.elapsed());
}

/// A plugin of a contract version the host does not know is refused by
/// name, with the supported range.
#[test]
fn a_plugin_of_an_unsupported_contract_version_is_refused_by_name() {
    let path = plugins::plugin_path(plugins::FUTURE_CONTRACT);
    let err = plugins::sandbox().prepare_file(&path, None).err().expect("refused");
    assert_eq!(err.to_string(), "the plugin implements contract version 0.9.0; this host supports 0.1.0 to 0.2.0");
}

/// guest-kro as it was built against contract 0.1.0 (a committed `.wasm`)
/// still loads, describes itself as before and plans the same objects and
/// copies as today's library, adapted to the newest types.
#[tokio::test]
async fn the_frozen_0_1_kro_plugin_still_works() {
    let old = plugins::load(plugins::KRO_0_1, Limits::default());
    assert_eq!(old.contract_version(), "0.1.0");
    assert_eq!(kro().contract_version(), "0.2.0");
    // The changes to describe() since: the ControlPlane token may read
    // ReplicaSets and Pods, which helm-controller's readiness wait needs
    // (found with openmcp-operator's scoped tokens), and RBAC's verbs are
    // named (`escalate` and `bind` among them) instead of `*`.
    // Since then, too, kro v0.10's Graphs hold a deletion: observed at
    // cleanup, and the token may read them.
    // And `spec.version` of the Kro CRD takes at most 64 characters.
    let mut now = KroProvider::describe();
    let bounded = "compared verbatim. At most\n                  64 characters: the API server refuses a longer one, so a tenant\n                  cannot make the object megabytes large through it.\n                maxLength: 64\n";
    let kroes = now.crds.iter_mut().find(|c| c.manifest.contains("kind: Kro\n")).expect("the Kro CRD");
    assert!(kroes.manifest.contains(bounded), "{}", kroes.manifest);
    kroes.manifest = kroes.manifest.replace(bounded, "compared verbatim.\n");
    now.observations.retain(|o| o.id != guest_kro::describe::OBSERVE_GRAPHS);
    for rule in &mut now.access.control_plane_rules {
        rule.resources.retain(|r| r != "graphs");
    }
    let before = now.access.control_plane_rules.len();
    now.access.control_plane_rules.retain(|r| r.resources != ["replicasets"] && r.resources != ["pods"]);
    assert_eq!(now.access.control_plane_rules.len(), before - 2);
    for rule in &mut now.access.control_plane_rules {
        if rule.api_groups == ["rbac.authorization.k8s.io"] {
            assert!(rule.verbs.contains(&"escalate".to_string()) && rule.verbs.contains(&"bind".to_string()));
            rule.verbs = vec!["*".into()];
        }
    }
    assert_eq!(old.descriptor(), &now);
    for case in cases::all().into_iter().filter(|c| c.call == Call::Plan) {
        let adapted = old.plan(&case.input).await.unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let native = KroProvider::plan(&case.input);
        match (&adapted, &native) {
            (Ok(a), Ok(n)) => {
                let objects = |p: &service_provider_sdk::contract::Plan| normalized::<_, ()>(&Ok(p.objects.clone()));
                // The one change since 0.1.0: the Flux interval is spelled as
                // the Go provider writes it ("1m0s", for `--adopt-from`).
                let old = objects(a).to_string().replace(r#""interval":"1m""#, r#""interval":"1m0s""#);
                assert_eq!(
                    serde_json::from_str::<serde_json::Value>(&old).unwrap(),
                    objects(n),
                    "case {:?}",
                    case.name
                );
                assert_eq!(a.copies, n.copies, "case {:?}", case.name);
            }
            (Err(a), Err(n)) => {
                assert_eq!(std::mem::discriminant(a), std::mem::discriminant(n), "case {:?}", case.name)
            }
            _ => panic!("case {:?}: {adapted:?} vs {native:?}", case.name),
        }
    }
}

/// A plugin written in Go (examples/go-hello: the SDK in sdk-go, built by
/// `task build-go-plugins`) is a component like any other: it describes
/// itself, plans, fails as the tenant's error, and tears down, through the
/// same sandbox and limits.
#[tokio::test]
async fn a_plugin_written_in_go_runs_in_the_same_sandbox() {
    use service_provider_sdk::contract::{CleanupPlan, Cluster};
    let started = Instant::now();
    let hello = plugins::load(plugins::GO_HELLO, Limits::default());
    eprintln!("go-hello compiled and described in {:?}", started.elapsed());
    assert_eq!(hello.name(), "hello");
    assert_eq!(hello.descriptor().service.kind, "Hello");

    let context = service_provider_sdk::testing::granted_context(
        "hello.services.open-control-plane.io",
        "hello",
        "openmcp-system",
        "mcp-01",
        "tenant-a",
    );
    let tenant = context.tenant_namespace.clone();
    let greeting = |spec: serde_json::Value| Input {
        object: serde_json::json!({"apiVersion": "hello.services.open-control-plane.io/v1alpha1", "kind": "Hello",
            "metadata": {"name": "mcp-01", "namespace": "tenant-a"}, "spec": spec})
        .to_string(),
        provider_config: Some("{}".into()),
        context: context.clone(),
        observed: vec![],
    };
    let plan = hello.plan(&greeting(serde_json::json!({"greeting": "hi"}))).await.expect("no trap").expect("a plan");
    assert_eq!(plan.objects.len(), 1);
    assert_eq!(plan.objects[0].cluster, Cluster::Platform);
    let manifest: serde_json::Value = serde_json::from_str(&plan.objects[0].manifest).expect("JSON");
    assert_eq!(manifest["metadata"]["namespace"], tenant.as_str());
    assert_eq!(manifest["data"]["greeting"], "hi");
    assert_eq!(plan.status.conditions[0].reason, "Greeted");

    let refused = hello.plan(&greeting(serde_json::json!({}))).await.expect("no trap");
    assert!(
        matches!(&refused, Err(PlanError::InvalidInput(i)) if i.message == "spec.greeting is empty"),
        "{refused:?}"
    );
    let cleanup = hello.cleanup(&greeting(serde_json::json!({"greeting": "hi"}))).await.expect("no trap");
    let Ok(CleanupPlan::Teardown(teardown)) = cleanup else { panic!("a teardown: {cleanup:?}") };
    assert_eq!(teardown.objects[0].namespace.as_deref(), Some(tenant.as_str()));
    assert_eq!(teardown.objects[0].name, "hello");
}
