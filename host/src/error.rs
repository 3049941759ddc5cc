//! The host's error type and the categories that decide what happens next.
//!
//! Every error keeps its source, and every error has a [`Category`]: the
//! category is what the reconcile loop acts on (retry at the poll interval or
//! with backoff), what the status condition's reason says, and the label of
//! the failure metric, so an operator can tell a tenant's typo from a broken
//! plugin from an API server outage without reading logs.
//!
//! `Display` of an error says what failed at its own level; [`report`] walks
//! the whole cause chain for status messages, Events and logs.

use std::path::PathBuf;
use std::time::Duration;

use crate::plugin::sandbox::PluginError;

/// What kind of failure an error is: who can fix it and how to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Something a tenant or the platform operator must fix (an unknown
    /// version, a missing ProviderConfig or source Secret, a Secret of the
    /// wrong type). Retried every minute, without backoff.
    UserInput,
    /// An object the host would write already exists and is not this
    /// instance's. Needs a person; retried every minute.
    Conflict,
    /// The plugin failed: it trapped, returned output the host cannot use, or
    /// hit a resource limit. Retried with backoff.
    Plugin,
    /// The plugin did not finish within its time budget.
    PluginTimeout,
    /// The plugin asked for something its grant does not allow.
    CapabilityDenied,
    /// Cluster access could not be obtained or used (AccessRequest denied, an
    /// unusable kubeconfig).
    Access,
    /// A Kubernetes API request failed, or the leader lease could not be
    /// held; usually transient.
    Kubernetes,
    /// The host's own configuration: flags, files, endpoints.
    Config,
    /// A bug in the host (a reconcile panicked); retried with backoff while
    /// every other instance goes on.
    Internal,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::UserInput,
        Category::Conflict,
        Category::Plugin,
        Category::PluginTimeout,
        Category::CapabilityDenied,
        Category::Access,
        Category::Kubernetes,
        Category::Config,
        Category::Internal,
    ];
}

impl crate::metrics::LabelValue for Category {
    /// The metrics label.
    fn label(self) -> &'static str {
        match self {
            Category::UserInput => "user-input",
            Category::Conflict => "conflict",
            Category::Plugin => "plugin",
            Category::PluginTimeout => "plugin-timeout",
            Category::CapabilityDenied => "capability-denied",
            Category::Access => "access",
            Category::Kubernetes => "kubernetes",
            Category::Config => "config",
            Category::Internal => "internal",
        }
    }
}

impl Category {
    /// Whether only a person can fix it: such failures are failed
    /// reconciles like any other, but retried every minute instead of with
    /// backoff ([`Error::NeedsAPerson`]).
    pub fn needs_a_person(self) -> bool {
        matches!(self, Category::UserInput | Category::Conflict)
    }

    /// The reason of the `Ready=False` condition the host writes for it.
    pub fn reason(self) -> &'static str {
        match self {
            Category::Plugin => "PluginError",
            Category::PluginTimeout => "PluginTimeout",
            Category::CapabilityDenied => "CapabilityDenied",
            Category::Conflict => "Conflict",
            Category::UserInput | Category::Access | Category::Kubernetes | Category::Config | Category::Internal => {
                "ReconcileError"
            }
        }
    }
}

/// A cause from a library the host only reports (an address parser, a
/// YAML parser, a socket): kept as the error's source.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Errors of the host library. Each variant names what it is about in
/// fields (an object, a cluster, a setting) and keeps its cause as the
/// source; [`Error::category`] decides who must act.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// Loading or calling a plugin failed (compile error, trap, deadline,
    /// resource limit).
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The plugin reported a failure worth retrying (`plan-error::transient`);
    /// made with [`Error::plugin_transient`].
    #[error("{message}")]
    PluginTransient { plugin: String, message: String },
    /// The plugin returned something the host cannot use (malformed
    /// objects, copies without a type; see [`crate::plugin::plan`]).
    #[error("plugin {plugin} returned an unusable plan: {reason}")]
    InvalidPlan { plugin: String, reason: String },
    /// What an observation read outgrew the plugin's input limit.
    #[error("{what}: more than the limit of {max} bytes of plugin input")]
    InputTooLarge { what: String, max: usize },
    /// What an observation reads from a cluster, counted before it is
    /// trimmed, is more than the host reads for one (`per`: in one
    /// response, or in all): what the plugin does not see counts too, so a
    /// tenant's cluster decides it, and the tenant must act.
    #[error(
        "{what}: its objects are more than the limit of {max} bytes the host reads {per} (what the plugin does not \
         see counts too, such as annotations and managedFields): remove or shrink them"
    )]
    ObservationTooLarge { what: String, max: usize, per: &'static str },
    /// The plugin asked for something its grant does not allow, or that
    /// the host never allows (see [`crate::plugin::grant`]).
    #[error(transparent)]
    Denied(#[from] crate::plugin::grant::Denial),
    /// The operator's grant cannot be used.
    #[error(transparent)]
    Grant(#[from] crate::plugin::grant::GrantError),
    /// Something only a tenant or the platform operator can fix: shown in
    /// the status, retried every minute.
    #[error(transparent)]
    UserInput(#[from] UserInput),
    /// An object the host would write exists and belongs to someone else.
    #[error("{object} {reason}")]
    Conflict { object: String, reason: Conflicting },
    /// Cluster access could not be obtained or used.
    #[error(transparent)]
    Access(#[from] AccessFailure),
    /// The host's own configuration (flags, files, endpoints).
    #[error("{what}")]
    Config {
        what: String,
        #[source]
        source: Option<Cause>,
    },
    /// Something the host waits for did not happen in time (a CRD to be
    /// established, a grant at start-up): what it was `doing`, and what it
    /// saw last.
    #[error("gave up {doing} after {}s{}", after.as_secs(), last_seen.as_deref().map(|s| format!(" ({s})")).unwrap_or_default())]
    Timeout { doing: String, after: Duration, last_seen: Option<String> },
    /// Leader election could not be set up, or the lease was lost.
    #[error("leader election: {0}")]
    LeaderElection(#[from] Leadership),
    #[error("{context}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    /// Watching for a condition failed (the watch itself, not the wait).
    #[error("{context}")]
    Watch {
        context: String,
        #[source]
        source: kube::runtime::wait::Error,
    },
    #[error("{context}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// A failure only a tenant or the platform operator can fix
    /// ([`Category::needs_a_person`]), already shown in the instance's
    /// status: a failed reconcile to the metrics, as controller-runtime
    /// counts a Go provider's, looked at again after `retry_after` without
    /// backoff.
    #[error("{error}")]
    NeedsAPerson {
        #[source]
        error: Box<Error>,
        retry_after: Duration,
    },
    /// Deletion is progressing but not finished: not a failure, just look
    /// again after the given delay (the finalizer stays).
    #[error("{reason}")]
    NotYet { reason: String, retry_after: Duration },
    /// Adding or removing the finalizer failed (see [`Error::from_finalizer`]).
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    /// A reconcile panicked: a host bug, contained to its instance.
    #[error("the host failed internally: {message}")]
    Panic { message: String },
}

/// What a tenant or the platform operator must provide or fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserInput {
    /// The service object lacks a field every object has.
    #[error("invalid service object: {field} is missing")]
    ServiceObject { field: &'static str },
    /// The service object is larger than the host keeps (its labels and
    /// annotations, most likely).
    #[error(
        "the service object is {} KiB, more than the {} KiB the host reads: remove labels or annotations",
        .bytes >> 10,
        .limit >> 10
    )]
    ServiceObjectTooLarge { bytes: usize, limit: usize },
    /// The provider's ProviderConfig does not exist.
    #[error(
        "No ProviderConfig found: create the cluster-scoped {kind} {name:?} ({api_version}) on the platform cluster"
    )]
    NoProviderConfig { kind: String, api_version: String, name: String },
    /// The source of a copy is not in the provider's namespace.
    #[error("{kind} {namespace}/{name} does not exist on the platform cluster")]
    NoSource { kind: String, namespace: String, name: String },
    /// What the plugin found the tenant must fix (`plan-error::invalid-input`),
    /// and when it asks to look again (0: the host's default); made with
    /// [`UserInput::plan`].
    #[error("{message}")]
    Plan { message: String, requeue_after_seconds: u32 },
    /// The instance's tenant namespace does not exist on the platform
    /// cluster: it has no ControlPlane (yet).
    #[error(
        "no ControlPlane for this instance: its namespace {namespace} does not exist on the platform cluster (the object's name and namespace must be those of a ControlPlane)"
    )]
    NoControlPlane { namespace: String },
    /// A Secret to copy has another type than the plugin requires.
    #[error("Secret {namespace}/{name} has type {found}, but {required} is required")]
    SecretType { namespace: String, name: String, found: String, required: String },
}

impl UserInput {
    /// What the plugin found the tenant must fix, as one line of at most
    /// [`crate::syntax::PLUGIN_TEXT`] characters (see [`Error::plugin_transient`]).
    pub fn plan(message: &str, requeue_after_seconds: u32) -> Self {
        UserInput::Plan { message: crate::syntax::one_line(message, crate::syntax::PLUGIN_TEXT), requeue_after_seconds }
    }
}

/// Why an existing object is not the host's to write; completes
/// "<object> …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflicting {
    /// It carries the host's marks for another writer (an AccessRequest
    /// someone else made for this instance).
    #[error("already exists but is not managed by this provider")]
    NotOurs,
    /// It was there a moment ago, and is gone.
    #[error("vanished while being created")]
    Vanished,
    /// Another provider's or instance's object, not taken over.
    #[error("already exists and {0}")]
    NotTakenOver(#[from] crate::adopt::Refusal),
    /// A CRD another field manager installed (`writers`, or none on record).
    #[error(
        "exists and was installed by {}, not by this host; it is never taken over unless named{}: remove it, or rename the plugin's",
        if writers.is_empty() { "a writer that left no record".to_string() } else { writers.join(", ") },
        adopt_from.as_deref().map(|m| format!(" (if it is a provider's this one replaces: --adopt-from {m:?})")).unwrap_or_default()
    )]
    InstalledBy { writers: Vec<String>, adopt_from: Option<String> },
    /// A CRD Flux's kustomize-controller applied (openmcp's bootstrapper's
    /// GitOps) with other content than the plugin declares: git holds
    /// another release's component than this image.
    #[error(
        "was applied by {manager:?} (Flux, from the platform's GitOps repository) with other content than this \
         plugin declares, so the component there is another release than this host's image: commit this release's \
         component (its CRDs) to the GitOps repository, or take the CRD over with --adopt-from {manager:?} (Flux \
         puts its own back at its next reconcile)"
    )]
    OtherRelease { manager: String },
    /// The API server refused the apply: another manager owns fields it sets.
    #[error("has fields another field manager owns: {message}")]
    FieldsOwned { message: String },
    /// A copy another instance holds, with other content.
    #[error("is another instance's copy of the same source with different content; its owner updates it")]
    SharedCopy,
    /// A copy whose type differs from its source's, not the instance's own.
    #[error("has another type than its source; remove it")]
    OtherType,
}

/// Why cluster access could not be obtained or used.
#[derive(Debug, thiserror::Error)]
pub enum AccessFailure {
    /// openmcp denied a request (`what` was asked for by `request`).
    #[error("{what} was denied: {request}")]
    Denied { what: String, request: String },
    /// A request is granted but says nowhere where its kubeconfig is.
    #[error("{request} is granted without status.secretRef")]
    NoSecretRef { request: String },
    /// Access that a command only reads is not granted (yet).
    #[error("{what} is not granted: {hint}")]
    NotGranted { what: String, hint: String },
    /// A kubeconfig's text is not a kubeconfig.
    #[error("the {cluster} kubeconfig is not valid")]
    InvalidKubeconfig {
        cluster: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A kubeconfig from a cluster asks for what the host never does (see
    /// [`crate::clusters::kubeconfig::sanitize`]).
    #[error("the {cluster} kubeconfig is refused: {reason}")]
    RefusedKubeconfig { cluster: String, reason: String },
    /// A kubeconfig that parsed but cannot make a client.
    #[error("the {cluster} kubeconfig cannot be used")]
    Unusable {
        cluster: String,
        #[source]
        source: Cause,
    },
    /// Neither in-cluster configuration nor `KUBECONFIG`.
    #[error("no platform cluster configuration (in-cluster or KUBECONFIG)")]
    NoPlatform(#[source] kube::config::InferConfigError),
    /// The kubeconfig Secret lacks the key, or its value is not text.
    #[error("Secret {namespace}/{name} key {key:?} {problem}")]
    SecretKey { namespace: String, name: String, key: String, problem: &'static str },
}

/// What went wrong with the leader lease.
#[derive(Debug, thiserror::Error)]
pub enum Leadership {
    #[error("setting it up")]
    SetUp(#[source] kube_lease_manager::LeaseManagerError),
    #[error("lost the leader lease")]
    Lost,
    #[error("the lease manager stopped")]
    Stopped,
}

/// The message a panic was raised with, if it has one (`panic!` with a
/// literal gives a `&str`, with arguments a `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// The Wasm side's failures, each as the host's variant of the same name.
impl From<crate::plugin::Error> for Error {
    fn from(e: crate::plugin::Error) -> Self {
        match e {
            crate::plugin::Error::Call(e) => Error::Plugin(e),
            crate::plugin::Error::InvalidPlan { plugin, reason } => Error::InvalidPlan { plugin, reason },
            crate::plugin::Error::Denied(d) => Error::Denied(d),
        }
    }
}

impl Error {
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube { context: context.into(), source }
    }

    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json { context: context.into(), source }
    }

    /// An object (as people name it: kind, place, cluster) in conflict.
    pub fn conflict(object: impl Into<String>, reason: impl Into<Conflicting>) -> Self {
        Error::Conflict { object: object.into(), reason: reason.into() }
    }

    /// A plugin's transient failure, its text as one line of at most
    /// [`crate::syntax::PLUGIN_TEXT`] characters: it goes into every retry's log line,
    /// trace event, Event and condition, and a plugin may send megabytes.
    pub fn plugin_transient(plugin: &str, message: &str) -> Self {
        Error::PluginTransient {
            plugin: plugin.to_string(),
            message: crate::syntax::one_line(message, crate::syntax::PLUGIN_TEXT),
        }
    }

    /// A configuration problem, with or without a cause to keep.
    pub fn config(what: impl Into<String>, source: impl Into<Option<Cause>>) -> Self {
        Error::Config { what: what.into(), source: source.into() }
    }

    pub fn category(&self) -> Category {
        match self {
            Error::Io { .. } | Error::Parse { .. } | Error::Config { .. } | Error::Grant(_) => Category::Config,
            Error::Plugin(e) => match e {
                PluginError::Timeout { .. } => Category::PluginTimeout,
                PluginError::Engine(_) | PluginError::Cache { .. } | PluginError::UnsafeCache { .. } => {
                    Category::Config
                }
                _ => Category::Plugin,
            },
            Error::InvalidPlan { .. } | Error::PluginTransient { .. } | Error::InputTooLarge { .. } => Category::Plugin,
            Error::Denied(_) => Category::CapabilityDenied,
            Error::UserInput(_) | Error::ObservationTooLarge { .. } => Category::UserInput,
            Error::Conflict { .. } => Category::Conflict,
            Error::Access(_) => Category::Access,
            Error::Kube { .. }
            | Error::Watch { .. }
            | Error::Json { .. }
            | Error::NotYet { .. }
            | Error::Timeout { .. }
            | Error::LeaderElection(_)
            | Error::Finalizer(_) => Category::Kubernetes,
            Error::Panic { .. } => Category::Internal,
            Error::NeedsAPerson { error, .. } => error.category(),
        }
    }

    /// When a failure only a person can fix is looked at again
    /// ([`Error::NeedsAPerson`]).
    pub fn needs_a_person(&self) -> Option<Duration> {
        match self {
            Error::NeedsAPerson { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// When a deletion step must be retried later (and is not a failure).
    pub fn not_yet(&self) -> Option<Duration> {
        match self {
            Error::NotYet { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// What kube's finalizer helper returns, as the host reports it: the
    /// reconcile's or cleanup's own error as it is (a log line names the
    /// plugin timeout or the denial, not the helper's "failed to apply
    /// object" wrapper); only the helper's own patches stay wrapped.
    pub fn from_finalizer(error: kube::runtime::finalizer::Error<Error>) -> Self {
        use kube::runtime::finalizer::Error as F;
        match error {
            F::ApplyFailed(e) | F::CleanupFailed(e) => e,
            other => Error::Finalizer(Box::new(other)),
        }
    }
}

/// The whole cause chain on one line, `outer: inner: innermost`, skipping a
/// cause whose text the line already contains (many errors repeat their
/// source in their own message).
pub fn report(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = said(error);
    let mut next = error.source();
    while let Some(cause) = next {
        let text = said(cause);
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        next = cause.source();
    }
    line
}

/// What one error says. An API server's refusal is its own message and
/// reason (`namespaces "x" is forbidden: …: Forbidden`), not kube's
/// rendering, which appends the whole `Status` structure.
fn said(error: &(dyn std::error::Error + 'static)) -> String {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => match status.reason.is_empty() {
            true => status.message.clone(),
            false => format!("{}: {}", status.message, status.reason),
        },
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LabelValue;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_wasm_sides_failures_keep_their_categories() {
        let plugin = |e| Error::from(e).category();
        let invalid = crate::plugin::Error::InvalidPlan { plugin: "p".into(), reason: "r".into() };
        assert_eq!(plugin(invalid), Category::Plugin);
        let denied = crate::plugin::grant::Denial::new("rule", "what", "why");
        assert_eq!(plugin(crate::plugin::Error::Denied(denied)), Category::CapabilityDenied);
        let timeout =
            crate::plugin::sandbox::PluginError::Timeout { plugin: "p".into(), budget: Duration::from_secs(1) };
        assert_eq!(plugin(crate::plugin::Error::Call(timeout)), Category::PluginTimeout);
    }

    #[test]
    fn a_report_carries_every_cause_once() {
        let io = std::io::Error::other("disk on fire");
        assert_eq!(report(&Outer(io)), "outer: disk on fire");
        let e = Error::Io { path: "/x".into(), source: std::io::Error::other("gone") };
        assert_eq!(report(&e), "/x: gone");
        let missing =
            Error::from(UserInput::NoSource { kind: "Secret".into(), namespace: "p".into(), name: "s".into() });
        assert_eq!(report(&missing), "Secret p/s does not exist on the platform cluster");
        let bind = Error::config("invalid bind address \":x\"", Some(Cause::from(std::io::Error::other("bad port"))));
        assert_eq!(report(&bind), "invalid bind address \":x\": bad port");
        // A cause the line already says is left out (the binary's one line).
        #[derive(Debug, thiserror::Error)]
        #[error("loading plugin x: outer")]
        struct Loading(#[source] Outer);
        let compiling = Loading(Outer(std::io::Error::other("bad magic")));
        assert_eq!(report(&compiling), "loading plugin x: outer: bad magic");
    }

    #[test]
    fn an_api_servers_refusal_is_reported_in_its_own_words() {
        let status = kube::core::Status::failure("namespaces \"x\" is forbidden: User \"u\" cannot get", "Forbidden")
            .with_code(403);
        let e = Error::kube("reading Namespace x", kube::Error::Api(Box::new(status)));
        assert_eq!(report(&e), "reading Namespace x: namespaces \"x\" is forbidden: User \"u\" cannot get: Forbidden");
    }

    fn conflict_again() -> Error {
        Error::conflict("Secret a/b", Conflicting::OtherType)
    }

    #[test]
    fn categories_decide_who_must_act() {
        assert!(Error::from(UserInput::ServiceObject { field: "metadata.name" }).category().needs_a_person());
        let conflict = Error::conflict("Secret a/b", Conflicting::OtherType);
        assert!(conflict.category().needs_a_person());
        assert_eq!(conflict.to_string(), "Secret a/b has another type than its source; remove it");
        let denied = AccessFailure::Denied { what: "onboarding access".into(), request: "AccessRequest p/x".into() };
        assert!(!Error::from(denied).category().needs_a_person());
        assert_eq!(Error::config("x", None).category().label(), "config");
        assert_eq!(Error::from(Leadership::Lost).category().label(), "kubernetes");
        assert_eq!(Error::from(Leadership::Lost).to_string(), "leader election: lost the leader lease");
        let not_yet = Error::NotYet { reason: "wait".into(), retry_after: Duration::from_secs(3) };
        assert_eq!(not_yet.not_yet(), Some(Duration::from_secs(3)));
        // Through kube's finalizer helper, the reconcile's own error as it is.
        let denied = Error::from_finalizer(kube::runtime::finalizer::Error::ApplyFailed(conflict));
        assert_eq!(denied.category(), Category::Conflict);
        assert!(report(&denied).starts_with("Secret a/b has another type"));
        let shown = Error::NeedsAPerson { error: Box::new(conflict_again()), retry_after: Duration::from_secs(60) };
        assert_eq!((shown.category(), shown.needs_a_person()), (Category::Conflict, Some(Duration::from_secs(60))));
        assert_eq!(report(&shown), "Secret a/b has another type than its source; remove it", "said once");
        let waiting = kube::runtime::finalizer::Error::CleanupFailed(not_yet);
        assert_eq!(Error::from_finalizer(waiting).not_yet(), Some(Duration::from_secs(3)));
    }
}
