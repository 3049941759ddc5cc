//! `service-provider-host`: one generic OpenControlPlane service provider;
//! the service-specific logic comes from a WebAssembly plugin.
//!
//! The whole command line: every flag with its help text, and the few lines
//! that turn each subcommand into library calls and each failure into one
//! line for a person.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use service_provider_host::clusters;
use service_provider_host::controller::server;
use service_provider_host::controller::{self, Endpoints, InitOptions, Settings};
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::plan::Planner;
use service_provider_host::plugin::sandbox::{Limits, Sandbox};
use service_provider_host::plugin::{author, load, oci};
use service_provider_host::reconcile::rollout::Cohort;
use service_provider_host::render::{self, Request};
use service_provider_host::telemetry::Traces;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install the plugin's CRDs and register the service kind at the
    /// ServiceProvider (run once per provider version by openmcp).
    Init(InitArgs),
    /// Run the service provider.
    Run(RunArgs),
    /// Print what the host would apply, copy, delete and write as status for
    /// one service object, without touching any cluster.
    Render(RenderArgs),
    /// Preview a plugin upgrade on the live fleet without writing anything:
    /// what --plugin (the candidate) would change for every service object
    /// against the plugin running now (--current-plugin).
    Diff(DiffArgs),
    /// Compile plugins into --plugin-cache-dir ahead of time (for container
    /// images), checking that each one loads and describes itself.
    Precompile(PrecompileArgs),
    /// Work with plugin artifacts.
    #[command(subcommand)]
    Plugin(PluginCommand),
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Publish a plugin component to an OCI registry and print the
    /// digest-pinned reference to give --plugin (sign that digest with
    /// `cosign sign --key`).
    Push(PushArgs),
    /// Start a plugin: write a working one (its CRDs, grant, native tests,
    /// shared cases, build and render example) into a new directory.
    New(NewArgs),
    /// Make a component of a core Wasm module built for WASI preview 1 (what
    /// `GOOS=wasip1 go build -buildmode=c-shared` writes).
    Componentize(ComponentizeArgs),
    /// Show what a component is and asks for: contract version, digests,
    /// identity, capabilities, observations, token rules, CRDs.
    Inspect(InspectArgs),
    /// Print the grant that gives a component exactly what it asks for, its
    /// identity pinned to the component's digest: what the author hands the
    /// platform team to review.
    Grant(GrantArgs),
    /// Run a component through the conformance checks every plugin must
    /// pass, with its shared cases (the JSON the SDKs' tests read); exits 1
    /// when a check fails.
    Test(TestArgs),
}

#[derive(Args)]
struct PushArgs {
    /// The plugin component (.wasm); it must load and describe itself.
    file: PathBuf,
    /// Where to push it: oci://<registry>/<repository>:<tag>.
    target: String,
    #[command(flatten)]
    registry: RegistryAccess,
}

#[derive(Clone, Copy, ValueEnum)]
enum Language {
    Rust,
    Go,
    Ts,
}

#[derive(Args)]
struct NewArgs {
    /// The plugin's name: lowercase letters, digits and '-' (it names the
    /// service kind, its API group and the directory).
    name: String,
    /// The language to write it in.
    #[arg(long)]
    lang: Language,
    /// Where to write it (must not exist, or be empty); default: ./<name>.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The API group of its kinds, one of your domain (default:
    /// <name>.services.example.com).
    #[arg(long)]
    group: Option<String>,
    /// Take the SDK from this directory instead of its registry: a clone of
    /// service-provider-host, or the language's SDK directory itself
    /// (before a release is published, or to try an unreleased SDK).
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

#[derive(Args)]
struct ComponentizeArgs {
    /// The core module.
    core: PathBuf,
    /// The component to write.
    out: PathBuf,
}

/// A component to read: a file, or a digest-pinned registry reference.
#[derive(Args)]
struct ComponentArgs {
    /// A component file (.wasm), or oci://<registry>/<repository>@sha256:<digest>.
    plugin: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

impl ComponentArgs {
    async fn load(&self) -> anyhow::Result<(service_provider_host::plugin::sandbox::Plugin, Option<String>)> {
        Ok(load::component(&self.plugin, &self.registry.options(None), Limits::default()).await?)
    }
}

#[derive(Args)]
struct InspectArgs {
    #[command(flatten)]
    component: ComponentArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    output: Output,
}

#[derive(Args)]
struct GrantArgs {
    #[command(flatten)]
    component: ComponentArgs,
    /// Print the host's built-in grant instead, its identities pinned to
    /// the components this build ships and the component's identity also to
    /// its digest: how a platform admits a new build of a shipped plugin
    /// (kro, flux), which the built-in grant refuses by digest.
    #[arg(long)]
    built_in: bool,
    /// Print the grant also when the plugin asks for what no review covers
    /// (a named cluster power in a token rule, a Flux kind the built-in
    /// grant has no rule for, a core kind observed whole); the file's header
    /// then names each. Without it, such a grant is refused.
    #[arg(long, conflicts_with = "built_in")]
    allow_unreviewed: bool,
}

#[derive(Args)]
struct TestArgs {
    #[command(flatten)]
    component: ComponentArgs,
    /// Files of shared cases (a JSON array: name, call, input, expected).
    cases: Vec<PathBuf>,
    /// Run under this grant instead of the one `plugin grant` prints.
    #[arg(long)]
    plugin_grant: Option<PathBuf>,
    /// Report format.
    #[arg(short, long, value_enum, default_value = "text")]
    output: TestOutput,
}

#[derive(Clone, Copy, ValueEnum)]
enum TestOutput {
    Text,
    Json,
}

/// How plugins are fetched from OCI registries.
#[derive(Args, Clone)]
struct RegistryArgs {
    /// Only load plugins from a registry whose digest this cosign public key
    /// (PEM, ECDSA P-256) has signed; files are refused. A path, or the PEM
    /// itself (a value starting with `-----BEGIN PUBLIC KEY-----`).
    #[arg(long, env = "PLUGIN_VERIFY_KEY")]
    plugin_verify_key: Option<PathBuf>,
    /// Development only: admit oci:// references by tag. A tag can be moved
    /// to other code; production pins @sha256:<digest>.
    #[arg(long, env = "ALLOW_MUTABLE_PLUGIN_REFERENCE", action = ArgAction::SetTrue)]
    allow_mutable_plugin_reference: bool,
    #[command(flatten)]
    access: RegistryAccess,
}

/// How registries are reached.
#[derive(Args, Clone)]
struct RegistryAccess {
    /// Registries (host[:port]) reached over plain HTTP; repeat or separate
    /// with commas.
    #[arg(long = "insecure-registry", env = "INSECURE_REGISTRIES", value_delimiter = ',')]
    insecure_registries: Vec<String>,
    /// Extra CA certificates (PEM) to trust for registries. Credentials come
    /// from $DOCKER_CONFIG/config.json (a mounted dockerconfigjson Secret).
    #[arg(long, env = "REGISTRY_CA_FILE")]
    registry_ca_file: Option<PathBuf>,
    /// How long pulling a plugin may take, in seconds: every request, retry
    /// and signature check of it together. A registry that stalls, or sends
    /// a byte at a time, fails the start (or `plugin push`) after this.
    #[arg(long, env = "PLUGIN_PULL_TIMEOUT_SECONDS", default_value_t = oci::DEFAULT_PULL_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    plugin_pull_timeout_seconds: u64,
}

impl RegistryArgs {
    fn options(&self, cache_dir: Option<PathBuf>) -> oci::Options {
        oci::Options {
            allow_tag: self.allow_mutable_plugin_reference,
            verify_key: self.plugin_verify_key.clone(),
            ..self.access.options(cache_dir)
        }
    }
}

impl RegistryAccess {
    /// Options that admit no tag and check no signature (`plugin push`
    /// writes, it does not load).
    fn options(&self, cache_dir: Option<PathBuf>) -> oci::Options {
        oci::Options {
            cache_dir,
            allow_tag: false,
            verify_key: None,
            insecure_registries: self.insecure_registries.clone(),
            ca_file: self.registry_ca_file.clone(),
            pull_timeout: Duration::from_secs(self.plugin_pull_timeout_seconds),
        }
    }
}

/// How much the host logs.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Verbosity {
    Error,
    Info,
    Debug,
}

impl Verbosity {
    /// The level's name in a tracing filter.
    fn level(self) -> &'static str {
        match self {
            Verbosity::Error => "error",
            Verbosity::Info => "info",
            Verbosity::Debug => "debug",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Flags openmcp passes to both `init` and `run`.
#[derive(Args)]
struct ProviderArgs {
    /// The openmcp environment name.
    #[arg(long, default_value = "default")]
    environment: String,
    /// Name of the ServiceProvider (and of the ProviderConfig to use).
    #[arg(long, env = "PROVIDER_NAME")]
    provider_name: String,
    /// Log level: error, info or debug (any case); RUST_LOG overrides it.
    #[arg(short = 'v', long, value_enum, ignore_case = true, default_value = "info")]
    verbosity: Verbosity,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Development: use this onboarding kubeconfig instead of requesting
    /// onboarding access through openmcp.
    #[arg(long, env = "ONBOARDING_KUBECONFIG")]
    onboarding_kubeconfig: Option<PathBuf>,
    /// How long to wait for onboarding access to be granted, in seconds.
    #[arg(long, default_value_t = 1800)]
    onboarding_timeout_seconds: u64,
    /// Only reconcile service objects in this onboarding namespace.
    #[arg(long, env = "WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Take over objects at the places this provider's plans put them that
    /// this field manager wrote (e.g. `service-provider-kro`, switching from
    /// the Go provider); repeat or separate with commas. For one rollout
    /// (docs/migrating.md).
    #[arg(long, env = "ADOPT_FROM", value_delimiter = ',')]
    adopt_from: Vec<String>,
    #[command(flatten)]
    plugin: PluginArgs,
}

#[derive(Args)]
struct InitArgs {
    #[command(flatten)]
    provider: ProviderArgs,
    /// Register the service kind in the ServiceProvider's status (openmcp
    /// deletes a ControlPlane's service objects through it); `false` for an
    /// install without an openmcp ServiceProvider.
    #[arg(long, env = "REGISTER_SERVICE_KIND", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    register_service_kind: bool,
    /// How long to wait for openmcp to reconcile the ServiceProvider (give
    /// it a status) before registering the service kind, in seconds.
    #[arg(long, default_value_t = 600)]
    service_provider_timeout_seconds: u64,
}

#[derive(Args)]
struct DiffArgs {
    /// The candidate plugin is --plugin, its grant --plugin-grant; a request
    /// the grant does not give is reported, not refused.
    #[command(flatten)]
    provider: ProviderArgs,
    /// The plugin running now (a file or an oci:// reference); defaults to
    /// --plugin, to preview a change of the grant or the ProviderConfig.
    #[arg(long)]
    current_plugin: Option<String>,
    /// The grant of the plugin running now; defaults to --plugin-grant.
    #[arg(long)]
    current_plugin_grant: Option<PathBuf>,
    /// A ProviderConfig (YAML or JSON) for the candidate to plan with
    /// instead of the live one.
    #[arg(long)]
    provider_config: Option<PathBuf>,
    /// Only service objects with these labels (a label selector).
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Instances previewed at once (a reconcile round's worth by default);
    /// at most 16, each with up to --plugin-memory-mib of guest memory.
    #[arg(long, default_value_t = controller::preview::CONCURRENCY as u64, value_parser = clap::value_parser!(u64).range(1..=16))]
    concurrency: u64,
    /// Also reach each instance's ControlPlane (and workload cluster) with
    /// the access `run` was granted, to compare the objects there with what
    /// is live. It reads every tenant's kubeconfig Secret, so it needs the
    /// host's own ServiceAccount; without it, those objects are compared
    /// with the current plugin's plan.
    #[arg(long)]
    tenant_clusters: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    output: DiffOutput,
    /// Exit with 0 when nothing would change, 2 when something would, 1 on
    /// an error (an instance that could not be previewed included).
    #[arg(long)]
    exit_code: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum DiffOutput {
    Text,
    Json,
    Yaml,
}

#[derive(Args)]
struct PrecompileArgs {
    /// Where to write the compiled plugins (and pulled ones).
    #[arg(long, env = "PLUGIN_CACHE_DIR")]
    plugin_cache_dir: PathBuf,
    /// Plugin components (.wasm), directories whose .wasm files to compile,
    /// or oci:// references to pull.
    #[arg(required = true)]
    plugins: Vec<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    provider: ProviderArgs,
    /// Address of the /metrics endpoint; `0` disables it.
    #[arg(long, default_value = "0")]
    metrics_bind_address: String,
    /// Address of /healthz and /readyz; `0` disables them.
    #[arg(long, default_value = ":8081")]
    health_probe_bind_address: String,
    /// Run only while holding the leader lease (for more than one replica).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    leader_elect: bool,
    /// A shadow plugin (a file or an oci:// reference, e.g. the next version
    /// of --plugin): on every reconcile it plans with the same input;
    /// nothing of its plans is applied, and where they differ the host
    /// counts it, logs it and records an Event on the service object.
    #[arg(long, env = "SHADOW_PLUGIN")]
    shadow_plugin: Option<String>,
    /// The shadow plugin's grant; defaults to --plugin-grant. What it asks
    /// for beyond it is dropped (a shadow never acts).
    #[arg(long, env = "SHADOW_PLUGIN_GRANT")]
    shadow_plugin_grant: Option<PathBuf>,
    /// A canary plugin (a file or an oci:// reference: the next version of
    /// --plugin) that reconciles the instances of its cohort
    /// (--canary-selector or --canary-percent) while --plugin reconciles
    /// the rest. Promote it by making it --plugin.
    #[arg(long, env = "PLUGIN_CANARY", requires = "cohort")]
    plugin_canary: Option<String>,
    /// The canary's grant; defaults to --plugin-grant. A canary that asks
    /// for more than it gives is refused at start.
    #[arg(long, env = "PLUGIN_CANARY_GRANT", requires = "plugin_canary")]
    plugin_canary_grant: Option<PathBuf>,
    /// The canary's cohort: the service objects this label selector
    /// matches (e.g. `rollout=canary`, `tier in (dev,test)`). Tenants write
    /// their objects' labels, so a tenant could move itself into or out of
    /// the cohort (and halt the canary for all): taken only with
    /// --canary-selector-trusted.
    #[arg(long, env = "CANARY_SELECTOR", group = "cohort", requires = "plugin_canary")]
    canary_selector: Option<String>,
    /// Take --canary-selector although tenants write the labels it reads:
    /// say so where an admission policy keeps them from it, or where
    /// choosing the canary is theirs to do.
    #[arg(long, env = "CANARY_SELECTOR_TRUSTED", requires = "canary_selector", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    canary_selector_trusted: bool,
    /// The canary's cohort: this share of instances, by a stable hash of
    /// their service object's uid (the same instances on every start; a
    /// tenant cannot pick a name that lands in it).
    #[arg(long, env = "CANARY_PERCENT", group = "cohort", requires = "plugin_canary", value_parser = clap::value_parser!(u8).range(0..=100))]
    canary_percent: Option<u8>,
    /// How many instances of the cohort may fail by the canary (a plugin
    /// error or timeout, a refused plan); one more halts it, and the cohort
    /// is reconciled with --plugin again.
    #[arg(long, env = "CANARY_MAX_FAILURES", default_value_t = 0)]
    canary_max_failures: usize,
    /// What the host as a whole may write to each cluster, in MiB a minute
    /// (and at most as much at once): however many instances its plugin
    /// has, their writes wait once they add up to it. Each instance has a
    /// budget of its own besides.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    cluster_write_mib_per_minute: u32,
    /// Only `false` (what openmcp's operator passes): the host serves
    /// /metrics over plain HTTP without authentication, so `true` is
    /// refused rather than ignored. Keep the port inside the cluster
    /// (deploy/standalone/50-networkpolicy.yaml) or put an authenticating
    /// proxy in front.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    metrics_secure: bool,
}

impl RunArgs {
    /// The canary's cohort, when there is a canary.
    fn cohort(&self) -> anyhow::Result<Option<Cohort>> {
        if self.plugin_canary.is_none() {
            return Ok(None);
        }
        Ok(Some(match (&self.canary_selector, self.canary_percent) {
            (Some(selector), _) if !self.canary_selector_trusted => anyhow::bail!(
                "--canary-selector {selector:?} matches labels of the service objects, which their tenants write: a \
                 tenant could move itself into or out of the cohort, and halt the canary for everyone; use \
                 --canary-percent, or add --canary-selector-trusted where an admission policy keeps tenants from \
                 these labels"
            ),
            (Some(selector), _) => {
                Cohort::selector(selector).map_err(|why| anyhow::anyhow!("--canary-selector {selector:?}: {why}"))?
            }
            (None, Some(percent)) => Cohort::Percent(percent),
            (None, None) => anyhow::bail!("--plugin-canary needs --canary-selector or --canary-percent"),
        }))
    }
}

impl ProviderArgs {
    fn settings(&self) -> anyhow::Result<Settings> {
        let pod_namespace = std::env::var("POD_NAMESPACE").ok().filter(|s| !s.is_empty()).context(
            "POD_NAMESPACE is not set: the provider needs to know its own namespace (source Secrets and onboarding requests live there); set it from the downward API (fieldRef metadata.namespace)",
        )?;
        let adoption = service_provider_host::adopt::Adoption::new(&self.adopt_from).map_err(anyhow::Error::msg)?;
        // It names the Lease, AccessRequests, copies and field managers, and
        // labels every object and series of the host's.
        anyhow::ensure!(
            service_provider_host::syntax::dns_label(&self.provider_name),
            "--provider-name {:?} is not an RFC 1123 label (lower-case letters, digits and '-', at most 63)",
            self.provider_name
        );
        Ok(Settings {
            adoption,
            provider_name: self.provider_name.clone(),
            pod_namespace,
            pod_name: std::env::var("POD_NAME").ok().filter(|s| !s.is_empty()),
            environment: self.environment.clone(),
            onboarding_kubeconfig: self.onboarding_kubeconfig.clone(),
            onboarding_timeout: Duration::from_secs(self.onboarding_timeout_seconds),
            watch_namespace: self.watch_namespace.clone(),
            unreachable_grace: service_provider_host::reconcile::shared::UNREACHABLE_GRACE,
            writes: Default::default(),
            host_writes: service_provider_host::reconcile::budget::HOST,
        })
    }

    /// The log on stderr, and traces where the `OTEL_*` variables ask for
    /// them (see `telemetry`); the traces are sent until the returned value
    /// is dropped.
    fn init_logging(&self) -> anyhow::Result<Option<Traces>> {
        let level = self.verbosity.level();
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{level},kube=warn,hyper=warn,tower=warn")));
        let ansi = stderr_in_colour();
        // With debug logs, each step's span reports its time when it closes
        // (plugin calls, gathering, every apply and copy, the status write).
        let spans = match self.verbosity {
            Verbosity::Debug => tracing_subscriber::fmt::format::FmtSpan::CLOSE,
            Verbosity::Error | Verbosity::Info => tracing_subscriber::fmt::format::FmtSpan::NONE,
        };
        let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).with_span_events(spans);
        let log = match self.log_format {
            // Fields on one line: what plugins and clusters say forges none.
            LogFormat::Text => log.fmt_fields(service_provider_host::logging::OneLineFields::default()).boxed(),
            LogFormat::Json => log.json().boxed(),
        };
        let traces = Traces::from_env()?;
        tracing_subscriber::registry()
            .with(log.with_filter(filter))
            .with(traces.as_ref().map(|traces| traces.layer()))
            .init();
        if traces.is_some() {
            tracing::info!("sending traces over OTLP (OTEL_* variables)");
        }
        Ok(traces)
    }
}

/// How the plugin is loaded and limited.
#[derive(Args)]
struct PluginArgs {
    /// The plugin: a component file (.wasm; the image has
    /// /plugins/kro.wasm and /plugins/flux.wasm), or
    /// oci://<registry>/<repository>@sha256:<digest> to pull it.
    #[arg(long, env = "PLUGIN")]
    plugin: String,
    /// Directory for pulled and precompiled plugins; compiling is skipped
    /// when a matching artifact exists. The host keeps its artifacts in a
    /// `precompiled/` directory only its user may write.
    #[arg(long, env = "PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
    /// Wall-clock budget of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    plugin_timeout_ms: u64,
    /// Linear-memory limit of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    plugin_memory_mib: usize,
    /// What the plugin may do (YAML, see docs/security.md);
    /// without it the built-in grant applies.
    #[arg(long, env = "PLUGIN_GRANT")]
    plugin_grant: Option<PathBuf>,
    /// What to do with a plugin that asks for more than its grant gives:
    /// `refuse` it at start, naming each request (a plugin upgrade that
    /// wants more stops at its rollout), or `drop` those requests, one log
    /// line each.
    #[arg(long, env = "UNGRANTED_REQUESTS", value_enum, default_value = "refuse")]
    ungranted_requests: UngrantedRequests,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum UngrantedRequests {
    Refuse,
    Drop,
}

impl PluginArgs {
    /// Loads the plugin with its grant ([`load::planner`]).
    async fn load(&self) -> anyhow::Result<Planner> {
        let ungranted = match self.ungranted_requests {
            UngrantedRequests::Refuse => load::Ungranted::Refuse,
            UngrantedRequests::Drop => load::Ungranted::Drop,
        };
        self.load_with(load::Role::Plugin, ungranted, None, None).await
    }

    /// Loads `plugin` (else --plugin) with `grant` (else --plugin-grant) as
    /// the host's `role`, doing with requests the grant does not give what
    /// `ungranted` says.
    async fn load_with(
        &self,
        role: load::Role,
        ungranted: load::Ungranted,
        plugin: Option<&str>,
        grant: Option<&std::path::Path>,
    ) -> anyhow::Result<Planner> {
        let limits = Limits {
            timeout: Duration::from_millis(self.plugin_timeout_ms),
            memory_bytes: self.plugin_memory_mib << 20,
            ..Limits::default()
        };
        let registry = self.registry.options(self.plugin_cache_dir.clone());
        let request = load::Load {
            plugin: plugin.unwrap_or(&self.plugin),
            grant: grant.or(self.plugin_grant.as_deref()),
            cache_dir: self.plugin_cache_dir.as_deref(),
            limits,
            registry: &registry,
            ungranted,
            role,
        };
        Ok(load::planner(request).await?)
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Yaml,
    Json,
}

#[derive(Args)]
struct RenderArgs {
    #[command(flatten)]
    plugin: PluginArgs,
    /// The service object (YAML or JSON), e.g. a `Kro`.
    #[arg(long)]
    object: PathBuf,
    /// The ProviderConfig (YAML or JSON); omit to see the missing-config case.
    #[arg(long)]
    provider_config: Option<PathBuf>,
    /// Directory of YAML/JSON files with objects the plugin may observe
    /// (e.g. Flux objects with status, ResourceGraphDefinitions).
    #[arg(long)]
    observed: Option<PathBuf>,
    /// Render the deletion (cleanup) instead of a reconcile.
    #[arg(long)]
    deleting: bool,
    /// The provider's pod namespace, where source Secrets live.
    #[arg(long, env = "POD_NAMESPACE", default_value = "openmcp-system")]
    pod_namespace: String,
    /// ProviderConfig name (`--provider-name` of `run`); defaults to the
    /// given ProviderConfig's name, then the plugin's name.
    #[arg(long)]
    provider_name: Option<String>,
    /// Name of the ControlPlane kubeconfig Secret (from the AccessRequest
    /// status); defaults to the AccessRequest's name.
    #[arg(long)]
    control_plane_secret: Option<String>,
    /// Render as if ControlPlane access were not granted (or already gone).
    #[arg(long)]
    without_control_plane: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    output: Output,
}

/// Names the plugins next to a missing one (the image has them side by side).
/// A panic prints one line, like any other error, whatever `RUST_BACKTRACE`
/// says; through the log when logging is set up (a panic inside a
/// reconcile is caught there and only fails that instance).
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let line = panic_line(info);
        if tracing::dispatcher::has_been_set() {
            tracing::error!("{line}");
        } else {
            eprintln!("error: {line}");
        }
    }));
}

fn panic_line(info: &std::panic::PanicHookInfo<'_>) -> String {
    let message = service_provider_host::error::panic_message(info.payload());
    let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
    format!("internal error (a bug): {}{at}", message.unwrap_or("panic").replace('\n', " "))
}

fn main() -> std::process::ExitCode {
    install_panic_hook();
    let cli = Cli::parse();
    match runtime().and_then(|rt| rt.block_on(execute(cli))) {
        Ok(code) => code,
        Err(error) => {
            // One line with the whole cause chain (whatever a plugin or a
            // cluster put into it); never a backtrace.
            let report = service_provider_host::error::report(error.as_ref());
            eprintln!("error: {}", service_provider_host::syntax::flat(&report));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Whether log lines on stderr are coloured: only on a terminal, and never
/// with NO_COLOR (no-color.org).
fn stderr_in_colour() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::IsTerminal::is_terminal(&std::io::stderr()) && !no_color
}

/// The one-shot commands (all but `init`, `run` and `diff`, which set up
/// the operator's logging and traces) print warnings to stderr, e.g. a
/// precompiled plugin that had to be compiled again: one line each, the
/// fields made safe as in the operator's text log, colour only on a
/// terminal.
fn init_command_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube=error,hyper=error,tower=error"));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(stderr_in_colour())
        .without_time()
        .with_target(false)
        .fmt_fields(service_provider_host::logging::OneLineFields::default());
    let _ = tracing_subscriber::registry().with(log.with_filter(filter)).try_init();
}

async fn execute(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    if !matches!(cli.command, Command::Init(_) | Command::Run(_) | Command::Diff(_)) {
        init_command_logging();
    }
    match cli.command {
        Command::Init(args) => {
            let _traces = args.provider.init_logging()?;
            let settings = args.provider.settings()?;
            let plugin = args.provider.plugin.load().await?;
            let metrics = Metrics::new(&settings.provider_name);
            let platform = clusters::platform_client(&metrics).await?;
            let options = InitOptions {
                register_service_kind: args.register_service_kind,
                service_provider_timeout: Duration::from_secs(args.service_provider_timeout_seconds),
            };
            controller::init_with(&plugin, &settings, platform, &metrics, &options).await?;
        }
        Command::Run(args) => {
            let _traces = args.provider.init_logging()?;
            anyhow::ensure!(
                !args.metrics_secure,
                "--metrics-secure=true: the host serves /metrics over plain HTTP without authentication and does not \
                 pretend otherwise; pass --metrics-secure=false (as openmcp's operator does) and keep the port inside the \
                 cluster with a NetworkPolicy (deploy/standalone/50-networkpolicy.yaml) or an authenticating proxy"
            );
            let mib = (args.cluster_write_mib_per_minute as usize) << 20;
            let host_writes = service_provider_host::reconcile::budget::Rate { per_minute: mib, burst: mib };
            let settings = Settings { host_writes, ..args.provider.settings()? };
            let endpoints = Endpoints {
                metrics: server::bind_address(&args.metrics_bind_address)?,
                health: server::bind_address(&args.health_probe_bind_address)?,
            };
            // Checked before any plugin loads (which may pull from a registry).
            let cohort = args.cohort()?;
            let plugin = args.provider.plugin.load().await?;
            let shadow = match &args.shadow_plugin {
                Some(shadow) => {
                    let grant = args.shadow_plugin_grant.as_deref();
                    Some(
                        args.provider
                            .plugin
                            .load_with(load::Role::Shadow, load::Ungranted::Drop, Some(shadow), grant)
                            .await?,
                    )
                }
                None => None,
            };
            let canary = match (&args.plugin_canary, cohort) {
                (Some(canary), Some(cohort)) => {
                    let grant = args.plugin_canary_grant.as_deref();
                    let ungranted = load::Ungranted::Refuse;
                    let planner =
                        args.provider.plugin.load_with(load::Role::Canary, ungranted, Some(canary), grant).await?;
                    let allowed_failures = args.canary_max_failures;
                    Some(controller::CanaryPlugin { planner, cohort, allowed_failures, halt: Default::default() })
                }
                _ => None,
            };
            let plugins = controller::Plugins { plugin, shadow, canary };
            let metrics = Metrics::new(&settings.provider_name);
            let platform = clusters::platform_client(&metrics).await?;
            controller::run(plugins, &settings, endpoints, args.leader_elect, platform, metrics).await?;
        }
        Command::Render(args) => {
            let plugin = args.plugin.load().await?;
            let request = Request {
                object: args.object,
                provider_config: args.provider_config,
                observed: args.observed,
                deleting: args.deleting,
                pod_namespace: args.pod_namespace,
                provider_name: args.provider_name,
                control_plane_secret: args.control_plane_secret,
                without_control_plane: args.without_control_plane,
            };
            let doc = render::render(&plugin, &request).await?;
            let text = match args.output {
                Output::Json => serde_json::to_string_pretty(&doc)?,
                Output::Yaml => serde_saphyr::to_string(&doc)?,
            };
            print(&format!("{}\n", text.trim_end()))?;
        }
        Command::Diff(args) => return diff(args).await,
        Command::Precompile(args) => precompile(&args).await?,
        Command::Plugin(PluginCommand::Push(args)) => push(&args).await?,
        Command::Plugin(PluginCommand::New(args)) => new_plugin(&args)?,
        Command::Plugin(PluginCommand::Componentize(args)) => {
            let core = std::fs::read(&args.core).with_context(|| format!("reading {}", args.core.display()))?;
            let component = author::componentize::componentize(&core)
                .with_context(|| format!("making a component of {}", args.core.display()))?;
            std::fs::write(&args.out, component).with_context(|| format!("writing {}", args.out.display()))?;
        }
        Command::Plugin(PluginCommand::Inspect(args)) => {
            let (plugin, reference) = args.component.load().await?;
            let inspection = author::inspect::inspect(&plugin, reference);
            let text = match args.output {
                Output::Json => serde_json::to_string_pretty(&inspection)?,
                Output::Yaml => serde_saphyr::to_string(&inspection)?,
            };
            print(&format!("{}\n", text.trim_end()))?;
        }
        Command::Plugin(PluginCommand::Grant(args)) => {
            let (plugin, _) = args.component.load().await?;
            let grant = match args.built_in {
                true => service_provider_host::plugin::grant::Grant::built_in_admitting(plugin.name(), plugin.digest())
                    .map_err(anyhow::Error::msg)?,
                false => author::inspect::grant_for(plugin.descriptor(), plugin.digest(), args.allow_unreviewed)?,
            };
            print(&grant)?;
        }
        Command::Plugin(PluginCommand::Test(args)) => return conformance(&args).await,
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `diff`: the fleet preview, printed; its exit code says whether anything
/// would change (with --exit-code).
async fn diff(args: DiffArgs) -> anyhow::Result<std::process::ExitCode> {
    let _traces = args.provider.init_logging()?;
    let settings = args.provider.settings()?;
    let candidate = args.provider.plugin.load_with(load::Role::Plugin, load::Ungranted::Drop, None, None).await?;
    let current = args
        .provider
        .plugin
        .load_with(
            load::Role::Current,
            load::Ungranted::Drop,
            args.current_plugin.as_deref(),
            args.current_plugin_grant.as_deref(),
        )
        .await?;
    let candidate_provider_config = match &args.provider_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(
                serde_saphyr::from_str::<serde_json::Value>(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )
        }
        None => None,
    };
    let options = controller::preview::PreviewOptions {
        selector: args.selector,
        concurrency: args.concurrency as usize,
        candidate_provider_config,
        page: controller::preview::LIST_PAGE,
        tenant_clusters: args.tenant_clusters,
    };
    let metrics = Metrics::new(&settings.provider_name);
    let platform = clusters::platform_client_with(&metrics, clusters::Writes::Refused).await?;
    // A bar on a terminal only; a pipe or a CI log gets the report alone.
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} instances, {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let preview =
        controller::preview::preview(current, candidate, &settings, platform, metrics, &options, progress).await?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let text = match args.output {
        DiffOutput::Text => controller::preview::text(&preview),
        DiffOutput::Json => format!("{}\n", serde_json::to_string_pretty(&preview)?),
        DiffOutput::Yaml => serde_saphyr::to_string(&preview)?,
    };
    print(&text)?;
    Ok(match (args.exit_code, preview.incomplete(), preview.changes()) {
        (false, _, _) => std::process::ExitCode::SUCCESS,
        (true, true, _) => std::process::ExitCode::FAILURE,
        (true, false, true) => std::process::ExitCode::from(2),
        (true, false, false) => std::process::ExitCode::SUCCESS,
    })
}

/// `plugin new`: writes the template and says what to run next.
fn new_plugin(args: &NewArgs) -> anyhow::Result<()> {
    let names = author::template::Names::of(&args.name)?;
    let names = match &args.group {
        Some(group) => names.in_group(group)?,
        None => names,
    };
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    let language = match args.lang {
        Language::Rust => author::template::Language::Rust,
        Language::Go => author::template::Language::Go,
        Language::Ts => author::template::Language::Ts,
    };
    let sdk = match &args.sdk {
        Some(path) => author::template::Sdk::Local(path.clone()),
        None => author::template::Sdk::Published,
    };
    let written = author::template::write_with(language, &names, &dir, &sdk)?;
    eprintln!(
        "wrote plugin {} ({} files) into {}: service kind {} in group {}{}; its README says how to test, build and render it",
        names.name,
        written.len(),
        dir.display(),
        names.kind,
        names.group,
        if args.group.is_none() { " (--group gives one of your domain)" } else { "" },
    );
    Ok(())
}

/// `plugin test`: the conformance run, its report printed; exit code 1 when
/// a check failed.
async fn conformance(args: &TestArgs) -> anyhow::Result<std::process::ExitCode> {
    let (plugin, _) = args.component.load().await?;
    let mut cases = Vec::new();
    for path in &args.cases {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let read = service_provider_sdk::testing::shared_cases(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        cases.extend(read);
    }
    let grant = match &args.plugin_grant {
        Some(path) => Some(service_provider_host::plugin::grant::Grant::load(Some(path))?),
        None => None,
    };
    let report = author::conformance::run(plugin, &cases, grant).await;
    let text = match args.output {
        TestOutput::Text => report.text(),
        TestOutput::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
    };
    print(&text)?;
    Ok(if report.passed() { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

async fn precompile(args: &PrecompileArgs) -> anyhow::Result<()> {
    let registry = args.registry.options(Some(args.plugin_cache_dir.clone()));
    let report = |c: load::Compiled| print(&format!("{}: plugin {} compiled in {:?}\n", c.origin, c.name, c.took));
    Ok(load::precompile(&args.plugins, &args.plugin_cache_dir, &registry, report).await?)
}

/// Checks that the component is a loadable plugin, pushes it, and prints
/// the digest-pinned reference (alone on stdout, for scripts).
async fn push(args: &PushArgs) -> anyhow::Result<()> {
    let options = args.registry.options(None);
    let target = oci::PluginRef::parse(&args.target, true)?;
    let wasm = std::fs::read(&args.file).with_context(|| format!("reading plugin {}", args.file.display()))?;
    let plugin = Sandbox::new()?
        .load(&wasm, None, Limits::default())
        .await
        .with_context(|| format!("plugin {} does not load; nothing was pushed", args.file.display()))?;
    let name = args.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let published = oci::push::push(&wasm, &name, &target, &options).await?;
    eprintln!(
        "pushed plugin {} to {target}; component digest {} (a grant identity may pin it)",
        plugin.name(),
        published.component
    );
    Ok(print(&format!("{}\n", published.pinned))?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    limit_malloc_arenas();
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// glibc gives threads that contend for the heap arenas of their own (up to
/// eight per core), and memory freed in one arena is not reused by another:
/// at 500 instances that was a tenth of the host's RSS (`task bench-scale`,
/// 70 → 64 MiB). Two arenas are plenty for a process that mostly waits on
/// the network. (The image's static musl build has no arenas.)
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called before the runtime starts any thread; `mallopt` only
    // adjusts an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_one_line_naming_where() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let previous = std::panic::take_hook();
        let record = seen.clone();
        std::panic::set_hook(Box::new(move |info| *record.lock().unwrap() = panic_line(info)));
        let _ = std::panic::catch_unwind(|| panic!("two\nlines"));
        std::panic::set_hook(previous);
        let line = seen.lock().unwrap().clone();
        assert!(line.starts_with("internal error (a bug): two lines at host/src/main.rs:"), "{line}");
        assert!(!line.contains('\n'));
    }
}
