//! Per-cluster PKI: one CA signs the serving certificate and the admin
//! client certificate, plus a separate service-account signing key.
//!
//! Everything is generated in memory with rcgen (ECDSA P-256) and written as
//! PEM files for kube-apiserver's flags; the kubeconfig embeds the same PEM
//! inline so it can be handed around as text (e.g. in AccessRequest Secrets).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// PEM material of one cluster.
#[derive(Clone)]
pub struct Pki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    /// Client certificate `CN=admin, O=system:masters`: kube-apiserver
    /// authorizes that group before RBAC, so it works right after `/readyz`.
    pub admin_cert: String,
    pub admin_key: String,
    pub sa_public_key: String,
    pub sa_private_key: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

/// File paths written by [`Pki::write_to`].
#[derive(Debug, Clone)]
pub struct PkiFiles {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub sa_public_key: PathBuf,
    pub sa_private_key: PathBuf,
}

impl Pki {
    /// Generates a fresh CA, serving cert (SANs `localhost`, `127.0.0.1`),
    /// admin client cert and service-account key pair.
    pub fn generate(cluster_name: &str) -> Result<Self> {
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params.distinguished_name.push(DnType::CommonName, format!("envtest-ca-{cluster_name}"));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        // Serving certificate. The IP SAN matters: clients connect to
        // https://127.0.0.1:<port> and rustls checks IP SANs.
        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
        serving.distinguished_name = rcgen::DistinguishedName::new();
        serving.distinguished_name.push(DnType::CommonName, "localhost");
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::default();
        admin.distinguished_name = rcgen::DistinguishedName::new();
        admin.distinguished_name.push(DnType::CommonName, "admin");
        admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &ca)?;

        // Service-account token signing key (ES256); kube-apiserver requires
        // the issuer/key flags even though no token controller runs.
        let sa_key = KeyPair::generate()?;

        Ok(Self {
            ca_cert: ca.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            admin_cert: admin_cert.pem(),
            admin_key: admin_key.serialize_pem(),
            sa_public_key: sa_key.public_key_pem(),
            sa_private_key: sa_key.serialize_pem(),
        })
    }

    /// Writes the server-side files into `dir` (created if missing).
    pub fn write_to(&self, dir: &Path) -> Result<PkiFiles> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let files = PkiFiles {
            dir: dir.to_path_buf(),
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_public_key: dir.join("sa.pub"),
            sa_private_key: dir.join("sa.key"),
        };
        for (path, content) in [
            (&files.ca_cert, &self.ca_cert),
            (&files.serving_cert, &self.serving_cert),
            (&files.serving_key, &self.serving_key),
            (&files.sa_public_key, &self.sa_public_key),
            (&files.sa_private_key, &self.sa_private_key),
        ] {
            std::fs::write(path, content).map_err(|e| Error::io(path, e))?;
        }
        Ok(files)
    }
}
