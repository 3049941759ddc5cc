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
async fn publish(registry: &PluginRegistry, index: &(String, String), registries: &Registries) -> Published {
    publish_version(registry, index, registries, VERSION, "1.0.0").await
}

/// [`publish`] as release `version` of the component, referenced by the
/// landscape's root component `root_version`.
async fn publish_version(
    registry: &PluginRegistry,
    (index, storage): &(String, String),
    registries: &Registries,
    version: &str,
    root_version: &str,
) -> Published {
    let host = registry.host().to_string();
    let authfile = registry.docker_config().join("config.json");
    let digestfile = registry.dir().join(format!("index-{version}.digest"));
    let target = format!("docker://{host}/service-provider-host:{version}");
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
    let image = format!("{host}/service-provider-host:{version}@{index_digest}");

    let plugin = registry.publish(
        Path::new(env!("CARGO_BIN_EXE_service-provider-host")),
        &plugins::plugin_path(KRO),
        "plugins/kro",
    );
    // A later release of the same plugin bytes carries the same signature.
    if version == VERSION {
        registry.sign(&plugin, false);
    }
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
        at: ComponentRef::new(&base, COMPONENT, version).unwrap(),
        image,
        plugin_signature: component::signature_of(registries, &plugin).await.expect("the plugin's signature"),
        config: component::config(&plugin, &cosign_key).unwrap(),
        plugin,
        crds,
    };
    let (private, public) = release::sign::generate().unwrap();
    component::publish(registries, &parts, &private, "service-provider-host").await.expect("the component is pushed");

    let root = ComponentRef::new(&base, ROOT, root_version).unwrap();
    let reference = ("service-provider-kro".to_string(), COMPONENT.to_string(), version.to_string());
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

impl Kubelet<'_> {
    /// Runs the init Job openmcp-operator made for the ServiceProvider's
    /// current generation (the Job's image pulled from the registry), marks
    /// it succeeded, and returns init's log.
    async fn run_init(&self, f: &Fixture, image: &str) -> String {
        let providers: Api<DynamicObject> =
            Api::all_with(f.platform.clone(), &service_provider_host::controller::init::service_provider_resource());
        let generation = providers.get(&f.provider).await.expect("the ServiceProvider").metadata.generation;
        let generation = generation.unwrap_or_default().to_string();
        let jobs: Api<Job> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
        let job_name = format!("sp-{}-init", f.provider);
        let job = eventually(&format!("the init Job of generation {generation}"), WAIT, || async {
            let job = jobs.get_opt(&job_name).await.unwrap()?;
            let annotations = job.metadata.annotations.clone().unwrap_or_default();
            (annotations.get("openmcp.cloud/provider-generation") == Some(&generation)).then_some(job)
        })
        .await;
        let pod = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some(image), "openmcp-operator runs the component's image");
        let image_id = self.pull(&pod, image).await;
        let kubeconfig = f.env.platform.kubeconfig_path();
        let pod_name = format!("init-{generation}");
        let out = self.command(&pod, &image_id, &pod_name, &kubeconfig).await.output().await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "init from the component: {stderr}\n{}", f.openmcp.diagnostics());
        jobs.patch_status(&job_name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"succeeded": 1}})))
            .await
            .expect("Job status");
        stderr
    }

    /// Starts the Deployment's pod once openmcp-operator runs `image` in it;
    /// returns it (stopped on drop) and its log.
    async fn run_deployment(&self, f: &Fixture, image: &str) -> (host_test_support::process::Running, PathBuf) {
        let deployments: Api<Deployment> = Api::namespaced(f.platform.clone(), SYSTEM_NAMESPACE);
        let name = format!("sp-{}", f.provider);
        let deployment = eventually(&format!("the Deployment running {image}"), WAIT, || async {
            let deployment = deployments.get_opt(&name).await.unwrap()?;
            let pod = deployment.spec.template.spec.as_ref()?;
            (pod.containers[0].image.as_deref() == Some(image)).then_some(deployment)
        })
        .await;
        let pod = deployment.spec.template.spec.unwrap();
        let image_id = self.pull(&pod, image).await;
        let pod_name = unique("run");
        let log = self.dir.join(format!("{pod_name}.log"));
        let kubeconfig = f.env.platform.kubeconfig_path();
        let running = self.command(&pod, &image_id, &pod_name, &kubeconfig).await.spawn(Some(&log));
        (running, log)
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

/// A landscape as openmcp's bootstrapper leaves it before a provider is
/// installed: openmcp-operator and the test cluster provider, the Flux chain
/// with kustomize-controller, and no CRD of this project on any cluster.
/// Started for one test, kept for the binary's life (its exit hook stops it).
struct Landscape {
    openmcp: &'static testbed::openmcp::OpenMcp,
    flux: &'static testbed::RealFlux,
}

impl Landscape {
    async fn start() -> Landscape {
        let options = testbed::EnvOptions { project_crds: false };
        let openmcp = testbed::openmcp::OpenMcp::start_with(options).await.expect("openmcp-operator");
        let openmcp: &'static _ = Box::leak(Box::new(openmcp));
        let flux_options = testbed::RealFluxOptions { kustomize_controller: true, ..Default::default() };
        let flux = testbed::RealFlux::start(&openmcp.env.platform, flux_options).await.expect("the Flux chain");
        Landscape { openmcp, flux: Box::leak(Box::new(flux)) }
    }

    /// What the bootstrapper commits for `provider` from `root`, read with
    /// Gardener's OCM library (`tools/release/bootstrap.py`), pushed as the
    /// GitOps repository's next revision `revision`; Flux applies it.
    async fn commit(&self, registry: &PluginRegistry, root: &ComponentRef, config: &Value, revision: &str) -> PathBuf {
        let dir = registry.dir().join(format!("gitops-{revision}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config_file = dir.with_extension("config.yaml");
        std::fs::write(&config_file, serde_json::to_string(config).unwrap()).unwrap();
        let venv = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cached-tool.sh"))
            .args(["pypi", "gardener-ocm", "1.2863.0"])
            .output()
            .expect("cached-tool.sh runs");
        assert!(venv.status.success(), "gardener-ocm: {}", String::from_utf8_lossy(&venv.stderr));
        let python = PathBuf::from(String::from_utf8_lossy(&venv.stdout).trim()).join("bin/python");
        let root_text = format!("{}//{}:{}", root.base, root.name, root.version);
        let out = Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/release/bootstrap.py"))
            .args(["--plain-http", "--provider", "kro", "--image-pull-secret", LANDSCAPE_PULL_SECRET])
            .arg("--docker-config")
            .arg(registry.docker_config().join("config.json"))
            .args(["--root", &root_text])
            .arg("--config")
            .arg(&config_file)
            .arg("--out")
            .arg(&dir)
            .output()
            .expect("bootstrap.py runs");
        assert!(out.status.success(), "bootstrap.py: {}", String::from_utf8_lossy(&out.stderr));
        let crds: Vec<String> = std::fs::read_dir(dir.join("resources/openmcp/crds"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(crds, ["kro.services.open-control-plane.io_providerconfigs.yaml"], "only the platform's CRDs");

        let registry = self.flux.registry();
        registry.push_flux_artifact("landscape/gitops", revision, &dir).await.expect("the GitOps revision pushed");
        let platform = self.openmcp.env.platform.client().await.unwrap();
        let secrets: Api<Secret> = Api::namespaced(platform.clone(), "flux-system");
        let secret = registry.pull_secret("gitops-registry", "flux-system");
        secrets
            .patch("gitops-registry", &PatchParams::apply("landscape").force(), &Patch::Apply(&secret))
            .await
            .unwrap();
        let apply = |kind: &str, plural: &str, api_version: &str, spec: Value| {
            let platform = platform.clone();
            let resource = service_provider_host::resource::api_resource(api_version, kind, plural);
            let object = json!({
                "apiVersion": api_version, "kind": kind,
                "metadata": {"name": "bootstrap", "namespace": "flux-system"}, "spec": spec,
            });
            async move {
                let api: Api<DynamicObject> = Api::namespaced_with(platform, "flux-system", &resource);
                let object: DynamicObject = serde_json::from_value(object).unwrap();
                api.patch("bootstrap", &PatchParams::apply("landscape").force(), &Patch::Apply(&object)).await.unwrap();
            }
        };
        let url = format!("oci://{}/landscape/gitops", registry.host());
        let source = json!({"url": url, "ref": {"tag": revision}, "interval": "1m", "insecure": true,
                            "secretRef": {"name": "gitops-registry"}});
        apply("OCIRepository", "ocirepositories", "source.toolkit.fluxcd.io/v1", source).await;
        // The bootstrapper's Kustomization: prune, from the repository's
        // environment folder.
        let kustomization = json!({"interval": "1m", "prune": true, "path": "./resources/openmcp",
                                   "sourceRef": {"kind": "OCIRepository", "name": "bootstrap"}});
        apply("Kustomization", "kustomizations", "kustomize.toolkit.fluxcd.io/v1", kustomization).await;
        let resource = service_provider_host::resource::api_resource(
            "kustomize.toolkit.fluxcd.io/v1",
            "Kustomization",
            "kustomizations",
        );
        let kustomizations: Api<DynamicObject> = Api::namespaced_with(platform, "flux-system", &resource);
        eventually(&format!("Flux applied revision {revision}"), WAIT, || async {
            let k = serde_json::to_value(kustomizations.get("bootstrap").await.unwrap()).unwrap();
            let applied = k["status"]["lastAppliedRevision"].as_str().unwrap_or_default().to_string();
            (applied.starts_with(&format!("{revision}@")) && host_test_support::real_flux::flux_ready(&k)).then_some(())
        })
        .await;
        dir
    }
}

/// The pull Secret a landscape names in its bootstrapper config
/// (`imagePullSecrets`): in `openmcp-system` before the bootstrapper runs.
const LANDSCAPE_PULL_SECRET: &str = "landscape-registry";

/// The install as openmcp's bootstrapper does it, end to end, on clusters
/// where nothing of this project is installed: the component published, the
/// landscape's root component read with Gardener's OCM library into the
/// GitOps tree the bootstrapper commits, kustomize-controller applying the
/// platform CRDs and the ServiceProvider from it, openmcp-operator running
/// `init` and `run` from the image (the kubelet's part played with
/// buildah), a Kro Ready through the real source- and helm-controller. Then
/// the next component version through the same path: Flux applies it,
/// openmcp-operator runs `init` again, the instance stays Ready.
#[tokio::test]
async fn a_kro_is_installed_and_upgraded_through_openmcps_bootstrapper() {
    let Some(index) = index() else { return };
    let registry = PluginRegistry::start().await;
    let registries = registries_for(&[&registry]);
    let (landscape, first) =
        tokio::join!(Landscape::start(), publish_version(&registry, &index, &registries, VERSION, "1.0.0"));
    let platform = landscape.openmcp.env.platform.client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(platform.clone(), SYSTEM_NAMESPACE);
    secrets
        .create(&PostParams::default(), &registry.registry.pull_secret(LANDSCAPE_PULL_SECRET, SYSTEM_NAMESPACE))
        .await
        .expect("the landscape's pull Secret");
    let crd = "providerconfigs.kro.services.open-control-plane.io";
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(platform.clone());
    assert!(crds.get_opt(crd).await.unwrap().is_none(), "no CRD of this project before the install");

    // The platform team's bootstrapper config for the provider: the
    // component's configuration, with the landscape's registry access.
    let provider = landscape::resolve(&registries, &first.root, "service-provider-kro").await.unwrap();
    let config = landscape_config(
        landscape::config(&registries, &provider).await.unwrap(),
        registry.host(),
        LANDSCAPE_PULL_SECRET,
    );
    landscape.commit(&registry, &first.root, &config, "1").await;
    assert_eq!(crd_writers(&platform, crd).await, ["kustomize-controller"], "Flux applied the platform CRD");

    let setup = Setup {
        env: Some(&landscape.openmcp.env),
        openmcp: Some(landscape.openmcp),
        real_flux: Some(landscape.flux),
        pod_namespace: Some(SYSTEM_NAMESPACE.into()),
        provider: Some("kro".into()),
        ..Setup::default()
    };
    let f = Fixture::with_real_flux_setup(&["mcp-01"], setup).await;
    let dir = registry.dir().join("kubelet-bootstrap");
    std::fs::create_dir_all(&dir).unwrap();
    let kubelet = Kubelet { platform: &f.platform, storage: &index.1, dir, namespace: &f.ns };

    // init from the image, as openmcp-operator's Job runs it: the CRD Flux
    // applied is this release's, so init co-owns it.
    let image = landscape::image(&provider.stored.descriptor).unwrap();
    let init = kubelet.run_init(&f, &image).await;
    assert!(init.contains("CRD co-owned"), "{init}");
    assert_eq!(crd_writers(&platform, crd).await, ["kustomize-controller", "service-provider-host/kro"]);
    let run = kubelet.run_deployment(&f, &image).await;

    f.registry_credentials("chart-pull", None).await;
    let mut version = f.registry_version("v0.9.1", "0.9.1");
    version["chartPullSecret"] = json!("chart-pull");
    f.provider_config(json!([version])).await;
    f.create_kro("mcp-01", "v0.9.1").await;
    let log_text = |log: &Path| std::fs::read_to_string(log).unwrap_or_default();
    let ready = tokio::time::timeout(f.wait, f.wait_ready("mcp-01")).await;
    assert!(
        ready.is_ok(),
        "run from the component: {}\n{}\n{}",
        log_text(&run.1),
        f.openmcp.diagnostics(),
        landscape.flux.log_tails(30)
    );
    assert!(f.kro_deployment().await.is_some(), "helm-controller installed kro on the ControlPlane");

    // The next release, through the same path.
    let second = publish_version(&registry, &index, &registries, "0.0.1-test", "1.0.1").await;
    landscape.commit(&registry, &second.root, &config, "2").await;
    let sp: Api<DynamicObject> =
        Api::all_with(platform.clone(), &service_provider_host::controller::init::service_provider_resource());
    let image =
        serde_json::to_value(sp.get("kro").await.unwrap()).unwrap()["spec"]["image"].as_str().unwrap().to_string();
    assert!(image.contains(":0.0.1-test@sha256:"), "Flux applied the new ServiceProvider: {image}");
    drop(run);
    let init = kubelet.run_init(&f, &image).await;
    assert!(!init.contains("Conflict"), "{init}");
    assert_eq!(crd_writers(&platform, crd).await, ["kustomize-controller", "service-provider-host/kro"]);
    let run = kubelet.run_deployment(&f, &image).await;
    f.wait_ready("mcp-01").await;
    f.delete_kro("mcp-01").await;
    let gone = tokio::time::timeout(f.wait, f.wait_gone("mcp-01")).await;
    assert!(gone.is_ok(), "deletion after the upgrade: {}", log_text(&run.1));
    let _ = std::fs::remove_dir_all(&kubelet.dir);
}
