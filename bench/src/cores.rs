//! Which cores each party of a run may use. On this machine the broker, PostgreSQL and the
//! replicas share two cores, so once they are busy a path's rate follows the CPU of every
//! party, the broker's included. A deployment runs its broker on machines of its own: the
//! `split` layout gives the broker a core of its own and the service (this process, its
//! replicas or RecordEvents with its callers) and PostgreSQL the other, so the service side
//! of both paths gets the same one core. A deployment's database has machines of its own
//! too: the `database` layout gives PostgreSQL, the party both paths share, a core of its own
//! and the service and the broker the other.

use std::process::{Command, Stdio};

use crate::helpers::pg;

/// Where the parties of a run are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Every party on every core (the machine as it is).
    Shared,
    /// The broker on the last core, the service and PostgreSQL on the others.
    Split,
    /// PostgreSQL on the last core, the service and the broker on the others.
    Database,
}

impl Layout {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::Split => "split",
            Self::Database => "database",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "shared" => Some(Self::Shared),
            "split" => Some(Self::Split),
            "database" => Some(Self::Database),
            _ => None,
        }
    }
}

/// The cores of a layout, applied until dropped; every party is given every core again
/// after (the machine's NATS server outlives the benchmark).
pub(crate) struct Pinned<'a> {
    database: &'a pg::ThrowawayPostgres,
    broker: &'a [u32],
}

impl<'a> Pinned<'a> {
    /// Pins this process, `database`'s processes and the broker's processes `broker` as
    /// `layout` says (nothing for [`Layout::Shared`] beyond undoing an earlier split).
    pub(crate) fn apply(layout: Layout, database: &'a pg::ThrowawayPostgres, broker: &'a [u32]) -> Self {
        let pinned = Self { database, broker };
        let cores = cores();
        let (rest, last) = (format!("0-{}", cores.max(2) - 2), format!("{}", cores.max(2) - 1));
        assert!(layout == Layout::Shared || cores >= 2, "the {} layout needs two cores", layout.name());
        match layout {
            Layout::Shared => pinned.set(&all(), &all(), &all()),
            Layout::Split => pinned.set(&rest, &rest, &last),
            Layout::Database => pinned.set(&rest, &last, &rest),
        }
        pinned
    }

    /// Pins this process to `service`, PostgreSQL to `database` and the broker to `brokers`.
    fn set(&self, service: &str, database: &str, brokers: &str) {
        pin(std::process::id(), service);
        for pid in self.database.pids() {
            pin(pid, database);
        }
        for &pid in self.broker {
            pin(pid, brokers);
        }
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.set(&all(), &all(), &all());
    }
}

/// The machine's cores, not this process's (it may be pinned already).
fn cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/present")
        .ok()
        .and_then(|s| s.trim().rsplit(['-', ',']).next()?.parse::<usize>().ok())
        .map_or_else(|| std::thread::available_parallelism().map_or(1, usize::from), |last| last + 1)
}

fn all() -> String {
    format!("0-{}", cores() - 1)
}

/// Every thread of `pid` on `cpus` (`taskset`, util-linux); a process gone meanwhile is
/// left alone.
fn pin(pid: u32, cpus: &str) {
    let _ = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
