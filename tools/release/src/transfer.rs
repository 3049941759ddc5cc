//! A component version copied to another registry with everything it
//! needs (an air-gapped landscape's mirror): its OCI resources (the image
//! index with both images, the plugin and its signature) to the same
//! repository paths under the target, its local blobs, and its
//! references' components. Accesses are rewritten to the copies and the
//! target is added to `repositoryContexts`; signatures are kept as they
//! are and still hold, since neither is signed.
//!
//! Every copy is checked against the digest the (signed) descriptor
//! records, not against the (unsigned) access that named it; resources are
//! read only from the component's own registry unless others are allowed,
//! so a descriptor cannot send the tool and its credentials elsewhere.

use std::collections::BTreeSet;

use anyhow::{Context, Result, bail};
use oci_client::Reference;

use crate::descriptor::{Access, RepositoryContext};
use crate::registry::{Registries, pinned, sha256};
use crate::repository::{self, ComponentRef, LocalBlob, split_base};
use crate::sign;

/// `reference` under `base`: the same repository path (and tag, digest).
pub fn relocate(reference: &str, base: &str) -> Result<String> {
    let parsed: Reference = reference.parse().with_context(|| format!("{reference} is not an OCI reference"))?;
    let (registry, path) = split_base(base);
    let repository = match path {
        Some(path) => format!("{path}/{}", parsed.repository()),
        None => parsed.repository().to_string(),
    };
    let mut out = format!("{registry}/{repository}");
    if let Some(tag) = parsed.tag() {
        out.push(':');
        out.push_str(tag);
    }
    let digest = parsed.digest().with_context(|| format!("{reference} is not pinned by digest"))?;
    out.push('@');
    out.push_str(digest);
    Ok(out)
}

/// What a transfer may do besides copying.
#[derive(Default)]
pub struct Options {
    /// Registries (host[:port]) resources may be read from besides the
    /// component's own.
    pub allowed_sources: Vec<String>,
    /// Check the signature (name, RSA public key PEM) of each component that
    /// has resources before anything of it is copied.
    pub verify: Option<(String, String)>,
}

/// Copies `from` (and the components it references) under `to_base`;
/// returns where it is now.
pub async fn transfer(
    registries: &Registries,
    from: &ComponentRef,
    to_base: &str,
    options: &Options,
) -> Result<ComponentRef> {
    let mut done = BTreeSet::new();
    transfer_one(registries, from, to_base, options, &mut done).await
}

async fn transfer_one(
    registries: &Registries,
    from: &ComponentRef,
    to_base: &str,
    options: &Options,
    done: &mut BTreeSet<String>,
) -> Result<ComponentRef> {
    let to = ComponentRef::new(to_base, &from.name, &from.version)?;
    // A component referenced twice is copied once; a cycle ends here.
    if !done.insert(from.to_string()) {
        return Ok(to);
    }
    if done.len() > 256 {
        bail!("more than 256 components under {from}");
    }
    let stored = repository::get(registries, from).await?;
    // Whatever carries resources must be signed; a component of references
    // only (a landscape's root) is the landscape's own, and may not be.
    let references_only = stored.descriptor.component.resources.is_empty() && stored.descriptor.signatures.is_empty();
    if let Some((name, key)) = &options.verify
        && !references_only
    {
        sign::verify(&stored.descriptor, name, key).with_context(|| format!("{from}"))?;
    }
    let mut descriptor = stored.descriptor.clone();
    for reference in &descriptor.component.component_references {
        let child = ComponentRef::new(&from.base, &reference.component_name, &reference.version)?;
        Box::pin(transfer_one(registries, &child, to_base, options, done)).await?;
    }
    let own_registry = split_base(&from.base).0;
    let mut blobs = Vec::new();
    for resource in &mut descriptor.component.resources {
        let expected =
            resource.recorded_digest().with_context(|| format!("resource {} records no digest", resource.name))?;
        match &mut resource.access {
            Access::OciArtifact { image_reference } => {
                let source: Reference = image_reference.parse()?;
                let allowed =
                    source.registry() == own_registry || options.allowed_sources.iter().any(|r| r == source.registry());
                if !allowed {
                    bail!(
                        "resource {} of {from} is in {}, not in the component's registry {own_registry}: allow it with --allow-source {}",
                        resource.name,
                        source.registry(),
                        source.registry()
                    );
                }
                if source.digest() != Some(expected.as_str()) {
                    bail!(
                        "resource {} of {from} points at {image_reference}, its descriptor records {expected}",
                        resource.name
                    );
                }
                let target = relocate(image_reference, to_base)?;
                let parsed_target: Reference = target.parse()?;
                let copied = registries
                    .copy(&pinned(&source, &expected), &pinned(&parsed_target, &expected), parsed_target.tag())
                    .await?;
                if copied != expected {
                    bail!("resource {} copied as {copied}, not {expected}", resource.name);
                }
                *image_reference = target;
            }
            Access::LocalBlob { local_reference, media_type, .. } => {
                let bytes = repository::local_blob(registries, from, &stored, local_reference).await?;
                if sha256(&bytes) != expected {
                    bail!("local blob of resource {} of {from} does not match its recorded digest", resource.name);
                }
                blobs.push(LocalBlob { bytes, media_type: media_type.clone() });
            }
        }
    }
    descriptor.component.repository_contexts.push(RepositoryContext::oci(to_base));
    let now = sign::digest(&descriptor)?;
    for signature in &descriptor.signatures {
        if signature.digest.value != now.value {
            bail!("transferring {from} would break signature {}", signature.name);
        }
    }
    repository::push(registries, &to, &descriptor, &blobs).await?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_moves_under_the_target_with_its_tag_and_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            relocate(&format!("reg.example:5000/plugins/kro:0.2.0@{digest}"), "mirror.example/air").unwrap(),
            format!("mirror.example/air/plugins/kro:0.2.0@{digest}")
        );
        assert_eq!(
            relocate(&format!("reg.example/plugins/kro@{digest}"), "mirror.example:5000").unwrap(),
            format!("mirror.example:5000/plugins/kro@{digest}")
        );
        assert!(relocate("reg.example/plugins/kro:0.2.0", "mirror.example").is_err(), "only pinned references");
    }
}
