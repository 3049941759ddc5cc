//! Plugins in a registry, for the tests of `--plugin oci://…`: the testbed
//! registry (authentication required), a docker config that grants access,
//! cosign key pairs, and publishing with the host's own `plugin push` and
//! signing with the real cosign.

use std::path::{Path, PathBuf};
use std::process::Command;

use testbed::bins::FluxBinaries;
use testbed::process::RunDir;
use testbed::registry::Registry;

/// Where the image test mounts the files of a [`PluginRegistry`].
pub const IMAGE_DIR: &str = "/var/run/plugin-registry";

/// A registry with plugin-publishing helpers; stopped and removed on drop.
pub struct PluginRegistry {
    pub registry: Registry,
    cosign: PathBuf,
    dir: RunDir,
}

impl PluginRegistry {
    /// Starts the registry and makes two cosign key pairs: `cosign.*`
    /// (the trusted one) and `other/cosign.*`.
    pub async fn start() -> Self {
        let cosign = FluxBinaries::locate().expect("the Flux chain binaries and cosign are built").cosign;
        let registry = Registry::start().await.expect("the registry starts");
        let dir = RunDir::create("plugin-registry").expect("a run directory");
        let this = Self { registry, cosign, dir };
        std::fs::create_dir_all(this.dir.path().join("docker")).unwrap();
        std::fs::write(this.dir.path().join("docker/config.json"), this.registry.docker_config_json()).unwrap();
        std::fs::create_dir_all(this.dir.path().join("no-credentials")).unwrap();
        for dir in [this.dir.path().to_path_buf(), this.dir.path().join("other")] {
            std::fs::create_dir_all(&dir).unwrap();
            this.cosign(&dir, &["generate-key-pair"]);
        }
        this
    }

    /// The directory holding `docker/`, `cosign.pub` and `other/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The registry host, for `--insecure-registry`.
    pub fn host(&self) -> &str {
        self.registry.host()
    }

    /// `DOCKER_CONFIG` that grants access.
    pub fn docker_config(&self) -> PathBuf {
        self.dir.path().join("docker")
    }

    /// `DOCKER_CONFIG` without any credentials.
    pub fn no_credentials(&self) -> PathBuf {
        self.dir.path().join("no-credentials")
    }

    /// The trusted public key.
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("cosign.pub")
    }

    /// A key that signed nothing of ours.
    pub fn other_key(&self) -> PathBuf {
        self.dir.path().join("other/cosign.pub")
    }

    /// `service-provider-host plugin push` of `wasm` to
    /// `<repository>:test`; returns the digest-pinned reference it printed.
    pub fn publish(&self, host: &Path, wasm: &Path, repository: &str) -> String {
        let target = format!("oci://{}/{repository}:test", self.host());
        let out = Command::new(host)
            .args(["plugin", "push"])
            .arg(wasm)
            .arg(&target)
            .args(["--insecure-registry", self.host()])
            .env("DOCKER_CONFIG", self.docker_config())
            .output()
            .expect("the host runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "plugin push: {stderr}");
        let pinned = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(pinned.starts_with(&format!("oci://{}/{repository}@sha256:", self.host())), "{pinned}");
        pinned
    }

    /// `cosign sign --key` of a pinned reference, offline (no transparency
    /// log, no signing config from TUF): a Sigstore bundle referrer, or
    /// with `legacy` the `.sig` tag.
    pub fn sign(&self, pinned: &str, legacy: bool) {
        let reference = pinned.trim_start_matches("oci://");
        let key = self.dir.path().join("cosign.key");
        let key = key.to_str().unwrap();
        let format = format!("--new-bundle-format={}", !legacy);
        let args = [
            "sign",
            "--key",
            key,
            "--tlog-upload=false",
            "--use-signing-config=false",
            &format,
            "--allow-http-registry",
            "--yes",
            reference,
        ];
        self.cosign(self.dir.path(), &args);
    }

    fn cosign(&self, dir: &Path, args: &[&str]) {
        let out = Command::new(&self.cosign)
            .args(args)
            .current_dir(dir)
            .env("COSIGN_PASSWORD", "")
            .env("DOCKER_CONFIG", self.docker_config())
            .env("HOME", self.dir.path())
            .output()
            .expect("cosign runs");
        assert!(out.status.success(), "cosign {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
