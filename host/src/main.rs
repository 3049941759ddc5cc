//! `service-provider-host`: one generic OpenControlPlane service provider;
//! the service-specific logic comes from a WebAssembly plugin.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use service_provider_host::render::{self, Request};
use service_provider_host::sandbox::{Limits, Sandbox};

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
    /// Print what the host would apply, copy, delete and write as status for
    /// one service object, without touching any cluster.
    Render(RenderArgs),
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
}

impl PluginArgs {
    fn load(&self) -> anyhow::Result<service_provider_host::sandbox::Plugin> {
        let limits = Limits {
            timeout: Duration::from_millis(self.plugin_timeout_ms),
            memory_bytes: self.plugin_memory_mib << 20,
        };
        let sandbox = Sandbox::new()?;
        sandbox
            .load_file(&self.plugin, self.plugin_cache_dir.as_deref(), limits)
            .with_context(|| format!("loading plugin {}", self.plugin.display()))
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

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Render(args) => {
            let plugin = args.plugin.load()?;
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
            let doc = render::render(&plugin, &request)?;
            let text = match args.output {
                Output::Json => serde_json::to_string_pretty(&doc)?,
                Output::Yaml => serde_saphyr::to_string(&doc)?,
            };
            println!("{}", text.trim_end());
        }
    }
    Ok(())
}
