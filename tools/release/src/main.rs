//! `release`: the OCM components of a release, and what a landscape reads
//! from them. `task release` drives it; see docs/releasing.md.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use release::component::{self, Parts};
use release::landscape;
use release::registry::Registries;
use release::repository::{self, ComponentRef};
use release::{sign, transfer};

#[derive(Parser)]
#[command(about = "OCM components of service-provider-host releases")]
struct Cli {
    /// A registry reached over plain HTTP (a local one); repeatable.
    #[arg(long, global = true)]
    insecure_registry: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes a new RSA key pair for signing components: <out>/ocm.key, <out>/ocm.pub.
    Keygen {
        #[arg(long)]
        out: PathBuf,
    },
    /// Builds, signs and pushes a provider's component version; prints its reference.
    Component {
        /// `<registry>[/path]//<component name>:<version>`.
        at: String,
        /// The host's image index, pinned: registry/repository:tag@sha256:…
        #[arg(long)]
        image: String,
        /// The plugin's artifact, pinned by digest (signed with cosign: its
        /// signature becomes a resource too).
        #[arg(long)]
        plugin: String,
        /// A CRD file the provider brings; repeatable.
        #[arg(long, required = true)]
        crd: Vec<PathBuf>,
        /// The plugin publisher's cosign public key (PEM): the ServiceProvider
        /// configuration verifies the plugin with it.
        #[arg(long)]
        plugin_verify_key: PathBuf,
        /// The RSA private key (PKCS#8 PEM) that signs the descriptor.
        #[arg(long)]
        sign_key: PathBuf,
        /// The signature's name.
        #[arg(long, default_value = "service-provider-host")]
        signature: String,
    },
    /// Pushes a component that only references others (a landscape's root).
    Root {
        at: String,
        /// `<reference name>=<component name>:<version>`; repeatable.
        #[arg(long = "reference", required = true)]
        references: Vec<String>,
    },
    /// Copies a component version and everything it needs under another registry.
    Transfer {
        from: String,
        #[arg(long)]
        to: String,
        /// A registry (host[:port]) resources may be read from besides the
        /// component's own; repeatable.
        #[arg(long)]
        allow_source: Vec<String>,
        /// Check every component's signature with this RSA public key first.
        #[arg(long)]
        verify_key: Option<PathBuf>,
    },
    /// Checks a component version's signature and every resource's digest.
    Verify {
        at: String,
        #[arg(long)]
        key: PathBuf,
        #[arg(long, default_value = "service-provider-host")]
        signature: String,
    },
    /// Prints a component version's descriptor.
    Get { at: String },
    /// Prints the ServiceProvider the bootstrapper writes from a landscape's
    /// root component, and writes the platform CRDs it applies first.
    ServiceProvider {
        /// The root component: `<registry>[/path]//<name>:<version>`.
        root: String,
        /// The provider's name: the reference `service-provider-<name>`.
        #[arg(long)]
        name: String,
        /// Where to write the CRDs labelled for the platform cluster.
        #[arg(long)]
        crds_out: Option<PathBuf>,
        /// Verify the provider component's signature with this key first.
        #[arg(long)]
        verify_key: Option<PathBuf>,
    },
}

fn read(path: &PathBuf) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Checks a component version as read: its signature, and each
/// resource's bytes in the registry against the digest it records.
async fn verify(registries: &Registries, provider: &landscape::Provider, key: &str, signature: &str) -> Result<()> {
    sign::verify(&provider.stored.descriptor, signature, key)?;
    for resource in &provider.stored.descriptor.component.resources {
        match &resource.access {
            release::descriptor::Access::OciArtifact { image_reference } => {
                let pinned: oci_client::Reference = image_reference.parse()?;
                let manifest = registries.manifest(&pinned).await?;
                let recorded = resource.recorded_digest();
                if recorded.as_deref() != Some(manifest.digest.as_str()) {
                    bail!(
                        "resource {} is {} in the registry, {recorded:?} in the descriptor",
                        resource.name,
                        manifest.digest
                    );
                }
            }
            // Read, and checked against the recorded digest.
            release::descriptor::Access::LocalBlob { .. } => {
                landscape::local_blob(registries, provider, &resource.name).await?;
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let registries = Registries::new(&cli.insecure_registry);
    match cli.command {
        Command::Keygen { out } => {
            let (private, public) = sign::generate()?;
            std::fs::create_dir_all(&out)?;
            let key = out.join("ocm.key");
            // Readable by its owner only from the start; never over a key.
            let mut file = std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new().write(true).create_new(true),
                0o600,
            )
            .open(&key)
            .with_context(|| format!("creating {} (an existing key is not overwritten)", key.display()))?;
            std::io::Write::write_all(&mut file, private.as_bytes())?;
            std::fs::write(out.join("ocm.pub"), public)?;
        }
        Command::Component { at, image, plugin, crd, plugin_verify_key, sign_key, signature } => {
            let at = ComponentRef::parse(&at)?;
            let mut crds = Vec::new();
            for path in &crd {
                let name = path.file_name().context("a CRD path names a file")?.to_string_lossy().into_owned();
                crds.push((name, std::fs::read(path).with_context(|| format!("reading {}", path.display()))?));
            }
            let plugin = plugin.trim_start_matches("oci://").to_string();
            let plugin_signature = component::signature_of(&registries, &plugin).await?;
            let config = component::config(&plugin, &read(&plugin_verify_key)?)?;
            let parts = Parts { at: at.clone(), image, plugin, plugin_signature, crds, config };
            let digest = component::publish(&registries, &parts, &read(&sign_key)?, &signature).await?;
            println!("{at}@{digest}");
        }
        Command::Root { at, references } => {
            let at = ComponentRef::parse(&at)?;
            let mut parsed = Vec::new();
            for reference in references {
                let (name, target) = reference.split_once('=').context("--reference <name>=<component>:<version>")?;
                let (component_name, version) =
                    target.rsplit_once(':').context("--reference <name>=<component>:<version>")?;
                parsed.push((name.to_string(), component_name.to_string(), version.to_string()));
            }
            let descriptor = component::root(&at, &parsed)?;
            let digest = repository::push(&registries, &at, &descriptor, &[]).await?;
            println!("{at}@{digest}");
        }
        Command::Transfer { from, to, allow_source, verify_key } => {
            let verify = match verify_key {
                Some(key) => Some(("service-provider-host".to_string(), read(&key)?)),
                None => None,
            };
            let options = transfer::Options { allowed_sources: allow_source, verify };
            let to = transfer::transfer(&registries, &ComponentRef::parse(&from)?, &to, &options).await?;
            println!("{to}");
        }
        Command::Verify { at, key, signature } => {
            let at = ComponentRef::parse(&at)?;
            let provider = landscape::Provider { stored: repository::get(&registries, &at).await?, at: at.clone() };
            verify(&registries, &provider, &read(&key)?, &signature).await?;
            let resources = provider.stored.descriptor.component.resources.len();
            eprintln!("{at}: signature {signature} and {resources} resource digests verified");
        }
        Command::Get { at } => {
            let stored = repository::get(&registries, &ComponentRef::parse(&at)?).await?;
            print!("{}", serde_saphyr::to_string(&stored.descriptor)?);
        }
        Command::ServiceProvider { root, name, crds_out, verify_key } => {
            let root = ComponentRef::parse(&root)?;
            let provider = landscape::resolve(&registries, &root, &format!("service-provider-{name}")).await?;
            // What is checked is what is used: the descriptor read once.
            if let Some(key) = &verify_key {
                verify(&registries, &provider, &read(key)?, "service-provider-host").await?;
            }
            let image = landscape::image(&provider.stored.descriptor)?;
            if let Some(out) = crds_out {
                std::fs::create_dir_all(&out)?;
                for (file, object) in landscape::platform_crds(&registries, &provider).await? {
                    std::fs::write(out.join(file), serde_saphyr::to_string(&object)?)?;
                }
            }
            let config = landscape::config(&registries, &provider).await?;
            print!("{}", serde_saphyr::to_string(&landscape::service_provider(&name, &image, &config))?);
        }
    }
    Ok(())
}
