//! Cosign signatures, checked with the operator's public key.
//!
//! Two places hold a cosign signature for a manifest digest, and both are
//! read:
//! - a Sigstore bundle (v0.3) attached as an OCI referrer, what cosign v3
//!   writes: a DSSE envelope around an in-toto statement whose subject is
//!   the digest and whose predicate type is cosign's signing type;
//! - the `sha256-<hex>.sig` tag, what cosign wrote before bundles: a
//!   simple-signing payload naming the digest, its signature in a layer
//!   annotation.
//!
//! Only the key decides: no transparency log or certificate is consulted,
//! so an air-gapped platform verifies with nothing but the key. What
//! verified is kept next to the blobs and verified again on every start,
//! which is why a cached start needs no registry and trusts no file.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::DecodePublicKey as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::artifact::{Layer, MANIFEST};
use super::blobs::Blobs;
use super::reference::sha256_hex;
use super::registry::Lazy;
use super::{PluginRef, SourceError, oneline};

/// The artifact type cosign gives a bundle referrer.
pub const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// cosign's in-toto predicate type for a signature.
pub const SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// At most this many signature candidates are looked at, each this small.
const MAX_CANDIDATES: usize = 16;
const MAX_SIGNATURE_BYTES: u64 = 1 << 20;

/// The operator's verification key.
pub struct Key {
    key: VerifyingKey,
    path: String,
}

/// How a `--plugin-verify-key` value starts when it is the key itself
/// rather than a file's path: a ServiceProvider's `env` can then carry the
/// (public) key, with no ConfigMap to mount.
const INLINE_PEM: &str = "-----BEGIN PUBLIC KEY-----";

/// The key's name in messages: its path, or `inline PEM` for the key given
/// as the value itself (never the PEM in a log line).
pub fn key_name(path: &std::path::Path) -> String {
    match path.to_str() {
        Some(text) if text.trim_start().starts_with(INLINE_PEM) => "(inline PEM)".into(),
        _ => path.display().to_string(),
    }
}

impl Key {
    /// The key from a PEM file, or from the value itself when that is PEM.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let name = key_name(path);
        let pem = match path.to_str() {
            Some(text) if text.trim_start().starts_with(INLINE_PEM) => text.to_string(),
            _ => std::fs::read_to_string(path).map_err(|e| format!("reading plugin verification key {name}: {e}"))?,
        };
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
            format!(
                "plugin verification key {name} is not an ECDSA P-256 public key in PEM (what cosign generate-key-pair writes): {e}"
            )
        })?;
        Ok(Self { key, path: name })
    }
}

/// What a signature check needs, whichever place it came from; also the
/// form it is cached in.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
struct Evidence {
    /// Base64 of the signed payload.
    payload: String,
    /// Set for a DSSE envelope (the signature covers its pre-auth encoding).
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_type: Option<String>,
    /// Base64 of the DER signature.
    signature: String,
}

/// Verifies that `key` signed `digest`, from the cache or the registry.
pub async fn verify(
    key: &Key,
    reference: &PluginRef,
    digest: &str,
    blobs: &Blobs,
    remote: &Lazy<'_>,
) -> Result<(), SourceError> {
    let failed = |why: String| SourceError::Signature { reference: reference.to_string(), why };
    let cached = blobs.evidence(digest).and_then(|bytes| serde_json::from_slice::<Evidence>(&bytes).ok());
    if let Some(evidence) = cached
        && check(key, &evidence, digest).is_ok()
    {
        return Ok(());
    }
    let registry = remote.get()?;
    let subject = reference.at(digest);
    let mut reasons = Vec::new();
    let mut candidates = Vec::new();
    for referrer in registry.referrers(&subject, BUNDLE).await?.into_iter().take(MAX_CANDIDATES) {
        match sha256_hex(&referrer) {
            Some(_) => candidates.push((reference.at(&referrer), Source::Bundle)),
            None => reasons.push(format!("a referrer has digest {}", oneline(&referrer))),
        }
    }
    let tag = format!("sha256-{}.sig", sha256_hex(digest).unwrap_or_default());
    candidates.push((reference.tagged(&tag), Source::Tag));
    for (at, source) in candidates {
        let Some(manifest) = registry.manifest_at(&at, &[MANIFEST], "a signature manifest").await? else { continue };
        for (layer, annotation) in layers(&manifest, source).into_iter().take(MAX_CANDIDATES) {
            let bytes = registry.blob(&at, &layer, &Blobs::new(None)).await?;
            let evidence = match source {
                Source::Bundle => from_bundle(&bytes),
                Source::Tag => Ok(Evidence { payload: B64.encode(&bytes), payload_type: None, signature: annotation }),
            };
            match evidence.and_then(|e| check(key, &e, digest).map(|()| e)) {
                Ok(evidence) => {
                    blobs.keep_evidence(digest, &serde_json::to_vec(&evidence).unwrap_or_default());
                    return Ok(());
                }
                Err(why) => reasons.push(why),
            }
        }
    }
    Err(failed(match reasons.is_empty() {
        true => format!("no cosign signature found (neither a bundle referrer nor the {tag} tag)"),
        false => format!("no signature verifies with the key {}: {}", key.path, reasons.join("; ")),
    }))
}

#[derive(Clone, Copy)]
enum Source {
    Bundle,
    Tag,
}

/// The signature layers of a bundle referrer or a `.sig` manifest, with
/// the signature annotation (for the tag form).
fn layers(manifest: &[u8], source: Source) -> Vec<(Layer, String)> {
    let Ok(m) = serde_json::from_slice::<Value>(manifest) else { return Vec::new() };
    let wanted = match source {
        Source::Bundle => BUNDLE,
        Source::Tag => SIMPLE_SIGNING,
    };
    let layers = m.get("layers").and_then(Value::as_array).cloned().unwrap_or_default();
    layers
        .iter()
        .filter(|l| l.get("mediaType").and_then(Value::as_str) == Some(wanted))
        .filter_map(|l| {
            let digest = l.get("digest")?.as_str().filter(|d| sha256_hex(d).is_some())?;
            let size = l.get("size")?.as_u64().filter(|s| *s <= MAX_SIGNATURE_BYTES)?;
            let annotation = l.pointer(&format!("/annotations/{}", SIGNATURE_ANNOTATION.replace('/', "~1")));
            Some((Layer { digest: digest.into(), size }, annotation.and_then(Value::as_str).unwrap_or("").into()))
        })
        .collect()
}

/// The DSSE envelope of a Sigstore bundle.
fn from_bundle(bytes: &[u8]) -> Result<Evidence, String> {
    let bundle: Value = serde_json::from_slice(bytes).map_err(|e| format!("a bundle is not JSON: {e}"))?;
    let envelope = bundle.get("dsseEnvelope").ok_or("a bundle holds no DSSE envelope")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let signature = envelope.pointer("/signatures/0/sig");
    Ok(Evidence {
        payload: text(envelope.get("payload")).ok_or("a bundle's envelope has no payload")?,
        payload_type: Some(text(envelope.get("payloadType")).ok_or("a bundle's envelope has no payload type")?),
        signature: text(signature).ok_or("a bundle's envelope has no signature")?,
    })
}

/// Checks the signature, then that the payload names this digest.
fn check(key: &Key, evidence: &Evidence, digest: &str) -> Result<(), String> {
    let payload = B64.decode(&evidence.payload).map_err(|_| "a signed payload is not base64")?;
    let signature = B64.decode(evidence.signature.trim()).map_err(|_| "a signature is not base64")?;
    let signature = Signature::from_der(&signature).map_err(|_| "a signature is not an ECDSA signature")?;
    let signed = match &evidence.payload_type {
        Some(payload_type) => pre_auth_encoding(payload_type, &payload),
        None => payload.clone(),
    };
    key.key.verify(&signed, &signature).map_err(|_| "a signature was made with another key or over other bytes")?;
    let payload: Value = serde_json::from_slice(&payload).map_err(|_| "a signed payload is not JSON")?;
    let named = match &evidence.payload_type {
        Some(_) => statement_subjects(&payload)?,
        None => simple_signing_subject(&payload)?,
    };
    match named.iter().any(|d| d == digest) {
        true => Ok(()),
        false => Err(format!("a valid signature is for {}, not for {digest}", oneline(&named.join(", ")))),
    }
}

/// DSSE's pre-authentication encoding: what a DSSE signature covers.
fn pre_auth_encoding(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut pae = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    pae.extend_from_slice(payload);
    pae
}

fn statement_subjects(statement: &Value) -> Result<Vec<String>, String> {
    let predicate = statement.get("predicateType").and_then(Value::as_str).unwrap_or_default();
    if predicate != SIGN_PREDICATE {
        return Err(format!("a signed statement has predicate type {}, not {SIGN_PREDICATE}", oneline(predicate)));
    }
    let subjects = statement.get("subject").and_then(Value::as_array).ok_or("a signed statement has no subject")?;
    Ok(subjects
        .iter()
        .filter_map(|s| s.pointer("/digest/sha256").and_then(Value::as_str))
        .map(|hex| format!("sha256:{hex}"))
        .collect())
}

fn simple_signing_subject(payload: &Value) -> Result<Vec<String>, String> {
    let kind = payload.pointer("/critical/type").and_then(Value::as_str).unwrap_or_default();
    if kind != "cosign container image signature" {
        return Err(format!("a signed payload is of type {}, not a cosign image signature", oneline(kind)));
    }
    let digest = payload.pointer("/critical/image/docker-manifest-digest").and_then(Value::as_str);
    Ok(digest.map(str::to_string).into_iter().collect())
}

#[cfg(test)]
#[path = "signature_tests.rs"]
mod tests;
