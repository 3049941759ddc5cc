//! Registry credentials from a Docker `config.json`, the file a
//! `kubernetes.io/dockerconfigjson` pull Secret holds (mounted as
//! `$DOCKER_CONFIG/config.json`).
//!
//! Only the `auths` map is read: `credHelpers` and `credsStore` name
//! programs to run, and the host runs no programs a file names; they are
//! reported and ignored. The `docker_credential` crate reads the same file
//! but runs those helpers, which is why this small reader exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
    creds_store: Option<String>,
}

#[derive(Deserialize, Default)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    registrytoken: Option<String>,
}

/// The credentials of every registry the config names.
#[derive(Default)]
pub struct Credentials {
    by_host: BTreeMap<String, RegistryAuth>,
    source: Option<PathBuf>,
}

impl Credentials {
    /// Reads `$DOCKER_CONFIG/config.json` (or `~/.docker/config.json`);
    /// none there means anonymous pulls.
    pub fn from_env() -> Result<Self, String> {
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")));
        match dir.map(|d| d.join("config.json")) {
            Some(path) if path.is_file() => Self::read(&path),
            _ => Ok(Self::default()),
        }
    }

    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| format!("reading registry credentials {}: {e}", path.display()))?;
        let file: ConfigFile = serde_json::from_slice(&text)
            .map_err(|e| format!("registry credentials {} are not a Docker config.json: {e}", path.display()))?;
        if file.creds_store.is_some() || !file.cred_helpers.is_empty() {
            tracing::warn!(config = %path.display(), "credsStore and credHelpers are ignored: the host runs no credential programs; put credentials under auths");
        }
        let mut by_host = BTreeMap::new();
        for (key, entry) in file.auths {
            let auth = entry.into_auth().map_err(|why| {
                format!("registry credentials {} for {}: {why}", path.display(), super::oneline(&key))
            })?;
            by_host.insert(host_of(&key), auth);
        }
        Ok(Self { by_host, source: Some(path.to_path_buf()) })
    }

    /// The credentials for a registry host, anonymous when none are given.
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        let key = host_of(registry);
        self.by_host.get(&key).cloned().unwrap_or(RegistryAuth::Anonymous)
    }

    /// Whether credentials for this registry were given (for messages).
    pub fn has(&self, registry: &str) -> bool {
        self.by_host.contains_key(&host_of(registry))
    }

    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }
}

impl Entry {
    fn into_auth(self) -> Result<RegistryAuth, &'static str> {
        if let Some(token) = self.registrytoken.filter(|t| !t.is_empty()) {
            return Ok(RegistryAuth::Bearer(token));
        }
        if let (Some(user), Some(password)) = (&self.username, &self.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        let Some(auth) = self.auth.filter(|a| !a.is_empty()) else {
            return Ok(RegistryAuth::Anonymous);
        };
        let decoded =
            base64::engine::general_purpose::STANDARD.decode(auth.trim()).map_err(|_| "auth is not base64")?;
        let text = String::from_utf8(decoded).map_err(|_| "auth is not UTF-8")?;
        let (user, password) = text.split_once(':').ok_or("auth is not <user>:<password>")?;
        Ok(RegistryAuth::Basic(user.to_string(), password.to_string()))
    }
}

/// `https://index.docker.io/v1/` and `docker.io` are one registry; keys
/// may carry a scheme and a path.
fn host_of(key: &str) -> String {
    let rest = key.split_once("://").map_or(key, |(_, r)| r);
    let host = rest.split('/').next().unwrap_or(rest).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".to_string(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Credentials, String> {
        let path = std::env::temp_dir().join(format!("sph-auth-{}-{}.json", std::process::id(), text.len()));
        std::fs::write(&path, text).unwrap();
        let read = Credentials::read(&path);
        std::fs::remove_file(path).unwrap();
        read
    }

    #[test]
    fn a_pull_secret_gives_basic_auth_per_host() {
        // base64("alice:s3cr:et")
        let c = config(
            r#"{"auths":{"https://registry.example:5000/v1/":{"auth":"YWxpY2U6czNjcjpldA=="},
            "docker.io":{"username":"bob","password":"pw"}}}"#,
        )
        .unwrap();
        assert_eq!(c.for_registry("registry.example:5000"), RegistryAuth::Basic("alice".into(), "s3cr:et".into()));
        assert_eq!(c.for_registry("index.docker.io"), RegistryAuth::Basic("bob".into(), "pw".into()));
        assert_eq!(c.for_registry("other.example"), RegistryAuth::Anonymous);
        assert!(c.has("REGISTRY.example:5000"));
    }

    #[test]
    fn a_broken_entry_is_an_error_that_names_the_registry_not_the_secret() {
        let e = config(r#"{"auths":{"registry.example":{"auth":"bm9jb2xvbg=="}}}"#).err().unwrap();
        assert!(e.contains("registry.example") && e.contains("<user>:<password>"), "{e}");
        assert!(!e.contains("bm9jb2xvbg"), "{e}");
        assert!(config("[]").is_err());
    }

    #[test]
    fn credential_programs_are_never_run() {
        let c = config(r#"{"credsStore":"evil","credHelpers":{"r.example":"evil"}}"#).unwrap();
        assert_eq!(c.for_registry("r.example"), RegistryAuth::Anonymous);
    }
}
