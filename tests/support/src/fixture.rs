//! End-to-end fixtures: the host's controller on real API servers.
//!
//! Every test gets its own onboarding namespace, pod namespace, provider
//! name (hence its own ProviderConfig and owner labels) and its own
//! ControlPlane cluster, so tests run in parallel without seeing each other.
//! Platform and onboarding clusters are shared per test binary. The openmcp
//! and Flux simulators of `envtest` play the parts that are not running.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envtest::crds::{self, Purpose};
use envtest::{
    Cluster, ClusterOptions, FluxOptions, FluxSimulator, OpenMcpSimulator, SimulatorOptions, TargetCluster, TestEnv,
    eventually,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use service_provider_host::clusters;
use service_provider_host::metrics::Metrics;
use service_provider_host::operator::{self, Settings};
use service_provider_host::reconcile::Context;
use service_provider_host::sandbox::Plugin;
use service_provider_sdk::{contract, names};

use crate::plugins::{planner, plugin};
use crate::unique;

pub const WAIT: Duration = Duration::from_secs(60);
pub const GROUP: &str = "kro.services.open-control-plane.io";

pub fn kro_resource() -> ApiResource {
    service_provider_host::resource::api_resource(&format!("{GROUP}/v1alpha1"), "Kro", "kroes")
}

pub fn provider_config_resource() -> ApiResource {
    service_provider_host::resource::api_resource(&format!("{GROUP}/v1alpha1"), "ProviderConfig", "providerconfigs")
}

pub fn flux_resource(kind: &str) -> ApiResource {
    match kind {
        "OCIRepository" => {
            service_provider_host::resource::api_resource("source.toolkit.fluxcd.io/v1", kind, "ocirepositories")
        }
        "HelmRelease" => {
            service_provider_host::resource::api_resource("helm.toolkit.fluxcd.io/v2", kind, "helmreleases")
        }
        other => panic!("not a Flux kind: {other}"),
    }
}

pub fn rgd_resource() -> ApiResource {
    service_provider_host::resource::api_resource(
        "kro.run/v1alpha1",
        "ResourceGraphDefinition",
        "resourcegraphdefinitions",
    )
}

pub fn access_request_resource() -> ApiResource {
    service_provider_host::access::access_request_resource()
}

/// A version entry of the ProviderConfig.
pub fn version(version: &str, chart: &str) -> Value {
    json!({"version": version, "chartVersion": chart})
}

pub struct Fixture {
    pub env: &'static TestEnv,
    pub cp: Cluster,
    /// This test's workload cluster, if it asked for one.
    pub workload: Option<Cluster>,
    /// Onboarding namespace of this test's service objects.
    pub ns: String,
    /// The provider's pod namespace (source Secrets, onboarding requests).
    pub pod_ns: String,
    /// `--provider-name`, and the ProviderConfig's name.
    pub provider: String,
    pub platform: Client,
    pub onboarding: Client,
    pub control_plane: Client,
    pub metrics: Arc<Metrics>,
    pub openmcp: OpenMcpSimulator,
    pub flux: FluxSimulator,
    operator: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

pub struct Options {
    /// Instance names whose ControlPlanes (all on this test's ControlPlane
    /// cluster) are registered with the openmcp simulator.
    pub instances: Vec<String>,
    /// Flux marks objects Ready by itself.
    pub flux_ready: bool,
    /// Start a workload cluster that openmcp grants to `workload` requests.
    pub workload: bool,
}

/// Where a [`Fixture`] runs and what it is called; every field defaults to
/// the usual (the shared environment, unique names).
#[derive(Default)]
pub struct Setup {
    /// The clusters (default: [`envtest::shared`]).
    pub env: Option<&'static TestEnv>,
    /// The provider's pod namespace (created if missing).
    pub pod_namespace: Option<String>,
    /// `--provider-name`.
    pub provider: Option<String>,
    /// The kubeconfig the openmcp simulator hands out for the onboarding
    /// cluster (default: its admin kubeconfig), e.g. a revocable token.
    pub onboarding_kubeconfig: Option<String>,
}

impl Fixture {
    pub async fn new(options: Options) -> Fixture {
        Fixture::new_with(options, Setup::default()).await
    }

    pub async fn new_with(options: Options, setup: Setup) -> Fixture {
        let env = match setup.env {
            Some(env) => env,
            None => envtest::shared().await.expect("test environment"),
        };
        let (cp, rgd_crds) = tokio::join!(
            Cluster::start(ClusterOptions::new("cp")),
            tokio::task::spawn_blocking(|| crds::crds_for(Purpose::ControlPlane))
        );
        let cp = cp.expect("ControlPlane cluster");
        let control_plane = cp.client().await.expect("client");
        crds::install(&control_plane, &rgd_crds.unwrap().expect("RGD CRD"), WAIT).await.expect("RGD CRD installed");

        let workload = match options.workload {
            true => Some(Cluster::start(ClusterOptions::new("wl")).await.expect("workload cluster")),
            false => None,
        };
        let ns = unique("tenant");
        let pod_ns = setup.pod_namespace.unwrap_or_else(|| unique("provider"));
        let provider = setup.provider.unwrap_or_else(|| unique("kro"));
        let platform = env.platform.client().await.expect("client");
        let onboarding = env.onboarding.client().await.expect("client");
        for (client, name) in [(&onboarding, &ns), (&platform, &pod_ns)] {
            let namespace = Namespace {
                metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                ..Default::default()
            };
            match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await {
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                other => drop(other.expect("namespace")),
            }
        }
        let onboarding_target = TargetCluster {
            name: env.onboarding.name().to_string(),
            kubeconfig: setup.onboarding_kubeconfig.unwrap_or_else(|| env.onboarding.kubeconfig_yaml().to_string()),
        };
        let openmcp = OpenMcpSimulator::start_with(
            env.platform.kubeconfig_yaml(),
            onboarding_target,
            SimulatorOptions {
                provider_namespaces: vec![pod_ns.clone()],
                remove_clusteraccess_finalizer: false,
                workload: workload.as_ref().map(Into::into),
                ..Default::default()
            },
        );
        let mut tenants = Vec::new();
        for instance in &options.instances {
            tenants.push(openmcp.register_control_plane(instance, &ns, &cp).await.expect("ControlPlane registered"));
        }
        let flux = FluxSimulator::start(
            &env.platform,
            FluxOptions { namespaces: tenants, auto_ready: options.flux_ready, ..Default::default() },
        );
        Fixture {
            env,
            cp,
            workload,
            ns,
            pod_ns,
            provider,
            platform,
            onboarding,
            control_plane,
            metrics: Metrics::new(),
            openmcp,
            flux,
            operator: None,
        }
    }

    pub fn settings(&self) -> Settings {
        Settings {
            provider_name: self.provider.clone(),
            pod_namespace: self.pod_ns.clone(),
            pod_name: Some(format!("{}-pod", self.provider)),
            environment: "test".into(),
            onboarding_kubeconfig: None,
            onboarding_timeout: WAIT,
            watch_namespace: Some(self.ns.clone()),
        }
    }

    /// The reconcile context, with the onboarding cluster reached directly.
    /// Its clients count their requests in [`Self::metrics`]; the test's own
    /// clients (`platform`, `onboarding`) do not.
    pub async fn context(&self) -> Arc<Context> {
        self.context_with(plugin()).await
    }

    /// Like [`Self::context`], with another plugin.
    pub async fn context_with(&self, plugin: Plugin) -> Arc<Context> {
        let counted = |cluster: &Cluster, which| {
            let metrics = self.metrics.clone();
            let yaml = cluster.kubeconfig_yaml().to_string();
            async move { clusters::client_from_kubeconfig(&yaml, which, &metrics).await.expect("client") }
        };
        let platform = counted(&self.env.platform, contract::Cluster::Platform).await;
        let onboarding = counted(&self.env.onboarding, contract::Cluster::Onboarding).await;
        Arc::new(operator::context(planner(plugin), &self.settings(), platform, onboarding, self.metrics.clone()))
    }

    /// Runs the controller until [`Self::stop_operator`] (or the test ends).
    pub async fn start_operator(&mut self) {
        self.start_operator_with(plugin()).await;
    }

    pub async fn start_operator_with(&mut self, plugin: Plugin) {
        let ctx = self.context_with(plugin).await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(service_provider_host::watch::run(ctx, async move {
            let _ = stopped.await;
        }));
        self.operator = Some((stop, task));
    }

    /// Whether the controller started by [`Self::start_operator`] still runs
    /// (it never ends on its own: a plugin must not be able to stop it).
    pub fn operator_running(&self) -> bool {
        self.operator.as_ref().is_some_and(|(_, task)| !task.is_finished())
    }

    pub async fn stop_operator(&mut self) {
        if let Some((stop, task)) = self.operator.take() {
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        }
    }

    pub fn tenant(&self, instance: &str) -> String {
        names::tenant_namespace(instance, &self.ns).unwrap()
    }

    pub fn kroes(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.onboarding.clone(), &self.ns, &kro_resource())
    }

    pub fn provider_configs(&self) -> Api<DynamicObject> {
        Api::all_with(self.platform.clone(), &provider_config_resource())
    }

    pub fn flux_objects(&self, kind: &str, instance: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.platform.clone(), &self.tenant(instance), &flux_resource(kind))
    }

    pub fn access_requests(&self, instance: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.platform.clone(), &self.tenant(instance), &access_request_resource())
    }

    /// Creates or replaces the ProviderConfig with these versions.
    pub async fn provider_config(&self, versions: Value) {
        self.provider_config_with(json!({"pollInterval": "1m", "versions": versions}), None).await;
    }

    pub async fn provider_config_with(&self, spec: Value, annotations: Option<Value>) {
        let mut pc = json!({
            "apiVersion": format!("{GROUP}/v1alpha1"),
            "kind": "ProviderConfig",
            "metadata": {"name": self.provider},
            "spec": spec,
        });
        if let Some(a) = annotations {
            pc["metadata"]["annotations"] = a;
        }
        self.provider_configs()
            .patch(&self.provider, &PatchParams::apply("e2e-test").force(), &Patch::Apply(&pc))
            .await
            .expect("ProviderConfig applied");
    }

    pub async fn create_kro(&self, name: &str, version: &str) {
        let kro: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1alpha1"),
            "kind": "Kro",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"version": version},
        }))
        .unwrap();
        self.kroes().create(&PostParams::default(), &kro).await.expect("Kro created");
    }

    pub async fn patch_kro(&self, name: &str, patch: Value) {
        self.kroes().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("Kro patched");
    }

    pub async fn kro(&self, name: &str) -> Option<Value> {
        self.kroes().get_opt(name).await.expect("read Kro").map(|k| serde_json::to_value(k).unwrap())
    }

    /// Waits until the Kro's status satisfies `check`; returns the object.
    pub async fn wait_kro(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(&format!("{name}: {what}"), WAIT, || async { self.kro(name).await.filter(|k| check(k)) }).await
    }

    pub async fn wait_ready(&self, name: &str) -> Value {
        self.wait_kro(name, "phase Ready", |k| k["status"]["phase"] == "Ready").await
    }

    pub async fn wait_gone(&self, name: &str) {
        let deadline = Instant::now() + WAIT;
        while let Some(kro) = self.kro(name).await {
            assert!(Instant::now() < deadline, "timed out waiting for {name} to be deleted; it is now: {kro:#}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn delete_kro(&self, name: &str) {
        self.kroes().delete(name, &Default::default()).await.expect("Kro deletion accepted");
    }

    /// A Secret in the provider's pod namespace.
    pub async fn source_secret(&self, name: &str, type_: &str, value: &str) {
        let key = if type_ == "kubernetes.io/dockerconfigjson" { ".dockerconfigjson" } else { "token" };
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(self.pod_ns.clone()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some([(key.to_string(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.platform.clone(), &self.pod_ns)
            .patch(name, &PatchParams::apply("e2e-test").force(), &Patch::Apply(&secret))
            .await
            .expect("source Secret applied");
    }

    /// Events recorded for the Kro `name`.
    pub async fn events(&self, name: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.onboarding.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect()
    }

    pub async fn wait_event(&self, name: &str, type_: &str, reason: &str) -> Event {
        eventually(&format!("{type_} Event {reason} on {name}"), WAIT, || async {
            self.events(name)
                .await
                .into_iter()
                .find(|e| e.type_.as_deref() == Some(type_) && e.reason.as_deref() == Some(reason))
        })
        .await
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some((stop, task)) = self.operator.take() {
            let _ = stop.send(());
            task.abort();
        }
    }
}

/// The Ready condition of a status.
pub fn ready(kro: &Value) -> &Value {
    kro["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready")).unwrap_or(&Value::Null)
}
