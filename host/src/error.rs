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

use crate::sandbox::PluginError;

/// What kind of failure an error is: who can fix it and how to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Something a tenant or the platform operator must fix (an unknown
    /// version, a missing ProviderConfig or source Secret, a Secret of the
    /// wrong type). Retried at the poll interval, without backoff.
    UserInput,
    /// An object the host would write already exists and is not this
    /// instance's. Needs a person; retried at the poll interval.
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
    /// The metrics label.
    pub fn label(self) -> &'static str {
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

    /// Whether only a person can fix it: such failures are retried at the
    /// poll interval instead of with backoff, and count as "invalid input".
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

/// Errors of the host library.
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
    /// The plugin reported a failure worth retrying (`plan-error::transient`).
    #[error("{0}")]
    PluginTransient(String),
    /// The plugin returned something the host cannot use (malformed
    /// objects, copies without a type; see [`crate::plan`]).
    #[error("plugin {plugin} returned an unusable plan: {reason}")]
    InvalidPlan { plugin: String, reason: String },
    /// What an observation read outgrew the plugin's input limit.
    #[error("{what}: more than the limit of {max} bytes of plugin input")]
    InputTooLarge { what: String, max: usize },
    /// The plugin asked for something its grant does not allow, or that
    /// the host never allows (see [`crate::grant`]).
    #[error(transparent)]
    Denied(#[from] crate::grant::Denial),
    /// The operator's grant cannot be used.
    #[error(transparent)]
    Grant(#[from] crate::grant::GrantError),
    /// The service object cannot be reconciled as it is.
    #[error("invalid service object: {0}")]
    InvalidObject(String),
    /// Something only a person can fix (a missing source Secret, a Secret of
    /// the wrong type): shown in the status, retried at the poll interval.
    #[error("{0}")]
    UserInput(String),
    /// An object the host would write exists and belongs to someone else.
    #[error("{0}")]
    Conflict(String),
    /// Cluster access could not be obtained or used.
    #[error("{0}")]
    Access(String),
    /// The host's own configuration (flags, files, endpoints).
    #[error("{0}")]
    Config(String),
    /// Something the host waits for did not happen in time (a CRD to be
    /// established, a grant at start-up).
    #[error("{0}")]
    Timeout(String),
    /// Leader election could not be set up, or the lease was lost.
    #[error("leader election: {0}")]
    LeaderElection(String),
    #[error("{context}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("{context}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// Deletion is progressing but not finished: not a failure, just look
    /// again after the given delay (the finalizer stays).
    #[error("{reason}")]
    NotYet { reason: String, retry_after: Duration },
    /// Adding or removing the finalizer failed (see [`Error::from_finalizer`]).
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    /// A reconcile panicked: a host bug, contained to its instance.
    #[error("the host failed internally: {0}")]
    Panic(String),
}

impl Error {
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube { context: context.into(), source }
    }

    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json { context: context.into(), source }
    }

    pub fn category(&self) -> Category {
        match self {
            Error::Io { .. } | Error::Parse { .. } | Error::Config(_) | Error::Grant(_) => Category::Config,
            Error::Plugin(e) => match e {
                PluginError::Timeout { .. } => Category::PluginTimeout,
                PluginError::Engine(_) | PluginError::Cache { .. } => Category::Config,
                _ => Category::Plugin,
            },
            Error::InvalidPlan { .. } | Error::PluginTransient(_) | Error::InputTooLarge { .. } => Category::Plugin,
            Error::Denied(_) => Category::CapabilityDenied,
            Error::InvalidObject(_) | Error::UserInput(_) => Category::UserInput,
            Error::Conflict(_) => Category::Conflict,
            Error::Access(_) => Category::Access,
            Error::Kube { .. }
            | Error::Json { .. }
            | Error::NotYet { .. }
            | Error::Timeout(_)
            | Error::LeaderElection(_) => Category::Kubernetes,
            Error::Finalizer(_) => Category::Kubernetes,
            Error::Panic(_) => Category::Internal,
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
    let mut line = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        next = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_report_carries_every_cause_once() {
        let io = std::io::Error::other("disk on fire");
        assert_eq!(report(&Outer(io)), "outer: disk on fire");
        let e = Error::Io { path: "/x".into(), source: std::io::Error::other("gone") };
        assert_eq!(report(&e), "/x: gone");
        let repeated = Error::UserInput("a: b".into());
        assert_eq!(report(&repeated), "a: b");
        // A cause the line already says is left out (the binary's one line).
        #[derive(Debug, thiserror::Error)]
        #[error("loading plugin x: outer")]
        struct Loading(#[source] Outer);
        let compiling = Loading(Outer(std::io::Error::other("bad magic")));
        assert_eq!(report(&compiling), "loading plugin x: outer: bad magic");
    }

    #[test]
    fn categories_decide_who_must_act() {
        assert!(Error::UserInput("x".into()).category().needs_a_person());
        assert!(Error::InvalidObject("x".into()).category().needs_a_person());
        assert!(!Error::Access("x".into()).category().needs_a_person());
        assert_eq!(Error::Config("x".into()).category().label(), "config");
        assert_eq!(Error::LeaderElection("lost".into()).category().label(), "kubernetes");
        let not_yet = Error::NotYet { reason: "wait".into(), retry_after: Duration::from_secs(3) };
        assert_eq!(not_yet.not_yet(), Some(Duration::from_secs(3)));
        // Through kube's finalizer helper, the reconcile's own error as it is.
        let denied = Error::from_finalizer(kube::runtime::finalizer::Error::ApplyFailed(Error::Conflict("x".into())));
        assert_eq!((report(&denied), denied.category()), ("x".to_string(), Category::Conflict));
        let waiting = kube::runtime::finalizer::Error::CleanupFailed(not_yet);
        assert_eq!(Error::from_finalizer(waiting).not_yet(), Some(Duration::from_secs(3)));
    }
}
