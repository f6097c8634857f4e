//! What several scenarios share: a database of its own per run on a throwaway PostgreSQL,
//! the CPU each party spends per event, and RecordEvents from several writers.

use std::sync::{Arc, Mutex};

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database};

use crate::Running;
use crate::helpers::pg;
use crate::helpers::process::cpu_seconds;

/// A fresh database on the throwaway server, after a checkpoint: the dirty pages of the runs
/// before it are written now rather than by a checkpoint inside this run's window.
pub(crate) async fn fresh_db(server: &str) -> String {
    let admin = Database::connect(server).await.expect("connect");
    let name = format!("rk_run_{:x}", Utc::now().timestamp_micros());
    admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
    admin.execute_unprepared("CHECKPOINT").await.expect("checkpoint");
    format!("{}/{name}", server.rsplit_once('/').expect("path").0)
}

/// Drops a run's database, so that no later run's window holds its autovacuum.
pub(crate) async fn drop_db(server: &str, url: &str) {
    let admin = Database::connect(server).await.expect("connect");
    let name = url.rsplit_once('/').expect("path").1;
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.expect("drop database");
}

/// CPU seconds so far of the processes `pids` (a broker's), those gone meanwhile left out.
fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().copied().map(cpu_seconds).filter(|s| !s.is_nan()).sum()
}

/// CPU spent per event by this process (the in-process servers, plus the callers of
/// RecordEvents), PostgreSQL and a broker, µs.
#[derive(Clone, Copy, Default)]
pub(crate) struct CpuPerEvent {
    pub(crate) service: f64,
    pub(crate) database: f64,
    pub(crate) broker: f64,
}

/// Reads the CPU clocks at the start of a run and divides their growth by its events.
pub(crate) struct CpuMeter<'a> {
    database: &'a pg::ThrowawayPostgres,
    /// The broker's processes, when a broker takes part.
    broker: &'a [u32],
    start: [f64; 3],
}

impl<'a> CpuMeter<'a> {
    pub(crate) fn start(database: &'a pg::ThrowawayPostgres, broker: &'a [u32]) -> Self {
        let mut meter = Self { database, broker, start: [0.0; 3] };
        meter.start = meter.read();
        meter
    }

    fn read(&self) -> [f64; 3] {
        [cpu_seconds(std::process::id()), self.database.cpu_seconds(), cpu_of(self.broker)]
    }

    pub(crate) fn per_event(&self, n: usize) -> CpuPerEvent {
        let now = self.read();
        let us = |i: usize| (now[i] - self.start[i]) / n as f64 * 1e6;
        CpuPerEvent { service: us(0), database: us(1), broker: us(2) }
    }
}

/// RecordEvents of `batches` from `writers` writers spread over `servers` in turn, each
/// taking the next batch, in order, when its previous one is answered; returns when all are.
/// In order, as a bus delivers them: the ids of a run grow with its batches, and the order
/// decides where in the ledger's index each batch's ids fall (reversed, every batch fell
/// before all the stored ids, which hid a lookup plan that read the ledger up to them).
pub(crate) async fn write_batches(servers: &[Running], batches: Vec<Vec<v1::Event>>, writers: usize) {
    let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(batches)));
    let mut tasks = Vec::new();
    for w in 0..writers {
        let app = &servers[w % servers.len()];
        let mut client = app.clients[w / servers.len() % app.clients.len()].clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(batch) = queue.lock().expect("queue").pop_front() else { return };
                client.record_events(v1::RecordEventsRequest { events: batch }).await.expect("RecordEvents");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
}
