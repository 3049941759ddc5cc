//! The one-shot commands whose work is more than one library call: the
//! fleet preview (`diff`), a plugin project (`plugin new`), its conformance
//! report (`plugin test`), precompiling and pushing a plugin.

use std::path::PathBuf;

use anyhow::Context as _;
use service_provider_host::clusters;
use service_provider_host::controller;
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::sandbox::{Limits, Sandbox};
use service_provider_host::plugin::{author, load, oci};

use crate::cli::{DiffArgs, DiffOutput, Language, NewArgs, PrecompileArgs, PushArgs, TestArgs, TestOutput};

/// `diff`: the fleet preview, printed; its exit code says whether anything
/// would change (with --exit-code).
pub(crate) async fn diff(args: DiffArgs) -> anyhow::Result<std::process::ExitCode> {
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
pub(crate) fn new_plugin(args: &NewArgs) -> anyhow::Result<()> {
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
pub(crate) async fn conformance(args: &TestArgs) -> anyhow::Result<std::process::ExitCode> {
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
pub(crate) fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

pub(crate) async fn precompile(args: &PrecompileArgs) -> anyhow::Result<()> {
    let registry = args.registry.options(Some(args.plugin_cache_dir.clone()));
    let report = |c: load::Compiled| print(&format!("{}: plugin {} compiled in {:?}\n", c.origin, c.name, c.took));
    Ok(load::precompile(&args.plugins, &args.plugin_cache_dir, &registry, report).await?)
}

/// Checks that the component is a loadable plugin, pushes it, and prints
/// the digest-pinned reference (alone on stdout, for scripts).
pub(crate) async fn push(args: &PushArgs) -> anyhow::Result<()> {
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
