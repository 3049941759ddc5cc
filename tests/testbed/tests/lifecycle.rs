//! Lifecycle of a standalone cluster: start, measure, tear down without leaks.
//!
//! A separate test binary, so the timing is not skewed by other clusters.

use std::path::Path;

use testbed::{Cluster, ClusterOptions};

fn alive(pid: u32) -> bool {
    // A reaped process has no /proc entry; a zombie would have state Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

#[tokio::test]
async fn a_dropped_cluster_leaves_no_process_and_no_directory() {
    let cluster = Cluster::start(ClusterOptions::new("lifecycle")).await.expect("start cluster");
    let rss = cluster.rss().expect("rss");
    eprintln!(
        "testbed: one cluster ready in {:?}; RSS apiserver {} MiB + etcd {} MiB = {} MiB",
        cluster.startup_duration(),
        rss.apiserver_bytes >> 20,
        rss.etcd_bytes >> 20,
        rss.total_bytes() >> 20
    );
    let client = cluster.client().await.expect("client");
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.git_version, testbed::bins::K8S_VERSION);

    let (api_pid, etcd_pid) = cluster.pids();
    let dir = cluster.dir().to_path_buf();
    assert!(alive(api_pid) && alive(etcd_pid));
    assert!(Path::new(&dir).join("kubeconfig.yaml").is_file());

    drop(cluster);
    assert!(!alive(api_pid), "kube-apiserver {api_pid} still running");
    assert!(!alive(etcd_pid), "etcd {etcd_pid} still running");
    if std::env::var_os(testbed::process::ENV_KEEP_DIRS).is_none() {
        assert!(!dir.exists(), "run directory {} removed", dir.display());
    }
}
