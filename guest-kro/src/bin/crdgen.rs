//! Writes the plugin's CRDs to `crds/` (or the directory given as the first
//! argument). `task generate` runs it; CI fails when the output differs from
//! what is committed.

use std::path::PathBuf;

use guest_kro::api::{Kro, ProviderConfig};
use kube::CustomResourceExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crds".into()));
    std::fs::create_dir_all(&dir)?;
    for crd in [Kro::crd(), ProviderConfig::crd()] {
        let name = crd.metadata.name.clone().ok_or("CRD without a name")?;
        let path = dir.join(format!("{}.yaml", name_to_file(&name)));
        let yaml = serde_saphyr::to_string(&crd)?;
        std::fs::write(&path, format!("---\n{yaml}"))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// `kroes.kro.services.open-control-plane.io` → `kro.services.open-control-plane.io_kroes`,
/// the controller-gen file naming the Go providers use.
fn name_to_file(crd_name: &str) -> String {
    match crd_name.split_once('.') {
        Some((plural, group)) => format!("{group}_{plural}"),
        None => crd_name.to_string(),
    }
}
