//! openmcp naming: stable UUIDs, tenant namespaces and name shortening.
//!
//! These reproduce controller-utils / openmcp-operator exactly, because other
//! openmcp components compute the same names independently (the ControlPlane
//! controller creates the tenant namespace, the cluster provider grants the
//! AccessRequest by name).

use sha3::Shake128;
use sha3::digest::{ExtendableOutput, Update, XofReader};

/// Kubernetes' limit for names and label values.
pub const MAX_NAME_LEN: usize = 63;

/// Prefix of tenant namespaces on the platform cluster.
pub const TENANT_NAMESPACE_PREFIX: &str = "mcp--";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    #[error("at least one name must be non-empty to derive a stable name")]
    Empty,
}

fn shake128(input: &str, out: &mut [u8]) {
    let mut hasher = Shake128::default();
    hasher.update(input.as_bytes());
    hasher.finalize_xof().read(out);
}

/// controller-utils `K8sNameUUID`: a version-8 UUID from the SHAKE128 hash of
/// the parts joined with `/`.
pub fn k8s_name_uuid(parts: &[&str]) -> Result<String, NameError> {
    if parts.iter().all(|p| p.is_empty()) {
        return Err(NameError::Empty);
    }
    let mut h = [0u8; 16];
    shake128(&parts.join("/"), &mut h);
    h[6] = (h[6] & 0x0f) | 0x80; // version 8
    h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]))
}

/// openmcp `StableMCPNamespace(name, namespace)`: the tenant namespace of the
/// ControlPlane (and hence of the service object) `namespace/name`.
pub fn tenant_namespace(name: &str, namespace: &str) -> Result<String, NameError> {
    Ok(format!("{TENANT_NAMESPACE_PREFIX}{}", k8s_name_uuid(&[namespace, name])?))
}

/// RFC 4648 base32, lower-case alphabet, no padding.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// controller-utils `ShortenToXCharacters`: names longer than `max` keep a
/// prefix and get `--<8 chars of hash>` so they stay unique and valid.
pub fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let mut h = [0u8; 5];
    shake128(name, &mut h);
    let suffix = format!("--{}", base32_lower(&h));
    let keep = max.saturating_sub(suffix.len());
    // Names are ASCII (DNS labels); cut on a char boundary regardless.
    let mut cut = keep.min(name.len());
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = name[..cut].trim_end_matches(['-', '.']);
    format!("{prefix}{suffix}")
}

/// openmcp `StableRequestName(controller, request, suffix)`: the name of the
/// AccessRequest a provider creates for one service instance, e.g.
/// `kro.services.open-control-plane.io--mcp-01--mcp`.
pub fn access_request_name(controller: &str, instance: &str, suffix: &str) -> String {
    let base = format!("{}--{}", controller.to_lowercase(), instance.to_lowercase());
    let max = MAX_NAME_LEN.saturating_sub(suffix.len() + 2);
    format!("{}--{suffix}", shorten(&base, max))
}

/// A label value: openmcp shortens every managed label value to 63 characters.
pub fn label_value(value: &str) -> String {
    shorten(value, MAX_NAME_LEN)
}

/// A provider-specific name for a copied object, e.g. `sp-kro-<source>`, so
/// copies of different providers in one namespace never collide.
pub fn prefixed_copy_name(provider: &str, source: &str) -> String {
    shorten(&format!("sp-{provider}-{source}"), MAX_NAME_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_matches_upstream_vectors() {
        assert_eq!(k8s_name_uuid(&["example"]).unwrap(), "23cc2129-a257-8644-95e0-289d55c69704");
        assert_eq!(k8s_name_uuid(&["default", "example"]).unwrap(), "2bcf790e-815e-8ea9-857b-15be429583a5");
    }

    #[test]
    fn tenant_namespace_matches_upstream_vector() {
        assert_eq!(tenant_namespace("test-mcp", "default").unwrap(), "mcp--eaedbc8f-bfe8-889c-bc87-4958803d9f94");
    }

    #[test]
    fn empty_names_are_rejected() {
        assert_eq!(k8s_name_uuid(&["", ""]), Err(NameError::Empty));
        assert_eq!(tenant_namespace("", ""), Err(NameError::Empty));
    }

    #[test]
    fn base32_is_rfc4648_lowercase() {
        // RFC 4648 test vectors, lower-cased, padding removed.
        assert_eq!(base32_lower(b"f"), "my");
        assert_eq!(base32_lower(b"fo"), "mzxq");
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        assert_eq!(base32_lower(b"fooba"), "mzxw6ytb");
    }

    #[test]
    fn short_names_are_untouched() {
        assert_eq!(shorten("abc", 63), "abc");
        let exact = "a".repeat(63);
        assert_eq!(shorten(&exact, 63), exact);
    }

    #[test]
    fn long_names_are_shortened_deterministically() {
        let long = format!("{}-{}", "x".repeat(50), "y".repeat(50));
        let a = shorten(&long, 63);
        assert_eq!(a.len(), 63);
        assert_eq!(a, shorten(&long, 63));
        assert!(a.starts_with(&"x".repeat(50)));
        let (_, hash) = a.rsplit_once("--").unwrap();
        assert_eq!(hash.len(), 8);
        assert!(hash.chars().all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c)));
        assert_ne!(shorten(&format!("{long}z"), 63), a, "different input, different name");
    }

    #[test]
    fn shortening_strips_trailing_separators_before_the_hash() {
        // 53 chars kept, the last ones being '-' and '.', must be trimmed.
        let name = format!("{}-.{}", "a".repeat(51), "b".repeat(40));
        let short = shorten(&name, 63);
        assert!(short.starts_with(&format!("{}--", "a".repeat(51))), "{short}");
        assert!(short.len() < 63);
    }

    #[test]
    fn access_request_names_follow_openmcp() {
        let controller = "kro.services.open-control-plane.io";
        assert_eq!(
            access_request_name(controller, "test-mcp", "mcp"),
            "kro.services.open-control-plane.io--test-mcp--mcp"
        );
        // Names of 23 and 63 characters (the Go provider breaks on these).
        for len in [22, 23, 63] {
            let instance = "n".repeat(len);
            let name = access_request_name(controller, &instance, "mcp");
            assert!(name.len() <= 63, "{len}: {name}");
            assert!(name.ends_with("--mcp"));
        }
        // Lower-cased.
        assert_eq!(access_request_name("Flux", "My", "mcp"), "flux--my--mcp");
    }

    /// The Go SDK (sdk-go/names) pins the same values.
    #[test]
    fn shortened_names_match_the_go_sdk() {
        let long = format!("{}-{}", "x".repeat(50), "y".repeat(50));
        assert_eq!(shorten(&long, 63), format!("{}-yy--emohweya", "x".repeat(50)));
        let trailing = format!("{}-.{}", "a".repeat(51), "b".repeat(40));
        assert_eq!(shorten(&trailing, 63), format!("{}--jyhdkwyj", "a".repeat(51)));
        assert_eq!(
            access_request_name("kro.services.open-control-plane.io", &"n".repeat(63), "mcp"),
            "kro.services.open-control-plane.io--nnnnnnnnnnnn--rallaaej--mcp"
        );
    }

    #[test]
    fn copy_names_are_prefixed_and_valid() {
        assert_eq!(prefixed_copy_name("kro", "registry"), "sp-kro-registry");
        let long = prefixed_copy_name("kro", &"r".repeat(63));
        assert_eq!(long.len(), 63);
        assert!(long.starts_with("sp-kro-"));
    }
}
