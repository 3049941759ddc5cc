//! The command line: every subcommand and flag with its help text (clap),
//! and what a subcommand's arguments become for the library (settings,
//! plugins, registries).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use service_provider_host::controller::{self, Settings};
use service_provider_host::plugin::plan::Planner;
use service_provider_host::plugin::sandbox::Limits;
use service_provider_host::plugin::{load, oci};
use service_provider_host::reconcile::rollout::Cohort;
use service_provider_host::telemetry::Traces;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[derive(Parser)]
#[command(version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
pub(crate) enum PluginCommand {
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
pub(crate) struct PushArgs {
    /// The plugin component (.wasm); it must load and describe itself.
    pub(crate) file: PathBuf,
    /// Where to push it: oci://<registry>/<repository>:<tag>.
    pub(crate) target: String,
    #[command(flatten)]
    pub(crate) registry: RegistryAccess,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Language {
    Rust,
    Go,
    Ts,
}

#[derive(Args)]
pub(crate) struct NewArgs {
    /// The plugin's name: lowercase letters, digits and '-' (it names the
    /// service kind, its API group and the directory).
    pub(crate) name: String,
    /// The language to write it in.
    #[arg(long)]
    pub(crate) lang: Language,
    /// Where to write it (must not exist, or be empty); default: ./<name>.
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// The API group of its kinds, one of your domain (default:
    /// <name>.services.example.com).
    #[arg(long)]
    pub(crate) group: Option<String>,
    /// Take the SDK from this directory instead of its registry: a clone of
    /// service-provider-host, or the language's SDK directory itself
    /// (before a release is published, or to try an unreleased SDK).
    #[arg(long, value_name = "DIR")]
    pub(crate) sdk: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ComponentizeArgs {
    /// The core module.
    pub(crate) core: PathBuf,
    /// The component to write.
    pub(crate) out: PathBuf,
}

/// A component to read: a file, or a digest-pinned registry reference.
#[derive(Args)]
pub(crate) struct ComponentArgs {
    /// A component file (.wasm), or oci://<registry>/<repository>@sha256:<digest>.
    pub(crate) plugin: String,
    #[command(flatten)]
    pub(crate) registry: RegistryArgs,
}

impl ComponentArgs {
    pub(crate) async fn load(
        &self,
    ) -> anyhow::Result<(service_provider_host::plugin::sandbox::Plugin, Option<String>)> {
        Ok(load::component(&self.plugin, &self.registry.options(None), Limits::default()).await?)
    }
}

#[derive(Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) component: ComponentArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub(crate) output: Output,
}

#[derive(Args)]
pub(crate) struct GrantArgs {
    #[command(flatten)]
    pub(crate) component: ComponentArgs,
    /// Print the host's built-in grant instead, its identities pinned to
    /// the components this build ships and the component's identity also to
    /// its digest: how a platform admits a new build of a shipped plugin
    /// (kro, flux), which the built-in grant refuses by digest.
    #[arg(long)]
    pub(crate) built_in: bool,
    /// Print the grant also when the plugin asks for what no review covers
    /// (a named cluster power in a token rule, a Flux kind the built-in
    /// grant has no rule for, a core kind observed whole); the file's header
    /// then names each. Without it, such a grant is refused.
    #[arg(long, conflicts_with = "built_in")]
    pub(crate) allow_unreviewed: bool,
}

#[derive(Args)]
pub(crate) struct TestArgs {
    #[command(flatten)]
    pub(crate) component: ComponentArgs,
    /// Files of shared cases (a JSON array: name, call, input, expected).
    pub(crate) cases: Vec<PathBuf>,
    /// Run under this grant instead of the one `plugin grant` prints.
    #[arg(long)]
    pub(crate) plugin_grant: Option<PathBuf>,
    /// Report format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub(crate) output: TestOutput,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum TestOutput {
    Text,
    Json,
}

/// How plugins are fetched from OCI registries.
#[derive(Args, Clone)]
pub(crate) struct RegistryArgs {
    /// Only load plugins from a registry whose digest this cosign public key
    /// (PEM, ECDSA P-256) has signed; files are refused. A path, or the PEM
    /// itself (a value starting with `-----BEGIN PUBLIC KEY-----`).
    #[arg(long, env = "PLUGIN_VERIFY_KEY")]
    pub(crate) plugin_verify_key: Option<PathBuf>,
    /// Development only: admit oci:// references by tag. A tag can be moved
    /// to other code; production pins @sha256:<digest>.
    #[arg(long, env = "ALLOW_MUTABLE_PLUGIN_REFERENCE", action = ArgAction::SetTrue)]
    pub(crate) allow_mutable_plugin_reference: bool,
    #[command(flatten)]
    pub(crate) access: RegistryAccess,
}

/// How registries are reached.
#[derive(Args, Clone)]
pub(crate) struct RegistryAccess {
    /// Registries (host[:port]) reached over plain HTTP; repeat or separate
    /// with commas.
    #[arg(long = "insecure-registry", env = "INSECURE_REGISTRIES", value_delimiter = ',')]
    pub(crate) insecure_registries: Vec<String>,
    /// Extra CA certificates (PEM) to trust for registries. Credentials come
    /// from $DOCKER_CONFIG/config.json (a mounted dockerconfigjson Secret).
    #[arg(long, env = "REGISTRY_CA_FILE")]
    pub(crate) registry_ca_file: Option<PathBuf>,
    /// How long pulling a plugin may take, in seconds: every request, retry
    /// and signature check of it together. A registry that stalls, or sends
    /// a byte at a time, fails the start (or `plugin push`) after this.
    #[arg(long, env = "PLUGIN_PULL_TIMEOUT_SECONDS", default_value_t = oci::DEFAULT_PULL_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) plugin_pull_timeout_seconds: u64,
}

impl RegistryArgs {
    pub(crate) fn options(&self, cache_dir: Option<PathBuf>) -> oci::Options {
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
    pub(crate) fn options(&self, cache_dir: Option<PathBuf>) -> oci::Options {
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
pub(crate) enum Verbosity {
    Error,
    Info,
    Debug,
}

impl Verbosity {
    /// The level's name in a tracing filter.
    pub(crate) fn level(self) -> &'static str {
        match self {
            Verbosity::Error => "error",
            Verbosity::Info => "info",
            Verbosity::Debug => "debug",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Flags openmcp passes to both `init` and `run`.
#[derive(Args)]
pub(crate) struct ProviderArgs {
    /// The openmcp environment name.
    #[arg(long, default_value = "default")]
    pub(crate) environment: String,
    /// Name of the ServiceProvider (and of the ProviderConfig to use).
    #[arg(long, env = "PROVIDER_NAME")]
    pub(crate) provider_name: String,
    /// Log level: error, info or debug (any case); RUST_LOG overrides it.
    #[arg(short = 'v', long, value_enum, ignore_case = true, default_value = "info")]
    pub(crate) verbosity: Verbosity,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) log_format: LogFormat,
    /// Development: use this onboarding kubeconfig instead of requesting
    /// onboarding access through openmcp.
    #[arg(long, env = "ONBOARDING_KUBECONFIG")]
    pub(crate) onboarding_kubeconfig: Option<PathBuf>,
    /// How long to wait for onboarding access to be granted, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub(crate) onboarding_timeout_seconds: u64,
    /// Only reconcile service objects in this onboarding namespace.
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub(crate) watch_namespace: Option<String>,
    /// Take over objects at the places this provider's plans put them that
    /// this field manager wrote (e.g. `service-provider-kro`, switching from
    /// the Go provider); repeat or separate with commas. For one rollout
    /// (docs/migrating.md).
    #[arg(long, env = "ADOPT_FROM", value_delimiter = ',')]
    pub(crate) adopt_from: Vec<String>,
    #[command(flatten)]
    pub(crate) plugin: PluginArgs,
}

#[derive(Args)]
pub(crate) struct InitArgs {
    #[command(flatten)]
    pub(crate) provider: ProviderArgs,
    /// Register the service kind in the ServiceProvider's status (openmcp
    /// deletes a ControlPlane's service objects through it); `false` for an
    /// install without an openmcp ServiceProvider.
    #[arg(long, env = "REGISTER_SERVICE_KIND", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub(crate) register_service_kind: bool,
    /// How long to wait for openmcp to reconcile the ServiceProvider (give
    /// it a status) before registering the service kind, in seconds.
    #[arg(long, default_value_t = 600)]
    pub(crate) service_provider_timeout_seconds: u64,
}

#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The candidate plugin is --plugin, its grant --plugin-grant; a request
    /// the grant does not give is reported, not refused.
    #[command(flatten)]
    pub(crate) provider: ProviderArgs,
    /// The plugin running now (a file or an oci:// reference); defaults to
    /// --plugin, to preview a change of the grant or the ProviderConfig.
    #[arg(long)]
    pub(crate) current_plugin: Option<String>,
    /// The grant of the plugin running now; defaults to --plugin-grant.
    #[arg(long)]
    pub(crate) current_plugin_grant: Option<PathBuf>,
    /// A ProviderConfig (YAML or JSON) for the candidate to plan with
    /// instead of the live one.
    #[arg(long)]
    pub(crate) provider_config: Option<PathBuf>,
    /// Only service objects with these labels (a label selector).
    #[arg(short = 'l', long)]
    pub(crate) selector: Option<String>,
    /// Instances previewed at once (a reconcile round's worth by default);
    /// at most 16, each with up to --plugin-memory-mib of guest memory.
    #[arg(long, default_value_t = controller::preview::CONCURRENCY as u64, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub(crate) concurrency: u64,
    /// Also reach each instance's ControlPlane (and workload cluster) with
    /// the access `run` was granted, to compare the objects there with what
    /// is live. It reads every tenant's kubeconfig Secret, so it needs the
    /// host's own ServiceAccount; without it, those objects are compared
    /// with the current plugin's plan.
    #[arg(long)]
    pub(crate) tenant_clusters: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub(crate) output: DiffOutput,
    /// Exit with 0 when nothing would change, 2 when something would, 1 on
    /// an error (an instance that could not be previewed included).
    #[arg(long)]
    pub(crate) exit_code: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum DiffOutput {
    Text,
    Json,
    Yaml,
}

#[derive(Args)]
pub(crate) struct PrecompileArgs {
    /// Where to write the compiled plugins (and pulled ones).
    #[arg(long, env = "PLUGIN_CACHE_DIR")]
    pub(crate) plugin_cache_dir: PathBuf,
    /// Plugin components (.wasm), directories whose .wasm files to compile,
    /// or oci:// references to pull.
    #[arg(required = true)]
    pub(crate) plugins: Vec<String>,
    #[command(flatten)]
    pub(crate) registry: RegistryArgs,
}

#[derive(Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) provider: ProviderArgs,
    /// Address of the /metrics endpoint; `0` disables it.
    #[arg(long, default_value = "0")]
    pub(crate) metrics_bind_address: String,
    /// Address of /healthz and /readyz; `0` disables them.
    #[arg(long, default_value = ":8081")]
    pub(crate) health_probe_bind_address: String,
    /// Run only while holding the leader lease (for more than one replica).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub(crate) leader_elect: bool,
    /// A shadow plugin (a file or an oci:// reference, e.g. the next version
    /// of --plugin): on every reconcile it plans with the same input;
    /// nothing of its plans is applied, and where they differ the host
    /// counts it, logs it and records an Event on the service object.
    #[arg(long, env = "SHADOW_PLUGIN")]
    pub(crate) shadow_plugin: Option<String>,
    /// The shadow plugin's grant; defaults to --plugin-grant. What it asks
    /// for beyond it is dropped (a shadow never acts).
    #[arg(long, env = "SHADOW_PLUGIN_GRANT")]
    pub(crate) shadow_plugin_grant: Option<PathBuf>,
    /// A canary plugin (a file or an oci:// reference: the next version of
    /// --plugin) that reconciles the instances of its cohort
    /// (--canary-selector or --canary-percent) while --plugin reconciles
    /// the rest. Promote it by making it --plugin.
    #[arg(long, env = "PLUGIN_CANARY", requires = "cohort")]
    pub(crate) plugin_canary: Option<String>,
    /// The canary's grant; defaults to --plugin-grant. A canary that asks
    /// for more than it gives is refused at start.
    #[arg(long, env = "PLUGIN_CANARY_GRANT", requires = "plugin_canary")]
    pub(crate) plugin_canary_grant: Option<PathBuf>,
    /// The canary's cohort: the service objects this label selector
    /// matches (e.g. `rollout=canary`, `tier in (dev,test)`). Tenants write
    /// their objects' labels, so a tenant could move itself into or out of
    /// the cohort (and halt the canary for all): taken only with
    /// --canary-selector-trusted.
    #[arg(long, env = "CANARY_SELECTOR", group = "cohort", requires = "plugin_canary")]
    pub(crate) canary_selector: Option<String>,
    /// Take --canary-selector although tenants write the labels it reads:
    /// say so where an admission policy keeps them from it, or where
    /// choosing the canary is theirs to do.
    #[arg(long, env = "CANARY_SELECTOR_TRUSTED", requires = "canary_selector", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub(crate) canary_selector_trusted: bool,
    /// The canary's cohort: this share of instances, by a stable hash of
    /// their service object's uid (the same instances on every start; a
    /// tenant cannot pick a name that lands in it).
    #[arg(long, env = "CANARY_PERCENT", group = "cohort", requires = "plugin_canary", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub(crate) canary_percent: Option<u8>,
    /// How many instances of the cohort may fail by the canary (a plugin
    /// error or timeout, a refused plan); one more halts it, and the cohort
    /// is reconciled with --plugin again.
    #[arg(long, env = "CANARY_MAX_FAILURES", default_value_t = 0)]
    pub(crate) canary_max_failures: usize,
    /// What the host as a whole may write to each cluster, in MiB a minute
    /// (and at most as much at once): however many instances its plugin
    /// has, their writes wait once they add up to it. Each instance has a
    /// budget of its own besides.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) cluster_write_mib_per_minute: u32,
    /// Only `false` (what openmcp's operator passes): the host serves
    /// /metrics over plain HTTP without authentication, so `true` is
    /// refused rather than ignored. Keep the port inside the cluster
    /// (deploy/standalone/50-networkpolicy.yaml) or put an authenticating
    /// proxy in front.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub(crate) metrics_secure: bool,
}

impl RunArgs {
    /// The canary's cohort, when there is a canary.
    pub(crate) fn cohort(&self) -> anyhow::Result<Option<Cohort>> {
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
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
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
    pub(crate) fn init_logging(&self) -> anyhow::Result<Option<Traces>> {
        let level = self.verbosity.level();
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{level},kube=warn,hyper=warn,tower=warn")));
        let ansi = crate::stderr_in_colour();
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
pub(crate) struct PluginArgs {
    /// The plugin: a component file (.wasm; the image has
    /// /plugins/kro.wasm and /plugins/flux.wasm), or
    /// oci://<registry>/<repository>@sha256:<digest> to pull it.
    #[arg(long, env = "PLUGIN")]
    pub(crate) plugin: String,
    /// Directory for pulled and precompiled plugins; compiling is skipped
    /// when a matching artifact exists. The host keeps its artifacts in a
    /// `precompiled/` directory only its user may write.
    #[arg(long, env = "PLUGIN_CACHE_DIR")]
    pub(crate) plugin_cache_dir: Option<PathBuf>,
    /// Wall-clock budget of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub(crate) plugin_timeout_ms: u64,
    /// Linear-memory limit of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    pub(crate) plugin_memory_mib: usize,
    /// What the plugin may do (YAML, see docs/security.md);
    /// without it the built-in grant applies.
    #[arg(long, env = "PLUGIN_GRANT")]
    pub(crate) plugin_grant: Option<PathBuf>,
    /// What to do with a plugin that asks for more than its grant gives:
    /// `refuse` it at start, naming each request (a plugin upgrade that
    /// wants more stops at its rollout), or `drop` those requests, one log
    /// line each.
    #[arg(long, env = "UNGRANTED_REQUESTS", value_enum, default_value = "refuse")]
    pub(crate) ungranted_requests: UngrantedRequests,
    #[command(flatten)]
    pub(crate) registry: RegistryArgs,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum UngrantedRequests {
    Refuse,
    Drop,
}

impl PluginArgs {
    /// Loads the plugin with its grant ([`load::planner`]).
    pub(crate) async fn load(&self) -> anyhow::Result<Planner> {
        let ungranted = match self.ungranted_requests {
            UngrantedRequests::Refuse => load::Ungranted::Refuse,
            UngrantedRequests::Drop => load::Ungranted::Drop,
        };
        self.load_with(load::Role::Plugin, ungranted, None, None).await
    }

    /// Loads `plugin` (else --plugin) with `grant` (else --plugin-grant) as
    /// the host's `role`, doing with requests the grant does not give what
    /// `ungranted` says.
    pub(crate) async fn load_with(
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
pub(crate) enum Output {
    Yaml,
    Json,
}

#[derive(Args)]
pub(crate) struct RenderArgs {
    #[command(flatten)]
    pub(crate) plugin: PluginArgs,
    /// The service object (YAML or JSON), e.g. a `Kro`.
    #[arg(long)]
    pub(crate) object: PathBuf,
    /// The ProviderConfig (YAML or JSON); omit to see the missing-config case.
    #[arg(long)]
    pub(crate) provider_config: Option<PathBuf>,
    /// Directory of YAML/JSON files with objects the plugin may observe
    /// (e.g. Flux objects with status, ResourceGraphDefinitions).
    #[arg(long)]
    pub(crate) observed: Option<PathBuf>,
    /// Render the deletion (cleanup) instead of a reconcile.
    #[arg(long)]
    pub(crate) deleting: bool,
    /// The provider's pod namespace, where source Secrets live.
    #[arg(long, env = "POD_NAMESPACE", default_value = "openmcp-system")]
    pub(crate) pod_namespace: String,
    /// ProviderConfig name (`--provider-name` of `run`); defaults to the
    /// given ProviderConfig's name, then the plugin's name.
    #[arg(long)]
    pub(crate) provider_name: Option<String>,
    /// Name of the ControlPlane kubeconfig Secret (from the AccessRequest
    /// status); defaults to the AccessRequest's name.
    #[arg(long)]
    pub(crate) control_plane_secret: Option<String>,
    /// Render as if ControlPlane access were not granted (or already gone).
    #[arg(long)]
    pub(crate) without_control_plane: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub(crate) output: Output,
}
