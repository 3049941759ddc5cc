//! CustomResourceDefinitions: the project's own (`crds/*.yaml`) and
//! third-party ones read at test time from pinned Go modules.
//!
//! Third-party YAML is never vendored into the repository: `go mod download
//! -json MODULE@VERSION` fetches the module into the Go module cache (from
//! the module proxy, verified against go.sum's checksum database) and its
//! `.Dir` points at the unpacked, read-only files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;

use crate::error::{Error, Result};

/// The label openmcp uses to say which cluster a CRD belongs on.
pub const CLUSTER_LABEL: &str = "openmcp.cloud/cluster";
/// Env var naming the `go` binary (default: `go` on PATH, else /usr/local/go/bin/go).
pub const ENV_GO: &str = "TESTBED_GO";

/// The role of a cluster in an openmcp landscape, as used by the
/// `openmcp.cloud/cluster` CRD label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Where providers, ProviderConfigs, AccessRequests and Flux objects live.
    Platform,
    /// Where tenants create ControlPlanes and service objects (`Kro`).
    Onboarding,
    /// A tenant's ControlPlane cluster (label value `mcp`).
    ControlPlane,
}

impl Purpose {
    /// The `openmcp.cloud/cluster` label value.
    pub fn label(self) -> &'static str {
        match self {
            Purpose::Platform => "platform",
            Purpose::Onboarding => "onboarding",
            Purpose::ControlPlane => "mcp",
        }
    }

    pub fn from_label(value: &str) -> Option<Self> {
        match value {
            "platform" => Some(Purpose::Platform),
            "onboarding" => Some(Purpose::Onboarding),
            "mcp" => Some(Purpose::ControlPlane),
            _ => None,
        }
    }
}

/// A CRD file inside a pinned Go module.
#[derive(Debug, Clone, Copy)]
pub struct ModuleCrd {
    pub module: &'static str,
    pub version: &'static str,
    /// Path inside the module.
    pub path: &'static str,
    /// Where it is installed (these files carry no, or the same, label).
    pub purpose: Purpose,
}

const OPENMCP_API: &str = "github.com/openmcp-project/openmcp-operator/api";
const FLUX_SOURCE_MODULE: &str = "github.com/fluxcd/source-controller";
const FLUX_HELM_MODULE: &str = "github.com/fluxcd/helm-controller";
const FLUX_KUSTOMIZE_MODULE: &str = "github.com/fluxcd/kustomize-controller";

/// A source-controller CRD file (path inside the module), from the module
/// version of the binary `build-flux-bins.sh` builds: the CRDs must match
/// the running controller.
const fn flux_source_crd(path: &'static str) -> ModuleCrd {
    ModuleCrd {
        module: FLUX_SOURCE_MODULE,
        version: crate::bins::FLUX_SOURCE_VERSION,
        path,
        purpose: Purpose::Platform,
    }
}

const fn flux_helm_release_crd() -> ModuleCrd {
    ModuleCrd {
        module: FLUX_HELM_MODULE,
        version: crate::bins::FLUX_HELM_VERSION,
        path: "config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml",
        purpose: Purpose::Platform,
    }
}

/// Every CRD the real source-controller, helm-controller and
/// kustomize-controller need on the platform cluster. Each starts informers
/// for all its kinds and never becomes ready while one is missing, so this
/// is more than the two kinds the Kro plugin writes (those two are also in
/// [`THIRD_PARTY`]).
pub const FLUX_CONTROLLER_CRDS: &[ModuleCrd] = &[
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_buckets.yaml"),
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_externalartifacts.yaml"),
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"),
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_helmcharts.yaml"),
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_helmrepositories.yaml"),
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"),
    flux_helm_release_crd(),
    ModuleCrd {
        module: FLUX_KUSTOMIZE_MODULE,
        version: crate::bins::FLUX_KUSTOMIZE_VERSION,
        path: "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
        purpose: Purpose::Platform,
    },
];

/// The third-party CRDs the environment installs.
pub const THIRD_PARTY: &[ModuleCrd] = &[
    flux_source_crd("config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"),
    flux_helm_release_crd(),
    ModuleCrd {
        module: "github.com/kubernetes-sigs/kro",
        version: "v0.9.3",
        path: "helm/crds/kro.run_resourcegraphdefinitions.yaml",
        purpose: Purpose::ControlPlane,
    },
    ModuleCrd {
        module: OPENMCP_API,
        version: "v1.3.0",
        path: "crds/manifests/clusters.openmcp.cloud_accessrequests.yaml",
        purpose: Purpose::Platform,
    },
    ModuleCrd {
        module: OPENMCP_API,
        version: "v1.3.0",
        path: "crds/manifests/clusters.openmcp.cloud_clusterrequests.yaml",
        purpose: Purpose::Platform,
    },
    ModuleCrd {
        module: OPENMCP_API,
        version: "v1.3.0",
        path: "crds/manifests/openmcp.cloud_serviceproviders.yaml",
        purpose: Purpose::Platform,
    },
];

/// One CRD manifest, ready to apply.
#[derive(Debug, Clone)]
pub struct Crd {
    /// `metadata.name`, e.g. `kroes.kro.services.open-control-plane.io`.
    pub name: String,
    /// The file it came from (for error messages).
    pub origin: String,
    /// Target cluster, from the label or the [`THIRD_PARTY`] table.
    pub purpose: Option<Purpose>,
    /// The manifest as JSON (applied verbatim with server-side apply).
    pub manifest: serde_json::Value,
}

impl Crd {
    /// The resource the CRD serves (group, storage version, kind, plural).
    pub fn api_resource(&self) -> Result<ApiResource> {
        let invalid = |m: &str| Error::InvalidCrd { origin: self.origin.clone(), message: m.to_string() };
        let spec = &self.manifest["spec"];
        let group = spec["group"].as_str().ok_or_else(|| invalid("no spec.group"))?;
        let kind = spec["names"]["kind"].as_str().ok_or_else(|| invalid("no spec.names.kind"))?;
        let plural = spec["names"]["plural"].as_str().ok_or_else(|| invalid("no spec.names.plural"))?;
        let versions = spec["versions"].as_array().ok_or_else(|| invalid("no spec.versions"))?;
        let version = versions
            .iter()
            .find(|v| v["storage"].as_bool() == Some(true))
            .or_else(|| versions.first())
            .and_then(|v| v["name"].as_str())
            .ok_or_else(|| invalid("no version name"))?;
        Ok(ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural))
    }
}

/// Parses every CRD document in a YAML file.
pub fn parse_crds(text: &str, origin: &str, default_purpose: Option<Purpose>) -> Result<Vec<Crd>> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| Error::Yaml { origin: origin.to_string(), message: e.to_string() })?;
    let mut crds = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        if doc["kind"] != "CustomResourceDefinition" {
            continue;
        }
        let name = doc["metadata"]["name"]
            .as_str()
            .ok_or_else(|| Error::InvalidCrd { origin: origin.to_string(), message: "no metadata.name".into() })?
            .to_string();
        let purpose =
            doc["metadata"]["labels"][CLUSTER_LABEL].as_str().and_then(Purpose::from_label).or(default_purpose);
        crds.push(Crd { name, origin: origin.to_string(), purpose, manifest: doc });
    }
    Ok(crds)
}

fn read_crd_file(path: &Path, default_purpose: Option<Purpose>) -> Result<Vec<Crd>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_crds(&text, &path.display().to_string(), default_purpose)
}

/// The repository's `crds/` directory.
pub fn project_crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

/// The project's CRDs (`crds/*.yaml`), each tagged with its
/// `openmcp.cloud/cluster` label.
pub fn project_crds() -> Result<Vec<Crd>> {
    let dir = project_crd_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::io(&dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    let mut crds = Vec::new();
    for path in paths {
        crds.extend(read_crd_file(&path, None)?);
    }
    Ok(crds)
}

/// The [`THIRD_PARTY`] CRDs, read from the Go module cache.
pub fn third_party_crds() -> Result<Vec<Crd>> {
    module_crds(THIRD_PARTY)
}

/// The [`FLUX_CONTROLLER_CRDS`], read from the Go module cache.
pub fn flux_controller_crds() -> Result<Vec<Crd>> {
    module_crds(FLUX_CONTROLLER_CRDS)
}

/// CRDs read from pinned Go modules (may download them: blocking).
pub fn module_crds(entries: &[ModuleCrd]) -> Result<Vec<Crd>> {
    let mut crds = Vec::new();
    for entry in entries {
        let path = go_module_dir(entry.module, entry.version)?.join(entry.path);
        crds.extend(read_crd_file(&path, Some(entry.purpose))?);
    }
    Ok(crds)
}

/// Project plus third-party CRDs whose purpose is `purpose`.
pub fn crds_for(purpose: Purpose) -> Result<Vec<Crd>> {
    crds_for_with(purpose, true)
}

/// Third-party CRDs whose purpose is `purpose`, and the project's too if
/// `project`.
pub fn crds_for_with(purpose: Purpose, project: bool) -> Result<Vec<Crd>> {
    let mut all = if project { project_crds()? } else { Vec::new() };
    all.extend(third_party_crds()?);
    Ok(all.into_iter().filter(|c| c.purpose == Some(purpose)).collect())
}

fn go_binary() -> PathBuf {
    if let Some(go) = std::env::var_os(ENV_GO).filter(|v| !v.is_empty()) {
        return PathBuf::from(go);
    }
    let on_path = std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("go").is_file()));
    if on_path { PathBuf::from("go") } else { PathBuf::from("/usr/local/go/bin/go") }
}

/// `.Dir` of `go mod download -json MODULE@VERSION` (memoized per process).
pub fn go_module_dir(module: &str, version: &str) -> Result<PathBuf> {
    static CACHE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let key = format!("{module}@{version}");
    let cache = CACHE.get_or_init(Default::default);
    if let Some(dir) = crate::process::lock_unpoisoned(cache).get(&key) {
        return Ok(dir.clone());
    }
    let command = format!("go mod download -json {key}");
    // Run outside any module/workspace so nothing local can interfere.
    let output = std::process::Command::new(go_binary())
        .args(["mod", "download", "-json", &key])
        .current_dir(std::env::temp_dir())
        .env("GOWORK", "off")
        .env("GO111MODULE", "on")
        .output()
        .map_err(|e| Error::Command {
            command: command.clone(),
            message: format!("{e} (is Go installed? set {ENV_GO})"),
        })?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|e| Error::Command {
        command: command.clone(),
        message: format!("{e}; stderr: {}", String::from_utf8_lossy(&output.stderr)),
    })?;
    if let Some(err) = json["Error"].as_str() {
        return Err(Error::Command { command, message: err.to_string() });
    }
    let dir = json["Dir"].as_str().filter(|d| !d.is_empty()).ok_or_else(|| Error::Command {
        command: command.clone(),
        message: format!("no .Dir in output; stderr: {}", String::from_utf8_lossy(&output.stderr)),
    })?;
    let dir = PathBuf::from(dir);
    crate::process::lock_unpoisoned(cache).insert(key, dir.clone());
    Ok(dir)
}

/// The field manager of the project's own CRDs: the shared clusters stand
/// for a platform where the host's `init` has run (the host updates only
/// CRDs a manager of its own installed).
pub const PROJECT_FIELD_MANAGER: &str = "service-provider-host/envtest";

/// Applies `crds` (server-side apply, field manager `envtest`, or
/// [`PROJECT_FIELD_MANAGER`] for the project's own) and waits until each is
/// `Established` and its resource can be listed.
pub async fn install(client: &Client, crds: &[Crd], timeout: Duration) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let project = project_crd_dir().display().to_string();
    for crd in crds {
        let manager = if crd.origin.starts_with(&project) { PROJECT_FIELD_MANAGER } else { "envtest" };
        api.patch(&crd.name, &PatchParams::apply(manager).force(), &Patch::Apply(&crd.manifest)).await?;
    }
    let deadline = Instant::now() + timeout;
    for crd in crds {
        wait_established(&api, crd, deadline, timeout).await?;
        wait_served(client, crd, deadline, timeout).await?;
    }
    Ok(())
}

/// True when the CRD has condition `Established=True`.
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    crd: &Crd,
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    loop {
        let current = api.get(&crd.name).await?;
        if is_established(&current) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("CRD {} to be Established", crd.name),
                seconds: timeout.as_secs(),
                detail: format!(": status {:?}", current.status),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Established does not yet mean discovery serves the resource; a list
/// call succeeding does.
async fn wait_served(client: &Client, crd: &Crd, deadline: Instant, timeout: Duration) -> Result<()> {
    let resource = crd.api_resource()?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(Error::Timeout {
                    what: format!("{} to be served", crd.name),
                    seconds: timeout.as_secs(),
                    detail: format!(": {e}"),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
