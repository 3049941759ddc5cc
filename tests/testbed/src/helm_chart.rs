//! Helm charts packaged in memory, the way `helm package` would, so that no
//! Helm CLI has to be built: the kro chart comes straight from kro's Go
//! module and is pushed with [`crate::Registry::push_helm_chart`].
//!
//! The archive is reproducible (sorted entries, fixed mtime, owner and mode),
//! so the same chart always has the same digest and a Flux revision seen in
//! one run can be compared with the next.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// OCI media type of a Helm chart's config blob (Chart.yaml as JSON).
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// OCI media type of a Helm chart archive layer.
pub const HELM_CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// The Go module that carries kro's chart under `helm/`.
pub const KRO_MODULE: &str = "github.com/kubernetes-sigs/kro";
/// The chart versions the harness can package: the two the Kro plugin's
/// README names, so that an upgrade can be tested.
pub const KRO_CHART_VERSIONS: [&str; 2] = ["0.9.1", "0.9.3"];
/// Repository path of the kro chart in a registry, as on registry.k8s.io
/// (`oci://registry.k8s.io/kro/charts/kro`).
pub const KRO_CHART_REPOSITORY: &str = "kro/charts/kro";

/// A packaged chart: the `.tgz` and the OCI config blob.
#[derive(Debug, Clone)]
pub struct HelmChart {
    /// `name` from Chart.yaml (the archive's top directory).
    pub name: String,
    /// `version` from Chart.yaml; also the OCI tag it is pushed under.
    pub version: String,
    /// The gzipped tar archive (`<name>/Chart.yaml`, `<name>/templates/...`).
    pub archive: Vec<u8>,
    /// Chart.yaml as JSON: the config blob `helm push` writes.
    pub config: Vec<u8>,
    /// Description from Chart.yaml, for the manifest annotations.
    pub description: Option<String>,
}

/// A text edit applied to one file of the chart before packaging.
#[derive(Debug, Clone)]
pub struct LineEdit {
    /// Path relative to the chart directory, e.g. `values.yaml`.
    pub file: &'static str,
    /// The edited line is the first one whose trimmed text starts with this.
    pub prefix: &'static str,
    /// The replacement for the trimmed text (indentation is kept).
    pub replacement: String,
}

impl HelmChart {
    /// Packages the chart directory `dir` after applying `edits`. Every edit
    /// must match a line: a changed chart layout fails loudly instead of
    /// silently producing a `0.0.0-dev` chart.
    pub fn package(dir: &Path, edits: &[LineEdit]) -> Result<Self> {
        let mut files = Vec::new();
        collect_files(dir, dir, &mut files)?;
        files.sort();
        let mut contents = Vec::with_capacity(files.len());
        for relative in &files {
            let path = dir.join(relative);
            let mut text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            for edit in edits.iter().filter(|e| Path::new(e.file) == relative.as_path()) {
                text = apply_edit(&text, edit, &path)?;
            }
            contents.push((relative.clone(), text));
        }

        let chart_yaml = contents
            .iter()
            .find(|(p, _)| p == Path::new("Chart.yaml"))
            .ok_or_else(|| Error::Other(format!("{}: no Chart.yaml", dir.display())))?;
        let origin = dir.join("Chart.yaml").display().to_string();
        let text = String::from_utf8_lossy(&chart_yaml.1);
        let metadata: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|e| Error::Yaml { origin: origin.clone(), message: e.to_string() })?;
        let field = |key: &str| metadata[key].as_str().map(str::to_string);
        let missing = |key: &str| Error::Yaml { origin: origin.clone(), message: format!("no `{key}`") };
        let name = field("name").ok_or_else(|| missing("name"))?;
        let version = field("version").ok_or_else(|| missing("version"))?;

        let archive = tar_gz(&name, &contents).map_err(|e| Error::io(dir, e))?;
        Ok(Self { description: field("description"), config: serde_json::to_vec(&metadata)?, name, version, archive })
    }
}

/// The kro chart of release `version` (e.g. `0.9.3`), from the Go module
/// `github.com/kubernetes-sigs/kro@v<version>` (downloaded into the Go module
/// cache if needed: blocking).
///
/// The module's chart says `0.0.0-dev` and has an image tag placeholder;
/// like kro's release (`make inject-helm-version`), the chart version, the
/// appVersion and `image.tag` are set to the release.
pub fn kro_chart(version: &str) -> Result<HelmChart> {
    let dir = kro_chart_dir(version)?;
    let edits = [
        LineEdit { file: "Chart.yaml", prefix: "version:", replacement: format!("version: {version}") },
        LineEdit { file: "Chart.yaml", prefix: "appVersion:", replacement: format!("appVersion: \"{version}\"") },
        LineEdit { file: "values.yaml", prefix: "tag:", replacement: format!("tag: \"{version}\"") },
    ];
    HelmChart::package(&dir, &edits)
}

/// `helm/` inside the kro module at `v<version>`.
pub fn kro_chart_dir(version: &str) -> Result<PathBuf> {
    Ok(crate::crds::go_module_dir(KRO_MODULE, &format!("v{version}"))?.join("helm"))
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let kind = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            collect_files(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path.strip_prefix(root).expect("below the root").to_path_buf());
        }
    }
    Ok(())
}

fn apply_edit(text: &[u8], edit: &LineEdit, path: &Path) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(text).map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
    let mut found = false;
    let mut out = String::with_capacity(text.len() + edit.replacement.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if !found && trimmed.starts_with(edit.prefix) {
            found = true;
            let indent = &line[..line.len() - trimmed.len()];
            let newline = if line.ends_with('\n') { "\n" } else { "" };
            out.push_str(indent);
            out.push_str(&edit.replacement);
            out.push_str(newline);
        } else {
            out.push_str(line);
        }
    }
    if !found {
        return Err(Error::Other(format!("{}: no line starting with `{}` to edit", path.display(), edit.prefix)));
    }
    Ok(out.into_bytes())
}

/// A gzipped tar with every file under `<top>/`, regular files only, mode
/// 0644, owner 0, mtime 0 (reproducible).
pub(crate) fn tar_gz(top: &str, files: &[(PathBuf, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (relative, data) in files {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(&mut header, Path::new(top).join(relative), data.as_slice())?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_replace_the_first_matching_line_and_keep_indentation() {
        let edit = LineEdit { file: "values.yaml", prefix: "tag:", replacement: "tag: \"1.2.3\"".into() };
        let out = apply_edit(b"image:\n  tag: ${VERSION}\n  tag: other\n", &edit, Path::new("values.yaml")).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "image:\n  tag: \"1.2.3\"\n  tag: other\n");
        let missing = apply_edit(b"image: {}\n", &edit, Path::new("values.yaml")).unwrap_err();
        assert!(missing.to_string().contains("no line starting with `tag:`"), "{missing}");
    }

    #[test]
    fn a_packaged_chart_is_reproducible_and_has_its_files_under_the_chart_name() {
        let dir = std::env::temp_dir().join(format!("testbed-chart-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(dir.join("Chart.yaml"), "apiVersion: v2\nname: demo\nversion: 0.0.0-dev\n").unwrap();
        std::fs::write(dir.join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
        let edits = [LineEdit { file: "Chart.yaml", prefix: "version:", replacement: "version: 1.0.0".into() }];
        let first = HelmChart::package(&dir, &edits).unwrap();
        let second = HelmChart::package(&dir, &edits).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        assert_eq!((first.name.as_str(), first.version.as_str()), ("demo", "1.0.0"));
        assert_eq!(first.archive, second.archive, "same input, same bytes");
        let config: serde_json::Value = serde_json::from_slice(&first.config).unwrap();
        assert_eq!(config["version"], "1.0.0");
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(first.archive.as_slice()));
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        assert_eq!(names, ["demo/Chart.yaml", "demo/templates/cm.yaml"]);
    }
}
