use p256::ecdsa::SigningKey;
use p256::ecdsa::signature::Signer as _;
use p256::pkcs8::EncodePublicKey as _;
use serde_json::json;

use super::*;

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const OTHER: &str = "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn signer(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).unwrap()
}

fn key_of(signer: &SigningKey) -> Key {
    Key { key: *signer.verifying_key(), path: "cosign.pub".into() }
}

fn statement(digest: &str, predicate: &str) -> Vec<u8> {
    let hex = sha256_hex(digest).unwrap();
    serde_json::to_vec(&json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"digest": {"sha256": hex}}],
        "predicateType": predicate,
        "predicate": {},
    }))
    .unwrap()
}

fn dsse(signer: &SigningKey, payload: &[u8]) -> Evidence {
    let payload_type = "application/vnd.in-toto+json";
    let signature: Signature = signer.sign(&pre_auth_encoding(payload_type, payload));
    Evidence {
        payload: B64.encode(payload),
        payload_type: Some(payload_type.into()),
        signature: B64.encode(signature.to_der().as_bytes()),
    }
}

fn simple(signer: &SigningKey, digest: &str) -> Evidence {
    let payload = serde_json::to_vec(&json!({"critical": {"identity": {"docker-reference": "r.example/p"},
        "image": {"docker-manifest-digest": digest}, "type": "cosign container image signature"}, "optional": null}))
    .unwrap();
    let signature: Signature = signer.sign(&payload);
    Evidence { payload: B64.encode(&payload), payload_type: None, signature: B64.encode(signature.to_der().as_bytes()) }
}

#[test]
fn a_bundle_and_a_tag_signature_over_the_digest_verify() {
    let s = signer(7);
    check(&key_of(&s), &dsse(&s, &statement(D, SIGN_PREDICATE)), D).unwrap();
    check(&key_of(&s), &simple(&s, D), D).unwrap();
}

#[test]
fn another_key_another_digest_or_other_bytes_fail() {
    let (s, mallory) = (signer(7), signer(9));
    let e = check(&key_of(&s), &dsse(&mallory, &statement(D, SIGN_PREDICATE)), D).unwrap_err();
    assert!(e.contains("another key"), "{e}");
    let e = check(&key_of(&s), &dsse(&s, &statement(OTHER, SIGN_PREDICATE)), D).unwrap_err();
    assert!(e.contains("not for sha256:0123"), "{e}");
    let e = check(&key_of(&s), &simple(&s, OTHER), D).unwrap_err();
    assert!(e.contains("not for"), "{e}");
    let e = check(&key_of(&s), &dsse(&s, &statement(D, "https://slsa.dev/provenance/v1")), D).unwrap_err();
    assert!(e.contains("predicate type"), "{e}");
    // A payload swapped under a valid signature.
    let mut swapped = dsse(&s, &statement(OTHER, SIGN_PREDICATE));
    swapped.payload = B64.encode(statement(D, SIGN_PREDICATE));
    assert!(check(&key_of(&s), &swapped, D).unwrap_err().contains("another key"));
    // The DSSE signature does not stand for the raw payload, nor the reverse.
    let mut raw = dsse(&s, &statement(D, SIGN_PREDICATE));
    raw.payload_type = None;
    assert!(check(&key_of(&s), &raw, D).is_err());
    let mut garbage = simple(&s, D);
    garbage.signature = "not base64!".into();
    assert!(check(&key_of(&s), &garbage, D).unwrap_err().contains("base64"));
}

#[test]
fn a_bundle_gives_its_envelope() {
    let s = signer(7);
    let e = dsse(&s, &statement(D, SIGN_PREDICATE));
    let bundle = json!({"mediaType": BUNDLE, "verificationMaterial": {"publicKey": {"hint": ""}},
        "dsseEnvelope": {"payload": e.payload, "payloadType": e.payload_type, "signatures": [{"sig": e.signature, "keyid": ""}]}});
    let evidence = from_bundle(&serde_json::to_vec(&bundle).unwrap()).unwrap();
    check(&key_of(&s), &evidence, D).unwrap();
    assert!(from_bundle(br#"{"messageSignature": {}}"#).unwrap_err().contains("no DSSE envelope"));
}

#[test]
fn a_key_must_be_a_p256_public_key() {
    let dir = std::env::temp_dir().join(format!("sph-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("cosign.pub");
    std::fs::write(&good, signer(7).verifying_key().to_public_key_pem(Default::default()).unwrap()).unwrap();
    assert!(Key::load(&good).is_ok());
    let bad = dir.join("bad.pub");
    std::fs::write(&bad, "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").unwrap();
    let e = Key::load(&bad).err().unwrap();
    assert!(e.contains("not an ECDSA P-256 public key"), "{e}");
    assert!(Key::load(&dir.join("missing.pub")).is_err());
    std::fs::remove_dir_all(dir).unwrap();
}
