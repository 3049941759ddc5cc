//! End-to-end fixtures: the host's controller on real API servers.
//!
//! Every test gets its own onboarding namespace, pod namespace, provider
//! name (hence its own ProviderConfig and owner labels) and its own
//! ControlPlane cluster, so tests run in parallel without seeing each other.
//! Platform and onboarding clusters are shared per test binary. The openmcp
//! simulator of `testbed` plays openmcp; Flux is either the simulator
//! ([`Fixture::new`]) or the real controllers ([`Fixture::with_real_flux`],
//! see [`crate::real_flux`]), never both in one test binary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use service_provider_host::clusters;
use service_provider_host::controller::{self, Settings};
use service_provider_host::metrics::Metrics;
use service_provider_host::plugin::sandbox::Plugin;
use service_provider_host::reconcile::Shared;
use service_provider_sdk::{contract, names};
use testbed::crds::{self, Purpose};
use testbed::{
    Cluster, ClusterOptions, DeploymentSimulator, FluxOptions, FluxSimulator, OpenMcpSimulator, RealFlux,
    SimulatorOptions, TargetCluster, TestEnv, eventually,
};

use crate::plugins::{planner, plugin};
use crate::unique;

pub const WAIT: Duration = Duration::from_secs(60);
/// Waits with the real Flux chain: Helm's readiness wait polls in steps of
/// about 5 s, Flux retries with backoff, and the machine may have 2 cores.
pub const REAL_FLUX_WAIT: Duration = Duration::from_secs(180);
pub const GROUP: &str = "kro.services.open-control-plane.io";

/// The service kind a fixture's instances are of.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

impl Service {
    pub const KRO: Service = Service { group: GROUP, kind: "Kro", plural: "kroes" };
    pub const FLUX: Service = Service { group: "flux.services.open-control-plane.io", kind: "Flux", plural: "fluxes" };

    pub fn resource(&self) -> ApiResource {
        service_provider_host::resource::api_resource(&format!("{}/v1alpha1", self.group), self.kind, self.plural)
    }

    pub fn provider_config(&self) -> ApiResource {
        let api_version = format!("{}/v1alpha1", self.group);
        service_provider_host::resource::api_resource(&api_version, "ProviderConfig", "providerconfigs")
    }
}

pub fn kro_resource() -> ApiResource {
    Service::KRO.resource()
}

pub fn provider_config_resource() -> ApiResource {
    Service::KRO.provider_config()
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
    service_provider_host::reconcile::access::access_request_resource()
}

/// A version entry of the ProviderConfig.
pub fn version(version: &str, chart: &str) -> Value {
    json!({"version": version, "chartVersion": chart})
}

pub struct Fixture {
    pub env: &'static TestEnv,
    /// The service kind of this test's instances (Kro unless said otherwise).
    pub service: Service,
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
    pub openmcp: OpenMcp,
    pub flux: Flux,
    /// How long the `wait_*` helpers wait.
    pub wait: Duration,
    operator: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

/// What plays openmcp in a fixture.
pub enum OpenMcp {
    /// The simulator, on this fixture's namespaces, with admin kubeconfigs.
    Simulated(OpenMcpSimulator),
    /// openmcp-operator v1.3.0 and the test cluster provider on clusters of
    /// their own (`testbed::openmcp::shared()`), with RBAC-scoped tokens.
    Real(&'static testbed::openmcp::OpenMcp),
}

impl OpenMcp {
    /// Plays the creation of a ControlPlane (see each implementation).
    pub async fn register_control_plane(
        &self,
        name: &str,
        namespace: &str,
        cluster: &Cluster,
    ) -> testbed::Result<String> {
        match self {
            OpenMcp::Simulated(s) => s.register_control_plane(name, namespace, cluster).await,
            OpenMcp::Real(r) => r.register_control_plane(name, namespace, cluster).await,
        }
    }

    /// Plays the ControlPlane's deletion (only the simulator so far).
    pub async fn unregister_control_plane(&self, name: &str, namespace: &str) -> testbed::Result<()> {
        match self {
            OpenMcp::Simulated(s) => s.unregister_control_plane(name, namespace).await,
            OpenMcp::Real(_) => unimplemented!("deleting a ControlPlane through openmcp"),
        }
    }

    /// What openmcp did, for a failure message.
    pub fn diagnostics(&self) -> String {
        match self {
            OpenMcp::Simulated(s) => format!("openmcp simulator's last error: {:?}", s.last_error()),
            OpenMcp::Real(r) => r.diagnostics(40),
        }
    }
}

/// What plays Flux in a fixture.
pub enum Flux {
    /// The simulator, on this fixture's tenant namespaces.
    Simulated(FluxSimulator),
    /// The real source-controller and helm-controller of this test binary
    /// (`testbed::real_flux::shared()`, on every namespace of the shared
    /// platform), and Deployments in `kro-system` on this fixture's
    /// ControlPlane made Available (no kubelet), so that Helm's wait ends.
    Real { chain: &'static RealFlux, deployments: DeploymentSimulator },
}

#[derive(Debug, Clone, Default)]
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
    /// The clusters (default: [`testbed::shared`]).
    pub env: Option<&'static TestEnv>,
    /// The provider's pod namespace (created if missing).
    pub pod_namespace: Option<String>,
    /// `--provider-name`.
    pub provider: Option<String>,
    /// The kubeconfig the openmcp simulator hands out for the onboarding
    /// cluster (default: its admin kubeconfig), e.g. a revocable token.
    pub onboarding_kubeconfig: Option<String>,
    /// openmcp-operator itself instead of the simulator.
    pub openmcp: Option<&'static testbed::openmcp::OpenMcp>,
    /// The real Flux chain to use (default: the shared one of `env`), e.g.
    /// one with kustomize-controller.
    pub real_flux: Option<&'static testbed::RealFlux>,
}

impl Fixture {
    /// A fixture with the Flux simulator, and kro's RGD CRD on the
    /// ControlPlane (as if kro were installed).
    pub async fn new(options: Options) -> Fixture {
        Fixture::with_service(options, Service::KRO).await
    }

    /// A fixture whose instances are of another service kind.
    pub async fn with_service(options: Options, service: Service) -> Fixture {
        Self::start(options, service, false, Setup::default()).await
    }

    /// Like [`Self::new`], placed and named by `setup`.
    pub async fn new_with(options: Options, setup: Setup) -> Fixture {
        Self::start(options, Service::KRO, false, setup).await
    }

    /// A fixture on openmcp-operator itself (its own clusters, the test
    /// cluster provider granting RBAC-scoped tokens), with the Flux
    /// simulator.
    pub async fn with_openmcp(options: Options) -> Fixture {
        Self::with_openmcp_service(options, Service::KRO).await
    }

    /// Like [`Self::with_openmcp`], for instances of another service kind.
    pub async fn with_openmcp_service(options: Options, service: Service) -> Fixture {
        Self::with_openmcp_setup(options, service, Setup::default()).await
    }

    /// Like [`Self::with_openmcp_service`], placed and named by `setup`
    /// (its `env` and `openmcp` are openmcp-operator's).
    pub async fn with_openmcp_setup(options: Options, service: Service, setup: Setup) -> Fixture {
        let openmcp = testbed::openmcp::shared().await.expect("openmcp-operator");
        let setup = Setup { env: Some(&openmcp.env), openmcp: Some(openmcp), ..setup };
        Self::start(options, service, false, setup).await
    }

    /// A fixture with the real Flux chain: the ControlPlane starts empty
    /// (the Helm install is what puts kro's CRDs there). Only in test
    /// binaries without the simulator: the real controllers act on every
    /// namespace of the shared platform cluster.
    pub async fn with_real_flux(instances: &[&str]) -> Fixture {
        let options = Options { instances: instances.iter().map(|i| i.to_string()).collect(), ..Options::default() };
        Self::start(options, Service::KRO, true, Setup::default()).await
    }

    /// A fixture with the real Flux chain `setup` names, on the
    /// openmcp-operator it names (both `'static`: a test that starts its own
    /// landscape leaks them for the test binary's life).
    pub async fn with_real_flux_setup(instances: &[&str], setup: Setup) -> Fixture {
        let options = Options { instances: instances.iter().map(|i| i.to_string()).collect(), ..Options::default() };
        Self::start(options, Service::KRO, true, setup).await
    }

    /// A fixture with the real Flux chain on openmcp-operator's platform
    /// cluster, with RBAC-scoped tokens: helm-controller installs with the
    /// plugin's token rules. Only in a test binary where no Flux simulator
    /// runs on that platform.
    pub async fn with_real_flux_on_openmcp(instances: &[&str]) -> Fixture {
        let openmcp = testbed::openmcp::shared().await.expect("openmcp-operator");
        let options = Options { instances: instances.iter().map(|i| i.to_string()).collect(), ..Options::default() };
        let setup = Setup { env: Some(&openmcp.env), openmcp: Some(openmcp), ..Setup::default() };
        Self::start(options, Service::KRO, true, setup).await
    }

    async fn start(options: Options, service: Service, real_flux: bool, setup: Setup) -> Fixture {
        // The chain first: it fails fast, before any cluster starts, when the
        // Flux binaries are missing.
        let chain = match (real_flux, setup.openmcp) {
            (true, _) if setup.real_flux.is_some() => setup.real_flux,
            (true, Some(openmcp)) => Some(openmcp.real_flux().await.expect("the real Flux chain on openmcp")),
            (true, None) => Some(testbed::real_flux::shared().await.expect("the real Flux chain")),
            (false, _) => None,
        };
        let env = match setup.env {
            Some(env) => env,
            None => testbed::shared().await.expect("test environment"),
        };
        let (cp, rgd_crds) = tokio::join!(
            Cluster::start(ClusterOptions::new("cp")),
            tokio::task::spawn_blocking(|| crds::crds_for(Purpose::ControlPlane))
        );
        let cp = cp.expect("ControlPlane cluster");
        let control_plane = cp.client().await.expect("client");
        if chain.is_none() {
            crds::install(&control_plane, &rgd_crds.unwrap().expect("RGD CRD"), WAIT).await.expect("RGD CRD installed");
        }

        let workload = match options.workload {
            true => Some(Cluster::start(ClusterOptions::new("wl")).await.expect("workload cluster")),
            false => None,
        };
        let ns = unique("tenant");
        let pod_ns = setup.pod_namespace.unwrap_or_else(|| unique("provider"));
        let provider = setup.provider.unwrap_or_else(|| unique("kro"));
        let metrics = Metrics::new(&provider);
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
        let openmcp = match setup.openmcp {
            Some(real) => {
                if let Some(workload) = &workload {
                    for instance in &options.instances {
                        let tenant = names::tenant_namespace(instance, &ns).expect("tenant namespace");
                        real.register_workload(&tenant, workload);
                    }
                }
                OpenMcp::Real(real)
            }
            None => OpenMcp::Simulated(OpenMcpSimulator::start_with(
                env.platform.kubeconfig_yaml(),
                onboarding_target,
                SimulatorOptions {
                    provider_namespaces: vec![pod_ns.clone()],
                    remove_clusteraccess_finalizer: false,
                    workload: workload.as_ref().map(Into::into),
                    ..Default::default()
                },
            )),
        };
        let mut tenants = Vec::new();
        for instance in &options.instances {
            tenants.push(openmcp.register_control_plane(instance, &ns, &cp).await.expect("ControlPlane registered"));
        }
        let (flux, wait) = match chain {
            Some(chain) => {
                let deployments = DeploymentSimulator::start(&cp, &[crate::real_flux::KRO_SYSTEM]);
                (Flux::Real { chain, deployments }, REAL_FLUX_WAIT)
            }
            None => {
                let options = FluxOptions { namespaces: tenants, auto_ready: options.flux_ready, ..Default::default() };
                (Flux::Simulated(FluxSimulator::start(&env.platform, options)), WAIT)
            }
        };
        Fixture {
            env,
            service,
            cp,
            workload,
            ns,
            pod_ns,
            provider,
            platform,
            onboarding,
            control_plane,
            metrics,
            openmcp,
            flux,
            wait,
            operator: None,
        }
    }

    pub fn settings(&self) -> Settings {
        Settings {
            adoption: Default::default(),
            provider_name: self.provider.clone(),
            pod_namespace: self.pod_ns.clone(),
            pod_name: Some(format!("{}-pod", self.provider)),
            environment: "test".into(),
            onboarding_kubeconfig: None,
            onboarding_timeout: WAIT,
            watch_namespace: Some(self.ns.clone()),
            unreachable_grace: service_provider_host::reconcile::shared::UNREACHABLE_GRACE,
            writes: Default::default(),
            host_writes: service_provider_host::reconcile::budget::HOST,
        }
    }

    /// What every reconcile shares, with the onboarding cluster reached
    /// directly.
    /// Its clients count their requests in [`Self::metrics`]; the test's own
    /// clients (`platform`, `onboarding`) do not.
    pub async fn context(&self) -> Arc<Shared> {
        self.context_with(plugin()).await
    }

    /// Like [`Self::context`], with another plugin.
    pub async fn context_with(&self, plugin: Plugin) -> Arc<Shared> {
        Arc::new(self.context_tuned(plugin, |_| {}).await)
    }

    /// Like [`Self::context_with`], with [`Self::settings`] changed by
    /// `tune` (e.g. shorter waits, `--adopt-from`).
    pub async fn context_tuned(&self, plugin: Plugin, tune: impl FnOnce(&mut Settings)) -> Shared {
        self.context_for(planner(plugin), tune).await
    }

    /// Like [`Self::context_tuned`], with a plugin granted as `planner` says
    /// (e.g. under a narrower grant than the built-in one), or with the
    /// components beside it during an upgrade ([`controller::Plugins`]).
    pub async fn context_for(
        &self,
        plugins: impl Into<controller::Plugins>,
        tune: impl FnOnce(&mut Settings),
    ) -> Shared {
        let counted = |cluster: &Cluster, which| {
            let metrics = self.metrics.clone();
            let yaml = cluster.kubeconfig_yaml().to_string();
            async move { clusters::client_from_kubeconfig(&yaml, which, &metrics).await.expect("client") }
        };
        let platform = counted(&self.env.platform, contract::Cluster::Platform).await;
        let onboarding = counted(&self.env.onboarding, contract::Cluster::Onboarding).await;
        let mut settings = self.settings();
        tune(&mut settings);
        controller::shared(plugins, &settings, controller::Reached::new(platform, onboarding), self.metrics.clone())
    }

    /// Runs the controller until [`Self::stop_operator`] (or the test ends).
    pub async fn start_operator(&mut self) {
        self.start_operator_with(plugin()).await;
    }

    pub async fn start_operator_with(&mut self, plugin: Plugin) {
        let ctx = self.context_with(plugin).await;
        self.start_operator_on(ctx);
    }

    /// Runs the controller with this context.
    pub fn start_operator_on(&mut self, ctx: Arc<Shared>) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(service_provider_host::controller::watch::run(ctx, async move {
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

    /// The service objects in this test's onboarding namespace.
    pub fn instances(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.onboarding.clone(), &self.ns, &self.service.resource())
    }

    pub fn kroes(&self) -> Api<DynamicObject> {
        self.instances()
    }

    pub fn provider_configs(&self) -> Api<DynamicObject> {
        Api::all_with(self.platform.clone(), &self.service.provider_config())
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
            "apiVersion": format!("{}/v1alpha1", self.service.group),
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

    /// Creates a service object of the fixture's kind with `spec.version`.
    pub async fn create_instance(&self, name: &str, version: &str) {
        self.create_kro(name, version).await
    }

    /// The service object `name`, if it exists.
    pub async fn instance(&self, name: &str) -> Option<Value> {
        self.kro(name).await
    }

    /// Waits until the service object satisfies `check`; returns it.
    pub async fn wait_instance(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        self.wait_kro(name, what, check).await
    }

    pub async fn patch_instance(&self, name: &str, patch: Value) {
        self.patch_kro(name, patch).await
    }

    pub async fn delete_instance(&self, name: &str) {
        self.delete_kro(name).await
    }

    /// Creates a service object of the fixture's kind (a `Kro` by default).
    pub async fn create_kro(&self, name: &str, version: &str) {
        let kro: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1alpha1", self.service.group),
            "kind": self.service.kind,
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
    /// On timeout the panic shows the Kro as it was last seen (and, with the
    /// real Flux chain, the controllers' logs).
    pub async fn wait_kro(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + self.wait;
        loop {
            let kro = self.kro(name).await;
            if let Some(kro) = kro.as_ref().filter(|k| check(k)) {
                return kro.clone();
            }
            if Instant::now() > deadline {
                let status = kro.map(|k| k["status"].clone());
                panic!(
                    "timed out after {:?} waiting for {name}: {what}; its status is now: {status:#?}{}",
                    self.wait,
                    self.flux_logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The real Flux controllers' last log lines (empty with the simulator),
    /// for assertion messages.
    pub fn flux_logs(&self) -> String {
        match &self.flux {
            Flux::Real { chain, .. } => format!("\n{}", chain.log_tails(30)),
            Flux::Simulated(_) => String::new(),
        }
    }

    pub async fn wait_ready(&self, name: &str) -> Value {
        self.wait_kro(name, "phase Ready", |k| k["status"]["phase"] == "Ready").await
    }

    pub async fn wait_gone(&self, name: &str) {
        let deadline = Instant::now() + self.wait;
        while let Some(kro) = self.kro(name).await {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {name} to be deleted; it is now: {kro:#}{}",
                self.flux_logs()
            );
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
        eventually(&format!("{type_} Event {reason} on {name}"), self.wait, || async {
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
