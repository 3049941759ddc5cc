//! Kubeconfigs that come from the cluster are data, never code.
//!
//! A kubeconfig can make its client run a program (`exec`, `auth-provider`)
//! or read files on the host (`tokenFile`, certificate paths). The kubeconfig
//! Secrets the host reads belong to AccessRequests; whoever can write one
//! must not be able to run a command in the host or read its files. So the
//! host keeps only what a connection needs: the server, its CA, and a token
//! or a client certificate, all inline. Everything else is refused with a
//! message that names it.

use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

/// Keeps only inline connection data from the current context of
/// `kubeconfig`, or says which setting the host refuses.
pub fn sanitize(kubeconfig: &Kubeconfig) -> Result<Kubeconfig, String> {
    let current = kubeconfig.current_context.as_deref().ok_or("it has no current-context")?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| format!("its current-context {current:?} does not exist"))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| format!("its cluster {:?} does not exist", context.cluster))?;
    let user_name = context.user.as_deref().ok_or("its current context names no user")?;
    let user = kubeconfig
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.as_ref())
        .ok_or_else(|| format!("its user {user_name:?} does not exist"))?;

    let refuse =
        |what: &str| Err(format!("it uses {what}, which the host never follows in a kubeconfig from the cluster"));
    match cluster {
        Cluster { certificate_authority: Some(_), .. } => return refuse("a certificate-authority file"),
        Cluster { proxy_url: Some(_), .. } => return refuse("a proxy-url"),
        Cluster { insecure_skip_tls_verify: Some(true), .. } => return refuse("insecure-skip-tls-verify"),
        _ => {}
    }
    let server = cluster.server.as_deref().ok_or("its cluster has no server")?;
    if !server.starts_with("https://") {
        return Err(format!("its server {server:?} is not an https:// URL"));
    }
    if user.exec.is_some() {
        return refuse("an exec credential plugin");
    }
    if user.auth_provider.is_some() {
        return refuse("an auth-provider");
    }
    if user.token_file.is_some() {
        return refuse("a tokenFile");
    }
    if user.client_certificate.is_some() || user.client_key.is_some() {
        return refuse("client certificate files");
    }
    if user.username.is_some() || user.password.is_some() {
        return refuse("basic authentication");
    }
    if user.impersonate.is_some() || user.impersonate_groups.is_some() || user.impersonate_uid.is_some() {
        return refuse("impersonation");
    }
    let certificate = user.client_certificate_data.is_some() && user.client_key_data.is_some();
    if user.token.is_none() && !certificate {
        return Err("it has neither a token nor an inline client certificate and key".into());
    }

    const NAME: &str = "sanitized";
    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(Cluster {
                server: Some(server.to_string()),
                certificate_authority_data: cluster.certificate_authority_data.clone(),
                tls_server_name: cluster.tls_server_name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: NAME.into(),
            auth_info: Some(AuthInfo {
                token: user.token.clone(),
                client_certificate_data: user.client_certificate_data.clone(),
                client_key_data: user.client_key_data.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context { cluster: NAME.into(), user: Some(NAME.into()), ..Default::default() }),
            ..Default::default()
        }],
        current_context: Some(NAME.into()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nclusters:\n- name: k\n  cluster:\n{cluster}\nusers:\n- name: u\n  user:\n{user}\n"
        )
    }

    fn check(cluster: &str, user: &str) -> Result<Kubeconfig, String> {
        sanitize(&Kubeconfig::from_yaml(&kubeconfig(cluster, user)).expect("parses"))
    }

    const SERVER: &str =
        "    server: https://127.0.0.1:6443\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";

    #[test]
    fn inline_tokens_and_certificates_are_kept() {
        let kc = check(SERVER, "    token: abc").unwrap();
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some());
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some(CA));
        assert!(check(SERVER, "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5").is_ok());
    }

    #[test]
    fn code_and_files_are_refused_by_name() {
        for (cluster, user, expected) in [
            (
                SERVER,
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [/tmp/pwned]",
                "exec",
            ),
            (SERVER, "    auth-provider:\n      name: gcp", "auth-provider"),
            (SERVER, "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "tokenFile"),
            (SERVER, "    client-certificate: /etc/cert\n    client-key: /etc/key", "client certificate files"),
            (SERVER, "    token: a\n    as: system:admin", "impersonation"),
            (SERVER, "    username: a\n    password: b", "basic authentication"),
            (
                "    server: https://x\n    certificate-authority: /etc/ca.crt",
                "    token: a",
                "certificate-authority file",
            ),
            ("    server: https://x\n    insecure-skip-tls-verify: true", "    token: a", "insecure-skip-tls-verify"),
            ("    server: https://x\n    proxy-url: http://evil:8080", "    token: a", "proxy-url"),
            ("    server: http://x", "    token: a", "not an https:// URL"),
            (SERVER, "    client-certificate-data: Y2VydA==", "neither a token"),
        ] {
            let err = check(cluster, user).unwrap_err();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    #[test]
    fn only_the_current_context_matters_and_it_must_exist() {
        let err = sanitize(&Kubeconfig::default()).unwrap_err();
        assert!(err.contains("current-context"), "{err}");
        let text = kubeconfig(SERVER, "    token: a").replace("current-context: c", "current-context: missing");
        let err = sanitize(&Kubeconfig::from_yaml(&text).unwrap()).unwrap_err();
        assert!(err.contains("\"missing\""), "{err}");
    }
}
