//! Server processes that cannot outlive the test binary.
//!
//! Three layers make sure no etcd/kube-apiserver survives a test run:
//!
//! 1. **Drop**: [`ServerProcess`] sends SIGTERM to its process group on drop
//!    (also during a panic unwind), then SIGKILL after a grace period.
//! 2. **Exit hook**: clusters shared through statics are never dropped, so an
//!    `atexit` hook SIGKILLs every still-registered process and removes the
//!    registered run directories. libtest leaves through `exit()` both on
//!    success and on failure, so the hook runs in both cases.
//! 3. **`PR_SET_PDEATHSIG`**: if the test binary dies without running exit
//!    hooks (SIGKILL, abort), the kernel SIGKILLs the servers. The signal
//!    fires when the *thread* that forked the child exits, and libtest runs
//!    every test in its own short-lived thread, so all servers are forked
//!    from one dedicated spawner thread that lives as long as the process.
//!
//! `scripts/check-leftovers.sh` verifies the result from the outside.

use std::collections::HashSet;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Env var naming the directory under which every cluster gets its run
/// directory. The leftover check looks for processes whose command line
/// mentions it.
pub const ENV_RUN_DIR: &str = "TESTBED_RUN_DIR";
/// Set to `1` to keep run directories (logs, certs, kubeconfig) after teardown.
pub const ENV_KEEP_DIRS: &str = "TESTBED_KEEP_DIRS";

/// The base of all run directories: `$TESTBED_RUN_DIR` or
/// `${TMPDIR:-/tmp}/service-provider-host-testbed`.
pub fn run_base_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_RUN_DIR).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    std::env::temp_dir().join("service-provider-host-testbed")
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Live server pids (each the leader of its own process group), for the exit hook.
static LIVE_PIDS: Mutex<Vec<(u64, i32)>> = Mutex::new(Vec::new());
/// Run directories to delete at exit.
static LIVE_DIRS: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());

/// Locks a mutex, ignoring poisoning (a panicking test must not stop cleanup).
pub(crate) fn lock_unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct SpawnRequest {
    command: Command,
    reply: mpsc::SyncSender<io::Result<Child>>,
}

/// The long-lived spawner thread (see the module docs for why).
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        install_exit_hook();
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testbed-spawner".into())
            .spawn(move || {
                // The sender sits in a static and is never dropped, so this
                // loop (and the thread) lasts until the process exits.
                for mut request in rx {
                    let _ = request.reply.send(request.command.spawn());
                }
            })
            .expect("cannot start the testbed spawner thread");
        tx
    })
}

fn install_exit_hook() {
    extern "C" fn on_exit() {
        kill_all_registered();
    }
    // SAFETY: registering a plain extern "C" fn with no captured state.
    unsafe {
        libc::atexit(on_exit);
    }
}

/// SIGKILLs every registered server and removes registered run directories.
/// Runs from `atexit`: must not panic and must not block on a lock that
/// another (still running) thread might hold, hence `try_lock` with retries.
fn kill_all_registered() {
    fn try_take<T: Clone>(m: &Mutex<Vec<T>>) -> Vec<T> {
        for _ in 0..50 {
            match m.try_lock() {
                Ok(mut g) => return std::mem::take(&mut *g),
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    return std::mem::take(&mut *p.into_inner());
                }
                Err(std::sync::TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        Vec::new() // give up; PR_SET_PDEATHSIG still kills the servers
    }
    let pids = try_take(&LIVE_PIDS);
    for &(_, pid) in &pids {
        // SAFETY: plain syscalls on pids we spawned.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        }
    }
    for &(_, pid) in &pids {
        // SAFETY: reaping our own children; ECHILD (already reaped) is fine.
        unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    if std::env::var_os(ENV_KEEP_DIRS).is_none_or(|v| v != "1") {
        for (_, dir) in try_take(&LIVE_DIRS) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A run directory that is removed on drop and at process exit (unless
/// `TESTBED_KEEP_DIRS=1`).
#[derive(Debug)]
pub struct RunDir {
    id: u64,
    path: PathBuf,
}

impl RunDir {
    /// Creates `<base>/<pid>-<n>-<name>`. Also removes directories left by
    /// earlier test processes that no longer exist (e.g. killed by SIGKILL).
    pub fn create(name: &str) -> Result<Self> {
        let base = run_base_dir();
        std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
        remove_stale_dirs(&base);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{}-{id}-{name}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        lock_unpoisoned(&LIVE_DIRS).push((id, path.clone()));
        Ok(Self { id, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        lock_unpoisoned(&LIVE_DIRS).retain(|(id, _)| *id != self.id);
        if std::env::var_os(ENV_KEEP_DIRS).is_none_or(|v| v != "1") {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn remove_stale_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()?.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One server process (etcd or kube-apiserver), output redirected to a log
/// file, in its own process group.
#[derive(Debug)]
pub struct ServerProcess {
    id: u64,
    what: String,
    child: Child,
    log: PathBuf,
    exit: Option<ExitStatus>,
}

impl ServerProcess {
    /// Spawns `program args...` from the spawner thread with
    /// `PR_SET_PDEATHSIG=SIGKILL`, its own process group, stdin closed and
    /// stdout+stderr appended to `log`.
    pub fn spawn(what: &str, program: &Path, args: &[String], log: &Path) -> Result<Self> {
        Self::spawn_with_env(what, program, args, &[], log)
    }

    /// Like [`Self::spawn`], with `env` set on top of the inherited
    /// environment (the Flux controllers take their kubeconfig and namespace
    /// from environment variables only).
    pub fn spawn_with_env(
        what: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &std::ffi::OsStr)],
        log: &Path,
    ) -> Result<Self> {
        let log_file =
            std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| Error::io(log, e))?;
        let log_err = log_file.try_clone().map_err(|e| Error::io(log, e))?;
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).stdout(log_file).stderr(log_err).process_group(0);
        command.envs(env.iter().copied());
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (prctl, getppid) in the child.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() != parent {
                    return Err(io::Error::other("test process exited during spawn"));
                }
                Ok(())
            });
        }
        let (reply, response) = mpsc::sync_channel(1);
        let spawn_error = |source| Error::Spawn { what: format!("{what} ({})", program.display()), source };
        spawner()
            .send(SpawnRequest { command, reply })
            .map_err(|_| spawn_error(io::Error::other("spawner thread is gone")))?;
        let child = response
            .recv()
            .map_err(|_| spawn_error(io::Error::other("spawner thread is gone")))?
            .map_err(spawn_error)?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        lock_unpoisoned(&LIVE_PIDS).push((id, child.id() as i32));
        Ok(Self { id, what: what.to_string(), child, log: log.to_path_buf(), exit: None })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// The error to report when the process exited while we waited for it.
    pub fn exited_error(&mut self) -> Option<Error> {
        let status = self.exited()?;
        Some(Error::ProcessExited {
            what: self.what.clone(),
            status: status.to_string(),
            log: self.log.clone(),
            log_tail: self.log_tail(40),
        })
    }

    /// The last `lines` lines of the log (at most 16 KiB are read).
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Resident set size in bytes, from `/proc/<pid>/status` (`VmRSS`).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// SIGTERM to the process group, SIGKILL after `grace`, then reap.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_none() {
            let pid = self.pid() as i32;
            // SAFETY: signalling the process group we created.
            unsafe {
                libc::kill(-pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.exited().is_none() {
                // SAFETY: as above.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
                self.exit = self.child.wait().ok();
            }
        }
        lock_unpoisoned(&LIVE_PIDS).retain(|(id, _)| *id != self.id);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// The last `lines` lines of a log file (reads at most its last 16 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::from("<no log>");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Hands out free loopback ports. A port is bound and released right away,
/// and remembered so that clusters started in parallel in this process
/// never get the same one; collisions with other processes remain possible
/// and are handled by retrying the cluster start.
pub fn free_port() -> Result<u16> {
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    for _ in 0..100 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("127.0.0.1:0", e))?;
        let port = listener.local_addr().map_err(|e| Error::io("127.0.0.1:0", e))?.port();
        let mut guard = lock_unpoisoned(&HANDED_OUT);
        if guard.get_or_insert_with(HashSet::new).insert(port) {
            return Ok(port);
        }
    }
    Err(Error::Other("no free loopback port found".into()))
}
