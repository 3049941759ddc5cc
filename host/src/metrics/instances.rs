//! `service_provider_host_instances{phase}`: the instances the controller
//! holds, by the phase their status reports, counted at scrape time from
//! the controller's store.
//!
//! A phase is the plugin's word, so it is a label value only if it looks
//! like one (a letter, then up to 31 letters, digits or dashes) and only
//! the 15 most common are kept; the rest count as `Other`, an instance
//! without a phase as `Unknown`. A plugin cannot grow the series without
//! end, nor put text of its choosing into the exposition.

use std::collections::BTreeMap;
use std::sync::RwLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

/// The most phases reported one by one.
const PHASES: usize = 15;

type Source = Box<dyn Fn() -> Vec<Option<String>> + Send + Sync>;

#[derive(Default)]
pub struct Instances {
    source: RwLock<Option<Source>>,
}

impl std::fmt::Debug for Instances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Instances")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

impl Instances {
    /// Counts from `phases` (each instance's phase) from now on; `None`
    /// stops counting (the controller stopped).
    pub fn count_from(&self, phases: Option<Source>) {
        *self.source.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = phases;
    }

    fn counted(&self) -> Option<BTreeMap<String, i64>> {
        let source = self.source.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        source.as_ref().map(|phases| by_phase(phases()))
    }
}

/// Instances by phase label, see the module.
fn by_phase(phases: Vec<Option<String>>) -> BTreeMap<String, i64> {
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for phase in phases {
        let label = match phase {
            None => "Unknown".to_string(),
            Some(p) if is_label(&p) => p,
            Some(_) => "Other".to_string(),
        };
        *counts.entry(label).or_default() += 1;
    }
    if counts.len() > PHASES {
        let mut by_size: Vec<(String, i64)> = counts.into_iter().collect();
        by_size.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let folded: i64 = by_size.iter().skip(PHASES - 1).map(|(_, n)| n).sum();
        counts = by_size.into_iter().take(PHASES - 1).collect();
        *counts.entry("Other".to_string()).or_default() += folded;
    }
    counts
}

fn is_label(phase: &str) -> bool {
    let mut chars = phase.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && phase.len() <= 32
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl Collector for Instances {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(counts) = self.counted() else { return Ok(()) };
        let help = "Instances the controller holds, by the phase their status reports";
        let mut family = encoder.encode_descriptor("instances", help, None, ConstGauge::new(0i64).metric_type())?;
        for (phase, n) in counts {
            ConstGauge::new(n).encode(family.encode_family(&PhaseLabels { phase })?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_counted_and_only_label_like_ones_kept() {
        let phases = vec![Some("Ready".into()), Some("Ready".into()), None, Some("bad\nphase\"}".into())];
        let counts = by_phase(phases);
        assert_eq!(counts, BTreeMap::from([("Ready".into(), 2), ("Unknown".into(), 1), ("Other".into(), 1)]));
    }

    #[test]
    fn a_plugin_cannot_grow_the_series_without_end() {
        let phases = (0..1000).map(|i| Some(format!("P{i}"))).chain([Some("Ready".into()), Some("Ready".into())]);
        let counts = by_phase(phases.collect());
        assert_eq!(counts.len(), PHASES);
        assert_eq!(counts["Ready"], 2);
        assert_eq!(counts.values().sum::<i64>(), 1002);
    }
}
