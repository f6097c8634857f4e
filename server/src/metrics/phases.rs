//! [`Phases`]: the time a piece of work spends in each of its named phases, for the families
//! that report phases (a recompute's, a live pass's). One helper instead of an `Instant` per
//! phase threaded through the work.

use std::time::Duration;

use tokio::time::Instant;

/// Named phases of one piece of work and the time spent in each.
#[derive(Debug)]
pub struct Phases {
    /// When the phase under way began.
    mark: Instant,
    spent: Vec<(&'static str, Duration)>,
}

impl Phases {
    /// Starts the first phase now.
    pub fn start() -> Self {
        Self { mark: Instant::now(), spent: Vec::new() }
    }

    /// Ends the phase under way as `name` and starts the next one now.
    pub fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.add(name, now - self.mark);
        self.mark = now;
    }

    /// Ends the phase under way as two: `first` until `at`, `second` from then until now
    /// (work whose boundary was measured inside it), and starts the next one now.
    pub fn split(&mut self, first: &'static str, at: Instant, second: &'static str) {
        let now = Instant::now();
        let at = at.clamp(self.mark, now);
        self.add(first, at - self.mark);
        self.add(second, now - at);
        self.mark = now;
    }

    /// Ends the phase under way as consecutive phases, each `(name, end)` lasting until its
    /// end (the last until now whatever its end says), and starts the next one now.
    pub fn split_at(&mut self, parts: &[(&'static str, Instant)]) {
        let now = Instant::now();
        for (i, (name, end)) in parts.iter().enumerate() {
            let end = if i + 1 == parts.len() { now } else { (*end).clamp(self.mark, now) };
            self.add(name, end - self.mark);
            self.mark = end;
        }
        self.mark = now;
    }

    /// Adds `spent` to `name` (a phase that ran beside others, measured on its own).
    pub fn add(&mut self, name: &'static str, spent: Duration) {
        match self.spent.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => *total += spent,
            None => self.spent.push((name, spent)),
        }
    }

    /// Each phase's seconds, in the order the phases first ended.
    pub fn seconds(&self) -> Vec<(&'static str, f64)> {
        self.spent.iter().map(|(name, d)| (*name, d.as_secs_f64())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_follow_each_other_and_added_time_sums_by_name() {
        let mut phases = Phases::start();
        phases.lap("read");
        phases.add("segments", Duration::from_millis(30));
        phases.lap("rank");
        phases.add("segments", Duration::from_millis(20));
        let seconds = phases.seconds();
        let names: Vec<&str> = seconds.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["read", "segments", "rank"]);
        assert_eq!(seconds[1].1, 0.05);
        assert!(seconds.iter().all(|(_, s)| *s >= 0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_phase_split_at_its_parts_ends_each_where_measured() {
        let mut phases = Phases::start();
        tokio::time::advance(Duration::from_millis(10)).await;
        let first = Instant::now();
        tokio::time::advance(Duration::from_millis(30)).await;
        let second = Instant::now();
        tokio::time::advance(Duration::from_millis(5)).await;
        phases.split_at(&[("rank", first), ("publish", second), ("trending", second)]);
        assert_eq!(phases.seconds(), vec![("rank", 0.01), ("publish", 0.03), ("trending", 0.005)]);
    }
}
