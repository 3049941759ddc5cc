//! A release as a landscape installs it (issue #38): the image index (both
//! architectures), the Kro plugin (pushed, cosign-signed) and the
//! `service-provider-kro` OCM component (signed) published to a registry;
//! then, as openmcp's bootstrapper reads it, the landscape's root component
//! → the reference `service-provider-kro` → the first `ociImage` → the
//! `-crds` directory, whose platform CRDs are applied first → the
//! ServiceProvider with the component's configuration as `spec` fields.
//! openmcp-operator v1.3.0 deploys that ServiceProvider; the kubelet's part
//! is played by pulling the pod's image from the registry (its
//! `imagePullSecrets`) and running the Job's and the Deployment's exact
//! container (arguments, environment, volumes) with buildah; a Kro goes to
//! Ready. Once straight from the publishing registry, once after a
//! `transfer` of the component with all its resources to a second
//! registry, the first stopped.
//!
//! Needs the image index (`SERVICE_PROVIDER_HOST_IMAGE_INDEX`, from
//! scripts/build-image.sh); without it the tests pass with a note, unless
//! `SERVICE_PROVIDER_HOST_REQUIRE_IMAGE=1` (CI).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use host_test_support::oci::PluginRegistry;
use host_test_support::plugins::{self, KRO};
use host_test_support::process::{Launcher, buildah_globals};
use host_test_support::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PodSpec, Secret};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use release::component::{self, Parts};
use release::landscape;
use release::registry::Registries;
use release::repository::{self, ComponentRef};
use serde_json::{Value, json};
use testbed::openmcp::SYSTEM_NAMESPACE;
use testbed::registry::{REGISTRY_PASSWORD, REGISTRY_USER};

const COMPONENT: &str = "open-control-plane.io/service-provider-host/service-provider-kro";
const ROOT: &str = "example.org/landscape/openmcp";
const VERSION: &str = "0.0.0-test";

fn index() -> Option<(String, String)> {
    let index = std::env::var("SERVICE_PROVIDER_HOST_IMAGE_INDEX").ok().filter(|s| !s.is_empty());
    if index.is_none() {
        let required = std::env::var("SERVICE_PROVIDER_HOST_REQUIRE_IMAGE").is_ok_and(|v| v == "1");
        assert!(!required, "SERVICE_PROVIDER_HOST_IMAGE_INDEX is not set: build it with scripts/build-image.sh");
        eprintln!("skipped: SERVICE_PROVIDER_HOST_IMAGE_INDEX is not set (eval \"$(scripts/build-image.sh)\")");
    }
    let storage = std::env::var("BUILDAH_STORAGE").unwrap_or_else(|_| "vfs".into());
    index.map(|i| (i, storage))
}

fn buildah(globals: &[String], args: &[&str]) -> String {
    let out = Command::new("buildah").args(globals).args(args).output().expect("buildah runs");
    assert!(out.status.success(), "buildah {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What a release put into a registry: the landscape's root component.
struct Published {
    root: ComponentRef,
    ocm_public_key: String,
}

/// Publishes the image index, the signed plugin and the signed component
/// (and a root referencing it) to `registry`, as `task release` does.
async fn publish(registry: &PluginRegistry, (index, storage): &(String, String), registries: &Registries) -> Published {
    let host = registry.host().to_string();
    let authfile = registry.docker_config().join("config.json");
    let digestfile = registry.dir().join("index.digest");
    let target = format!("docker://{host}/service-provider-host:{VERSION}");
    let authfile_arg = authfile.display().to_string();
    let digest_arg = digestfile.display().to_string();
    buildah(
        &buildah_globals(storage, None),
        &[
            "manifest",
            "push",
            "--all",
            "--tls-verify=false",
            "--authfile",
            &authfile_arg,
            "--digestfile",
            &digest_arg,
            index,
            &target,
        ],
    );
    let index_digest = std::fs::read_to_string(&digestfile).unwrap().trim().to_string();
    let image = format!("{host}/service-provider-host:{VERSION}@{index_digest}");

    let plugin = registry.publish(
        Path::new(env!("CARGO_BIN_EXE_service-provider-host")),
        &plugins::plugin_path(KRO),
        "plugins/kro",
    );
    registry.sign(&plugin, false);
    let plugin = plugin.trim_start_matches("oci://").to_string();

    let crds: Vec<(String, Vec<u8>)> =
        ["kro.services.open-control-plane.io_kroes.yaml", "kro.services.open-control-plane.io_providerconfigs.yaml"]
            .iter()
            .map(|f| {
                (f.to_string(), std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds").join(f)).unwrap())
            })
            .collect();
    let cosign_key = std::fs::read_to_string(registry.key()).unwrap();
    let base = format!("{host}/components");
    let parts = Parts {
        at: ComponentRef::new(&base, COMPONENT, VERSION).unwrap(),
        image,
        plugin_signature: component::signature_of(registries, &plugin).await.expect("the plugin's signature"),
        config: component::config(&plugin, &cosign_key).unwrap(),
        plugin,
        crds,
    };
    let (private, public) = release::sign::generate().unwrap();
    component::publish(registries, &parts, &private, "service-provider-host").await.expect("the component is pushed");

    let root = ComponentRef::new(&base, ROOT, "1.0.0").unwrap();
    let reference = ("service-provider-kro".to_string(), COMPONENT.to_string(), VERSION.to_string());
    let root_descriptor = component::root(&root, &[reference]).unwrap();
    repository::push(registries, &root, &root_descriptor, &[]).await.expect("the root is pushed");
    Published { root, ocm_public_key: public }
}

/// The landscape's additions to the component's configuration (its
/// bootstrapper config): the registry's credentials for the plugin pull
/// and, for this plain-HTTP test registry, `INSECURE_REGISTRIES`.
fn landscape_config(mut config: Value, registry_host: &str, pull_secret: &str) -> Value {
    let env = config["env"].as_array_mut().unwrap();
    env.push(json!({"name": "DOCKER_CONFIG", "value": "/etc/service-provider-host/registry"}));
    env.push(json!({"name": "INSECURE_REGISTRIES", "value": registry_host}));
    config["extraVolumes"].as_array_mut().unwrap().push(json!({
        "name": "registry", "secret": {"secretName": pull_secret, "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}
    }));
    config["extraVolumeMounts"].as_array_mut().unwrap().push(json!({
        "name": "registry", "mountPath": "/etc/service-provider-host/registry", "readOnly": true
    }));
    config["imagePullSecrets"] = json!([{"name": pull_secret}]);
    config
}

/// The kubelet's part for one pod: its image pulled with its
/// imagePullSecrets into a storage of its own (so every layer comes from
/// the registry, none from the build's storage), its first container run
/// with its arguments (the listening ports made free ones), environment
/// and volumes.
struct Kubelet<'a> {
    platform: &'a kube::Client,
    storage: &'a str,
    dir: PathBuf,
    /// The test's onboarding namespace: the only one its `run` watches
    /// (`WATCH_NAMESPACE`), since other tests' instances share the
    /// onboarding cluster and their own controllers reconcile them.
    namespace: &'a str,
}

impl Kubelet<'_> {
    fn root(&self) -> PathBuf {
        self.dir.join("containers")
    }
}

impl Kubelet<'_> {
    async fn pull(&self, spec: &PodSpec, image: &str) -> String {
        let secrets: Api<Secret> = Api::namespaced(self.platform.clone(), SYSTEM_NAMESPACE);
        let name = &spec.image_pull_secrets.as_ref().expect("imagePullSecrets")[0].name;
        let secret = secrets.get(name).await.expect("the pull secret");
        let authfile = self.dir.join("auth.json");
        std::fs::write(&authfile, &secret.data.unwrap()[".dockerconfigjson"].0).unwrap();
        // containers/image takes a digest or a tag, not both: the digest pins.
        let (name, digest) = image.split_once('@').expect("a pinned image");
        let repository = name.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')).map_or(name, |(r, _)| r);
        let source = format!("docker://{repository}@{digest}");
        let authfile_arg = authfile.display().to_string();
        let globals = buildah_globals(self.storage, Some(&self.root()));
        buildah(&globals, &["pull", "--quiet", "--tls-verify=false", "--authfile", &authfile_arg, &source])
    }

    /// Secrets and emptyDirs materialised under the kubelet's directory.
    async fn volumes(&self, spec: &PodSpec, pod: &str) -> Vec<(PathBuf, String)> {
        let container = &spec.containers[0];
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = spec.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a mounted volume");
            let here = self.dir.join(format!("{pod}-{}", volume.name));
            std::fs::create_dir_all(&here).unwrap();
            if let Some(source) = &volume.secret {
                let secrets: Api<Secret> = Api::namespaced(self.platform.clone(), SYSTEM_NAMESPACE);
                let secret = secrets.get(source.secret_name.as_deref().unwrap()).await.expect("a mounted Secret");
                let data = secret.data.unwrap_or_default();
                for item in source.items.iter().flatten() {
                    std::fs::write(here.join(&item.path), &data[&item.key].0).unwrap();
                }
            }
            // The container runs as 65532: an emptyDir is its to write.
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&here, std::fs::Permissions::from_mode(0o777)).unwrap();
            mounts.push((here, mount.mount_path.clone()));
        }
        mounts
    }

    async fn command(
        &self,
        spec: &PodSpec,
        image_id: &str,
        pod: &str,
        kubeconfig: &Path,
    ) -> host_test_support::process::Launched {
        let container = &spec.containers[0];
        let metrics = host_test_support::process::free_port();
        let args: Vec<OsString> = container
            .args
            .iter()
            .flatten()
            .map(|a| match a {
                a if a.starts_with("--metrics-bind-address") => format!("--metrics-bind-address=127.0.0.1:{metrics}"),
                a if a.starts_with("--health-probe-bind-address") => "--health-probe-bind-address=0".into(),
                a => a.clone(),
            })
            .map(Into::into)
            .collect();
        let mut env: Vec<(String, String)> =
            container.env.iter().flatten().filter_map(|e| Some((e.name.clone(), e.value.clone()?))).collect();
        env.extend([
            ("POD_NAMESPACE".into(), SYSTEM_NAMESPACE.into()),
            ("POD_NAME".into(), pod.into()),
            ("WATCH_NAMESPACE".into(), self.namespace.into()),
        ]);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mounts = self.volumes(spec, pod).await;
        let launcher =
            Launcher::Image { image: image_id.into(), storage: self.storage.into(), root: Some(self.root()) };
        launcher.command_with(&args, kubeconfig, &env, &mounts)
    }
}

/// The bootstrapper's walk from `root` and openmcp-operator's deployment of
/// the ServiceProvider it writes, to a Kro Ready and deleted.
async fn install(
    published: &Published,
    registries: &Registries,
    (registry, base): (&PluginRegistry, &str),
    storage: &str,
) {
    // The walk, the component's signature checked first (the bootstrapper
    // checks none).
    let provider =
        landscape::resolve(registries, &published.root, "service-provider-kro").await.expect("the reference");
    release::sign::verify(&provider.stored.descriptor, "service-provider-host", &published.ocm_public_key)
        .expect("the component's signature");
    let image = landscape::image(&provider.stored.descriptor).unwrap();
    assert!(image.starts_with(&format!("{base}/service-provider-host:{VERSION}@sha256:")), "{image}");
    let crds = landscape::platform_crds(registries, &provider).await.unwrap();
    let names: Vec<&str> = crds.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names, ["kro.services.open-control-plane.io_providerconfigs.yaml"], "only the platform's CRDs");
    let config = landscape::config(registries, &provider).await.unwrap();
    let plugin = config["env"][0]["value"].as_str().unwrap();
    assert!(plugin.starts_with(&format!("oci://{base}/plugins/kro@sha256:")), "{plugin}");

    let name = unique("kro");
    let setup =
        Setup { pod_namespace: Some(SYSTEM_NAMESPACE.into()), provider: Some(name.clone()), ..Setup::default() };
    let options = Options { instances: vec!["mcp-01".into()], flux_ready: true, workload: false };
    let f = Fixture::with_openmcp_setup(options, Service::KRO, setup).await;

    // The platform CRDs first, exactly as the component carries them.
    let crd_api: Api<DynamicObject> = Api::all_with(
        f.platform.clone(),
        &kube::discovery::ApiResource::erase::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(&()),
    );
    for (file, crd) in &crds {
        let object: DynamicObject = serde_json::from_value(crd.clone()).unwrap();
        let apply = PatchParams::apply("bootstrapper").force();
        crd_api.patch(&object.metadata.name.clone().unwrap(), &apply, &Patch::Apply(&object)).await.expect(file);
    }

    // deploy/ shows this very ServiceProvider, but for where things are.
    let written = landscape::service_provider("kro", &image, &config);
    let shown = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/openmcp/serviceprovider-kro-from-component.yaml"),
    )
    .unwrap();
    let shown: Value = serde_saphyr::from_str(&shown).unwrap();
    assert_eq!(placeless(written), placeless(shown), "deploy/openmcp/serviceprovider-kro-from-component.yaml");

    let secrets: Api<Secret> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
    // The pull Secret the landscape adds (imagePullSecrets and the plugin's
    // registry credentials), one per test: the namespace is shared.
    let pull_secret = format!("registry-{name}");
    secrets
        .create(&PostParams::default(), &registry.registry.pull_secret(&pull_secret, SYSTEM_NAMESPACE))
        .await
        .expect("the pull Secret");
    let sp = landscape::service_provider(&name, &image, &landscape_config(config, registry.host(), &pull_secret));
    let providers: Api<DynamicObject> =
        Api::all_with(f.platform.clone(), &service_provider_host::controller::init::service_provider_resource());
    providers.create(&PostParams::default(), &serde_json::from_value(sp).unwrap()).await.expect("the ServiceProvider");

    let dir = registry.dir().join(format!("kubelet-{name}"));
    let kubelet = Kubelet { platform: &f.platform, storage, dir, namespace: &f.ns };
    std::fs::create_dir_all(&kubelet.dir).unwrap();
    let kubeconfig = f.env.platform.kubeconfig_path();
    let jobs: Api<Job> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
    let job_name = format!("sp-{name}-init");
    let job = eventually("the init Job", WAIT, || async { jobs.get_opt(&job_name).await.unwrap() }).await;
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some(image.as_str()), "openmcp-operator runs the component's image");
    let image_id = kubelet.pull(&pod, &image).await;
    let out = kubelet.command(&pod, &image_id, "init-pod", &kubeconfig).await.output().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "init from the component: {stderr}\n{}", f.openmcp.diagnostics());
    assert!(stderr.contains("service kind registered"), "{stderr}");
    jobs.patch_status(&job_name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"succeeded": 1}})))
        .await
        .expect("Job status");

    let deployments: Api<Deployment> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
    let deployment_name = format!("sp-{name}");
    let deployment =
        eventually("the Deployment", WAIT, || async { deployments.get_opt(&deployment_name).await.unwrap() }).await;
    let pod = deployment.spec.template.spec.unwrap();
    let log = kubelet.dir.join("run.log");
    let _run = kubelet.command(&pod, &image_id, "run-pod", &kubeconfig).await.spawn(Some(&log));
    f.provider_config(json!([version("v0.9.1", "0.9.1")])).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(ready.is_ok(), "run from the component: {}\n{}", log_text(), f.openmcp.diagnostics());
    let fetched = log_text().lines().find(|l| l.contains("plugin fetched")).map(str::to_string).unwrap_or_default();
    assert!(
        fetched.contains("verified=true") || fetched.contains("\"verified\":true"),
        "the plugin pulled from the component's registry, its signature checked: {}",
        log_text()
    );
    f.delete_kro("mcp-01").await;
    let gone = tokio::time::timeout(f.wait, f.wait_gone("mcp-01")).await;
    assert!(gone.is_ok(), "deletion: {}", log_text());
    let _ = std::fs::remove_dir_all(&kubelet.dir);
}

/// A component whose bytes are not what its signed descriptor records is
/// refused: a local blob swapped in the registry (the configuration, say a
/// plugin of the attacker's), a descriptor changed after signing, a key
/// that did not sign it.
async fn refuse_tampering(published: &Published, registries: &Registries) {
    let provider = landscape::resolve(registries, &published.root, "service-provider-kro").await.unwrap();
    let (_, stranger) = release::sign::generate().unwrap();
    let e = release::sign::verify(&provider.stored.descriptor, "service-provider-host", &stranger).unwrap_err();
    assert!(e.to_string().contains("does not verify"), "{e}");

    // The same descriptor (signature and all) pushed as another version,
    // with another configuration blob in the place its access names.
    let mut swapped = provider.stored.descriptor.clone();
    swapped.component.version = "0.0.0-tampered".into();
    let at = ComponentRef::new(&provider.at.base, &provider.at.name, "0.0.0-tampered").unwrap();
    let evil = b"env: [{name: PLUGIN, value: 'oci://evil.example/kro@sha256:00'}]\n".to_vec();
    let evil_blob = repository::LocalBlob { bytes: evil, media_type: "application/yaml".into() };
    for resource in &mut swapped.component.resources {
        if let release::descriptor::Access::LocalBlob { local_reference, .. } = &mut resource.access
            && resource.name == component::CONFIG
        {
            *local_reference = evil_blob.digest();
        }
    }
    let crds_bytes = landscape::local_blob(registries, &provider, &component::crds_resource(COMPONENT)).await.unwrap();
    let crds_blob = repository::LocalBlob { bytes: crds_bytes, media_type: "application/x-tar".into() };
    repository::push(registries, &at, &swapped, &[crds_blob, evil_blob]).await.unwrap();
    let tampered = landscape::Provider { stored: repository::get(registries, &at).await.unwrap(), at };
    let e = landscape::config(registries, &tampered).await.unwrap_err();
    assert!(e.to_string().contains("does not match the digest"), "a swapped blob: {e}");
    let e = release::sign::verify(&tampered.stored.descriptor, "service-provider-host", &published.ocm_public_key)
        .unwrap_err();
    assert!(e.to_string().contains("was changed"), "a changed descriptor (its version): {e}");
}

/// A ServiceProvider with every pinned reference and key replaced by a
/// placeholder: what stays is its shape and its constant values.
fn placeless(value: Value) -> Value {
    match value {
        Value::String(s) if s.contains("@sha256:") => json!("<pinned>"),
        Value::String(s) if s.contains("BEGIN PUBLIC KEY") => json!("<key>"),
        Value::Array(items) => Value::Array(items.into_iter().map(placeless).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, placeless(v))).collect()),
        other => other,
    }
}

fn registries_for(registries: &[&PluginRegistry]) -> Registries {
    let hosts: Vec<String> = registries.iter().map(|r| r.host().to_string()).collect();
    registries
        .iter()
        .fold(Registries::new(&hosts), |all, r| all.with_credentials(r.host(), REGISTRY_USER, REGISTRY_PASSWORD))
}

#[tokio::test]
async fn a_kro_is_installed_from_its_ocm_component_through_openmcp_operator() {
    let Some(index) = index() else { return };
    let registry = PluginRegistry::start().await;
    let registries = registries_for(&[&registry]);
    let published = publish(&registry, &index, &registries).await;
    refuse_tampering(&published, &registries).await;
    install(&published, &registries, (&registry, registry.host()), &index.1).await;
}

#[tokio::test]
async fn a_transferred_component_installs_from_the_mirror_with_the_first_registry_stopped() {
    let Some(index) = index() else { return };
    let first = PluginRegistry::start().await;
    let mirror = PluginRegistry::start().await;
    let registries = registries_for(&[&first, &mirror]);
    let published = publish(&first, &index, &registries).await;
    let base = format!("{}/air-gap", mirror.host());
    let options = release::transfer::Options {
        allowed_sources: Vec::new(),
        verify: Some(("service-provider-host".into(), published.ocm_public_key.clone())),
    };
    let root = release::transfer::transfer(&registries, &published.root, &base, &options).await.expect("the transfer");
    drop(first);
    install(&Published { root, ocm_public_key: published.ocm_public_key }, &registries, (&mirror, &base), &index.1)
        .await;
}
