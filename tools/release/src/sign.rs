//! Signing a component descriptor as OCM does: the descriptor normalised
//! (`jsonNormalisation/v4alpha1`: the signed fields only, as RFC 8785
//! canonical JSON), its SHA-256 signed with RSASSA-PKCS1-V1_5.
//!
//! What is left out of the normalised form is what may change when a
//! component moves: where it is stored (`repositoryContexts`) and how its
//! resources are reached (`access`). Each resource's own digest stays in, so
//! a signature made at publication still holds after a transfer to another
//! registry, and says which bytes every resource must have.

use anyhow::{Context, Result, bail};
use rsa::pkcs1v15::{Signature as RsaSignature, SigningKey, VerifyingKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::signature::SignatureEncoding;
use rsa::signature::hazmat::{PrehashSigner, PrehashVerifier};
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::descriptor::{Descriptor, Digest, SHA256, Signature, SignatureSpec};

pub const NORMALISATION: &str = "jsonNormalisation/v4alpha1";
pub const ALGORITHM: &str = "RSASSA-PKCS1-V1_5";
pub const MEDIA_TYPE: &str = "application/vnd.ocm.signature.rsa";

/// Only labels marked for signing, with the fields that are signed.
fn signed_labels(labels: Option<Value>) -> Option<Value> {
    let kept: Vec<Value> = labels?
        .as_array()?
        .iter()
        .filter(|l| l["signing"] == json!(true) || l["signing"] == json!("true"))
        .map(|l| {
            let mut out = Map::new();
            for key in ["name", "version", "value", "signing"] {
                if let Some(v) = l.get(key) {
                    out.insert(key.into(), v.clone());
                }
            }
            Value::Object(out)
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Array(kept))
}

/// The entries of a list with the fields that are not signed removed.
fn normalise_entries(entries: Option<Value>, dropped: &[&str]) -> Value {
    let entries = entries.and_then(|e| e.as_array().cloned()).unwrap_or_default();
    Value::Array(
        entries
            .into_iter()
            .map(|mut entry| {
                let Some(object) = entry.as_object_mut() else { return entry };
                let access_none = object
                    .get("access")
                    .and_then(|a| a["type"].as_str())
                    .is_some_and(|t| t.eq_ignore_ascii_case("none"));
                if access_none {
                    object.remove("digest");
                }
                for key in dropped {
                    object.remove(*key);
                }
                if object.get("extraIdentity").is_some_and(|e| e.is_null() || e.as_object().is_some_and(Map::is_empty))
                {
                    object.remove("extraIdentity");
                }
                match signed_labels(object.remove("labels")) {
                    Some(labels) => object.insert("labels".into(), labels),
                    None => None,
                };
                entry
            })
            .collect(),
    )
}

/// The descriptor's signed form, as canonical JSON.
pub fn normalise(descriptor: &Descriptor) -> Result<String> {
    let mut component = serde_json::to_value(&descriptor.component)?;
    let object = component.as_object_mut().context("a component is an object")?;
    object.remove("repositoryContexts");
    let provider = object.remove("provider").unwrap_or(Value::Null);
    object.insert("provider".into(), json!({"name": provider}));
    let resources = normalise_entries(object.remove("resources"), &["access", "srcRefs"]);
    object.insert("resources".into(), resources);
    let sources = normalise_entries(object.remove("sources"), &["access"]);
    object.insert("sources".into(), sources);
    let references = object.remove("componentReferences").filter(|r| !r.is_null()).unwrap_or(json!([]));
    object.insert("componentReferences".into(), references);
    match signed_labels(object.remove("labels")) {
        Some(labels) => object.insert("labels".into(), labels),
        None => None,
    };
    serde_json_canonicalizer::to_string(&json!({"component": component})).context("canonical JSON")
}

/// The digest a signature covers.
pub fn digest(descriptor: &Descriptor) -> Result<Digest> {
    let normalised = normalise(descriptor)?;
    Ok(Digest {
        hash_algorithm: SHA256.into(),
        normalisation_algorithm: NORMALISATION.into(),
        value: hex::encode(Sha256::digest(normalised.as_bytes())),
    })
}

/// A new RSA key pair (3072 bits) as PEM: (private PKCS#8, public SPKI).
pub fn generate() -> Result<(String, String)> {
    let key = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 3072).context("generating an RSA key")?;
    let private = key.to_pkcs8_pem(LineEnding::LF)?.to_string();
    let public = RsaPublicKey::from(&key).to_public_key_pem(LineEnding::LF)?;
    Ok((private, public))
}

/// Adds (or replaces) the signature `name` made with `private_pem`.
pub fn sign(descriptor: &mut Descriptor, name: &str, private_pem: &str) -> Result<()> {
    let key = RsaPrivateKey::from_pkcs8_pem(private_pem).context("the signing key is not an RSA PKCS#8 PEM key")?;
    let digest = digest(descriptor)?;
    let hashed = hex::decode(&digest.value)?;
    let signer = SigningKey::<Sha256>::new(key);
    // The digest is signed as a prehash: what OCM's RSA handler signs.
    let signature = signer.sign_prehash(&hashed).context("signing the descriptor's digest")?;
    descriptor.signatures.retain(|s| s.name != name);
    descriptor.signatures.push(Signature {
        name: name.into(),
        digest,
        signature: SignatureSpec {
            algorithm: ALGORITHM.into(),
            value: hex::encode(signature.to_bytes()),
            media_type: MEDIA_TYPE.into(),
            issuer: None,
        },
    });
    Ok(())
}

/// Checks the signature `name` with `public_pem`: the digest recomputed
/// from the descriptor as it is now, and the signature over it.
pub fn verify(descriptor: &Descriptor, name: &str, public_pem: &str) -> Result<()> {
    let key = RsaPublicKey::from_public_key_pem(public_pem).context("the key is not an RSA public key in PEM")?;
    let Some(signature) = descriptor.signatures.iter().find(|s| s.name == name) else {
        bail!("{}:{} has no signature {name}", descriptor.component.name, descriptor.component.version);
    };
    if signature.signature.algorithm != ALGORITHM || signature.digest.normalisation_algorithm != NORMALISATION {
        bail!(
            "signature {name} is {} over {}; this tool checks {ALGORITHM} over {NORMALISATION}",
            signature.signature.algorithm,
            signature.digest.normalisation_algorithm
        );
    }
    let now = digest(descriptor)?;
    if now.value != signature.digest.value {
        bail!(
            "the descriptor's digest is {}, the signature {name} was made over {}: it was changed",
            now.value,
            signature.digest.value
        );
    }
    let bytes = hex::decode(&signature.signature.value).context("a signature value that is not hex")?;
    let rsa_signature = RsaSignature::try_from(bytes.as_slice()).context("a malformed RSA signature")?;
    let hashed = hex::decode(&now.value)?;
    VerifyingKey::<Sha256>::new(key)
        .verify_prehash(&hashed, &rsa_signature)
        .map_err(|_| anyhow::anyhow!("signature {name} does not verify with this key"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::{Access, Resource};

    fn descriptor() -> Descriptor {
        let mut d = Descriptor::new("example.org/p", "1.0.0", "example.org", "r.example/base");
        d.component.resources.push(Resource {
            name: "image".into(),
            version: "1.0.0".into(),
            kind: "ociImage".into(),
            relation: "local".into(),
            extra_identity: Default::default(),
            labels: Vec::new(),
            access: Access::OciArtifact { image_reference: "r.example/base/img@sha256:00".into() },
            digest: Some(Digest::oci_artifact("sha256:00")),
        });
        d
    }

    #[test]
    fn the_signed_form_leaves_out_where_things_are_and_keeps_what_they_are() {
        let d = descriptor();
        assert_eq!(
            normalise(&d).unwrap(),
            r#"{"component":{"componentReferences":[],"name":"example.org/p","provider":{"name":"example.org"},"resources":[{"digest":{"hashAlgorithm":"SHA-256","normalisationAlgorithm":"ociArtifactDigest/v1","value":"00"},"name":"image","relation":"local","type":"ociImage","version":"1.0.0"}],"sources":[],"version":"1.0.0"}}"#
        );
        let mut moved = d.clone();
        moved.component.repository_contexts.push(crate::descriptor::RepositoryContext::oci("mirror.example"));
        moved.component.resources[0].access =
            Access::OciArtifact { image_reference: "mirror.example/img@sha256:00".into() };
        assert_eq!(digest(&moved).unwrap(), digest(&d).unwrap(), "a transfer keeps the digest");
        let mut other = d.clone();
        other.component.resources[0].digest = Some(Digest::oci_artifact("sha256:01"));
        assert_ne!(digest(&other).unwrap(), digest(&d).unwrap(), "other bytes, another digest");
    }

    #[test]
    fn a_signature_verifies_with_its_key_only_and_not_after_a_change() {
        let (private, public) = generate().unwrap();
        let (_, stranger) = generate().unwrap();
        let mut d = descriptor();
        sign(&mut d, "release", &private).unwrap();
        verify(&d, "release", &public).unwrap();
        let e = verify(&d, "release", &stranger).unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        d.component.resources[0].digest = Some(Digest::oci_artifact("sha256:01"));
        let e = verify(&d, "release", &public).unwrap_err();
        assert!(e.to_string().contains("was changed"), "{e}");
        assert!(verify(&d, "other", &public).is_err(), "no such signature");
    }
}
