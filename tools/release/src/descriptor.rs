//! The OCM component descriptor, schema `v2`: the fields this project
//! writes and reads, typed. Other fields of the component (`creationTime`)
//! are kept verbatim (`extra`); resources and references carry the fields
//! schema v2 defines, and the two access types this project uses
//! (`ociArtifact`, `localBlob`): a descriptor with others is refused when
//! read, rather than rewritten without them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `component-descriptor.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    pub meta: Meta,
    pub component: Component,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<Signature>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub schema_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    pub name: String,
    pub version: String,
    /// In schema v2 the provider is a name.
    pub provider: String,
    #[serde(default)]
    pub repository_contexts: Vec<RepositoryContext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Label>,
    #[serde(default)]
    pub sources: Vec<Value>,
    #[serde(default)]
    pub component_references: Vec<ComponentReference>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Where a component version was stored: one entry per repository it passed
/// through, the current one last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryContext {
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_name_mapping: Option<String>,
}

impl RepositoryContext {
    pub fn oci(base_url: &str) -> Self {
        Self { kind: "OCIRegistry".into(), base_url: base_url.into(), component_name_mapping: Some("urlPath".into()) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    pub name: String,
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Only labels marked for signing are part of the signed digest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub signing: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentReference {
    pub name: String,
    pub component_name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_identity: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub name: String,
    pub version: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub relation: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_identity: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Label>,
    pub access: Access,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
}

/// How to get a resource's bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Access {
    /// An OCI artifact (image, index, plugin) anywhere, by reference.
    #[serde(rename = "ociArtifact")]
    OciArtifact {
        #[serde(rename = "imageReference")]
        image_reference: String,
    },
    /// A blob stored with the component version: in an OCI repository, a
    /// layer of the component version's manifest, named by its digest.
    #[serde(rename = "localBlob")]
    LocalBlob {
        #[serde(rename = "localReference")]
        local_reference: String,
        #[serde(rename = "mediaType")]
        media_type: String,
        #[serde(rename = "referenceName", default, skip_serializing_if = "Option::is_none")]
        reference_name: Option<String>,
    },
}

impl Resource {
    /// The digest the descriptor records for the resource's bytes, as
    /// `sha256:<hex>`.
    pub fn recorded_digest(&self) -> Option<String> {
        self.digest.as_ref().map(|d| format!("sha256:{}", d.value))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Digest {
    pub hash_algorithm: String,
    pub normalisation_algorithm: String,
    pub value: String,
}

impl Digest {
    /// The digest of an OCI artifact: its manifest's (or index's) digest.
    pub fn oci_artifact(manifest_digest: &str) -> Self {
        Self::sha256(OCI_ARTIFACT_DIGEST, manifest_digest)
    }

    /// The digest of a blob: SHA-256 of its bytes.
    pub fn generic_blob(blob_digest: &str) -> Self {
        Self::sha256(GENERIC_BLOB_DIGEST, blob_digest)
    }

    fn sha256(normalisation: &str, digest: &str) -> Self {
        Self {
            hash_algorithm: SHA256.into(),
            normalisation_algorithm: normalisation.into(),
            value: digest.trim_start_matches("sha256:").into(),
        }
    }
}

pub const SHA256: &str = "SHA-256";
pub const OCI_ARTIFACT_DIGEST: &str = "ociArtifactDigest/v1";
pub const GENERIC_BLOB_DIGEST: &str = "genericBlobDigest/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    pub name: String,
    pub digest: Digest,
    pub signature: SignatureSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureSpec {
    pub algorithm: String,
    pub value: String,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl Descriptor {
    /// A descriptor of `name` at `version`, stored (first) under `base_url`.
    pub fn new(name: &str, version: &str, provider: &str, base_url: &str) -> Self {
        Self {
            meta: Meta { schema_version: "v2".into() },
            component: Component {
                name: name.into(),
                version: version.into(),
                provider: provider.into(),
                repository_contexts: vec![RepositoryContext::oci(base_url)],
                labels: Vec::new(),
                sources: Vec::new(),
                component_references: Vec::new(),
                resources: Vec::new(),
                extra: BTreeMap::new(),
            },
            signatures: Vec::new(),
        }
    }

    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.component.resources.iter().find(|r| r.name == name)
    }

    /// The first resource of a type, as openmcp's bootstrapper picks the
    /// image (the first `ociImage`).
    pub fn first_of_type(&self, kind: &str) -> Option<&Resource> {
        self.component.resources.iter().find(|r| r.kind == kind)
    }

    pub fn reference(&self, name: &str) -> Option<&ComponentReference> {
        self.component.component_references.iter().find(|r| r.name == name)
    }
}
