//! The plugin components the tests use. `task build-plugins` builds them into
//! `target/wasm32-wasip2/plugin/`; each can be overridden with an env var.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use service_provider_host::plugin::grant::{Effective, Grant};
use service_provider_host::plugin::plan::Planner;
use service_provider_host::plugin::sandbox::{Limits, Plugin, Prepared, Sandbox};

/// A component the tests use: the env var that overrides its path, and its
/// file name in the build output (or, for a committed fixture, in
/// `tests/fixtures/`).
#[derive(Debug, Clone, Copy)]
pub struct Component {
    pub env: &'static str,
    pub file: &'static str,
    pub committed: bool,
}

impl Component {
    const fn built(env: &'static str, file: &'static str) -> Component {
        Component { env, file, committed: false }
    }
}

pub const KRO: Component = Component::built("KRO_PLUGIN_WASM", "guest_kro.wasm");
pub const FLUX: Component = Component::built("FLUX_PLUGIN_WASM", "guest_flux.wasm");
pub const MISBEHAVING: Component = Component::built("MISBEHAVING_PLUGIN_WASM", "misbehaving_plugin.wasm");
pub const WORKLOAD_ECHO: Component = Component::built("WORKLOAD_ECHO_PLUGIN_WASM", "workload_echo_plugin.wasm");
pub const HOSTILE: Component = Component::built("HOSTILE_PLUGIN_WASM", "hostile_plugin.wasm");
pub const IMPOSTOR: Component = Component::built("IMPOSTOR_PLUGIN_WASM", "impostor_plugin.wasm");
/// `tests/plugins/plural-thief`: a pinnable identity, ConfigMaps observed through `secrets`.
pub const PLURAL_THIEF: Component = Component::built("PLURAL_THIEF_PLUGIN_WASM", "plural_thief_plugin.wasm");
pub const SLEEPY_DESCRIBE: Component = Component::built("SLEEPY_DESCRIBE_PLUGIN_WASM", "sleepy_describe_plugin.wasm");
pub const FUTURE_CONTRACT: Component = Component::built("FUTURE_CONTRACT_PLUGIN_WASM", "future_contract_plugin.wasm");
/// The Kro plugin's next version (`tests/plugins/kro-next`): known changes, for upgrades.
pub const KRO_NEXT: Component = Component::built("KRO_NEXT_PLUGIN_WASM", "kro_next_plugin.wasm");
/// examples/go-hello, a plugin written in Go (`task build-go-plugins`).
pub const GO_HELLO: Component = Component::built("GO_HELLO_PLUGIN_WASM", "go_hello.wasm");
/// examples/go-kro, guest-kro ported to Go (`task build-go-plugins`).
pub const GO_KRO: Component = Component::built("GO_KRO_PLUGIN_WASM", "go_kro.wasm");
/// examples/ts-hello, go-hello in TypeScript (`task build-ts-plugins`).
pub const TS_HELLO: Component = Component::built("TS_HELLO_PLUGIN_WASM", "ts_hello.wasm");
/// guest-kro as built against contract 0.1.0, committed: old plugins must
/// keep working.
pub const KRO_0_1: Component = Component { env: "KRO_0_1_PLUGIN_WASM", file: "guest-kro-0.1.0.wasm", committed: true };

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where a component is; panics with the command to run when it is missing.
pub fn plugin_path(component: Component) -> PathBuf {
    let path = std::env::var_os(component.env).map(PathBuf::from).unwrap_or_else(|| match component.committed {
        true => root().join("tests/fixtures").join(component.file),
        false => root().join("target/wasm32-wasip2/plugin").join(component.file),
    });
    assert!(
        path.is_file(),
        "{} not found: build the plugins first with `task build-plugins` (or set {})",
        path.display(),
        component.env
    );
    path
}

/// The process-wide engine.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| Sandbox::new().expect("engine"))
}

/// A component compiled and linked, not yet described. Compiling takes
/// seconds in a debug build, so do it once per process and component.
pub fn prepared(component: Component) -> Prepared {
    static CACHE: OnceLock<std::sync::Mutex<Vec<(&'static str, Prepared)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().expect("not poisoned");
    if let Some((_, p)) = cache.iter().find(|(file, _)| *file == component.file) {
        return p.clone();
    }
    let prepared = sandbox().prepare_file(&plugin_path(component), None).expect("the component compiles and links");
    cache.push((component.file, prepared.clone()));
    prepared
}

/// A component loaded with `limits` (its `describe` called). Usable from
/// synchronous code and from inside a runtime: the call runs on a thread of
/// its own.
pub fn load(component: Component, limits: Limits) -> Plugin {
    let prepared = prepared(component);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(prepared.describe(limits))
    })
    .join()
    .expect("describe thread")
    .unwrap_or_else(|e| panic!("{}: describe failed: {e}", component.file))
}

/// The Kro component with default limits, loaded once per process.
pub fn plugin() -> Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| load(KRO, Limits::default())).clone()
}

/// The Go port of the Kro plugin with default limits, loaded once per process.
pub fn go_kro_plugin() -> Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| load(GO_KRO, Limits::default())).clone()
}

/// The Flux component with default limits, loaded once per process.
pub fn flux_plugin() -> Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| load(FLUX, Limits::default())).clone()
}

/// A test plugin that asks for a workload cluster (`tests/plugins/workload-echo`).
pub fn workload_echo_plugin() -> Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| load(WORKLOAD_ECHO, Limits::default())).clone()
}

/// The built-in grant with one of `plugin`'s ControlPlane token rules taken
/// from its identity's ceiling: every rule it asks for but the ones naming
/// `resource`. How many rules are left.
pub fn built_in_grant_without(plugin: &Plugin, resource: &str) -> (Grant, usize) {
    let mut grant = Grant::default_grant();
    let rules = &plugin.descriptor().access.control_plane_rules;
    let identity = grant.identities.iter_mut().find(|i| i.plugin == plugin.name()).expect("the plugin's identity");
    let ceiling = identity.token_rules.as_mut().expect("the identity's own token ceiling");
    ceiling.control_plane = rules.iter().filter(|r| !r.resources.iter().any(|x| x == resource)).cloned().collect();
    let left = ceiling.control_plane.len();
    (grant, left)
}

/// The grant a platform operator would give each test plugin: the built-in
/// one, which pins kro's and flux's identities; for `echo` (workload-echo)
/// and `hostile` their own identities (both serve the Kro API, so the
/// project's CRDs can be reused), and for `echo` a token ceiling of its own
/// and a workload cluster where it may write ConfigMaps in `default`
/// (`hostile` gets no token rules at all).
pub fn grant_for(plugin: &Plugin) -> Grant {
    Grant::parse(&grant_text_for(plugin.name())).expect("the test grant parses")
}

/// [`grant_for`] as the text of a `--plugin-grant` file (JSON, which is
/// YAML), for the plugin named `plugin_name`.
pub fn grant_text_for(plugin_name: &str) -> String {
    let mut grant: serde_json::Value =
        serde_saphyr::from_str(service_provider_host::plugin::grant::DEFAULT).expect("the built-in grant parses");
    let kro_kinds = |plugin: &str, finalizer: &str, crds: &[&str]| {
        let group = "kro.services.open-control-plane.io";
        serde_json::json!({"plugin": plugin, "service": {"group": group, "kind": "Kro"},
            "providerConfig": {"group": group, "kind": "ProviderConfig"}, "finalizer": finalizer, "crds": crds})
    };
    let identities = grant["identities"].as_array_mut().expect("identities");
    let mut echo = kro_kinds("echo", "echo.test/finalizer", &["echoes.kro.services.open-control-plane.io"]);
    echo["tokenRules"] = serde_json::json!({
        "controlPlane": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        "workload": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
    });
    identities.push(echo);
    identities.push(kro_kinds("hostile", "hostile.test/finalizer", &[]));
    identities.push(kro_kinds("thief", "thief.test/finalizer", &[]));
    if plugin_name == "thief" {
        // What a platform might well grant: ConfigMaps are not Secrets.
        grant["observe"].as_array_mut().expect("observe rules").push(serde_json::json!({
            "cluster": "platform", "namespaces": ["{tenant}"], "groups": [""], "kinds": ["ConfigMap"], "detail": "full",
        }));
    }
    if plugin_name == "echo" {
        grant["write"].as_array_mut().expect("write rules").push(serde_json::json!({
            "cluster": "workload", "namespaces": ["default"], "groups": [""], "kinds": ["ConfigMap"],
        }));
    }
    serde_json::to_string_pretty(&grant).expect("JSON")
}

/// A plugin with the grant of [`grant_for`].
pub fn planner(plugin: Plugin) -> Planner {
    let granted = Effective::for_component(plugin.descriptor(), plugin.digest(), grant_for(&plugin))
        .expect("the grant fits the plugin");
    Planner { plugin, granted: Arc::new(granted) }
}
