//! Who a plugin is: pinned by the platform operator's grant, never taken
//! from the plugin's word.
//!
//! A plugin's `describe()` names its service kind, its ProviderConfig kind,
//! its finalizer and its CRDs, and the host acts on them: the service
//! group names the AccessRequests (`<group>--<instance>--mcp`) and decides
//! the onboarding RBAC request, the finalizer goes on every service object,
//! the CRDs are force-applied by `init`. Self-declared, these let a plugin
//! that claims Flux's group ship a CRD over Flux's (a conversion webhook
//! would see every tenant's objects), or one that claims another
//! provider's service kind take over that provider's AccessRequests. So
//! the grant pins each of them ([`Identity`]; the built-in grant pins
//! guest-kro's and guest-flux's), and groups that belong to Kubernetes,
//! Flux or openmcp can never be a plugin's own, whatever a grant says.

use serde::Deserialize;
use service_provider_sdk::contract::{ApiKind, Descriptor};

/// A kind by group and name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindRef {
    pub group: String,
    pub kind: String,
}

/// The identity a grant gives one plugin (by its `describe().name`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Identity {
    /// The plugin's name, as its `describe()` says.
    pub plugin: String,
    /// The service kind tenants create on the onboarding cluster.
    pub service: KindRef,
    /// The cluster-scoped ProviderConfig kind on the platform cluster.
    pub provider_config: KindRef,
    /// The finalizer on service objects.
    pub finalizer: String,
    /// The CRDs (`<plural>.<group>`) the plugin may install; each of the
    /// service's or the ProviderConfig's group.
    #[serde(default)]
    pub crds: Vec<String>,
    /// If set, the `sha256:<hex>` digest the component must have: the
    /// identity is then given to exactly these bytes, not to whatever
    /// plugin calls itself by this name.
    #[serde(default)]
    pub digest: Option<String>,
    /// More digests the component may have (each `sha256:<hex>`), e.g. the
    /// builds of one plugin in several languages; with `digest`, the
    /// component must have one of them.
    #[serde(default)]
    pub digests: Vec<String>,
    /// The most this plugin's per-instance tokens may allow, instead of the
    /// grant's `tokenRules` (which then apply to the other plugins only).
    #[serde(default)]
    pub token_rules: Option<super::TokenRules>,
}

/// API groups no plugin may call its own: Kubernetes' (`k8s.io`,
/// `kubernetes.io`, `x-k8s.io` and their subdomains, and the core group),
/// Flux's and openmcp's.
const RESERVED_DOMAINS: &[&str] = &["k8s.io", "kubernetes.io", "x-k8s.io", "fluxcd.io", "openmcp.cloud"];

/// Whether `group` belongs to Kubernetes, Flux or openmcp.
pub fn reserved(group: &str) -> bool {
    !group.contains('.')
        || RESERVED_DOMAINS.iter().any(|d| group == *d || group.strip_suffix(d).is_some_and(|g| g.ends_with('.')))
}

/// The name and group of a CRD manifest (YAML or JSON text); empty when
/// unreadable.
pub fn crd_name_and_group(manifest: &str) -> (String, String) {
    let value = serde_saphyr::from_str::<serde_json::Value>(manifest).unwrap_or_default();
    let text = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    (text("/metadata/name"), text("/spec/group"))
}

impl Identity {
    /// The identity `descriptor` claims: what an operator writes into a
    /// grant to accept a plugin as it describes itself (after reading it).
    pub fn of(descriptor: &Descriptor) -> Identity {
        let kind = |k: &ApiKind| KindRef { group: k.group.clone(), kind: k.kind.clone() };
        Identity {
            plugin: descriptor.name.clone(),
            service: kind(&descriptor.service),
            provider_config: kind(&descriptor.provider_config),
            finalizer: descriptor.finalizer.clone(),
            crds: descriptor.crds.iter().map(|c| crd_name_and_group(&c.manifest).0).collect(),
            digest: None,
            digests: Vec::new(),
            token_rules: None,
        }
    }

    /// Every digest the identity pins (`digest` and `digests`); empty when
    /// it pins none and is given by name.
    pub fn pinned_digests(&self) -> Vec<&str> {
        self.digest.iter().chain(&self.digests).map(String::as_str).collect()
    }

    /// Why a grant's identity is not one any grant may give.
    pub fn invalid(&self) -> Option<String> {
        let hex = |d: &str| d.len() == 64 && d.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if let Some(digest) = self.pinned_digests().into_iter().find(|d| !d.strip_prefix("sha256:").is_some_and(hex)) {
            return Some(format!("digest {digest:?} is not sha256:<64 lower-case hex digits>"));
        }
        for group in [&self.service.group, &self.provider_config.group] {
            if reserved(group) {
                return Some(format!("group {group:?} belongs to Kubernetes, Flux or openmcp"));
            }
        }
        let own = |group: &str| group == self.service.group || group == self.provider_config.group;
        self.crds
            .iter()
            .find(|crd| !crd.split_once('.').is_some_and(|(_, group)| own(group)))
            .map(|crd| format!("CRD {crd} is not of the service's or the ProviderConfig's group"))
    }

    /// Where `descriptor` claims more than, or other than, this identity.
    pub fn mismatches(&self, descriptor: &Descriptor) -> Vec<String> {
        let mut found = Vec::new();
        let kind = |what: &str, pinned: &KindRef, declared: &ApiKind, found: &mut Vec<String>| {
            if pinned.group != declared.group || pinned.kind != declared.kind {
                found.push(format!(
                    "its {what} is {} of {:?}, the grant pins {} of {:?}",
                    declared.kind, declared.group, pinned.kind, pinned.group
                ));
            }
        };
        kind("service kind", &self.service, &descriptor.service, &mut found);
        kind("ProviderConfig kind", &self.provider_config, &descriptor.provider_config, &mut found);
        if descriptor.finalizer != self.finalizer {
            found.push(format!("its finalizer is {:?}, the grant pins {:?}", descriptor.finalizer, self.finalizer));
        }
        for crd in &descriptor.crds {
            let (name, group) = crd_name_and_group(&crd.manifest);
            if !self.crds.contains(&name) || !name.ends_with(&format!(".{group}")) {
                found.push(format!("it brings CRD {name:?} (group {group:?}), which the grant does not list"));
            }
        }
        for group in [&descriptor.service.group, &descriptor.provider_config.group] {
            if reserved(group) {
                found.push(format!("it claims group {group:?}, which belongs to Kubernetes, Flux or openmcp"));
            }
        }
        found.dedup();
        found
    }
}

#[cfg(test)]
mod tests {
    use service_provider_sdk::contract::{Cluster, Crd};

    use super::*;

    fn identity() -> Identity {
        Identity {
            plugin: "kro".into(),
            service: KindRef { group: "kro.example".into(), kind: "Kro".into() },
            provider_config: KindRef { group: "kro.example".into(), kind: "ProviderConfig".into() },
            finalizer: "kro.example/finalizer".into(),
            crds: vec!["kroes.kro.example".into()],
            digest: None,
            digests: Vec::new(),
            token_rules: None,
        }
    }

    fn descriptor() -> Descriptor {
        let crd = "metadata: {name: kroes.kro.example}\nspec: {group: kro.example}\n";
        Descriptor {
            crds: vec![Crd { cluster: Cluster::Onboarding, manifest: crd.into() }],
            ..Descriptor::new(
                "kro",
                ApiKind::new("kro.example", "v1", "Kro", "kroes", true),
                ApiKind::new("kro.example", "v1", "ProviderConfig", "providerconfigs", false),
                "kro.example/finalizer",
            )
        }
    }

    #[test]
    fn reserved_groups_are_kubernetes_flux_and_openmcp() {
        for group in ["", "apps", "rbac.authorization.k8s.io", "source.toolkit.fluxcd.io", "fluxcd.io", "openmcp.cloud"]
        {
            assert!(reserved(group), "{group}");
        }
        for group in ["kro.services.open-control-plane.io", "kro.run", "notk8s.io", "evil.example"] {
            assert!(!reserved(group), "{group}");
        }
    }

    #[test]
    fn a_plugin_is_what_the_grant_pins() {
        assert!(identity().mismatches(&descriptor()).is_empty());
        assert_eq!(identity().invalid(), None);
        let mut impostor = descriptor();
        impostor.provider_config.group = "source.toolkit.fluxcd.io".into();
        impostor.finalizer = "flux.example/finalizer".into();
        impostor.crds[0].manifest =
            "metadata: {name: ocirepositories.source.toolkit.fluxcd.io}\nspec: {group: source.toolkit.fluxcd.io}\n"
                .into();
        let found = identity().mismatches(&impostor).join("\n");
        for expected in [
            "ProviderConfig kind",
            "finalizer",
            "ocirepositories.source.toolkit.fluxcd.io",
            "belongs to Kubernetes, Flux or openmcp",
        ] {
            assert!(found.contains(expected), "{expected} in {found}");
        }
        let mut greedy = identity();
        greedy.provider_config.group = "helm.toolkit.fluxcd.io".into();
        assert!(greedy.invalid().unwrap().contains("helm.toolkit.fluxcd.io"));
        let mut foreign_crd = identity();
        foreign_crd.crds.push("things.evil.example".into());
        assert!(foreign_crd.invalid().unwrap().contains("things.evil.example"));
    }
}
