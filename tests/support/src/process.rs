//! The host as a process, the way it runs in production: the binary of this
//! build, or the same commands inside the container image (`buildah run`,
//! host network, the kubeconfig mounted read-only).
//!
//! [`Replica`] is one `service-provider-host run` with its probe and metrics
//! ports; [`Launcher::command`] builds any other command (`init`, ...).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::{Fixture, WAIT};
use crate::plugins::{self, Component};
use crate::unique;

/// Where the kubeconfig is mounted inside the image.
const IMAGE_KUBECONFIG: &str = "/var/run/service-provider-host/kubeconfig";
/// The binary inside the image.
const IMAGE_BINARY: &str = "/usr/local/bin/service-provider-host";

/// How the host is started.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// This build's binary (`env!("CARGO_BIN_EXE_service-provider-host")`).
    Binary(PathBuf),
    /// The container image, run with buildah; from the storage under
    /// `root` instead of buildah's own, if given.
    Image { image: String, storage: String, root: Option<PathBuf> },
}

impl Launcher {
    /// The image named by `SERVICE_PROVIDER_HOST_IMAGE` (built by
    /// `scripts/build-image.sh`), if set.
    pub fn image_from_env() -> Option<Launcher> {
        let image = std::env::var("SERVICE_PROVIDER_HOST_IMAGE").ok().filter(|s| !s.is_empty())?;
        let storage = std::env::var("BUILDAH_STORAGE").unwrap_or_else(|_| "vfs".into());
        Some(Launcher::Image { image, storage, root: None })
    }

    /// The path of a plugin as this launcher's process sees it: the build
    /// output, or `/plugins/<name>.wasm` in the image.
    pub fn plugin(&self, component: Component) -> PathBuf {
        match self {
            Launcher::Binary(_) => plugins::plugin_path(component),
            Launcher::Image { .. } => {
                let name = component.file.trim_end_matches(".wasm").trim_start_matches("guest_");
                PathBuf::from(format!("/plugins/{name}.wasm"))
            }
        }
    }

    /// Where the process sees a mounted path: `here` for the binary,
    /// `there` in the image.
    pub fn path(&self, here: &Path, there: &str) -> String {
        match self {
            Launcher::Binary(_) => here.display().to_string(),
            Launcher::Image { .. } => there.to_string(),
        }
    }

    /// A command running the host with `args`, the platform cluster from
    /// `kubeconfig` and the extra environment `env` (nothing else of the
    /// test's environment is passed on to the image).
    pub fn command(&self, args: &[OsString], kubeconfig: &Path, env: &[(&str, &str)]) -> Launched {
        self.command_with(args, kubeconfig, env, &[])
    }

    /// [`Self::command`] with files or directories made visible to the
    /// process: (path here, path in the image). The binary sees them where
    /// they are; see [`Self::path`].
    pub fn command_with(
        &self,
        args: &[OsString],
        kubeconfig: &Path,
        env: &[(&str, &str)],
        mounts: &[(PathBuf, String)],
    ) -> Launched {
        match self {
            Launcher::Binary(binary) => {
                let mut command = Command::new(binary);
                command.args(args).env("KUBECONFIG", kubeconfig).env_remove("ONBOARDING_KUBECONFIG");
                command.envs(env.iter().copied());
                Launched { command, container: None }
            }
            Launcher::Image { image, storage, root } => {
                let container = unique("sph");
                let globals = buildah_globals(storage, root.as_deref());
                let status = Command::new("buildah")
                    .args(&globals)
                    .args(["from", "--quiet", "--name", &container, image])
                    .stdout(Stdio::null())
                    .status()
                    .expect("buildah runs");
                assert!(status.success(), "buildah from {image} failed");
                let mut command = Command::new("buildah");
                command.args(&globals).args(["run", "--isolation", "chroot", "--network", "host"]);
                command.arg("-v").arg(format!("{}:{IMAGE_KUBECONFIG}:ro", kubeconfig.display()));
                for (here, there) in mounts {
                    command.arg("-v").arg(format!("{}:{there}", here.display()));
                }
                command.args(["-e", &format!("KUBECONFIG={IMAGE_KUBECONFIG}")]);
                for (key, value) in env {
                    command.args(["-e", &format!("{key}={value}")]);
                }
                command.args([&container, "--", IMAGE_BINARY]).args(args);
                Launched { command, container: Some((globals, container)) }
            }
        }
    }
}

/// `service-provider-host run` as the benchmarks start it: the production
/// binary on `env`'s clusters (onboarding reached directly), logging only
/// errors, metrics on `metrics_port`, no probes; `args` and `vars` added.
/// Killed when dropped.
pub fn bench_host(
    binary: &Path,
    env: &testbed::TestEnv,
    (provider, pod_namespace): (&str, &str),
    metrics_port: u16,
    args: &[OsString],
    vars: &[(&str, &str)],
) -> Running {
    let mut all: Vec<OsString> = ["run", "--provider-name", provider, "--environment", "bench", "--verbosity", "ERROR"]
        .iter()
        .map(OsString::from)
        .collect();
    all.extend(args.iter().cloned());
    all.push("--onboarding-kubeconfig".into());
    all.push(env.onboarding.kubeconfig_path().into());
    all.push(format!("--metrics-bind-address=127.0.0.1:{metrics_port}").into());
    all.push("--health-probe-bind-address=0".into());
    let mut vars = vars.to_vec();
    vars.extend([("POD_NAMESPACE", pod_namespace), ("POD_NAME", "bench")]);
    Launcher::Binary(binary.to_path_buf()).command(&all, &env.platform.kubeconfig_path(), &vars).spawn(None)
}

/// buildah's global options for a storage driver and, if given, a storage
/// of its own under `root`.
pub fn buildah_globals(storage: &str, root: Option<&Path>) -> Vec<String> {
    let mut globals = vec!["--storage-driver".to_string(), storage.to_string()];
    if let Some(root) = root {
        globals.extend(["--root".into(), root.join("storage").display().to_string()]);
        globals.extend(["--runroot".into(), root.join("run").display().to_string()]);
    }
    globals
}

/// A command to run; removes its container (if any) when dropped.
pub struct Launched {
    pub command: Command,
    /// buildah's global options and the container's name.
    container: Option<(Vec<String>, String)>,
}

impl Launched {
    /// Runs to completion (off the async threads) and returns the output.
    pub async fn output(mut self) -> std::process::Output {
        tokio::task::spawn_blocking(move || self.command.output().expect("runs")).await.expect("joined")
    }

    /// Starts it in a process group of its own (so a signal reaches the
    /// container's process too), stderr into `log` if given.
    pub fn spawn(mut self, log: Option<&Path>) -> Running {
        use std::os::unix::process::CommandExt as _;
        self.command.process_group(0).stdout(Stdio::null());
        match log {
            Some(path) => self.command.stderr(std::fs::File::create(path).expect("log file")),
            None => self.command.stderr(Stdio::inherit()),
        };
        let child = self.command.spawn().expect("the host starts");
        Running { child, _launched: self }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if let Some((globals, container)) = self.container.take() {
            let _ = Command::new("buildah")
                .args(&globals)
                .args(["rm", &container])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A started command; killed (with its process group) when dropped.
pub struct Running {
    pub child: Child,
    _launched: Launched,
}

impl Running {
    fn signal(&self, signal: i32) {
        // SAFETY: plain kill(2) on the process group this test started.
        unsafe { libc::kill(-(self.child.id() as i32), signal) };
    }

    /// The host process itself: this child, or in a container a
    /// descendant of `buildah run`.
    fn hosts(&self) -> Vec<i32> {
        descendants(self.child.id() as i32)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("service-provide"))
            })
            .collect()
    }

    /// Resident memory of the host process, in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory the host process has had so far (the
    /// kernel's high-water mark, so no peak between two samples is missed),
    /// in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.status_kib("VmHWM:")
    }

    /// A `kB` field of the host process's `/proc/<pid>/status`.
    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.hosts().first()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// SIGTERM to the host process itself, as the kubelet sends it (in a
    /// container, `buildah run` would kill it outright on a SIGTERM of its
    /// own); then the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let hosts = self.hosts();
        match hosts.is_empty() {
            true => self.signal(libc::SIGTERM),
            // SAFETY: kill(2) on processes this test started.
            false => hosts.iter().for_each(|pid| unsafe {
                libc::kill(*pid, libc::SIGTERM);
            }),
        }
        self.wait(Duration::from_secs(30)).expect("the host did not stop on SIGTERM")
    }

    /// SIGKILL (a crash, or a node gone), then the exit status.
    pub fn kill(&mut self) -> ExitStatus {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(30)).expect("the host did not die on SIGKILL")
    }

    /// The exit status once it ended, waiting up to `within`.
    pub fn wait(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("waitable") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waitable").is_none()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.is_running() {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// `pid` and every process below it.
fn descendants(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter_map(|p| {
                    let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                    // `pid (comm) state ppid ...`; comm may contain spaces.
                    let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
                    Some((p, ppid))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![pid];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        next += 1;
    }
    found
}

/// A free loopback port, never one handed out before in this process (the
/// test clusters' own allocator).
pub fn free_port() -> u16 {
    testbed::process::free_port().expect("a free loopback port")
}

/// A plain HTTP GET on loopback: (status code, body), or None if nothing listens.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, response.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()))
}

/// How a [`Replica`] runs.
pub struct ReplicaOptions {
    pub leader_elect: bool,
    /// `POD_NAME`: the lease identity.
    pub pod: String,
    pub plugin: Component,
    /// A `--plugin` value instead of `plugin` (e.g. an `oci://` reference).
    pub plugin_source: Option<String>,
    /// Paths to make visible, as for [`Launcher::command_with`].
    pub mounts: Vec<(PathBuf, String)>,
    /// More flags for `run`.
    pub args: Vec<String>,
    /// The platform kubeconfig (default: the test platform's admin).
    pub kubeconfig: Option<PathBuf>,
    /// Write stderr here instead of the test's output.
    pub log: Option<PathBuf>,
    /// More environment.
    pub env: Vec<(String, String)>,
    /// `--verbosity` (default `INFO`).
    pub verbosity: &'static str,
}

impl ReplicaOptions {
    pub fn new(pod: &str) -> Self {
        ReplicaOptions {
            leader_elect: false,
            pod: pod.into(),
            plugin: plugins::KRO,
            plugin_source: None,
            mounts: Vec::new(),
            args: Vec::new(),
            kubeconfig: None,
            log: None,
            env: Vec::new(),
            verbosity: "INFO",
        }
    }
}

/// One `service-provider-host run` of a fixture's provider.
pub struct Replica {
    pub process: Running,
    pub health: u16,
    pub metrics: u16,
    /// When it was started.
    pub started: Instant,
}

impl Replica {
    pub fn start(launcher: &Launcher, f: &Fixture, options: ReplicaOptions) -> Replica {
        let (health, metrics) = (free_port(), free_port());
        let mut args: Vec<OsString> =
            ["run", "--environment", "test", "--provider-name", &f.provider, "--verbosity", options.verbosity]
                .iter()
                .map(OsString::from)
                .collect();
        args.push(format!("--leader-elect={}", options.leader_elect).into());
        args.push(format!("--health-probe-bind-address=127.0.0.1:{health}").into());
        args.push(format!("--metrics-bind-address=127.0.0.1:{metrics}").into());
        args.push("--metrics-secure=false".into());
        args.extend(["--watch-namespace".into(), OsString::from(&f.ns), "--plugin".into()]);
        match &options.plugin_source {
            Some(source) => args.push(source.into()),
            None => args.push(launcher.plugin(options.plugin).into()),
        }
        args.extend(options.args.iter().map(OsString::from));
        let kubeconfig = options.kubeconfig.clone().unwrap_or_else(|| f.env.platform.kubeconfig_path());
        let mut env: Vec<(&str, &str)> = vec![("POD_NAMESPACE", &f.pod_ns), ("POD_NAME", &options.pod)];
        env.extend(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let started = Instant::now();
        let process = launcher.command_with(&args, &kubeconfig, &env, &options.mounts).spawn(options.log.as_deref());
        Replica { process, health, metrics, started }
    }

    /// `/readyz`: (status code, body).
    pub fn readyz(&self) -> Option<(u16, String)> {
        http_get(self.health, "/readyz")
    }

    /// Waits until `/readyz` answers 200; false after `within`.
    pub async fn wait_ready(&self, within: Duration) -> bool {
        self.wait_readyz(within, |code, _| code == 200).await
    }

    /// Waits until `/readyz` satisfies `check`.
    pub async fn wait_readyz(&self, within: Duration, check: impl Fn(u16, &str) -> bool) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some((code, body)) = self.readyz()
                && check(code, &body)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// The `/metrics` text.
    pub fn metrics(&self) -> String {
        let (code, text) = http_get(self.metrics, "/metrics").expect("metrics endpoint");
        assert_eq!(code, 200);
        text
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        self.process.terminate()
    }
}

/// The sum of a counter's samples whose line starts with `prefix` (a metric
/// name, optionally with the first labels), 0 when there are none.
pub fn counter(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Default wait for a replica.
pub const READY: Duration = WAIT;
