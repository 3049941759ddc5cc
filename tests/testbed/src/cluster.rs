//! One test "cluster": its own etcd and kube-apiserver processes, ports,
//! run directory, PKI and admin kubeconfig.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::bins::Binaries;
use crate::error::{Error, Result};
use crate::pki::Pki;
use crate::process::{RunDir, ServerProcess, free_port};

/// Name of the ConfigMap in `default` that identifies a cluster; lets tests
/// check *which* cluster a kubeconfig reaches (data key `cluster`).
pub const MARKER_CONFIGMAP: &str = "envtest-cluster";

/// How a cluster is started.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Name used for the run directory, etcd member, kubeconfig context and
    /// the marker ConfigMap. Must be a DNS label.
    pub name: String,
    /// Time allowed for etcd `/health` plus kube-apiserver `/readyz`.
    pub start_timeout: Duration,
    /// Appended to the kube-apiserver command line (later flags win).
    pub extra_apiserver_args: Vec<String>,
}

impl ClusterOptions {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            // Three apiservers starting at once on 2 cores take a while.
            start_timeout: Duration::from_secs(120),
            extra_apiserver_args: Vec::new(),
        }
    }
}

/// Resident memory of a running cluster's processes.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    pub apiserver_bytes: u64,
    pub etcd_bytes: u64,
}

impl Rss {
    pub fn total_bytes(&self) -> u64 {
        self.apiserver_bytes + self.etcd_bytes
    }
}

/// A running cluster. Dropping it stops both processes and removes its run
/// directory. Shared clusters in statics are cleaned up by the exit hook in
/// [`crate::process`].
pub struct Cluster {
    name: String,
    server: String,
    etcd_url: String,
    kubeconfig: String,
    pki: Pki,
    startup: Duration,
    // Field order = drop order: processes stop before the directory goes.
    apiserver: Mutex<ServerProcess>,
    etcd: Mutex<ServerProcess>,
    dir: RunDir,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts etcd and kube-apiserver and waits until `/readyz` is OK.
    /// Retries (new ports) when a port was taken in the meantime.
    pub async fn start(options: ClusterOptions) -> Result<Self> {
        let binaries = Binaries::locate()?;
        let mut attempt = 1;
        loop {
            match Self::try_start(&binaries, &options).await {
                Err(e) if attempt < 3 && is_port_clash(&e) => {
                    eprintln!("testbed: {}: port clash, retrying: {e}", options.name);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn try_start(binaries: &Binaries, options: &ClusterOptions) -> Result<Self> {
        let started = Instant::now();
        let deadline = started + options.start_timeout;
        let name = options.name.as_str();
        let dir = RunDir::create(name)?;
        let pki = Pki::generate(name)?;
        let pki_files = pki.write_to(&dir.path().join("pki"))?;
        let (etcd_client, etcd_peer, api_port) = (free_port()?, free_port()?, free_port()?);

        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let etcd_args = vec![
            format!("--name={name}"),
            format!("--data-dir={}", dir.path().join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster={name}={peer_url}"),
            // Test data is thrown away: skipping fsync speeds everything up.
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ];
        let mut etcd =
            ServerProcess::spawn(&format!("etcd ({name})"), &binaries.etcd, &etcd_args, &dir.path().join("etcd.log"))?;
        wait_for_etcd(&mut etcd, etcd_client, deadline, options.start_timeout).await?;

        let p = |path: &Path| path.display().to_string();
        let mut api_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            // No dependence on a default route, and no loopback address in
            // the `kubernetes` Endpoints (which the reconciler would reject).
            "--advertise-address=127.0.0.1".into(),
            "--endpoint-reconciler-type=none".into(),
            // Distinct per instance; the default /var/run/kubernetes is shared.
            format!("--cert-dir={}", p(&pki_files.dir)),
            format!("--tls-cert-file={}", p(&pki_files.serving_cert)),
            format!("--tls-private-key-file={}", p(&pki_files.serving_key)),
            format!("--client-ca-file={}", p(&pki_files.ca_cert)),
            format!("--service-account-issuer=https://127.0.0.1:{api_port}/"),
            format!("--service-account-key-file={}", p(&pki_files.sa_public_key)),
            format!("--service-account-signing-key-file={}", p(&pki_files.sa_private_key)),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--authorization-mode=RBAC".into(),
            // No token controller runs, so pods would lack a default SA.
            "--disable-admission-plugins=ServiceAccount".into(),
            "--allow-privileged=true".into(),
        ];
        api_args.extend(options.extra_apiserver_args.iter().cloned());
        let mut apiserver = ServerProcess::spawn(
            &format!("kube-apiserver ({name})"),
            &binaries.kube_apiserver,
            &api_args,
            &dir.path().join("kube-apiserver.log"),
        )?;

        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = render_kubeconfig(name, &server, &pki);
        let kubeconfig_path = dir.path().join("kubeconfig.yaml");
        std::fs::write(&kubeconfig_path, &kubeconfig).map_err(|e| Error::io(&kubeconfig_path, e))?;
        let client = client_from_kubeconfig(&kubeconfig).await?;
        wait_for_readyz(&client, &mut apiserver, &mut etcd, deadline, options.start_timeout).await?;
        create_marker(&client, name).await?;

        Ok(Self {
            name: name.to_string(),
            server,
            etcd_url,
            kubeconfig,
            pki,
            startup: started.elapsed(),
            apiserver: Mutex::new(apiserver),
            etcd: Mutex::new(etcd),
            dir,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// Admin kubeconfig (`CN=admin, O=system:masters`) with all data inline,
    /// so it can be stored in a Secret and used anywhere.
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig
    }

    /// Same kubeconfig, also written to `<run dir>/kubeconfig.yaml` for kubectl.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }

    /// CA certificate (PEM) that signed the serving and admin certificates.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_cert
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Wall time from start to `/readyz` OK.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    /// A new admin client. Build one per test (it is cheap): a `Client` is
    /// bound to the tokio runtime it was created on, and every
    /// `#[tokio::test]` has its own runtime.
    pub async fn client(&self) -> Result<Client> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Current resident memory of kube-apiserver and etcd.
    pub fn rss(&self) -> Option<Rss> {
        let api = crate::process::lock_unpoisoned(&self.apiserver).rss_bytes()?;
        let etcd = crate::process::lock_unpoisoned(&self.etcd).rss_bytes()?;
        Some(Rss { apiserver_bytes: api, etcd_bytes: etcd })
    }

    /// Pids of kube-apiserver and etcd.
    pub fn pids(&self) -> (u32, u32) {
        (crate::process::lock_unpoisoned(&self.apiserver).pid(), crate::process::lock_unpoisoned(&self.etcd).pid())
    }

    /// The last lines of the kube-apiserver log (for assertion messages).
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        crate::process::lock_unpoisoned(&self.apiserver).log_tail(lines)
    }

    /// Stops kube-apiserver, then etcd. Also done on drop.
    pub fn stop(&self) {
        crate::process::lock_unpoisoned(&self.apiserver).stop(Duration::from_secs(5));
        crate::process::lock_unpoisoned(&self.etcd).stop(Duration::from_secs(5));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn is_port_clash(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("address already in use") || text.contains("bind: address")
}

/// Builds a client from kubeconfig text (first/current context).
pub async fn client_from_kubeconfig(kubeconfig: &str) -> Result<Client> {
    let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
    Client::try_from(config).map_err(Error::Kube)
}

/// Kubeconfig text with the CA, client certificate and key inline.
pub fn render_kubeconfig(name: &str, server: &str, pki: &Pki) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: admin
current-context: {name}
",
        ca = b64(&pki.ca_cert),
        cert = b64(&pki.admin_cert),
        key = b64(&pki.admin_key),
    )
}

async fn wait_for_etcd(etcd: &mut ServerProcess, port: u16, deadline: Instant, timeout: Duration) -> Result<()> {
    loop {
        if let Some(e) = etcd.exited_error() {
            return Err(e);
        }
        let last = match etcd_health(port).await {
            Ok(true) => return Ok(()),
            Ok(false) => "unhealthy".to_string(),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "etcd /health".into(),
                seconds: timeout.as_secs(),
                detail: format!(": {last}; log:\n{}", etcd.log_tail(20)),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /health` over plain HTTP/1.0 (no HTTP client dependency needed).
async fn etcd_health(port: u16) -> std::io::Result<bool> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .map_err(|_| std::io::Error::other("read timeout"))??;
    let text = String::from_utf8_lossy(&response);
    Ok(text.starts_with("HTTP/1.") && text.contains("\"health\":\"true\""))
}

async fn wait_for_readyz(
    client: &Client,
    apiserver: &mut ServerProcess,
    etcd: &mut ServerProcess,
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    loop {
        if let Some(e) = apiserver.exited_error().or_else(|| etcd.exited_error()) {
            return Err(e);
        }
        let request = http::Request::get("/readyz").body(Vec::new()).map_err(|e| Error::Other(e.to_string()))?;
        let last = match tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await {
            Ok(Ok(body)) if body.trim() == "ok" => return Ok(()),
            Ok(Ok(body)) => body,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "request timed out".to_string(),
        };
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "kube-apiserver /readyz".into(),
                seconds: timeout.as_secs(),
                detail: format!(": {last}; log:\n{}", apiserver.log_tail(30)),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_marker(client: &Client, name: &str) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let marker = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(MARKER_CONFIGMAP.into()), ..Default::default() },
        data: Some([("cluster".to_string(), name.to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &marker).await?;
    Ok(())
}
