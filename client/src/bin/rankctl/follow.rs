//! `rankctl follow`: a board of the ranking feed, read from Kafka or JetStream from the
//! oldest record kept, every version checked as it closes (its changes, its chain, the
//! checksum of the top held) and the top printed as it moves. With `--once`, it stops when it
//! has read what the bus held when it started. A consumer's reference: its rules are
//! `ranking_client::feed`.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Args;
use prost::Message;
use ranking_client::feed::{Follower, board_name, board_of};
use ranking_client::v1;

use crate::output::json;

#[derive(Args)]
pub struct FollowArgs {
    /// Kafka bootstrap servers (with --topic).
    #[arg(long, group = "bus", requires = "topic")]
    kafka: Option<String>,
    /// The feed's Kafka topic.
    #[arg(long)]
    topic: Option<String>,
    /// A NATS server (with --subject).
    #[arg(long, group = "bus", requires = "subject")]
    nats: Option<String>,
    /// The feed's JetStream subject prefix.
    #[arg(long)]
    subject: Option<String>,
    /// The weekly board instead of the daily one (`--window weekly`).
    #[arg(long, conflicts_with_all = ["trending", "window"])]
    weekly: bool,
    /// Today's trending board instead of the daily one (`--window trending`).
    #[arg(long, conflicts_with = "window")]
    trending: bool,
    /// The board's window: daily (the default), weekly or trending.
    #[arg(long, value_parser = crate::window_arg)]
    window: Option<v1::Window>,
    /// A segment's board; the whole ranking by default.
    #[arg(long, default_value = "")]
    segment: String,
    /// The board of this date (YYYY-MM-DD); by default the latest date the feed holds.
    #[arg(long)]
    date: Option<String>,
    /// The scoring profile.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Entries printed.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Stop once what the bus held at the start is read.
    #[arg(long)]
    once: bool,
}

/// The boards followed (one per date), and what is printed.
impl FollowArgs {
    /// The window followed.
    fn window(&self) -> v1::Window {
        match (self.weekly, self.trending, self.window) {
            (true, ..) => v1::Window::Weekly,
            (_, true, _) => v1::Window::Trending,
            (.., Some(named)) => named,
            _ => v1::Window::Daily,
        }
    }
}

struct Boards {
    args: FollowArgs,
    json: bool,
    followers: BTreeMap<String, (String, Follower)>,
}

impl Boards {
    fn wants(&self, board: &v1::BoardKey) -> bool {
        let window = self.args.window();
        board.window == window as i32
            && board.segment == self.args.segment
            && board.profile == self.args.profile
            && self.args.date.as_ref().is_none_or(|d| *d == board.date)
    }

    /// Applies a record; prints the board when it closed a version of the latest date.
    fn apply(&mut self, record: &v1::FeedRecord) -> Result<(), Box<dyn std::error::Error>> {
        let Some(board) = board_of(record).filter(|b| self.wants(b)) else { return Ok(()) };
        let (date, name) = (board.date.clone(), board_name(board));
        let (_, follower) = self.followers.entry(date.clone()).or_insert_with(|| (name.clone(), Follower::default()));
        let closed = follower.apply(record).map_err(|e| format!("{name}: {e}"))?;
        let latest = self.followers.keys().next_back().is_some_and(|d| *d == date);
        if let (Some(version), true) = (closed, latest) {
            self.print(&date, version);
        }
        Ok(())
    }

    fn print(&self, date: &str, version: u64) {
        let Some((name, follower)) = self.followers.get(date) else { return };
        let top = follower.top();
        let shown = &top[..top.len().min(self.args.limit)];
        if self.json {
            let entries: Vec<_> =
                shown.iter().zip(1u64..).map(|((p, s), r)| json!({ "rank": r, "product_id": p, "score": s })).collect();
            println!("{}", json!({ "board": name, "version": version, "entries": top.len(), "top": entries }));
        } else {
            println!("{name} version {version} ({} entries, checksum verified)", top.len());
            for ((p, s), r) in shown.iter().zip(1..) {
                println!("{r:>6}  {p:>20}  {s:.4}");
            }
        }
    }
}

pub async fn run(args: FollowArgs, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let once = args.once;
    let mut boards = Boards { args, json, followers: BTreeMap::new() };
    match (boards.args.kafka.clone(), boards.args.nats.clone()) {
        (Some(brokers), _) => {
            let topic = boards.args.topic.clone().unwrap_or_default();
            boards = tokio::task::spawn_blocking(move || kafka(&brokers, &topic, once, boards)).await??;
        }
        (None, Some(url)) => {
            let subject = boards.args.subject.clone().unwrap_or_default();
            nats(&url, &subject, once, &mut boards).await?
        }
        (None, None) => return Err("name a bus: --kafka BROKERS --topic T, or --nats URL --subject S".into()),
    }
    if boards.followers.is_empty() {
        return Err("no record of that board".into());
    }
    Ok(())
}

/// Reads every partition of `topic` from its oldest record.
fn kafka(brokers: &str, topic: &str, once: bool, mut boards: Boards) -> Result<Boards, String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message as _;
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let text = |e: rdkafka::error::KafkaError| e.to_string();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "rankctl-follow")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(text)?;
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).map_err(text)?;
    let partitions: Vec<i32> = metadata.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
    let mut list = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in &partitions {
        let (low, high) = consumer.fetch_watermarks(topic, *p, Duration::from_secs(10)).map_err(text)?;
        list.add_partition_offset(topic, *p, Offset::Offset(low)).map_err(text)?;
        ends.insert(*p, high);
    }
    consumer.assign(&list).map_err(text)?;
    let mut read: BTreeMap<i32, i64> = partitions.iter().map(|p| (*p, 0)).collect();
    loop {
        if once && read.iter().all(|(p, next)| *next >= ends[p]) {
            return Ok(boards);
        }
        let Some(message) = consumer.poll(Duration::from_millis(500)) else { continue };
        let message = message.map_err(text)?;
        read.insert(message.partition(), message.offset() + 1);
        let record = v1::FeedRecord::decode(message.payload().unwrap_or_default()).map_err(|e| e.to_string())?;
        boards.apply(&record).map_err(|e| e.to_string())?;
    }
}

/// Reads the feed's stream from its oldest message, only this board's subject.
async fn nats(url: &str, prefix: &str, once: bool, boards: &mut Boards) -> Result<(), Box<dyn std::error::Error>> {
    use async_nats::jetstream::{self, consumer};
    use futures_util::StreamExt;

    let js = jetstream::new(async_nats::connect(url).await?);
    let window = boards.args.window();
    let board = v1::BoardKey {
        window: window as i32,
        segment: boards.args.segment.clone(),
        profile: boards.args.profile.clone(),
        ..Default::default()
    };
    let subject = ranking_client::feed::subject(prefix, &board);
    let stream = js.get_stream(js.stream_by_subject(&subject).await?).await?;
    let config = consumer::pull::OrderedConfig { filter_subject: subject, ..Default::default() };
    let mut messages = stream.create_consumer(config).await?.messages().await?;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(2), messages.next()).await;
        let message = match next {
            Ok(Some(m)) => m?,
            Ok(None) => return Ok(()),
            Err(_) if once => return Ok(()),
            Err(_) => continue,
        };
        let pending = message.info().map(|i| i.pending).unwrap_or(1);
        let record = v1::FeedRecord::decode(message.payload.as_ref())?;
        boards.apply(&record)?;
        if once && pending == 0 {
            return Ok(());
        }
    }
}
