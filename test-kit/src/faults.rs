//! Faults a test puts between a server and what it depends on: a day of many products
//! seeded straight into SQL (so that a recompute lasts long enough to be paused in the
//! middle), a process paused and resumed (SIGSTOP, SIGCONT), and a TCP proxy that stops
//! forwarding on demand (a connection that stalls without closing, as a partition does).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Writes `products` rows of `date` into `product_daily_metrics` in one statement (views,
/// likes and order amounts varying with the product id, the latest event within the last
/// day), on any of the three engines.
pub async fn seed_day(url: &str, date: chrono::NaiveDate, products: i64) {
    let db = Database::connect(url).await.expect("connect");
    let now_us = chrono::Utc::now().timestamp_micros();
    let columns = "metric_date, product_id, views, likes, orders, order_amount, last_event_at, updated_at";
    let values = format!(
        "'{date}', g, (g * 7919) % 5000, (g * 104729) % 300, (g * 31) % 7, ((g * 7127) % 9) * 10000, \
         {now_us} - (g % 86400) * 1000000, {now_us}"
    );
    let sql = match db.get_database_backend() {
        DbBackend::Postgres => format!(
            "INSERT INTO product_daily_metrics ({columns}) SELECT {values} FROM generate_series(1::bigint, {products}::bigint) g"
        ),
        // MariaDB's sequence engine.
        DbBackend::MySql => format!(
            "INSERT INTO product_daily_metrics ({columns}) SELECT {values} FROM (SELECT seq AS g FROM seq_1_to_{products}) s"
        ),
        _ => format!(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {products}) \
             INSERT INTO product_daily_metrics ({columns}) SELECT {values} FROM s"
        ),
    };
    db.execute_unprepared(&sql).await.expect("seed the day");
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
    assert!(sent.expect("kill").success(), "kill -{signal} {pid}");
}

/// A TCP proxy to one server that forwards until told to stall: then every byte in either
/// direction is held (connections stay open, nothing moves) until it is told to forward again.
pub struct StallingProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    stalled: watch::Sender<bool>,
    stop: Arc<AtomicBool>,
}

impl StallingProxy {
    /// A proxy on a free loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stalled, _) = watch::channel(false);
        let stop = Arc::new(AtomicBool::new(false));
        let gate = stalled.clone();
        let stopped = stop.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(server) = TcpStream::connect(target).await else { continue };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward(client_read, server_write, gate.subscribe()));
                tokio::spawn(forward(server_read, client_write, gate.subscribe()));
            }
        });
        Self { addr, stalled, stop }
    }

    /// Holds every byte from now on.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again, the held bytes first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stalled.send_replace(false);
    }
}

/// Copies `from` to `to`, waiting while `stalled` says so before writing each read.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Bytes read just before a stall are held too.
        if stalled.wait_for(|s| !*s).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A reader of one replica's daily top, one GetTopN every 20 ms (each given 1 s, so a frozen
/// replica's unanswered calls do not stop it), keeping the version of every answer: what a
/// shopper refreshing a page would see, through a fault and after it.
pub struct VersionWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<u64>>,
}

impl VersionWatch {
    /// Starts reading through `client`.
    pub fn start(mut client: ranking_client::RankingServiceClient<ranking_client::tonic::transport::Channel>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut versions = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let request = ranking_client::v1::GetTopNRequest { limit: 1, ..Default::default() };
                let read = tokio::time::timeout(std::time::Duration::from_secs(1), client.get_top_n(request)).await;
                if let Ok(Ok(answer)) = read {
                    versions.push(answer.into_inner().version);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            versions
        });
        Self { stop, task }
    }

    /// Stops reading and asserts that no answer came from a version older than one before
    /// it; returns how many answers there were.
    pub async fn assert_never_went_back(self, replica: &str) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let versions = self.task.await.expect("watch task");
        if let Some(at) = versions.windows(2).position(|w| w[1] < w[0]) {
            panic!(
                "{replica} answered version {} after {} (read {} of {}; around it: {:?})",
                versions[at + 1],
                versions[at],
                at + 2,
                versions.len(),
                &versions[at.saturating_sub(3)..(at + 5).min(versions.len())]
            );
        }
        versions.len()
    }
}

/// Whether a session of `admin`'s database (PostgreSQL or MariaDB) other than its own has
/// sat inside a write transaction, without a statement, for a moment, after writing metrics
/// rows: so it holds the change epoch's row and the rows it upserted. A replica's healthy
/// transactions move on within milliseconds; one stopped in the middle stays.
pub async fn write_transaction_left_open(admin: &DatabaseConnection) -> bool {
    let sql = match admin.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT COUNT(*) FROM pg_stat_activity a WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND state = 'idle in transaction' \
             AND now() - state_change > interval '200 milliseconds' \
             AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid \
                         AND l.relation = 'product_daily_metrics'::regclass)"
        }
        // Past its 200 events: a metrics row written.
        DbBackend::MySql => {
            "SELECT COUNT(*) FROM information_schema.innodb_trx t \
             JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id \
             WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND p.COMMAND = 'Sleep' AND p.TIME_MS > 200 \
             AND t.trx_rows_modified > 200"
        }
        _ => unreachable!("replicas share a database server"),
    };
    let row = admin.query_one_raw(Statement::from_string(admin.get_database_backend(), sql)).await;
    let n: i64 = row.expect("query").expect("row").try_get_by_index(0).expect("count");
    n > 0
}

/// Stops process `pid` (SIGSTOP) at a moment it is inside a write transaction of `admin`'s
/// database: stopped, looked at, and let go again (SIGCONT) until it is caught so. Returns
/// the attempts it took.
pub async fn freeze_inside_a_write_transaction(pid: u32, admin: &DatabaseConnection) -> u32 {
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(attempts < 2_000, "never caught process {pid} inside a write transaction");
        signal(pid, "STOP");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        if write_transaction_left_open(admin).await {
            return attempts;
        }
        signal(pid, "CONT");
        tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempts % 7))).await;
    }
}
