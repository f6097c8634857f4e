//! The scoring profiles served at once: the service's own (`default`) and the variants of
//! `RANKING_PROFILES`, each a [`Lane`] of its own (its policy, boards, versions, controls,
//! feed and history, under its own names in the ranking store), and which lane a read is
//! served from: the profile it names, or, naming none, the variant its shopper's bucket
//! falls in when an experiment runs.

use std::sync::Arc;

use super::explain::Explainer;
use super::history::History;
use super::policy::{DEFAULT_PROFILE, Policy};
use super::queries::{Queries, Selector, Window};
use super::recompute::Recompute;
use super::watch::WatchHub;
use crate::domain::experiment::Experiment;
use crate::metrics::Metrics;
use crate::metrics::experiments::ExperimentLabels;

/// Longest `actor_id` a read may carry (as an event's).
pub const MAX_ACTOR_ID: usize = 128;

/// One profile's services.
pub struct Lane {
    pub policy: Arc<Policy>,
    pub queries: Arc<Queries>,
    pub explainer: Arc<Explainer>,
    pub history: Arc<History>,
    pub watch: Arc<WatchHub>,
    pub recompute: Arc<Recompute>,
}

impl Lane {
    /// The profile's name, as answers say it.
    pub fn name(&self) -> &str {
        &self.policy.profile_name
    }
}

/// Why a read names no lane.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("no scoring profile {0:?}")]
    UnknownProfile(String),
    #[error("actor_id: at most {MAX_ACTOR_ID} bytes, got {0}")]
    ActorTooLong(usize),
}

/// Every lane, the service's own first, and the experiment splitting shoppers between them.
pub struct Profiles {
    lanes: Vec<Lane>,
    experiment: Option<Experiment>,
    metrics: Arc<Metrics>,
}

impl Profiles {
    /// `lanes` (the service's own first; at least it) and the experiment, whose variants
    /// were checked to be lanes.
    pub fn new(lanes: Vec<Lane>, experiment: Option<Experiment>, metrics: Arc<Metrics>) -> Self {
        assert!(!lanes.is_empty(), "the service's own profile is a lane");
        Self { lanes, experiment, metrics }
    }

    /// The service's own profile's lane.
    pub fn default_lane(&self) -> &Lane {
        &self.lanes[0]
    }

    /// Every lane, the service's own first.
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// The lane of `name` (`default` or empty: the service's own).
    pub fn named(&self, name: &str) -> Option<&Lane> {
        if name.is_empty() || name == DEFAULT_PROFILE {
            return Some(self.default_lane());
        }
        self.lanes.iter().find(|l| l.name() == name)
    }

    /// The lane that holds the board `selector` names for `lane`: the hourly rankings are the
    /// service profile's running counts, kept once (ingestion increments them), and every
    /// profile's hourly read is answered from them, saying so.
    pub fn holding<'a>(&'a self, lane: &'a Lane, selector: &Selector) -> &'a Lane {
        if selector.window == Some(Window::Hourly) { self.default_lane() } else { lane }
    }

    /// The lane a read is served from: the profile it names; naming none, the experiment's
    /// variant of `actor_id` when both are there (counted as an exposure); else the service's
    /// own.
    pub fn route(&self, profile: &str, actor_id: &str) -> Result<&Lane, RouteError> {
        if actor_id.len() > MAX_ACTOR_ID {
            return Err(RouteError::ActorTooLong(actor_id.len()));
        }
        if !profile.is_empty() {
            return self.named(profile).ok_or_else(|| RouteError::UnknownProfile(profile.to_string()));
        }
        match &self.experiment {
            Some(experiment) if !actor_id.is_empty() => {
                let variant = experiment.variant_of(actor_id);
                let lane = self.named(variant).ok_or_else(|| RouteError::UnknownProfile(variant.to_string()))?;
                let labels =
                    ExperimentLabels { experiment: experiment.name().to_string(), variant: variant.to_string() };
                self.metrics.experiments.reads.get_or_create(&labels).inc();
                Ok(lane)
            }
            _ => Ok(self.default_lane()),
        }
    }
}
