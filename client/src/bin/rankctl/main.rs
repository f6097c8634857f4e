//! `rankctl`: the ranking service from a terminal — record an event, read the top N or a
//! product's rank, trigger a recompute. Human-readable tables by default, `--json` for scripts.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use ranking_client::tonic::transport::{Certificate, ClientTlsConfig};
use ranking_client::{RankingClient, events, v1};

mod compare;
mod controls;
mod follow;
mod history;
mod output;
mod status;
mod watch;

use output::{entries_json, entry_json, explain_json, explain_table, json, table};

/// Command-line client of the ranking service.
#[derive(Parser)]
#[command(name = "rankctl", version, about = "Command-line client of the ranking service")]
struct Cli {
    /// Service address.
    #[arg(long, env = "RANKCTL_ENDPOINT", default_value = "http://127.0.0.1:50051", global = true)]
    endpoint: String,
    /// Bearer token sent with every call.
    #[arg(long, env = "RANKCTL_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// PEM CA certificate to verify an `https://` endpoint with.
    #[arg(long, env = "RANKCTL_CA", global = true)]
    ca: Option<std::path::PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    View,
    Like,
    Unlike,
    Order,
    /// A custom signal of the server's scoring profile (`--signal NAME`).
    Signal,
    /// Takes back an earlier event of the product (`--retracts EVENT_ID`): a refunded or
    /// cancelled order, a view found to be fraud.
    Retract,
}

/// A `--window` value: a window by its name (`daily`, `hourly`, `weekly`, `trending`), as the
/// contract's enum names it; every command that selects a board takes it this way.
pub fn window_arg(name: &str) -> Result<v1::Window, String> {
    v1::Window::named(name).ok_or_else(|| format!("{name:?} is not a window: daily, hourly, weekly or trending"))
}

#[derive(Subcommand)]
enum Command {
    /// Record one event (a fresh id and the current time are filled in).
    Record {
        /// What happened.
        kind: Kind,
        /// The product.
        product_id: i64,
        /// Order amount in the currency's minor unit (ORDER), or an amount signal's value.
        #[arg(long, default_value_t = 0)]
        amount: i64,
        /// The custom signal of a `signal` event, as the server's profile names it.
        #[arg(long, default_value = "")]
        signal: String,
        /// The event a `retract` takes back.
        #[arg(long, default_value = "")]
        retracts: String,
        /// The shopper or session the event comes from.
        #[arg(long, default_value = "")]
        actor: String,
        /// Use this event id instead of a fresh one (to repeat a delivery).
        #[arg(long)]
        id: Option<String>,
    },
    /// Show the top of a ranking.
    Top {
        #[command(flatten)]
        ranking: Ranking,
        #[arg(long, default_value_t = 10)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u32,
        /// Continue a walk: the `next_page_token` a previous `top` printed.
        #[arg(long)]
        page_token: Option<String>,
    },
    /// Show one product's rank.
    Rank {
        product_id: i64,
        #[command(flatten)]
        ranking: Ranking,
        /// Also show this many entries on each side (0-50).
        #[arg(long, default_value_t = 0)]
        neighbors: u32,
    },
    /// Show the products that moved most since the previous period.
    Movers {
        #[command(flatten)]
        ranking: Ranking,
        /// Fallers instead of climbers.
        #[arg(long)]
        falling: bool,
        /// Only products ranked at most this (now when rising, before when falling).
        #[arg(long, default_value_t = 0)]
        within_top: u64,
        #[arg(long, default_value_t = 10)]
        limit: u32,
    },
    /// Show several products' ranks at once (up to 1,000).
    Ranks {
        #[arg(required = true)]
        product_ids: Vec<i64>,
        #[command(flatten)]
        ranking: Ranking,
    },
    /// Show why a product holds its place in a daily ranking (counts, weighted points,
    /// carry-over) or on the trending board (its hours, each decayed), each tie-break axis
    /// against the population, the gap to the entry above.
    Explain {
        product_id: i64,
        /// `daily` or `trending`.
        #[arg(long, value_parser = window_arg, default_value = "daily")]
        window: v1::Window,
        /// YYYY-MM-DD (default today).
        #[arg(long, default_value = "")]
        date: String,
        /// Its place within this segment's ranking.
        #[arg(long, default_value = "")]
        segment: String,
        /// The scoring profile whose board explains it (`default`, or a RANKING_PROFILES name).
        #[arg(long, default_value = "")]
        profile: String,
    },
    /// Watch a top live: the table is redrawn whenever it changes (Ctrl-C to stop); with
    /// --json, one line per change.
    Watch {
        #[command(flatten)]
        ranking: Ranking,
        /// Entries, 1-100.
        #[arg(long, default_value_t = 10)]
        limit: u32,
    },
    /// Compare two boards: rank-biased overlap, weighted tau, overlaps, the largest shifts.
    Compare(compare::CompareArgs),
    /// Follow a board of the ranking feed (Kafka or JetStream), checking every version.
    Follow(follow::FollowArgs),
    /// A product's rank on each ended day (the last 90 by default), its best rank and streak.
    History(history::HistoryArgs),
    /// Merchandising controls: pins, boosts, burials and exclusions of a board, on a schedule.
    Controls {
        #[command(subcommand)]
        action: controls::ControlsAction,
    },
    /// Change the catalog: a product's segments and hidden flag.
    Catalog {
        #[command(subcommand)]
        action: CatalogAction,
    },
    /// Show the running replicas: the ranking store's layout in force (the newest every live
    /// replica reads) and what each replica reads.
    Status,
    /// Recompute a day's ranking now.
    Recompute {
        /// YYYY-MM-DD (default today).
        #[arg(default_value = "")]
        date: String,
    },
}

#[derive(Subcommand)]
enum CatalogAction {
    /// Replace a product's segment set, hidden flag and title (hiding takes it out of today's
    /// rankings at once; segments count from the next recompute).
    Set {
        product_id: i64,
        /// A segment it belongs to (repeat for several): category:shoes, brand:acme…
        #[arg(long = "segment")]
        segments: Vec<String>,
        /// Hide it (delisted, out of stock); without the flag it is shown.
        #[arg(long)]
        hidden: bool,
        /// Its name as people know it (at most 200 characters).
        #[arg(long, default_value = "")]
        title: String,
    },
}

/// Which ranking a read addresses: `--window`, `--date`, `--hour`.
#[derive(clap::Args)]
struct Ranking {
    /// daily, hourly, weekly or trending (what rises now: hours of the last 7 days, decayed
    /// by a half-life).
    #[arg(long, value_parser = window_arg, default_value = "daily")]
    window: v1::Window,
    /// YYYY-MM-DD (default today).
    #[arg(long, default_value = "")]
    date: String,
    /// Hour 0-23 (hourly window).
    #[arg(long)]
    hour: Option<u32>,
    /// A segment's ranking (category:shoes, brand:acme…; daily and weekly windows).
    #[arg(long, default_value = "")]
    segment: String,
    /// The scoring profile (`default`, or a name of the server's RANKING_PROFILES).
    #[arg(long, default_value = "")]
    profile: String,
    /// The shopper the read is for: with no --profile, the server's experiment picks the
    /// profile by it (the answer names it).
    #[arg(long = "actor", default_value = "")]
    actor_id: String,
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    // The feed is read from its bus: no call to the service.
    if let Command::Follow(args) = cli.command {
        return follow::run(args, cli.json).await;
    }
    let mut builder = RankingClient::builder(cli.endpoint).request_timeout(Duration::from_secs(30));
    if let Some(token) = cli.token {
        builder = builder.bearer_token(token);
    }
    if let Some(ca) = cli.ca {
        builder = builder.tls(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(std::fs::read(ca)?)));
    }
    let client = builder.connect().await?;
    match cli.command {
        Command::Record { kind, product_id, amount, signal, retracts, actor, id } => {
            let mut event = match kind {
                Kind::View => events::view(product_id),
                Kind::Like => events::like(product_id),
                Kind::Unlike => events::unlike(product_id),
                Kind::Order => events::order(product_id, amount),
                Kind::Signal => events::signal(product_id, &signal, amount),
                Kind::Retract => events::retract(product_id, &retracts),
            };
            event.actor_id = actor;
            if let Some(id) = id {
                event.event_id = id;
            }
            let outcome = client.record_event(event.clone()).await?.outcome();
            let name = outcome.as_str_name();
            if cli.json {
                println!("{}", json!({ "event_id": event.event_id, "outcome": name }));
            } else {
                println!("{name} {}", event.event_id);
            }
        }
        Command::Top {
            ranking: Ranking { window: w, date, hour, segment, profile, actor_id },
            limit,
            offset,
            page_token,
        } => {
            let request = v1::GetTopNRequest {
                window: w as i32,
                date,
                hour,
                segment,
                offset,
                limit,
                page_token: page_token.unwrap_or_default(),
                profile,
                actor_id,
            };
            let r = client.top_n(request).await?;
            if cli.json {
                let top = json!({
                    "profile": r.profile,
                    "date": r.date,
                    "total": r.total,
                    "version": r.version,
                    "next_page_token": r.next_page_token,
                    "products": entries_json(&r.products),
                });
                println!("{top}");
            } else {
                println!("{} — {} ranked (version {}, profile {})", r.date, r.total, r.version, r.profile);
                table(&r.products);
                if !r.next_page_token.is_empty() {
                    println!("next page: --page-token {}", r.next_page_token);
                }
            }
        }
        Command::Rank {
            product_id,
            ranking: Ranking { window: w, date, hour, segment, profile, actor_id },
            neighbors,
        } => {
            let r = client
                .rank(v1::GetRankRequest {
                    product_id,
                    window: w as i32,
                    date,
                    hour,
                    neighbors,
                    segment,
                    profile,
                    actor_id,
                })
                .await?;
            let p = r.product.unwrap_or_default();
            if cli.json {
                let rank = json!({
                    "profile": r.profile,
                    "total": r.total,
                    "version": r.version,
                    "product": entry_json(&p),
                    "above": entries_json(&r.above),
                    "below": entries_json(&r.below),
                });
                println!("{rank}");
            } else {
                println!("rank {} of {} (profile {})", p.rank, r.total, r.profile);
                let mut rows = r.above.clone();
                rows.push(p);
                rows.extend(r.below.iter().cloned());
                table(&rows);
            }
        }
        Command::Movers {
            ranking: Ranking { window: w, date, hour, segment, profile, actor_id },
            falling,
            within_top,
            limit,
        } => {
            let direction = if falling { v1::MoverDirection::Falling } else { v1::MoverDirection::Rising };
            let request = v1::ListMoversRequest {
                window: w as i32,
                date,
                hour,
                direction: direction.into(),
                limit,
                within_top,
                segment,
                profile,
                actor_id,
            };
            let r = client.movers(request).await?;
            if cli.json {
                let movers = json!({ "date": r.date, "version": r.version, "products": entries_json(&r.products) });
                println!("{movers}");
            } else {
                println!("{} — {} movers ({})", r.date, r.products.len(), if falling { "falling" } else { "rising" });
                table(&r.products);
            }
        }
        Command::Ranks { product_ids, ranking: Ranking { window: w, date, hour, segment, profile, actor_id } } => {
            let r = client
                .ranks(v1::GetRanksRequest { product_ids, window: w as i32, date, hour, segment, profile, actor_id })
                .await?;
            if cli.json {
                let ranks = json!({
                    "total": r.total,
                    "version": r.version,
                    "products": entries_json(&r.products),
                    "missing": r.missing,
                });
                println!("{ranks}");
            } else {
                println!("{} of {} ranked", r.products.len(), r.total);
                table(&r.products);
                if !r.missing.is_empty() {
                    let missing: Vec<_> = r.missing.iter().map(i64::to_string).collect();
                    println!("not ranked: {}", missing.join(" "));
                }
            }
        }
        Command::Explain { product_id, window: w, date, segment, profile } => {
            let request = v1::ExplainRankRequest { product_id, date, segment, profile, window: w as i32 };
            let r = client.explain_rank(request).await?;
            if cli.json {
                println!("{}", explain_json(&r));
            } else {
                explain_table(&r);
            }
        }
        Command::Watch { ranking, limit } => watch::run(&client, ranking, limit, cli.json).await?,
        Command::Controls { action } => controls::run(&client, action, cli.json).await?,
        Command::History(args) => history::run(&client, args, cli.json).await?,
        Command::Compare(args) => compare::run(&client, args, cli.json).await?,
        Command::Follow(_) => unreachable!("followed above, without a connection"),
        Command::Catalog { action: CatalogAction::Set { product_id, segments, hidden, title } } => {
            let entry = v1::CatalogEntry { product_id, segments, hidden, title };
            let updated = client.update_catalog(vec![entry]).await?.updated;
            if cli.json {
                println!("{}", json!({ "updated": updated }));
            } else {
                println!("updated {updated} product{}", if updated == 1 { "" } else { "s" });
            }
        }
        Command::Status => status::run(&client, cli.json).await?,
        Command::Recompute { date } => {
            let r = client.recompute(date).await?;
            if cli.json {
                let recomputed =
                    json!({ "date": r.date, "products": r.products, "elapsed_ms": r.elapsed_ms, "version": r.version });
                println!("{recomputed}");
            } else {
                println!(
                    "recomputed {}: {} products in {} ms (version {})",
                    r.date, r.products, r.elapsed_ms, r.version
                );
            }
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<ranking_client::tonic::Status>() {
                Some(status) => eprintln!("rankctl: {:?}: {}", status.code(), status.message()),
                None => eprintln!("rankctl: {e}"),
            }
            ExitCode::FAILURE
        }
    }
}
