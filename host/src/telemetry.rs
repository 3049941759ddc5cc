//! Traces over OpenTelemetry's OTLP, configured only by the standard
//! `OTEL_*` environment variables and off unless they name an endpoint.
//!
//! A reconcile is one trace: the `reconcile` span (instance, plugin digest,
//! outcome) with a span for gathering, each plugin call (call, plugin,
//! digest, memory), each object applied or copied, and the status write.
//! The host's spans only: kube-rs's and the HTTP stack's are left out, so a
//! reconcile's span is the root of its trace. The host sends no trace
//! context on its own requests.
//!
//! The variables read (the SDK reads most of them itself):
//!
//! - `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`:
//!   where to send; without either, no traces;
//! - `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: no traces
//!   even so; any exporter but `otlp` is refused;
//! - `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the default); `grpc`
//!   and `http/json` are not built in and refused at start;
//! - `OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`, `..._COMPRESSION` (none
//!   built in), `OTEL_SERVICE_NAME` (default `service-provider-host`),
//!   `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `..._ARG`,
//!   `OTEL_BSP_*` (the batch processor).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::registry::LookupSpan;

/// The service name when `OTEL_SERVICE_NAME` does not give one.
const SERVICE_NAME: &str = "service-provider-host";

/// The traces of this process, while it exports them.
pub struct Traces {
    provider: SdkTracerProvider,
}

/// Why traces could not be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("{variable}={value} is not supported: {supported}")]
    Unsupported { variable: &'static str, value: String, supported: &'static str },
    #[error("setting up the OTLP trace exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    Off,
    Otlp,
}

fn wanted(var: impl Fn(&str) -> Option<String>) -> Result<Wanted, TracesError> {
    let set = |name: &str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(Wanted::Off);
    }
    match set("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(Wanted::Off),
        Some(other) => {
            return Err(TracesError::Unsupported {
                variable: "OTEL_TRACES_EXPORTER",
                value: other.to_string(),
                supported: "otlp or none",
            });
        }
    }
    if set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() {
        return Ok(Wanted::Off);
    }
    for variable in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
        match set(variable).as_deref() {
            None | Some("http/protobuf") => {}
            Some(other) => {
                return Err(TracesError::Unsupported {
                    variable,
                    value: other.to_string(),
                    supported: "this build sends http/protobuf",
                });
            }
        }
    }
    Ok(Wanted::Otlp)
}

impl Traces {
    /// The exporter the environment configures, or `None` when it asks for
    /// no traces.
    pub fn from_env() -> Result<Option<Traces>, TracesError> {
        if wanted(|name| std::env::var(name).ok())? == Wanted::Off {
            return Ok(None);
        }
        // The exporter's HTTPS (rustls without a provider of its own) uses
        // the process's: ring, as for every other client of the host.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(TracesError::Exporter)?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
            resource = resource.with_service_name(SERVICE_NAME);
        }
        let resource =
            resource.with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build();
        let provider = SdkTracerProvider::builder().with_resource(resource).with_batch_exporter(exporter).build();
        Ok(Some(Traces { provider }))
    }

    /// The layer that turns the host's spans into OpenTelemetry spans: its
    /// spans down to debug (every step of a reconcile) and its events down
    /// to info, nothing of other crates.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer("service-provider-host");
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(FilterFn::new(hosts_own))
    }

    /// Sends what is still batched and stops the exporter.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "flushing the last traces");
        }
    }
}

/// The host's own spans (to debug) and events (to info).
fn hosts_own(meta: &Metadata<'_>) -> bool {
    let ours = meta.target() == "service_provider_host" || meta.target().starts_with("service_provider_host::");
    let level = if meta.is_span() { Level::DEBUG } else { Level::INFO };
    ours && *meta.level() <= level
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_named() {
        assert_eq!(wanted(env(&[])).unwrap(), Wanted::Off);
        assert_eq!(wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])).unwrap(), Wanted::Off);
        assert_eq!(wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])).unwrap(), Wanted::Otlp);
        assert_eq!(
            wanted(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")])).unwrap(),
            Wanted::Otlp
        );
    }

    #[test]
    fn disabling_wins_and_what_is_not_built_in_is_refused() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        assert_eq!(wanted(env(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")])).unwrap(), Wanted::Off);
        assert_eq!(wanted(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])).unwrap(), Wanted::Off);
        let zipkin = wanted(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")])).unwrap_err();
        assert_eq!(zipkin.to_string(), "OTEL_TRACES_EXPORTER=zipkin is not supported: otlp or none");
        let grpc = wanted(env(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])).unwrap_err();
        assert!(grpc.to_string().contains("http/protobuf"), "{grpc}");
    }

    #[test]
    fn only_the_hosts_spans_and_events_are_exported() {
        use tracing::callsite::Identifier;
        use tracing::field::FieldSet;
        use tracing::metadata::Kind;
        struct Site;
        impl tracing::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        static SITE: Site = Site;
        let meta = |target: &'static str, level: Level, kind: Kind| {
            Metadata::new("m", target, level, None, None, None, FieldSet::new(&[], Identifier(&SITE)), kind)
        };
        assert!(hosts_own(&meta("service_provider_host::reconcile", Level::DEBUG, Kind::SPAN)));
        assert!(!hosts_own(&meta("service_provider_host::reconcile", Level::TRACE, Kind::SPAN)));
        assert!(hosts_own(&meta("service_provider_host", Level::INFO, Kind::EVENT)));
        assert!(!hosts_own(&meta("service_provider_host::reconcile", Level::DEBUG, Kind::EVENT)));
        assert!(!hosts_own(&meta("kube_runtime::controller", Level::INFO, Kind::SPAN)));
        assert!(!hosts_own(&meta("service_provider_hostile", Level::INFO, Kind::SPAN)));
    }
}
