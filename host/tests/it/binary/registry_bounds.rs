//! Hostile registries: a fake one on a loopback port, answering HTTP/1.1 by
//! hand, that trickles a manifest or floods the host with 100 MiB where a
//! manifest, an error, a token, a referrers index or a signature manifest
//! belongs. `precompile` (the fetch path of `init` and `run`) must give up
//! on each within the pull deadline, in one line that names the bound,
//! without reading (or holding) what the registry sent.
//!
//! The deadline is given as `PLUGIN_PULL_TIMEOUT_SECONDS`, the flag's
//! environment form: a binary that does not know it still runs, so a hang
//! shows as a hang (the watchdog's "still running") rather than as a usage
//! error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use host_test_support::unique;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the tests give `PLUGIN_PULL_TIMEOUT_SECONDS`.
const DEADLINE_SECONDS: u64 = 5;
/// Process start, refusal and exit on a loaded two-core machine, on top of
/// the deadline.
const SLACK: Duration = Duration::from_secs(10);
/// After this the host is killed and the test fails: it hangs.
const WATCHDOG: Duration = Duration::from_secs(45);
/// What a hostile registry sends where a small document belongs.
const FLOOD_BYTES: u64 = 100 << 20;
/// What a host that stopped reading at its limit can have taken in: the
/// loopback socket buffers of both ends hold a few MiB before the fake's
/// writes block.
const READ_AT_MOST: u64 = 16 << 20;
/// Peak resident memory (`VmHWM`) of `precompile`: a debug build that
/// held nothing large measures about 55 MiB, one that read a 100 MiB body
/// whole 250 to 300 MiB.
const PEAK_AT_MOST_KIB: u64 = 96 << 10;
const REPOSITORY: &str = "plugins/hostile";

fn host() -> PathBuf {
    env!("CARGO_BIN_EXE_service-provider-host").into()
}

/// What the fake registry answers to one request.
#[derive(Clone)]
enum Answer {
    /// A small, complete answer.
    Full { status: &'static str, headers: Vec<String>, body: Vec<u8> },
    /// [`FLOOD_BYTES`] bytes, with or without a `Content-Length` that says so.
    Flood { status: &'static str, headers: Vec<String>, announced: bool },
    /// An announced body, one byte every two seconds.
    Trickle { headers: Vec<String> },
}

impl Answer {
    fn json(status: &'static str, media_type: &str, body: &[u8]) -> Self {
        Self::Full { status, headers: vec![format!("Content-Type: {media_type}")], body: body.to_vec() }
    }

    fn not_found() -> Self {
        let envelope = json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]});
        Self::json("404 Not Found", "application/json", envelope.to_string().as_bytes())
    }
}

type Route = dyn Fn(&str) -> Answer + Send + Sync;

/// A fake registry; it counts the body bytes the host took from it.
struct Fake {
    host: String,
    sent: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    /// Serves `route` (request target → answer), each answer on a
    /// connection of its own.
    async fn start(route: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let route: Arc<Route> = Arc::new(route);
        let (counter, log) = (sent.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (route, counter, log) = (route.clone(), counter.clone(), log.clone());
                tokio::spawn(async move { serve(stream, &*route, &counter, &log).await });
            }
        });
        Self { host, sent, requests }
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, route: &Route, sent: &AtomicU64, log: &Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 << 10 {
            return;
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let line = head.lines().next().unwrap_or_default();
    let target = line.split(' ').nth(1).unwrap_or_default().to_string();
    log.lock().unwrap().push(line.to_string());
    let answer = route(&target);
    let (status, headers, length) = match &answer {
        Answer::Full { status, headers, body } => (*status, headers.clone(), Some(body.len() as u64)),
        Answer::Flood { status, headers, announced } => (*status, headers.clone(), announced.then_some(FLOOD_BYTES)),
        Answer::Trickle { headers } => ("200 OK", headers.clone(), Some(4096)),
    };
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for header in headers {
        text.push_str(&format!("{header}\r\n"));
    }
    if let Some(length) = length {
        text.push_str(&format!("Content-Length: {length}\r\n"));
    }
    text.push_str("\r\n");
    if stream.write_all(text.as_bytes()).await.is_err() {
        return;
    }
    match answer {
        Answer::Full { body, .. } => {
            if stream.write_all(&body).await.is_ok() {
                sent.fetch_add(body.len() as u64, Ordering::Relaxed);
            }
        }
        Answer::Flood { .. } => {
            let chunk = vec![b' '; 64 << 10];
            let mut left = FLOOD_BYTES;
            while left > 0 {
                let n = left.min(chunk.len() as u64);
                if stream.write_all(&chunk[..n as usize]).await.is_err() {
                    return;
                }
                sent.fetch_add(n, Ordering::Relaxed);
                left -= n;
            }
        }
        Answer::Trickle { .. } => loop {
            if stream.write_all(b" ").await.is_err() || stream.flush().await.is_err() {
                return;
            }
            sent.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(2)).await;
        },
    }
    let _ = stream.shutdown().await;
}

/// A plugin manifest (its layer is never asked for) and its digest.
fn plugin_manifest() -> (Vec<u8>, String) {
    let zero = format!("sha256:{}", "0".repeat(64));
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": zero, "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": zero, "size": 8}],
    }))
    .unwrap();
    let digest = service_provider_host::plugin::sandbox::digest_of(&manifest);
    (manifest, digest)
}

/// How one `precompile` ended.
struct Run {
    ok: bool,
    stderr: String,
    took: Duration,
    /// The most memory the process held (`VmHWM`), in KiB.
    peak_kib: u64,
}

/// `precompile` of `reference` from the fake, with the test deadline;
/// killed by the watchdog if it does not end.
async fn precompile(fake: &Fake, reference: &str, extra: &[&str]) -> Run {
    let dir = std::env::temp_dir().join(unique("registry-bounds"));
    std::fs::create_dir_all(dir.join("docker")).unwrap();
    let started = Instant::now();
    let mut child = Command::new(host())
        .args(["precompile", "--plugin-cache-dir"])
        .arg(dir.join("cache"))
        .args(["--insecure-registry", &fake.host])
        .args(extra)
        .arg(reference)
        .env("PLUGIN_PULL_TIMEOUT_SECONDS", DEADLINE_SECONDS.to_string())
        .env("DOCKER_CONFIG", dir.join("docker"))
        .env_remove("PLUGIN_VERIFY_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the host runs");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let mut peak_kib = 0;
    let status = loop {
        peak_kib = peak_kib.max(high_water_kib(child.id()).unwrap_or(0));
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = started.elapsed();
    let mut stderr = reader.join().unwrap();
    if status.is_none() {
        stderr = format!("still running after {WATCHDOG:?} (killed); it had written: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Run { ok: status.is_some_and(|s| s.success()), stderr, took, peak_kib }
}

fn high_water_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Refused in one line naming `reason`, within the deadline, having read
/// little and held little.
fn refused_quickly(fake: &Fake, run: &Run, case: &str, reason: &str) {
    let (sent, took, peak) = (fake.sent(), run.took, run.peak_kib);
    eprintln!("{case}: {took:?}, {sent} bytes sent by the registry, peak {peak} KiB: {}", run.stderr.trim_end());
    assert!(!run.ok, "{case}: accepted");
    assert!(run.stderr.contains(reason), "{case}: expected {reason:?} in {}", run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{case}: one line: {}", run.stderr);
    assert!(took < Duration::from_secs(DEADLINE_SECONDS) + SLACK, "{case}: took {took:?}");
    assert!(sent < READ_AT_MOST, "{case}: the host took {sent} bytes from the registry");
    assert!(peak < PEAK_AT_MOST_KIB, "{case}: the host held {peak} KiB; requests {:?}", fake.requests());
}

fn reference(fake: &Fake, digest: &str) -> String {
    format!("oci://{}/{REPOSITORY}@{digest}", fake.host)
}

/// A cosign public key (any will do: no signature ever arrives).
fn key_file() -> PathBuf {
    use p256::pkcs8::EncodePublicKey as _;
    let key = p256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
    let path = std::env::temp_dir().join(unique("registry-bounds-key")).with_extension("pub");
    std::fs::write(&path, key.verifying_key().to_public_key_pem(Default::default()).unwrap()).unwrap();
    path
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_trickles_the_manifest_is_given_up_at_the_pull_deadline() {
    let (_, digest) = plugin_manifest();
    let fake = Fake::start(|target| match target {
        "/v2/" => Answer::json("200 OK", "application/json", b"{}"),
        _ => Answer::Trickle { headers: vec!["Content-Type: application/vnd.oci.image.manifest.v1+json".into()] },
    })
    .await;
    let run = precompile(&fake, &reference(&fake, &digest), &[]).await;
    refused_quickly(&fake, &run, "trickle", &format!("did not finish within {DEADLINE_SECONDS}s"));
    assert!(run.took >= Duration::from_secs(DEADLINE_SECONDS), "given up before the deadline: {:?}", run.took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_of_100_mib_is_refused_before_it_is_read() {
    let (_, digest) = plugin_manifest();
    for announced in [true, false] {
        let fake = Fake::start(move |target| match target {
            "/v2/" => Answer::json("200 OK", "application/json", b"{}"),
            _ => Answer::Flood {
                status: "200 OK",
                headers: vec!["Content-Type: application/vnd.oci.image.manifest.v1+json".into()],
                announced,
            },
        })
        .await;
        let run = precompile(&fake, &reference(&fake, &digest), &[]).await;
        let case = format!("manifest (length announced: {announced})");
        refused_quickly(&fake, &run, &case, "sent more than 65536 bytes for the manifest");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_of_100_mib_is_not_read_whole() {
    let (_, digest) = plugin_manifest();
    for announced in [true, false] {
        let fake = Fake::start(move |target| match target {
            "/v2/" => Answer::json("200 OK", "application/json", b"{}"),
            _ => Answer::Flood { status: "404 Not Found", headers: vec!["Content-Type: text/html".into()], announced },
        })
        .await;
        let run = precompile(&fake, &reference(&fake, &digest), &[]).await;
        let case = format!("error body (length announced: {announced})");
        refused_quickly(&fake, &run, &case, "not found in the registry: HTTP 404");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_100_mib_is_refused() {
    let (_, digest) = plugin_manifest();
    let port = Arc::new(Mutex::new(String::new()));
    let realm = port.clone();
    let fake = Fake::start(move |target| match target {
        "/v2/" => Answer::Full {
            status: "401 Unauthorized",
            headers: vec![format!(
                "WWW-Authenticate: Bearer realm=\"http://{}/token\",service=\"fake\"",
                realm.lock().unwrap()
            )],
            body: b"{}".to_vec(),
        },
        t if t.starts_with("/token") => {
            Answer::Flood { status: "200 OK", headers: vec!["Content-Type: application/json".into()], announced: false }
        }
        // Only with a token: what an anonymous request gets is a 401.
        _ => Answer::json("401 Unauthorized", "application/json", b"{}"),
    })
    .await;
    *port.lock().unwrap() = fake.host.clone();
    let run = precompile(&fake, &reference(&fake, &digest), &[]).await;
    refused_quickly(&fake, &run, "token", "sent more than 65536 bytes for a token");
}

/// A registry names where its token comes from, and the host sends the
/// registry's credentials there: a plain-HTTP endpoint on a host the
/// operator did not name `--insecure-registry` (here a second fake, which
/// would hand out a token) is never asked, nor a `file:` URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_over_plain_http_elsewhere_is_never_asked() {
    let (_, digest) = plugin_manifest();
    let elsewhere = Fake::start(|_| Answer::json("200 OK", "application/json", br#"{"token":"t"}"#)).await;
    for realm in [format!("http://{}/token", elsewhere.host), "file:///etc/passwd".to_string()] {
        let challenge = format!("WWW-Authenticate: Bearer realm=\"{realm}\",service=\"fake\"");
        let fake = Fake::start(move |target| match target {
            "/v2/" => {
                Answer::Full { status: "401 Unauthorized", headers: vec![challenge.clone()], body: b"{}".to_vec() }
            }
            _ => Answer::json("401 Unauthorized", "application/json", b"{}"),
        })
        .await;
        let run = precompile(&fake, &reference(&fake, &digest), &[]).await;
        refused_quickly(&fake, &run, &realm, "its token endpoint");
        assert!(run.stderr.contains("only https, or http on a host --insecure-registry names"), "{}", run.stderr);
    }
    assert_eq!(elsewhere.requests(), Vec::<String>::new(), "the endpoint elsewhere was asked");
}

/// The way to a signature, from the plugin's manifest: a flood where
/// `flooded` says, nothing (404) anywhere else.
async fn signature_flood(case: &str, flooded: fn(&str) -> bool, reason: &str) {
    let (manifest, digest) = plugin_manifest();
    let key = key_file();
    let at = format!("/v2/{REPOSITORY}/manifests/{digest}");
    let fake = Fake::start(move |target| {
        if target == "/v2/" {
            Answer::json("200 OK", "application/json", b"{}")
        } else if target == at {
            Answer::json("200 OK", "application/vnd.oci.image.manifest.v1+json", &manifest)
        } else if flooded(target) {
            let headers = vec!["Content-Type: application/vnd.oci.image.index.v1+json".into()];
            Answer::Flood { status: "200 OK", headers, announced: false }
        } else {
            Answer::not_found()
        }
    })
    .await;
    let run = precompile(&fake, &reference(&fake, &digest), &["--plugin-verify-key", &key.display().to_string()]).await;
    remove(&key);
    refused_quickly(&fake, &run, case, reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referrers_index_of_100_mib_is_refused() {
    let referrers = |target: &str| target.starts_with(&format!("/v2/{REPOSITORY}/referrers/"));
    signature_flood("referrers index", referrers, "sent more than 65536 bytes for the referrers index").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_manifest_of_100_mib_is_refused() {
    // After the referrers API and its tag schema (both 404): the `.sig` tag.
    let sig =
        |target: &str| target.starts_with(&format!("/v2/{REPOSITORY}/manifests/sha256-")) && target.ends_with(".sig");
    signature_flood("signature manifest", sig, "sent more than 65536 bytes for a signature manifest").await;
}
