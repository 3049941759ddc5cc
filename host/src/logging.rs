//! The text log, one line per event whatever its fields say.
//!
//! Text from plugins, tenants and API servers ends up in log fields (a
//! plugin's transient error, an API server's refusal, a name read from a
//! cluster). tracing's text format writes a field's value as it is, so a
//! line break in it would start what looks like a line of the host's own
//! (`ERROR service_provider_host: …`), and a terminal escape would act on
//! whoever reads the log. [`OneLineFields`] escapes both; the JSON format
//! escapes them already.

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

use crate::syntax::breaks_a_line;

/// tracing's default field format, with every character that would break
/// or rearrange the line ([`breaks_a_line`]) written as its Rust escape
/// (`\n`, `\u{1b}`).
#[derive(Debug, Default)]
pub struct OneLineFields {
    inner: DefaultFields,
}

impl<'writer> FormatFields<'writer> for OneLineFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> fmt::Result {
        // Without colours: their escape codes would be escaped too.
        let mut line = String::new();
        self.inner.format_fields(Writer::new(&mut line), fields)?;
        for c in line.chars() {
            match breaks_a_line(c) {
                true => write!(writer, "{}", c.escape_default())?,
                false => writer.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_field_with_line_breaks_stays_on_its_line() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .fmt_fields(OneLineFields::default())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let forged = "failed\nERROR service_provider_host: forged\r\n\u{1b}[2J";
            tracing::warn!(error = %forged, "reconcile failed");
            tracing::info_span!("reconcile", instance = "a\nb").in_scope(|| tracing::info!("inside"));
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with(r"reconcile failed error=failed\nERROR service_provider_host: forged\r\n\u{1b}[2J"),
            "{text}"
        );
        assert!(lines[1].contains(r#"reconcile{instance="a\nb"}"#) || lines[1].contains(r"instance=a\nb"), "{text}");
        assert!(!text.contains('\u{1b}'));
    }
}
