//! The score engine and the domain vocabulary: pure functions and types.
//!
//! Nothing in here performs I/O or knows about tokio, Redis, SQL or gRPC, so every rule of
//! the ranking can be unit- and property-tested without a server.
//!
//! - [`cap`]: per-shopper caps of count signals, and how a batch changes a capped value.
//! - [`catalog`]: segments and the hidden flag of a product, and the segment syntax.
//! - [`vocabulary`]: the shared words (events, a day's counters, carry-over, signal kinds).
//! - [`event`]: what a shopper sends, and the validation rules an event must pass.
//! - [`delta`]: a batch of events folded into one change per metrics row.
//! - [`retraction`]: what each event of a batch does once the retractions it meets are known.
//! - [`calendar`]: ranking days and hours in the configured time zone.
//! - [`score`]: the main score, carry-over and its chain back through previous days.
//! - [`normalize`]: z-score → sigmoid → 0…999 normalisation of the tie-break axes.
//! - [`encoding`]: packing the four dimensions into one `f64` and back.
//! - [`layout`]: the same packing for any scoring profile's axes (1–4 axes, up to 12 digits).
//! - [`profile`]: scoring profiles: signals, main-score terms, tie-break axes; the built-in one.
//! - [`live`]: today's population held between live passes, changed rows applied to it.
//! - [`ranking`]: one day's population turned into encoded scores.
//! - [`explain`]: a product's daily score taken apart (ExplainRank).
//! - [`snapshot`]: an immutable ranking in memory (page in O(limit), rank in O(1)).
//! - [`history`]: the kept tops of ended days, and a product's history over them.
//! - [`feed`]: the ranking feed's changes between two fed tops, and their checksum.
//! - [`compare`]: two rankings compared (rank-biased overlap, weighted tau, shifts).
//! - [`experiment`]: sticky experiments, shoppers hashed into buckets and variants.
//! - [`trending`]: the trending board's arithmetic, hours of points decayed by a half-life.

pub mod board;
pub mod calendar;
pub mod cap;
pub mod catalog;
pub mod compare;
pub mod controls;
pub mod delta;
pub mod encoding;
pub mod event;
pub mod experiment;
pub mod explain;
pub mod feed;
pub mod history;
pub mod layout;
pub mod live;
pub mod normalize;
pub mod profile;
pub mod ranking;
pub mod retraction;
pub mod score;
pub mod snapshot;
pub mod trending;
pub mod vocabulary;
