//! `service-provider-host`: one generic OpenControlPlane service provider;
//! the service-specific logic comes from a WebAssembly plugin.
//!
//! The front door: parse the command line ([`cli`]), run the subcommand
//! (the library, or [`commands`] for the one-shot ones), and turn each
//! failure into one line for a person.

mod cli;
mod commands;

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use service_provider_host::clusters;
use service_provider_host::controller::server;
use service_provider_host::controller::{self, Endpoints, InitOptions, Settings};
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::{author, load};
use service_provider_host::render::{self, Request};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cli::{Cli, Command, Output, PluginCommand};
use crate::commands::{conformance, diff, new_plugin, precompile, print, push};

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
pub(crate) fn stderr_in_colour() -> bool {
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
        assert!(
            line.starts_with("internal error (a bug): two lines at host/src/bin/service-provider-host/main.rs:"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
