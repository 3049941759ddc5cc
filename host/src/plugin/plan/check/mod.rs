//! Holding a plan to the plugin's word and the operator's grant: every
//! object the plugin asks the host to write or delete must be well formed
//! ([`super::validate`]), on a cluster the instance reaches, requested in
//! the plugin's `describe()` and allowed by its grant ([`crate::plugin::grant`]).
//! One refusal fails the whole reconcile before anything is written.

use service_provider_sdk::contract::{
    Blocked, Capability, Cluster, Context, CopyKind, Descriptor, NamespaceScope, ObjectCopy, ObjectRef, Plan, Teardown,
};

use super::scope::{reachable, scope_namespace};
use super::{Manifest, report, validate};
use crate::plugin::Error;
use crate::plugin::grant::hard::{self, Target};
use crate::plugin::grant::{Denial, Effective, check::Facts, check::Sibling};
use crate::syntax;

fn describe(t: &Target) -> String {
    match t.namespace {
        Some(ns) => format!("{} {ns}/{} on the {} cluster", t.kind, t.name, t.cluster),
        None => format!("{} {} on the {} cluster", t.kind, t.name, t.cluster),
    }
}

/// The capability the plugin requested that covers the target, if any.
fn requested<'d>(descriptor: &'d Descriptor, context: &Context, t: &Target) -> Option<&'d Capability> {
    descriptor.capabilities.iter().find(|c| {
        c.cluster == t.cluster
            && c.api.group == t.group
            && c.api.kind == t.kind
            && (scope_namespace(&c.scope, context) == t.namespace
                || (c.scope == NamespaceScope::Any && t.namespace.is_some()))
            && (c.names.is_empty() || c.names.iter().any(|n| n == t.name))
    })
}

fn not_requested(what: &str) -> Error {
    Error::Denied(Denial::new("not-requested", what, "the plugin did not request it in describe()"))
}

/// Checks a deletion: a deletion on a cluster the instance no longer
/// reaches is skipped by the host, so it needs no access, but it must be
/// requested and granted like a write.
pub fn check_ref(descriptor: &Descriptor, granted: &Effective, context: &Context, r: &ObjectRef) -> Result<(), Error> {
    ref_syntax(descriptor, r)?;
    let target = Target {
        cluster: r.cluster,
        group: syntax::group_of(&r.api_version),
        kind: &r.kind,
        namespace: r.namespace.as_deref(),
        name: &r.name,
    };
    let what = format!("deleting {}", describe(&target));
    granted.check_always_refused(context, &target, &what)?;
    let capability = requested(descriptor, context, &target).ok_or_else(|| not_requested(&what))?;
    if r.plural != capability.api.plural {
        let reason =
            format!("plural {:?} is not {:?}, the plural of the kind it names", r.plural, capability.api.plural);
        return Err(Error::Denied(Denial::new("plural-of-kind", what, reason)));
    }
    granted.check_write(&Facts { context, siblings: &[], provider_config: None }, &target, None, &what)?;
    Ok(())
}

/// Every string of a reference that becomes part of a request path.
fn ref_syntax(descriptor: &Descriptor, r: &ObjectRef) -> Result<(), Error> {
    let bad = |field: &str, value: &str| {
        invalid(descriptor, format!("a deletion names {field} {value:?}, which is not valid in Kubernetes"))
    };
    if !syntax::api_version(&r.api_version) {
        return Err(bad("apiVersion", &r.api_version));
    }
    if !syntax::kind(&r.kind) {
        return Err(bad("kind", &r.kind));
    }
    if !syntax::plural(&r.plural) {
        return Err(bad("plural", &r.plural));
    }
    if let Some(ns) = r.namespace.as_deref().filter(|ns| !syntax::dns_label(ns)) {
        return Err(bad("namespace", ns));
    }
    if !syntax::dns_subdomain(&r.name) {
        return Err(bad("name", &r.name));
    }
    Ok(())
}

/// Checks a teardown: every deletion requested and granted, copies are v1
/// Secrets in places copies may go.
pub fn check_teardown(
    descriptor: &Descriptor,
    granted: &Effective,
    context: &Context,
    teardown: &Teardown,
) -> Result<(), Error> {
    if let Some(resources) = &teardown.resources {
        report::resources(resources).map_err(|reason| invalid(descriptor, reason))?;
    }
    for r in &teardown.objects {
        check_ref(descriptor, granted, context, r)?;
    }
    for r in &teardown.copies {
        ref_syntax(descriptor, r)?;
        let plural = match r.kind.as_str() {
            "Secret" => "secrets",
            "ConfigMap" => "configmaps",
            _ => "",
        };
        if plural.is_empty() || r.api_version != "v1" || r.plural != plural || r.namespace.is_none() {
            return Err(invalid(descriptor, format!("copy {} {} is not a v1 Secret or ConfigMap", r.kind, r.name)));
        }
        let namespace = r.namespace.as_deref().unwrap_or_default();
        let what = format!("deleting the copy {} {namespace}/{} on the {} cluster", r.kind, r.name, r.cluster);
        granted.check_copy_target(context, r.cluster, namespace, &what)?;
        let target = Target { cluster: r.cluster, group: "", kind: &r.kind, namespace: Some(namespace), name: &r.name };
        requested(descriptor, context, &target).ok_or_else(|| not_requested(&what))?;
    }
    Ok(())
}

/// Checks a blocked cleanup: what it reports of the resources.
pub fn check_blocked(descriptor: &Descriptor, blocked: &Blocked) -> Result<(), Error> {
    match &blocked.resources {
        Some(resources) => report::resources(resources).map_err(|reason| invalid(descriptor, reason)),
        None => Ok(()),
    }
}

fn invalid(descriptor: &Descriptor, reason: String) -> Error {
    Error::InvalidPlan { plugin: descriptor.name.clone(), reason }
}

/// Parses a desired object, checks its shape and pulls out its identity.
pub fn manifest(descriptor: &Descriptor, cluster: Cluster, text: &str) -> Result<Manifest, Error> {
    validate::manifest(cluster, text).map_err(|reason| invalid(descriptor, reason))
}

/// The most bytes of desired objects one plan may hold, all together.
/// Each is written where every tenant's objects are (a HelmRelease's
/// `values` on the platform cluster's etcd), so a plan may not be a
/// megabyte write that changes on every call; etcd's own limit for one
/// object is 1.5 MiB.
pub const MAX_PLAN_OBJECT_BYTES: usize = 1 << 20;

/// Checks every object and copy of a plan; returns the objects parsed, each
/// with the REST plural of the capability that allows it. The
/// ProviderConfig is what `{providerConfigURLs}` of the grant stands for.
pub fn check_plan(
    descriptor: &Descriptor,
    granted: &Effective,
    context: &Context,
    provider_config: Option<&serde_json::Value>,
    plan: &Plan,
) -> Result<Vec<Manifest>, Error> {
    report::status(&plan.status).map_err(|reason| invalid(descriptor, reason))?;
    let bytes: usize = plan.objects.iter().map(|o| o.manifest.len()).sum();
    if bytes > MAX_PLAN_OBJECT_BYTES {
        return Err(invalid(
            descriptor,
            format!("its objects come to {bytes} bytes, more than the limit of {MAX_PLAN_OBJECT_BYTES} bytes per plan"),
        ));
    }
    let mut manifests =
        plan.objects.iter().map(|o| manifest(descriptor, o.cluster, &o.manifest)).collect::<Result<Vec<_>, _>>()?;
    let objects = manifests.iter().map(|m| Sibling {
        cluster: m.cluster,
        group: m.group().to_string(),
        kind: m.kind.clone(),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        copy: false,
    });
    let copies = plan.copies.iter().map(|c| Sibling {
        cluster: c.target_cluster,
        group: String::new(),
        kind: c.kind().to_string(),
        namespace: Some(c.target_namespace.clone()),
        name: c.target_name.clone(),
        copy: true,
    });
    let siblings: Vec<Sibling> = objects.chain(copies).collect();
    for m in &mut manifests {
        let target = Target {
            cluster: m.cluster,
            group: m.group(),
            kind: &m.kind,
            namespace: m.namespace.as_deref(),
            name: &m.name,
        };
        let what = describe(&target);
        if !reachable(target.cluster, context) {
            let reason = format!("this instance has no access to the {} cluster", target.cluster);
            return Err(Error::Denied(Denial::new("no-access", what, reason)));
        }
        granted.check_always_refused(context, &target, &what)?;
        let capability = requested(descriptor, context, &target).ok_or_else(|| not_requested(&what))?;
        let facts = Facts { context, siblings: &siblings, provider_config };
        granted.check_write(&facts, &target, Some(&m.object), &what)?;
        if m.group() == "apiextensions.k8s.io" && m.kind == "CustomResourceDefinition" {
            let strategy = m.object.pointer("/spec/conversion/strategy").and_then(serde_json::Value::as_str);
            if let Some(refusal) = hard::crd_conversion(strategy) {
                return Err(Error::Denied(Denial::new(refusal.rule, what, refusal.reason)));
            }
        }
        m.plural = capability.api.plural.clone();
    }
    for copy in &plan.copies {
        let what = format!(
            "copy of {} {} to {}/{} on the {} cluster",
            copy.kind(),
            copy.source_name,
            copy.target_namespace,
            copy.target_name,
            copy.target_cluster
        );
        if !syntax::dns_subdomain(&copy.source_name)
            || !syntax::dns_subdomain(&copy.target_name)
            || !syntax::dns_label(&copy.target_namespace)
        {
            return Err(invalid(descriptor, format!("{what}: names are not valid Kubernetes names")));
        }
        if copy.kind == CopyKind::Secret(String::new()) {
            return Err(invalid(descriptor, format!("{what}: a copy must state the Secret type it requires")));
        }
        if !reachable(copy.target_cluster, context) {
            let reason = format!("this instance has no access to the {} cluster", copy.target_cluster);
            return Err(Error::Denied(Denial::new("no-access", what, reason)));
        }
        let target = Target {
            cluster: copy.target_cluster,
            group: "",
            kind: copy.kind(),
            namespace: Some(&copy.target_namespace),
            name: &copy.target_name,
        };
        granted.check_copy_target(context, copy.target_cluster, &copy.target_namespace, &what)?;
        requested(descriptor, context, &target).ok_or_else(|| not_requested(&what))?;
    }
    duplicate_copies(descriptor, &plan.copies)?;
    namespaces(descriptor, &manifests)?;
    Ok(manifests)
}

/// The most Namespaces an instance owns on one cluster: the most one plan
/// may name there, and the most the host creates for an instance over time
/// (it never deletes one: `reconcile::apply::namespaces`).
pub const NAMESPACES_PER_INSTANCE: usize = 8;

/// A plan names at most [`NAMESPACES_PER_INSTANCE`] Namespaces per cluster.
fn namespaces(descriptor: &Descriptor, manifests: &[Manifest]) -> Result<(), Error> {
    for cluster in [Cluster::Onboarding, Cluster::Platform, Cluster::ControlPlane, Cluster::Workload] {
        let count = manifests.iter().filter(|m| m.cluster == cluster && m.is_namespace()).count();
        if count > NAMESPACES_PER_INSTANCE {
            let reason = format!(
                "it names {count} Namespaces on the {cluster} cluster, more than the {NAMESPACES_PER_INSTANCE} an \
                 instance may own there"
            );
            return Err(invalid(descriptor, reason));
        }
    }
    Ok(())
}

/// One source is copied at most once to each cluster: a second copy adds
/// nothing a reader could not get from the first, and a thousand copies
/// of one large source are a thousand writes of it.
fn duplicate_copies(descriptor: &Descriptor, copies: &[ObjectCopy]) -> Result<(), Error> {
    let mut seen = std::collections::BTreeSet::new();
    for copy in copies {
        if !seen.insert((copy.target_cluster, copy.kind(), copy.source_name.as_str())) {
            let reason = format!(
                "{} {} is copied to the {} cluster more than once (again as {}/{}): one copy per source and cluster",
                copy.kind(),
                copy.source_name,
                copy.target_cluster,
                copy.target_namespace,
                copy.target_name
            );
            return Err(invalid(descriptor, reason));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
