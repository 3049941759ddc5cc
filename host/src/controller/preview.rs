//! `diff`: the fleet preview of a plugin upgrade. Every service object (or
//! those a label selector picks) goes through the preview path
//! ([`crate::reconcile::preview`]) with the current component and the
//! candidate, a bounded number at once, and the answers are summed up:
//! the grant delta first, then how many instances are unchanged, changed,
//! newly refused, then each instance.
//!
//! Every client it builds refuses writes ([`crate::clusters::Writes`]): a
//! preview reads (and dry-runs applies) only.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::Value;
use service_provider_sdk::contract::Cluster;

use super::{Reached, Settings, shared};
use crate::clusters::{self, Writes, kinds};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::plugin::grant::delta::{self, Delta};
use crate::plugin::plan::Planner;
use crate::reconcile::access;
use crate::reconcile::apply::dry_run::{Compared, Forbidden};
use crate::reconcile::preview::{self, Fleet, InstancePreview, Verdict};
use crate::reconcile::read_provider_config;
use crate::reconcile::shared::Loaded;
pub use crate::resource::LIST_PAGE;

/// How many instances are previewed at once: as many as the controller
/// reconciles at once, so that a preview loads the API servers no more than
/// a reconcile round.
pub const CONCURRENCY: usize = 8;

/// What to preview.
pub struct PreviewOptions {
    /// Only service objects with these labels (a label selector).
    pub selector: Option<String>,
    /// Instances previewed at once.
    pub concurrency: usize,
    /// A ProviderConfig for the candidate to plan with instead of the live
    /// one (to preview a change of it).
    pub candidate_provider_config: Option<Value>,
    /// Service objects listed (and held) at once.
    pub page: u32,
    /// Reach each instance's ControlPlane (and workload cluster) with the
    /// access `run` was granted, to compare the objects there with what is
    /// live. That reads every tenant's kubeconfig Secret: only with the
    /// host's own identity. Without it, those objects are compared with
    /// the current component's plan.
    pub tenant_clusters: bool,
}

/// One component, as the preview names it.
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub name: String,
    pub digest: String,
}

impl Component {
    fn of(planner: &Planner) -> Self {
        Component { name: planner.plugin.name().to_string(), digest: planner.plugin.digest().to_string() }
    }
}

/// How many instances came to each verdict.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub instances: usize,
    pub unchanged: usize,
    pub changed: usize,
    pub newly_refused: usize,
    pub no_longer_refused: usize,
    pub skipped: usize,
    pub failed: usize,
}

/// The fleet preview.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetPreview {
    pub current: Component,
    pub candidate: Component,
    /// What the candidate asks for beyond the current component, and what
    /// its grant does not give.
    pub grant: Delta,
    /// Whether the tenants' clusters were reached (`--tenant-clusters`);
    /// if not, the objects there were compared with the current plan.
    pub tenant_clusters: bool,
    pub counts: Counts,
    pub instances: Vec<InstancePreview>,
}

impl FleetPreview {
    /// Whether switching would change anything at all.
    pub fn changes(&self) -> bool {
        let c = &self.counts;
        !self.grant.is_empty() || c.changed + c.newly_refused + c.no_longer_refused > 0
    }

    /// Whether some instance could not be previewed.
    pub fn incomplete(&self) -> bool {
        self.counts.failed > 0
    }
}

/// Previews `candidate` against `current` on every service object;
/// `progress` is told after each instance (done, of how many).
pub async fn preview(
    current: Planner,
    candidate: Planner,
    settings: &Settings,
    platform: Client,
    metrics: Arc<Metrics>,
    options: &PreviewOptions,
    progress: impl Fn(usize, usize),
) -> Result<FleetPreview, Error> {
    let settings = Settings { writes: Writes::Refused, ..settings.clone() };
    let grant = delta::between(current.descriptor(), candidate.descriptor(), &candidate.granted);
    let (current_component, candidate_component) = (Component::of(&current), Component::of(&candidate));
    let onboarding = onboarding(&platform, &settings, &current, &metrics).await?;
    // Both components' kinds against discovery, as `run` checks them at
    // start: a plural that belongs to another kind is refused.
    let current_versions = kinds::check(current.descriptor(), &platform, &onboarding).await?;
    let candidate_versions = kinds::check(candidate.descriptor(), &platform, &onboarding).await?;
    let candidate = Loaded::new(candidate, candidate_versions);
    let reached = Reached { platform_versions: current_versions, ..Reached::new(platform, onboarding) };
    let ctx = shared(current, &settings, reached, metrics);
    let provider_config = read_provider_config(&ctx).await?;
    let forbidden = Forbidden::default();
    let fleet = Fleet {
        current: provider_config.as_ref(),
        candidate: options.candidate_provider_config.as_ref().or(provider_config.as_ref()),
        forbidden: &forbidden,
        tenant_clusters: options.tenant_clusters,
    };
    // A page of service objects at a time, each previewed as soon as it is
    // listed: memory follows the page, not the fleet.
    let pages =
        ServiceObjects::new(&ctx.clusters.onboarding, &ctx.plugin, settings.watch_namespace.as_deref(), options);
    let mut instances: Vec<InstancePreview> = Vec::new();
    let mut pages = std::pin::pin!(pages.stream());
    while let Some(page) = pages.next().await {
        let Page { objects, remaining } = page?;
        let (before, mut done) = (instances.len(), instances.len());
        let previewed: Vec<InstancePreview> = futures::stream::iter(&objects)
            .map(|object| preview::preview(&ctx, &candidate, object, &fleet))
            .buffer_unordered(options.concurrency.max(1))
            .inspect(|_| {
                done += 1;
                progress(done, before + objects.len() + remaining);
            })
            .collect()
            .await;
        instances.extend(previewed);
    }
    let total = instances.len();
    instances.sort_by(|a, b| (a.verdict, &a.instance).cmp(&(b.verdict, &b.instance)));
    let mut counts = Counts { instances: total, ..Counts::default() };
    for i in &instances {
        *match i.verdict {
            Verdict::Unchanged => &mut counts.unchanged,
            Verdict::Changed => &mut counts.changed,
            Verdict::NewlyRefused => &mut counts.newly_refused,
            Verdict::NoLongerRefused => &mut counts.no_longer_refused,
            Verdict::Skipped => &mut counts.skipped,
            Verdict::Failed => &mut counts.failed,
        } += 1;
    }
    let (current, candidate) = (current_component, candidate_component);
    let tenant_clusters = options.tenant_clusters;
    Ok(FleetPreview { current, candidate, grant, tenant_clusters, counts, instances })
}

/// The onboarding cluster, read-only: the override file, or the preview's
/// own read-only access, which `run` asks for (a preview requests none, and
/// never holds the token `run` writes with).
async fn onboarding(
    platform: &Client,
    settings: &Settings,
    current: &Planner,
    metrics: &Arc<Metrics>,
) -> Result<Client, Error> {
    if let Some(client) = super::operator_onboarding(settings, metrics).await? {
        return Ok(client);
    }
    let controller = &current.descriptor().service.group;
    let at = access::granted_preview_access(platform, &settings.pod_namespace, controller).await?;
    let (text, _) = clusters::read_kubeconfig(platform, &at).await?;
    clusters::client_from_kubeconfig_with(&text, Cluster::Onboarding, metrics, Writes::Refused).await
}

/// One page of service objects, and about how many are left after it.
struct Page {
    objects: Vec<DynamicObject>,
    remaining: usize,
}

/// The service objects to preview, listed a page at a time.
struct ServiceObjects {
    api: Api<DynamicObject>,
    params: ListParams,
    plural: String,
}

impl ServiceObjects {
    fn new(onboarding: &Client, plugin: &Loaded, namespace: Option<&str>, options: &PreviewOptions) -> Self {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(onboarding.clone(), ns, &plugin.service),
            None => Api::all_with(onboarding.clone(), &plugin.service),
        };
        let mut params = ListParams::default().limit(options.page.max(1));
        if let Some(selector) = &options.selector {
            params = params.labels(selector);
        }
        ServiceObjects { api, params, plural: plugin.service.plural.clone() }
    }

    /// The pages, each without the objects' `managedFields` (a preview
    /// never reads them; they are most of a listed object).
    fn stream(self) -> impl futures::Stream<Item = Result<Page, Error>> {
        futures::stream::try_unfold((self, Some(String::new())), |(this, token)| async move {
            let Some(token) = token else { return Ok(None) };
            let params = match token.is_empty() {
                true => this.params.clone(),
                false => this.params.clone().continue_token(&token),
            };
            let what = || format!("listing {} on the onboarding cluster", this.plural);
            let list = this.api.list(&params).await.map_err(|e| Error::kube(what(), e))?;
            let remaining = list.metadata.remaining_item_count.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            let next = list.metadata.continue_.filter(|t| !t.is_empty());
            let objects = list
                .items
                .into_iter()
                .map(|mut o| {
                    o.metadata.managed_fields = None;
                    o
                })
                .collect();
            Ok(Some((Page { objects, remaining }, (this, next))))
        })
    }
}

/// The longest a value or line is shown in the text report.
const SHOWN: usize = 200;

/// The preview for a person: the components, the grant delta, the counts,
/// one row per instance, then each instance that would change. Everything
/// a plugin or a cluster said is shown on its own line only.
pub fn text(preview: &FleetPreview) -> String {
    use std::fmt::Write as _;
    let line = |text: &str| crate::syntax::one_line(text, SHOWN);
    let mut out = String::new();
    let (a, b) = (&preview.current, &preview.candidate);
    let _ = writeln!(out, "plugin {} {} → {} {}", line(&a.name), a.digest, line(&b.name), b.digest);
    let grant = &preview.grant;
    match grant.is_empty() {
        true => out.push_str("requests: the same as the current plugin's\n"),
        false => {
            for (sign, items) in [("+", &grant.more), ("-", &grant.fewer)] {
                for item in items.iter() {
                    let _ = writeln!(out, "requests {sign} {}", line(item));
                }
            }
            for item in &grant.ungranted {
                let _ = writeln!(out, "NOT GRANTED: {} (run refuses the plugin)", line(item));
            }
        }
    }
    if !preview.tenant_clusters {
        out.push_str("tenant clusters: not reached; their objects are compared with the current plugin's plan\n");
    }
    let c = &preview.counts;
    let _ = writeln!(
        out,
        "\n{} instances: {} unchanged, {} changed, {} newly refused, {} no longer refused, {} skipped, {} failed\n",
        c.instances, c.unchanged, c.changed, c.newly_refused, c.no_longer_refused, c.skipped, c.failed
    );
    let width = preview.instances.iter().map(|i| i.instance.len()).max().unwrap_or(8).max(8);
    let _ = writeln!(
        out,
        "{:<width$}  {:<17}  {:>7}  {:>6}  {:>6}  {:>6}  {:>5}",
        "INSTANCE", "VERDICT", "OBJECTS", "PRUNED", "COPIES", "STATUS", "RULES"
    );
    for i in &preview.instances {
        let pruned = i.objects.iter().filter(|o| o.action == preview::Action::Prune).count();
        let objects = i.objects.len() - pruned;
        let copies = i.copies_added.len() + i.copies_removed.len();
        let status = if i.status.is_some() { "yes" } else { "-" };
        let rules = i.token_rules.added.len() + i.token_rules.removed.len();
        let verdict =
            serde_json::to_value(i.verdict).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<width$}  {verdict:<17}  {objects:>7}  {pruned:>6}  {copies:>6}  {status:>6}  {rules:>5}",
            i.instance
        );
    }
    for i in preview.instances.iter().filter(|i| i.verdict != Verdict::Unchanged) {
        let _ = writeln!(out, "\n{}:", i.instance);
        if let Some(reason) = &i.reason {
            let _ = writeln!(out, "  {}", line(reason));
        }
        if let (Some(current), Some(candidate)) = (&i.current, &i.candidate)
            && current != candidate
        {
            let _ = writeln!(out, "  answer: {}\n       → {}", line(current), line(candidate));
        }
        for o in &i.objects {
            let sign = match o.action {
                preview::Action::Create => "+",
                preview::Action::Update => "~",
                preview::Action::Prune => "-",
                preview::Action::Keep => "=",
            };
            let note = match (o.action, o.compared) {
                (preview::Action::Prune, _) => " (no longer planned: pruned)",
                (preview::Action::Keep, _) => " (no longer planned: kept, Namespaces are never pruned)",
                (_, Some(Compared::Plans)) => " (against the current plan: its cluster was not reached)",
                _ => "",
            };
            let _ = writeln!(out, "  {sign} {}{note}", object(&o.object));
            for f in &o.fields {
                let shown = |v: &Option<Value>| v.as_ref().map_or("(absent)".to_string(), |v| line(&v.to_string()));
                let _ = writeln!(out, "      {}: {} → {}", line(&f.path), shown(&f.before), shown(&f.after));
            }
        }
        for (sign, copies) in [("+", &i.copies_added), ("-", &i.copies_removed)] {
            for copy in copies.iter() {
                let _ = writeln!(out, "  {sign} copy {}", object(copy));
            }
        }
        if let Some(s) = &i.status {
            let _ = writeln!(out, "  status: phase {} → {}", line(&s.phase_before), line(&s.phase_after));
        }
        for (sign, rules) in [("+", &i.token_rules.added), ("-", &i.token_rules.removed)] {
            for rule in rules.iter() {
                let _ = writeln!(out, "  {sign} {}", line(rule));
            }
        }
    }
    out
}

/// An object's key as a person reads it: `platform HelmRelease ns/name`.
fn object(key: &crate::plugin::plan::ObjectKey) -> String {
    let place = key.namespace.as_ref().map_or(key.name.clone(), |ns| format!("{ns}/{}", key.name));
    crate::syntax::one_line(&format!("{} {} {place}", key.cluster, key.kind), SHOWN)
}
