//! The Flux floor: conditions on the fields of Flux objects that every
//! write is held to, whatever the grant says (a grant `plugin grant`
//! printed has no field rules at all).
//!
//! A Flux object in a tenant namespace is acted on by a Flux controller
//! with the controller's own rights on the platform cluster. Each rule
//! names what it keeps from a plugin:
//!
//! - `flux-acts-on-the-instance`: a HelmRelease or Kustomization without
//!   the `kubeConfig` the host obtained for the instance would install into
//!   the platform cluster itself (or another cluster whose kubeconfig sits
//!   in the namespace), or impersonate a ServiceAccount there;
//! - `flux-no-platform-identity`: a source's cloud `provider` or
//!   `serviceAccountName` lends it the controller's cloud identity or a
//!   ServiceAccount's pull secrets;
//! - `flux-no-platform-credentials`: a `secretRef` to a Secret the plan did
//!   not copy (the AccessRequest's kubeconfig, another provider's) sends it
//!   to a URL the plugin chose;
//! - `flux-no-platform-data`: `valuesFrom`, `postBuild.substituteFrom` and
//!   `decryption` carry the platform's Secrets to the tenant's cluster;
//! - `flux-own-sources`: a chart or source reference to another provider's
//!   source pulls with its credentials;
//! - `flux-bounded-work`: a HelmRelease's remediation `retries` (a negative
//!   number retries for ever, each attempt an install or upgrade that holds
//!   one of helm-controller's workers) and `maxHistory` (0 keeps every
//!   release Secret on the tenant's cluster) are bounded.
//!
//! The built-in grant has the same conditions and more (`default.yaml`);
//! this is the part no grant may leave out.

use std::sync::LazyLock;

use super::FieldRule;

/// A group of conditions with the name every refusal of it carries.
pub(super) struct Floor {
    pub rule: &'static str,
    pub group: &'static str,
    /// `*`: every kind of the group.
    pub kinds: &'static [&'static str],
    pub fields: Vec<FieldRule>,
}

fn must_be(path: &str, one_of: &[&str], required: bool) -> FieldRule {
    FieldRule {
        path: path.into(),
        required,
        one_of: one_of.iter().map(|v| v.to_string()).collect(),
        ..FieldRule::default()
    }
}

fn absent(path: &str) -> FieldRule {
    FieldRule { path: path.into(), absent: true, ..FieldRule::default() }
}

/// An integer field, if present, within `least..=most`.
fn within(path: &str, least: i64, most: i64) -> FieldRule {
    FieldRule {
        path: path.into(),
        at_least: Some(least.to_string()),
        at_most: Some(most.to_string()),
        ..FieldRule::default()
    }
}

fn planned(path: &str) -> FieldRule {
    FieldRule { path: path.into(), planned: true, ..FieldRule::default() }
}

/// A Secret the object names must be one the same plan copies there.
fn copied(path: &str) -> FieldRule {
    must_be(path, &["{secretCopies}"], false)
}

/// The most remediation retries of a HelmRelease's install or upgrade.
pub const MAX_HELM_RETRIES: i64 = 5;
/// The most Helm release revisions a HelmRelease keeps (Helm's default is 10, Flux's 5).
pub const MAX_HELM_HISTORY: i64 = 10;

const HELM: &str = "helm.toolkit.fluxcd.io";
const KUSTOMIZE: &str = "kustomize.toolkit.fluxcd.io";
const SOURCE: &str = "source.toolkit.fluxcd.io";
const IMAGE: &str = "image.toolkit.fluxcd.io";

static FLOOR: LazyLock<Vec<Floor>> = LazyLock::new(|| {
    let applier = || {
        vec![
            must_be("/spec/kubeConfig/secretRef/name", &["{controlPlaneSecret}", "{workloadSecret}"], true),
            absent("/spec/kubeConfig/configMapRef"),
            absent("/spec/serviceAccountName"),
        ]
    };
    let identity = || vec![must_be("/spec/provider", &["generic"], false), absent("/spec/serviceAccountName")];
    let credentials = || {
        ["/spec/secretRef/name", "/spec/certSecretRef/name", "/spec/proxySecretRef/name", "/spec/verify/secretRef/name"]
            .into_iter()
            .map(copied)
            .collect()
    };
    let floor = |rule, group, kinds, fields| Floor { rule, group, kinds, fields };
    vec![
        floor("flux-acts-on-the-instance", HELM, &["HelmRelease"], applier()),
        floor("flux-acts-on-the-instance", KUSTOMIZE, &["Kustomization"], applier()),
        floor("flux-no-platform-identity", SOURCE, &["*"], identity()),
        floor("flux-no-platform-identity", IMAGE, &["*"], identity()),
        floor("flux-no-platform-credentials", SOURCE, &["*"], credentials()),
        floor("flux-no-platform-credentials", IMAGE, &["*"], credentials()),
        floor(
            "flux-no-platform-credentials",
            HELM,
            &["HelmRelease"],
            vec![copied("/spec/chart/spec/verify/secretRef/name")],
        ),
        floor("flux-no-platform-data", HELM, &["HelmRelease"], vec![absent("/spec/valuesFrom")]),
        floor(
            "flux-no-platform-data",
            KUSTOMIZE,
            &["Kustomization"],
            vec![absent("/spec/postBuild/substituteFrom"), absent("/spec/decryption")],
        ),
        floor(
            "flux-own-sources",
            HELM,
            &["HelmRelease"],
            vec![planned("/spec/chartRef"), planned("/spec/chart/spec/sourceRef")],
        ),
        floor("flux-own-sources", KUSTOMIZE, &["Kustomization"], vec![planned("/spec/sourceRef")]),
        floor("flux-own-sources", SOURCE, &["HelmChart"], vec![planned("/spec/sourceRef")]),
        floor(
            "flux-bounded-work",
            HELM,
            &["HelmRelease"],
            vec![
                within("/spec/install/remediation/retries", 0, MAX_HELM_RETRIES),
                within("/spec/upgrade/remediation/retries", 0, MAX_HELM_RETRIES),
                within("/spec/maxHistory", 1, MAX_HELM_HISTORY),
            ],
        ),
    ]
});

/// The conditions an object of `group` and `kind` is held to, each with its
/// rule's name.
pub(super) fn conditions(group: &str, kind: &str) -> impl Iterator<Item = (&'static str, &'static FieldRule)> {
    FLOOR
        .iter()
        .filter(move |f| f.group == group && f.kinds.iter().any(|k| *k == "*" || *k == kind))
        .flat_map(|f| f.fields.iter().map(move |field| (f.rule, field)))
}
