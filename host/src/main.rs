//! `service-provider-host`: one generic OpenControlPlane service provider;
//! the service-specific logic comes from a WebAssembly plugin.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use service_provider_host::grant::{Effective, Grant};
use service_provider_host::metrics::Metrics;
use service_provider_host::operator::{self, Endpoints, Settings};
use service_provider_host::plan::Planner;
use service_provider_host::render::{self, Request};
use service_provider_host::sandbox::{Limits, Sandbox};
use service_provider_host::{clusters, server};

/// Where the container image puts the plugin.
const DEFAULT_PLUGIN: &str = "/plugins/provider.wasm";

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
    #[arg(short = 'v', long, default_value = "info", value_parser = ["error", "info", "debug", "ERROR", "INFO", "DEBUG", "Error", "Info", "Debug"])]
    verbosity: String,
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
    #[command(flatten)]
    plugin: PluginArgs,
}

#[derive(Args)]
struct InitArgs {
    #[command(flatten)]
    provider: ProviderArgs,
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
    /// Accepted for compatibility with openmcp's deployment; metrics are
    /// served over plain HTTP (put TLS in front if needed).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    metrics_secure: bool,
}

impl ProviderArgs {
    fn settings(&self) -> anyhow::Result<Settings> {
        let pod_namespace = std::env::var("POD_NAMESPACE").ok().filter(|s| !s.is_empty()).context(
            "POD_NAMESPACE is not set: the provider needs to know its own namespace (source Secrets and onboarding requests live there); set it from the downward API (fieldRef metadata.namespace)",
        )?;
        Ok(Settings {
            provider_name: self.provider_name.clone(),
            pod_namespace,
            pod_name: std::env::var("POD_NAME").ok().filter(|s| !s.is_empty()),
            environment: self.environment.clone(),
            onboarding_kubeconfig: self.onboarding_kubeconfig.clone(),
            onboarding_timeout: Duration::from_secs(self.onboarding_timeout_seconds),
            watch_namespace: self.watch_namespace.clone(),
        })
    }

    fn init_logging(&self) {
        let level = self.verbosity.to_lowercase();
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{level},kube=warn,hyper=warn,tower=warn")));
        let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
        match self.log_format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
    }
}

/// How the plugin is loaded and limited.
#[derive(Args)]
struct PluginArgs {
    /// The plugin component (.wasm).
    #[arg(long, env = "PLUGIN", default_value = DEFAULT_PLUGIN)]
    plugin: PathBuf,
    /// Directory for precompiled plugins; compiling is skipped when a matching
    /// artifact exists. Must not be writable by anyone else.
    #[arg(long, env = "PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
    /// Wall-clock budget of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    plugin_timeout_ms: u64,
    /// Linear-memory limit of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    plugin_memory_mib: usize,
    /// What the plugin may do (YAML, see the README's security section);
    /// without it the built-in grant applies.
    #[arg(long, env = "PLUGIN_GRANT")]
    plugin_grant: Option<PathBuf>,
}

impl PluginArgs {
    /// Loads the plugin and intersects its requests with the grant; what is
    /// not granted is logged, one line each.
    async fn load(&self) -> anyhow::Result<Planner> {
        let limits = Limits {
            timeout: Duration::from_millis(self.plugin_timeout_ms),
            memory_bytes: self.plugin_memory_mib << 20,
            ..Limits::default()
        };
        let sandbox = Sandbox::new()?;
        let plugin = sandbox
            .load_file(&self.plugin, self.plugin_cache_dir.as_deref(), limits)
            .await
            .with_context(|| format!("loading plugin {}", self.plugin.display()))?;
        let grant = Grant::load(self.plugin_grant.as_deref())?;
        let granted = Effective::new(plugin.descriptor(), grant)?;
        for refused in &granted.refused {
            tracing::warn!(plugin = %plugin.name(), "not granted: {refused}");
        }
        Ok(Planner { plugin, granted: Arc::new(granted) })
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match runtime().and_then(|rt| rt.block_on(execute(cli))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line with the whole cause chain; never a backtrace.
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", dedup_chain(&chain));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `outer: inner: ...`, leaving out a cause the line already contains.
fn dedup_chain(chain: &[String]) -> String {
    let mut line = String::new();
    for text in chain {
        if line.is_empty() {
            line = text.clone();
        } else if !text.is_empty() && !line.contains(text.as_str()) {
            line = format!("{line}: {text}");
        }
    }
    line
}

async fn execute(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init(args) => {
            args.provider.init_logging();
            let settings = args.provider.settings()?;
            let plugin = args.provider.plugin.load().await?;
            let metrics = Metrics::new();
            let platform = clusters::platform_client(&metrics).await?;
            operator::init(&plugin, &settings, platform, &metrics).await?;
        }
        Command::Run(args) => {
            args.provider.init_logging();
            let settings = args.provider.settings()?;
            let endpoints = Endpoints {
                metrics: server::bind_address(&args.metrics_bind_address)?,
                health: server::bind_address(&args.health_probe_bind_address)?,
            };
            let plugin = args.provider.plugin.load().await?;
            let metrics = Metrics::new();
            let platform = clusters::platform_client(&metrics).await?;
            operator::run(plugin, &settings, endpoints, args.leader_elect, platform, metrics).await?;
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
            println!("{}", text.trim_end());
        }
    }
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}
