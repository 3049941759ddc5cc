//! Writes the plugin's CRDs to `crds/` (or the directory given as the first
//! argument). `task generate` runs it; CI fails when the output differs from
//! what is committed.

use std::path::PathBuf;

use guest_flux::api::{Flux, ProviderConfig};
use kube::CustomResourceExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crds".into()));
    std::fs::create_dir_all(&dir)?;
    for crd in [Flux::crd(), ProviderConfig::crd()] {
        let name = crd.metadata.name.clone().ok_or("CRD without a name")?;
        let (plural, group) = name.split_once('.').ok_or("CRD name without a group")?;
        let path = dir.join(format!("{group}_{plural}.yaml"));
        std::fs::write(&path, format!("---\n{}", serde_saphyr::to_string(&crd)?))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
