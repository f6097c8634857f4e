//! What the per-shopper caps removed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of `ranking_events_capped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabels {
    /// A capped signal of the profile (`views`, or a custom count signal): at most nine.
    pub signal: String,
}

/// The caps' metrics.
pub struct ShopperMetrics {
    /// Events recorded that a per-actor cap kept from counting, per signal.
    pub capped: Family<SignalLabels, Counter>,
}

impl ShopperMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let shoppers = Self { capped: Family::default() };
        registry.register(
            "events_capped",
            "Events recorded that a per-actor cap kept from counting, by signal",
            shoppers.capped.clone(),
        );
        shoppers
    }
}
