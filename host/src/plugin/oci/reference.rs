//! `oci://<registry>/<repository>@sha256:<hex>`: where a plugin comes from.
//!
//! The reference becomes request paths and a cache file name, so it is
//! checked before anything uses it: an explicit registry host (no silent
//! Docker Hub default), a repository in the distribution grammar, and a
//! SHA-256 digest of exactly 64 lowercase hex digits. A tag alone names
//! something that can change under the platform; it is refused unless the
//! operator opts in for development.

use std::fmt;

use oci_client::Reference;

use super::SourceError;

/// The scheme that marks a plugin in a registry rather than a file.
pub const SCHEME: &str = "oci://";

/// A checked plugin reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginRef {
    reference: Reference,
}

impl PluginRef {
    /// Parses `oci://…`; `allow_tag` admits a reference without a digest.
    pub fn parse(text: &str, allow_tag: bool) -> Result<Self, SourceError> {
        let bad = |why: &str| SourceError::Reference { reference: super::oneline(text), why: why.to_string() };
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("it does not start with oci://"))?;
        let host = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(bad("it names no registry host (write oci://<registry>/<repository>@sha256:<digest>)"));
        }
        if rest.chars().any(|c| !c.is_ascii_graphic()) {
            return Err(bad("it contains spaces or characters other than printable ASCII"));
        }
        let reference = Reference::try_from(rest).map_err(|e| bad(&e.to_string()))?;
        if reference.registry() != host {
            return Err(bad("its registry host is not where it points"));
        }
        match reference.digest() {
            Some(digest) if sha256_hex(digest).is_some() => {}
            Some(_) => return Err(bad("its digest is not sha256:<64 lowercase hex digits>")),
            None if allow_tag => {}
            None => {
                return Err(bad(
                    "it has no digest; pin the plugin with @sha256:<digest> (--allow-mutable-plugin-reference admits tags, for development only: a tag can be moved to other code)",
                ));
            }
        }
        Ok(Self { reference })
    }

    /// The client's view of the reference.
    pub fn reference(&self) -> &Reference {
        &self.reference
    }

    /// The pinned manifest digest (`sha256:<hex>`), if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// The registry host (and port).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The same repository at `digest`.
    pub fn at(&self, digest: &str) -> Reference {
        Reference::with_digest(
            self.reference.registry().to_string(),
            self.reference.repository().to_string(),
            digest.to_string(),
        )
    }

    /// `oci://<registry>/<repository>@<digest>`: this repository pinned.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{SCHEME}{}/{}@{digest}", self.reference.registry(), self.reference.repository())
    }

    /// The same repository at `tag`.
    pub fn tagged(&self, tag: &str) -> Reference {
        Reference::with_tag(
            self.reference.registry().to_string(),
            self.reference.repository().to_string(),
            tag.to_string(),
        )
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.reference;
        write!(f, "{SCHEME}{}/{}", r.registry(), r.repository())?;
        match (r.digest(), r.tag()) {
            (Some(digest), _) => write!(f, "@{digest}"),
            (None, Some(tag)) => write!(f, ":{tag}"),
            (None, None) => Ok(()),
        }
    }
}

/// The 64 hex digits of a `sha256:` digest, if that is what it is. Every
/// digest that reaches a path or a file name passes here first.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parse(text: &str) -> Result<PluginRef, String> {
        PluginRef::parse(text, false).map_err(|e| e.to_string())
    }

    #[test]
    fn a_digest_reference_is_accepted_and_printed_back() {
        let text = format!("oci://registry.example:5000/team/kro-plugin@{D}");
        let r = parse(&text).unwrap();
        assert_eq!(r.to_string(), text);
        assert_eq!(r.registry(), "registry.example:5000");
        assert_eq!(r.digest(), Some(D));
        let tagged = PluginRef::parse("oci://registry.example:5000/team/kro-plugin:v1", true).unwrap();
        assert_eq!(tagged.pinned(D), text);
    }

    #[test]
    fn a_tag_needs_the_opt_in() {
        let e = parse("oci://localhost:5000/kro:v1").unwrap_err();
        assert!(e.contains("has no digest") && e.contains("--allow-mutable-plugin-reference"), "{e}");
        assert!(PluginRef::parse("oci://localhost:5000/kro:v1", true).is_ok());
    }

    #[test]
    fn what_could_bend_a_path_or_a_file_name_is_refused() {
        for bad in [
            "oci://kro/plugin@sha256:00".to_string(),
            format!("oci://kro@{D}"),
            format!("oci://registry.example/a/../b@{D}"),
            format!("oci://registry.example/a b@{D}"),
            format!("oci://registry.example/a?x=1@{D}"),
            format!("oci://registry.example/a#x@{D}"),
            format!("oci://registry.example/A@{D}"),
            "oci://registry.example/a@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef".into(),
            "oci://registry.example/a@sha512:00".into(),
            "oci://registry.example/a@sha256:../../etc".into(),
            format!("oci://registry.example/a%2f@{D}"),
            format!("registry.example/a@{D}"),
        ] {
            assert!(parse(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn only_sha256_hex_passes() {
        assert!(sha256_hex(D).is_some());
        assert!(sha256_hex("sha256:0123").is_none());
        assert!(sha256_hex(&D.replace('a', "/")).is_none());
        assert!(sha256_hex(&D.to_uppercase()).is_none());
    }
}
