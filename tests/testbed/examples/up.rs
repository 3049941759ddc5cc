//! Starts the three-cluster environment with both simulators and keeps it
//! running until Ctrl-C: a local playground (and the base of a demo).
//!
//! ```text
//! eval "$(tests/testbed/scripts/build-bins.sh)"
//! cargo run -p testbed --example up -- [PROVIDER_NAMESPACE] [CONTROLPLANE_NAME CONTROLPLANE_NAMESPACE]
//! ```
//!
//! Prints the kubeconfig path of each cluster; the openmcp simulator grants
//! requests in PROVIDER_NAMESPACE (default `openmcp-system`) and in the
//! tenant namespace of the given ControlPlane (default `default/demo`).

use testbed::{FluxOptions, FluxSimulator, OpenMcpSimulator, SimulatorOptions, TestEnv};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let provider_ns = args.first().cloned().unwrap_or_else(|| "openmcp-system".into());
    let cp_name = args.get(1).cloned().unwrap_or_else(|| "demo".into());
    let cp_namespace = args.get(2).cloned().unwrap_or_else(|| "default".into());

    let env = TestEnv::start().await?;
    eprintln!("clusters ready in {:?}, CRDs in {:?}", env.timings.clusters_ready, env.timings.crds_ready);
    for cluster in [&env.platform, &env.onboarding, &env.control_plane] {
        println!("{}: KUBECONFIG={}", cluster.name(), cluster.kubeconfig_path().display());
    }

    let openmcp = OpenMcpSimulator::start(&env.platform, &env.onboarding, SimulatorOptions::default());
    openmcp.watch_namespace(&provider_ns).await?;
    let tenant = openmcp.register_control_plane(&cp_name, &cp_namespace, &env.control_plane).await?;
    println!("ControlPlane {cp_namespace}/{cp_name}: tenant namespace {tenant}");
    let flux = FluxSimulator::start(&env.platform, FluxOptions { auto_ready: true, ..Default::default() });

    eprintln!("running; Ctrl-C stops everything");
    tokio::signal::ctrl_c().await?;
    flux.stop().await;
    openmcp.stop().await;
    drop(env);
    Ok(())
}
