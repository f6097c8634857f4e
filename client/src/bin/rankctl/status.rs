//! `rankctl status`: the running replicas as the answering one knows them (GetStatus): the
//! ranking store's layout in force (the newest every live replica reads) and each replica's
//! name, release, layouts read and last announcement.

use ranking_client::RankingClient;

use crate::output::{instant, json};

pub async fn run(client: &RankingClient, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let r = client.status().await?;
    if json {
        let replicas: Vec<_> = r
            .replicas
            .iter()
            .map(|a| {
                json!({ "replica": a.replica, "release": a.release, "reads_min": a.reads_min,
                        "reads_max": a.reads_max, "seen_at": instant(a.seen_at.as_ref()) })
            })
            .collect();
        println!("{}", json!({ "layout_in_force": r.layout_in_force, "replica": r.replica, "replicas": replicas }));
    } else {
        println!("layout in force: {} (answered by {})", r.layout_in_force, r.replica);
        println!("{:<40}  {:<12}  {:>7}  SEEN", "REPLICA", "RELEASE", "READS");
        for a in &r.replicas {
            let reads = format!("{}..={}", a.reads_min, a.reads_max);
            println!("{:<40}  {:<12}  {:>7}  {}", a.replica, a.release, reads, instant(a.seen_at.as_ref()));
        }
    }
    Ok(())
}
