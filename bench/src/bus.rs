//! `bus <kafka-brokers> [events] [nats-url]`: a backlog of events (uniform over 100,000
//! products, the worst case, then Zipf) on an Apache Kafka topic of 4 partitions and on a
//! JetStream stream, in proto3 JSON (or protobuf binary, `format=protobuf`), drained into a
//! throwaway PostgreSQL by one and by two replicas: events/s from the moment every replica
//! serves until every event is recorded (lag 0) and, for Kafka, also from the moment its
//! group settled (a join or rebalance pauses a group; a deployment pays it once per
//! membership change, not per event), next to the broker's own rate for a consumer that
//! only reads (librdkafka's, as the replicas use it, and for Kafka also Kafka's own
//! `ConsumerPerformance` with its CPU per record), and to RecordEvents with the same batch size from as many
//! writers as there are replicas, on one server and on as many servers as there are replicas
//! (each server with its own pool, as each replica has). A broker given as `-` is skipped.
//! Beside the rates, the CPU each path spends per event: the replicas' (this process),
//! PostgreSQL's and the broker's for the bus, the service's (with its callers) and
//! PostgreSQL's for RecordEvents, and the read-only consumer's own (what the bus client
//! spends to receive a record); on two shared cores the rates follow these sums once the
//! cores are busy.
//!
//! The replicas run in this process (the integration tests' fixture). In the `shared` layout
//! they share the machine's two cores with the broker and PostgreSQL, as a deployment on
//! one host would; in the `split` layout the broker has a core of its own, as a deployment's
//! broker has machines of its own, and both paths' service and PostgreSQL get the other; in
//! the `database` layout PostgreSQL, the party both paths share, has a core of its own
//! ([`crate::cores`]).

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull};
use chrono::Utc;
use futures_util::StreamExt;
use ranking_client::v1;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

use ranking_server::bus::decode::Format;

use crate::cores::{Layout, Pinned};
use crate::helpers::bus::{PARTITIONS, TestBus};
use crate::helpers::metric_or_zero as sample;
use crate::helpers::pg;
use crate::helpers::process::{children_cpu_seconds, command_line, cpu_seconds, pids_named};
use crate::ingest::Rng;
use crate::runs::{CpuMeter, CpuPerEvent, drop_db, fresh_db, write_batches};
use crate::serve;

pub(crate) const PRODUCTS: u64 = 100_000;
const BATCH: usize = 5_000;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Popularity {
    Uniform,
    Zipf,
}

impl Popularity {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Zipf => "Zipf",
        }
    }

    /// The share of events naming product `g` of `n`, as a SQL expression of `g` (for Zipf,
    /// product k with probability ln(1 + 1/k) / ln n: `Rng::zipf`'s draw).
    pub(crate) fn share_sql(self, n: i64) -> String {
        match self {
            Self::Uniform => format!("(1.0 / {n})"),
            Self::Zipf => format!("(ln(1.0 + 1.0 / g) / ln({n}.0))"),
        }
    }

    /// `uniform` or `zipf`, as the command line gives it (its name in any case).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        [Self::Uniform, Self::Zipf].into_iter().find(|p| p.name().eq_ignore_ascii_case(s))
    }
}

/// The bus a backlog is drained from.
#[derive(Clone, Copy)]
enum Broker<'a> {
    Kafka(&'a str),
    JetStream(&'a str),
}

impl Broker<'_> {
    fn source(self) -> &'static str {
        match self {
            Self::Kafka(_) => "kafka",
            Self::JetStream(_) => "jetstream",
        }
    }

    /// A fresh topic or stream with the records on it: (the bus, produce events/s).
    async fn backlog(self, records: &[(String, Vec<u8>)]) -> (TestBus, f64) {
        match self {
            Self::Kafka(brokers) => {
                let bus = TestBus::kafka(brokers).await;
                let rate = produce(brokers, bus.name(), records).await;
                (bus, rate)
            }
            Self::JetStream(url) => {
                let bus = TestBus::jetstream(url).await;
                let started = Instant::now();
                bus.publish(records).await;
                (bus, records.len() as f64 / started.elapsed().as_secs_f64())
            }
        }
    }

    /// The broker's processes on this machine (their CPU is read from /proc): the Kafka JVM
    /// that listens on the bootstrap address, the NATS server.
    fn pids(self) -> Vec<u32> {
        match self {
            Self::Kafka(brokers) => kafka_pids(brokers),
            Self::JetStream(_) => pids_named("nats-server"),
        }
    }

    /// A consumer that only reads the whole backlog: events/s, and this process's CPU µs
    /// per event meanwhile (what the bus client alone spends to receive a record, which the
    /// replicas spend on top of recording it).
    async fn read_only(self, name: &str, n: usize) -> (f64, f64) {
        let before = cpu_seconds(std::process::id());
        let rate = match self {
            Self::Kafka(brokers) => read_only(brokers, name, n).await,
            Self::JetStream(url) => read_only_jetstream(url, name, n).await,
        };
        (rate, (cpu_seconds(std::process::id()) - before) / n as f64 * 1e6)
    }

    /// The server flags that consume `name` under a fresh group / durable consumer.
    fn flags(self, name: &str) -> Vec<String> {
        let id = format!("bench-{:x}", Utc::now().timestamp_micros());
        match self {
            Self::Kafka(brokers) => vec![
                format!("--kafka-brokers={brokers}"),
                format!("--kafka-topics={name}"),
                format!("--kafka-group={id}"),
            ],
            Self::JetStream(url) => {
                vec![format!("--nats-url={url}"), format!("--nats-stream={name}"), format!("--nats-consumer={id}")]
            }
        }
    }
}

/// `n` VIEW/LIKE/ORDER events of today over [`PRODUCTS`] products (also the write-path
/// benchmark's).
pub(crate) fn events(n: usize, popularity: Popularity, run: &str) -> Vec<v1::Event> {
    let mut rng = Rng(0x51ED_2701 ^ n as u64);
    let at = prost_types::Timestamp { seconds: Utc::now().timestamp() - 30, nanos: 0 };
    (0..n)
        .map(|i| {
            let product_id = match popularity {
                Popularity::Uniform => 1 + (rng.next_u64() % PRODUCTS) as i64,
                Popularity::Zipf => rng.zipf(PRODUCTS).max(1),
            };
            let r = rng.next_u64();
            let (kind, amount) = match r % 20 {
                0 => (v1::EventType::Order, ((r >> 8) % 200_000) as i64),
                1..=3 => (v1::EventType::Like, 0),
                _ => (v1::EventType::View, 0),
            };
            v1::Event {
                // Growing with `i`, as time-ordered ids (ULIDs, snowflakes) grow.
                event_id: format!("{run}-{i:09}"),
                product_id,
                r#type: kind.into(),
                amount,
                occurred_at: Some(at),
                signal: String::new(),
                ..Default::default()
            }
        })
        .collect()
}

/// The record a producer would publish: keyed by product, the event in `format` (proto3
/// JSON, as a producer such as kcat writes it, or protobuf binary, as RecordEvents carries it).
fn record(e: &v1::Event, format: Format) -> (String, Vec<u8>) {
    if let Format::Protobuf = format {
        return (e.product_id.to_string(), prost::Message::encode_to_vec(e));
    }
    let at = e.occurred_at.expect("timestamp");
    let at = chrono::DateTime::<Utc>::from_timestamp(at.seconds, 0).expect("instant").to_rfc3339();
    let kind = v1::EventType::try_from(e.r#type).expect("type").as_str_name();
    let json = format!(
        r#"{{"eventId":"{}","productId":"{}","type":"{kind}","amount":"{}","occurredAt":"{at}"}}"#,
        e.event_id, e.product_id, e.amount
    );
    (e.product_id.to_string(), json.into_bytes())
}

async fn produce(brokers: &str, topic: &str, records: &[(String, Vec<u8>)]) -> f64 {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "20")
        .set("batch.num.messages", "10000")
        .set("queue.buffering.max.messages", "1000000")
        .set("compression.type", "lz4")
        .create()
        .expect("producer");
    let started = Instant::now();
    for chunk in records.chunks(50_000) {
        let sends = chunk.iter().map(|(key, payload)| {
            producer.send(FutureRecord::to(topic).key(key).payload(payload), Duration::from_secs(120))
        });
        for sent in futures_util::future::join_all(sends).await {
            sent.map_err(|(e, _)| e).expect("delivered");
        }
    }
    records.len() as f64 / started.elapsed().as_secs_f64()
}

/// The CPU µs per record of decoding `records` as the replicas do (this process, idle
/// otherwise between the cases): the share of their CPU that the records' encoding decides
/// (RecordEvents gets protobuf binary).
fn decoding(records: &[(String, Vec<u8>)], format: Format) -> f64 {
    let before = cpu_seconds(std::process::id());
    let valid =
        records.iter().filter(|(_, payload)| ranking_server::bus::decode::decode(format, payload).is_ok()).count();
    assert_eq!(valid, records.len(), "every benchmark record decodes");
    (cpu_seconds(std::process::id()) - before) / records.len() as f64 * 1e6
}

/// A consumer of a fresh group that only reads: the broker's own rate.
async fn read_only(brokers: &str, topic: &str, n: usize) -> f64 {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("bench-read-{:x}", Utc::now().timestamp_micros()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let started = Instant::now();
    let mut seen = 0usize;
    while seen < n {
        consumer.recv().await.expect("record");
        seen += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// The Kafka brokers of this machine listening on an address of `bootstrap`: the JVMs
/// running `kafka.Kafka` whose properties file (their last argument, as
/// `scripts/kafka-broker.sh` starts them) names one as a listener.
fn kafka_pids(bootstrap: &str) -> Vec<u32> {
    let listens = |properties: &str| {
        std::fs::read_to_string(properties).is_ok_and(|text| {
            text.lines().filter_map(|l| l.strip_prefix("listeners=")).any(|listeners| {
                bootstrap.split(',').any(|address| listeners.contains(&format!("//{}", address.trim())))
            })
        })
    };
    pids_named("java")
        .into_iter()
        .filter(|&pid| {
            let args = command_line(pid);
            args.iter().any(|a| a == "kafka.Kafka")
                && args.iter().rev().find(|a| !a.is_empty()).is_some_and(|properties| listens(properties))
        })
        .collect()
}

/// Kafka's own `ConsumerPerformance` reading the whole topic in a fresh group, from the jars
/// of `scripts/kafka-broker.sh`: its events/s (first fetch to last, as it reports), and its
/// CPU µs per record net of a JVM's start (a run reading one record is taken off).
fn consumer_performance(brokers: &str, topic: &str, n: usize) -> (f64, f64) {
    let run = |messages: usize| -> (f64, f64) {
        let before = children_cpu_seconds();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka-broker.sh");
        let output = std::process::Command::new(script)
            .args([
                "run",
                "org.apache.kafka.tools.ConsumerPerformance",
                "--bootstrap-server",
                brokers,
                "--topic",
                topic,
            ])
            .args(["--messages", &messages.to_string(), "--timeout", "120000", "--hide-header"])
            .arg("--group")
            .arg(format!("bench-perf-{:x}", Utc::now().timestamp_micros()))
            .output()
            .expect("ConsumerPerformance runs");
        let cpu = children_cpu_seconds() - before;
        let text = String::from_utf8_lossy(&output.stdout);
        // start.time, end.time, MB, MB/s, records, records/s, rebalance ms, fetch ms,
        // fetch MB/s, fetch records/s
        let fields: Vec<&str> = text.lines().last().unwrap_or_default().split(',').map(str::trim).collect();
        let fetch_rate = fields.get(9).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        (fetch_rate, cpu)
    };
    let (rate, cpu) = run(n);
    let (_, start_cpu) = run(1);
    (rate, (cpu - start_cpu) / n as f64 * 1e6)
}

/// A consumer without acks that pulls the whole stream in batches: the server's own rate.
async fn read_only_jetstream(url: &str, stream: &str, n: usize) -> f64 {
    let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
    let config = pull::Config { ack_policy: jetstream::consumer::AckPolicy::None, ..Default::default() };
    let reader = js.get_stream(stream).await.expect("stream").create_consumer(config).await.expect("reader");
    let started = Instant::now();
    let mut seen = 0usize;
    while seen < n {
        let mut batch =
            reader.batch().max_messages(BATCH).expires(Duration::from_secs(1)).messages().await.expect("fetch");
        while let Some(m) = batch.next().await {
            m.expect("message");
            seen += 1;
        }
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// `replicas` servers consuming the topic or stream until `n` records are recorded:
/// (events/s, events/s once a Kafka group settled, its batches, CPU per event).
async fn drain(
    broker: Broker<'_>,
    name: &str,
    database: &pg::ThrowawayPostgres,
    n: usize,
    replicas: usize,
    format: Format,
) -> (f64, Option<f64>, BatchFigures, CpuPerEvent) {
    let db = fresh_db(&database.url()).await;
    let mut args = vec![
        format!("--database-url={db}"),
        "--db-max-connections=32".to_string(),
        "--live-interval=0".to_string(),
        format!("--bus-batch={BATCH}"),
        format!("--bus-format={}", format.name()),
    ];
    args.extend(broker.flags(name));
    let mut apps = Vec::new();
    for replica in 0..replicas {
        // Replicas on one host share its name, the default static member id: each its own.
        let mut args = args.clone();
        args.push(format!("--kafka-instance-id=bench-replica-{replica}-{:x}", Utc::now().timestamp_micros()));
        apps.push(serve(&args).await);
    }
    // Measured from the moment every replica serves and has done its start-up recompute, as
    // RecordEvents is from its first call: a replica's start (migrations, the recompute over
    // what the others recorded meanwhile) is not part of its drain rate. What the first
    // replicas recorded while the others started is left out of the window.
    started_up(&apps).await;
    let before = progress(broker, &apps).await.recorded;
    let broker_pids = broker.pids();
    let cpu = CpuMeter::start(database, &broker_pids);
    let started = Instant::now();
    // A Kafka group's join and rebalances pause consumption for seconds on the test broker:
    // a second window opens once every replica holds partitions and all are held, and
    // counts what was recorded after that moment.
    let mut settled: Option<(Instant, usize)> = None;
    loop {
        let now = progress(broker, &apps).await;
        if settled.is_none() && now.settled {
            settled = Some((Instant::now(), now.recorded));
        }
        if now.recorded >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let measured = n.saturating_sub(before).max(1);
    let cpu = cpu.per_event(measured);
    let settled_rate = settled
        .filter(|&(_, recorded)| n > recorded)
        .map(|(at, recorded)| (n - recorded) as f64 / at.elapsed().as_secs_f64());
    let mut batch_seconds = 0.0;
    let mut batches = 0.0;
    for app in &apps {
        let m = app.app.scrape_metrics().await;
        batch_seconds += sample(&m, "ranking_bus_batch_seconds_sum");
        batches += sample(&m, "ranking_bus_batch_seconds_count");
    }
    for app in apps {
        app.stop().await;
    }
    drop_db(&database.url(), &db).await;
    let per_batch =
        BatchFigures { ms: batch_seconds / batches.max(1.0) * 1000.0, records: n as f64 / batches.max(1.0) };
    (measured as f64 / secs, settled_rate, per_batch, cpu)
}

/// The replicas' records so far, and whether their Kafka group has settled.
struct Progress {
    recorded: usize,
    /// Every replica holds partitions and all [`PARTITIONS`] are held (each replica's lag
    /// series are its assigned partitions, refreshed every second). Never for JetStream,
    /// which has no group to settle.
    settled: bool,
}

async fn progress(broker: Broker<'_>, apps: &[crate::Running]) -> Progress {
    let source = broker.source();
    let mut recorded = 0.0;
    let mut held = Vec::with_capacity(apps.len());
    for app in apps {
        let metrics = app.app.scrape_metrics().await;
        // Distinct records only: a record redelivered after a rebalance comes again as a
        // DUPLICATE, and counting it would end the window before every event is in.
        for o in ["accepted", "invalid"] {
            recorded += sample(&metrics, &format!("ranking_bus_records_total{{source=\"{source}\",outcome=\"{o}\"}}"));
        }
        let series = format!("ranking_bus_lag_records{{source=\"{source}\",");
        held.push(metrics.lines().filter(|l| l.starts_with(&series)).count());
    }
    let settled = match broker {
        Broker::Kafka(_) => held.iter().all(|&h| h > 0) && held.iter().sum::<usize>() == PARTITIONS as usize,
        Broker::JetStream(_) => false,
    };
    Progress { recorded: recorded as usize, settled }
}

/// Returns once every server has done its start-up recompute (600 s at most).
async fn started_up(apps: &[crate::Running]) {
    let starting = Instant::now();
    for app in apps {
        while sample(&app.app.scrape_metrics().await, "ranking_seconds_since_last_recompute") < 0.0 {
            assert!(starting.elapsed() < Duration::from_secs(600), "a start-up recompute never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A drain's batches on average: handling began → last ack, and records.
struct BatchFigures {
    ms: f64,
    records: f64,
}

/// RecordEvents of the same events in batches of the bus batch, from `writers` writers
/// spread over `servers` servers of one database: (events/s, CPU per event).
async fn record_events(
    database: &pg::ThrowawayPostgres,
    events: &[v1::Event],
    writers: usize,
    servers: usize,
) -> (f64, CpuPerEvent) {
    let db = fresh_db(&database.url()).await;
    let args = [format!("--database-url={db}"), "--db-max-connections=32".into(), "--live-interval=0".into()];
    let mut apps = Vec::new();
    for _ in 0..servers {
        apps.push(serve(&args).await);
    }
    // Timed from the first call, every server started as the bus's replicas are.
    started_up(&apps).await;
    let batches: Vec<Vec<v1::Event>> = events.chunks(BATCH).map(<[v1::Event]>::to_vec).collect();
    let cpu = CpuMeter::start(database, &[]);
    let started = Instant::now();
    write_batches(&apps, batches, writers).await;
    let rate = events.len() as f64 / started.elapsed().as_secs_f64();
    let cpu = cpu.per_event(events.len());
    for app in apps {
        app.stop().await;
    }
    drop_db(&database.url(), &db).await;
    (rate, cpu)
}

/// Which cases of the scenario run, and how.
pub struct BusCases {
    /// The machine's cores shared by every party, or split between the broker and the rest
    /// ([`Layout`]).
    pub layouts: Vec<Layout>,
    /// Each case this many times.
    pub rounds: usize,
    /// The records' encoding (`RANKING_BUS_FORMAT`).
    pub format: Format,
    /// Only this popularity; `None`: uniform, then Zipf.
    pub popularity: Option<Popularity>,
}

/// The scenario: each case of `cases` in each of its layouts.
pub async fn bench_bus(kafka: Option<&str>, nats: Option<&str>, n: usize, cases: &BusCases) {
    let BusCases { layouts, rounds, format, popularity: only } = cases;
    let (rounds, format) = ((*rounds).max(1), *format);
    let mut medians = Vec::new();
    let throwaway = pg::ThrowawayPostgres::start_with("-c max_connections=300").expect("PostgreSQL server binaries");
    let brokers: Vec<Broker<'_>> = kafka.map(Broker::Kafka).into_iter().chain(nats.map(Broker::JetStream)).collect();
    println!("\n## Event-bus ingestion: a backlog of {n} events drained into PostgreSQL\n");
    println!(
        "Kafka: {}, a topic of 4 partitions; JetStream: {}, one stream.",
        kafka.unwrap_or("-"),
        nats.unwrap_or("-")
    );
    println!(
        "Batches of {BATCH} records (RANKING_BUS_BATCH); {PRODUCTS} products; records in {} (RANKING_BUS_FORMAT).",
        format.name()
    );
    println!(
        "Layout shared: every party on every core; split: the broker on a core of its own, the service and PostgreSQL on the other; database: PostgreSQL on a core of its own, the service and the broker on the other.\n"
    );
    println!(
        "| layout | bus | popularity | produce events/s | broker read-only events/s | read-only client CPU µs/event | Kafka ConsumerPerformance events/s | its CPU µs/event | decoding µs/record | replicas | bus events/s | records per batch | ms per batch (handling began → last ack) | RecordEvents events/s ({BATCH}-event batches, as many writers), one server | the same on as many servers as replicas | bus / RecordEvents, one server | bus / RecordEvents, as many servers | bus / read-only | Kafka events/s once the group settled | settled / RecordEvents, one server; as many servers | CPU µs/event bus: replicas + PostgreSQL + broker | CPU µs/event RecordEvents, one server: service + PostgreSQL | the same, as many servers |"
    );
    println!(
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"
    );
    let popularities = match only {
        Some(p) => vec![*p],
        None => vec![Popularity::Uniform, Popularity::Zipf],
    };
    for &layout in layouts {
        for &popularity in &popularities {
            for &broker in &brokers {
                let run = format!("{:x}", Utc::now().timestamp_micros());
                let events = events(n, popularity, &run);
                let records: Vec<(String, Vec<u8>)> = events.iter().map(|e| record(e, format)).collect();
                let (backlog, produced) = broker.backlog(&records).await;
                let name = backlog.name();
                let decoding = decoding(&records, format);
                drop(records);
                let broker_pids = broker.pids();
                let _pinned = Pinned::apply(layout, &throwaway, &broker_pids);
                let (read, read_cpu) = broker.read_only(name, n).await;
                let perf = match broker {
                    Broker::Kafka(brokers) => {
                        let (brokers, name) = (brokers.to_string(), name.to_string());
                        let (rate, cpu) = tokio::task::spawn_blocking(move || consumer_performance(&brokers, &name, n))
                            .await
                            .expect("ConsumerPerformance");
                        (format!("{rate:.0}"), format!("{cpu:.1}"))
                    }
                    Broker::JetStream(_) => ("—".to_string(), "—".to_string()),
                };
                for replicas in [1, 2] {
                    // Rounds interleave the two paths, each bus drain paired with the
                    // RecordEvents run right after it; the ratio is judged as their median.
                    let mut ratios = Vec::with_capacity(rounds);
                    let mut fleet_ratios = Vec::with_capacity(rounds);
                    let mut settled_ratios = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
                    for _ in 0..rounds {
                        let (bus, settled, per_batch, bus_cpu) =
                            drain(broker, name, &throwaway, n, replicas, format).await;
                        let (direct, direct_cpu) = record_events(&throwaway, &events, replicas, 1).await;
                        // The same writers spread over as many servers as the bus has
                        // replicas: each server's own pool and background work, as the bus's.
                        let (fleet, fleet_cpu) = if replicas == 1 {
                            (direct, direct_cpu)
                        } else {
                            record_events(&throwaway, &events, replicas, replicas).await
                        };
                        ratios.push(bus / direct);
                        fleet_ratios.push(bus / fleet);
                        let settled = match settled {
                            Some(rate) => {
                                settled_ratios.0.push(rate / direct);
                                settled_ratios.1.push(rate / fleet);
                                (format!("{rate:.0}"), format!("{:.2}; {:.2}", rate / direct, rate / fleet))
                            }
                            None => ("—".to_string(), "—".to_string()),
                        };
                        println!(
                            "| {} | {} | {} | {produced:.0} | {read:.0} | {read_cpu:.1} | {} | {} | {decoding:.2} | {replicas} | {bus:.0} | {:.0} | {:.0} | {direct:.0} | {fleet:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} |",
                            layout.name(),
                            broker.source(),
                            popularity.name(),
                            perf.0,
                            perf.1,
                            per_batch.records,
                            per_batch.ms,
                            bus / direct,
                            bus / fleet,
                            bus / read,
                            settled.0,
                            settled.1,
                            summed(&[bus_cpu.service, bus_cpu.database, bus_cpu.broker]),
                            summed(&[direct_cpu.service, direct_cpu.database]),
                            summed(&[fleet_cpu.service, fleet_cpu.database]),
                        );
                    }
                    medians.push(format!(
                        "- {} {} {} ({}), {replicas} replica(s): median bus / RecordEvents on one server {}; on {replicas} server(s) {}",
                        layout.name(),
                        broker.source(),
                        popularity.name(),
                        format.name(),
                        median(ratios),
                        median(fleet_ratios),
                    ));
                    if !settled_ratios.0.is_empty() {
                        medians.push(format!(
                            "  - once the group settled: on one server {}; on {replicas} server(s) {}",
                            median(settled_ratios.0),
                            median(settled_ratios.1),
                        ));
                    }
                }
                // The broker would otherwise keep every case's records after the run.
                if let Err(e) = backlog.delete().await {
                    eprintln!("the backlog {name} was not deleted: {e}");
                }
            }
        }
    }
    println!();
    for line in medians {
        println!("{line}");
    }
}

/// `ratios`' median with every round, as `0.95 of 3 round(s) (0.94, 0.95, 0.99)`.
fn median(mut ratios: Vec<f64>) -> String {
    ratios.sort_by(f64::total_cmp);
    let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!("{:.2} of {} round(s) ({})", ratios[ratios.len() / 2], ratios.len(), shown.join(", "))
}

/// CPU figures and their sum, as `7.7 + 29.6 + 9.0 = 46.3`.
fn summed(parts: &[f64]) -> String {
    let shown: Vec<String> = parts.iter().map(|p| format!("{p:.1}")).collect();
    format!("{} = {:.1}", shown.join(" + "), parts.iter().sum::<f64>())
}
