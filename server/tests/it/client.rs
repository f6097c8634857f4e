//! The client crate as a sibling service uses it: retries through a server restart, TLS
//! (with and without client certificates) and bearer tokens.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::helpers::{TestDb, settings};
use ranking_client::tonic::Code;
use ranking_client::tonic::transport::{Certificate, ClientTlsConfig, Identity};
use ranking_client::{RankingClient, RetryPolicy, events, v1};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_retries_through_a_restart_and_events_land_once() {
    let db = TestDb::create().await;
    let port = crate::helpers::free_port();
    let listen = format!("--listen=127.0.0.1:{port}");
    let app = crate::helpers::TestApp::spawn_on(settings(&db.url, &[&listen])).await;
    let retry = RetryPolicy {
        max_attempts: 40,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(300),
        ..Default::default()
    };
    let client = RankingClient::builder(format!("http://127.0.0.1:{port}"))
        .retry(retry)
        .connect_timeout(Duration::from_millis(500))
        .connect_lazy()
        .expect("client");
    assert_eq!(client.record_event(events::view(1)).await.expect("up").outcome(), v1::RecordOutcome::Accepted);

    app.stop().await;
    // While "down", the port stays ours: a stand-in accepts and drops every connection, so a
    // server of a parallel test cannot be handed the same port and answer in our place.
    let stand_in = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("port still free");
    let (attempt_tx, mut attempts) = tokio::sync::mpsc::unbounded_channel();
    let down = tokio::spawn(async move {
        loop {
            if let Ok((conn, _)) = stand_in.accept().await {
                drop(conn);
                let _ = attempt_tx.send(());
            }
        }
    });
    let batch: Vec<_> = (0..9).map(|_| events::like(2)).collect();
    let writer = client.clone();
    let sent = batch.clone();
    let pending = tokio::spawn(async move { writer.record_events(sent).await });
    // The client keeps trying while the server is down: three refused connections, and the
    // call is still waiting for its answer.
    for _ in 0..3 {
        attempts.recv().await.expect("the client reconnects");
    }
    if pending.is_finished() {
        panic!("the call should still be retried while the server is down: {:?}", pending.await);
    }
    down.abort();
    let _ = down.await; // the listener is dropped with the task
    let app = crate::helpers::TestApp::spawn_on(settings(&db.url, &[&listen])).await;

    let r = pending.await.expect("task").expect("landed after the restart");
    assert_eq!(r.accepted, 9);
    // A caller that never saw the answer sends the same events again: they land once.
    let again = client.record_events(batch).await.expect("retry");
    assert_eq!((again.accepted, again.duplicates), (0, 9));
    assert_eq!(crate::helpers::count_events(&db.url).await, 10);
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn the_bearer_token_of_the_builder_is_sent() {
    let mut app = crate::helpers::TestApp::spawn(&["--write-token=s3cret"]).await;
    let endpoint = format!("http://{}", app.addr);
    let anonymous = RankingClient::builder(&endpoint).connect().await.expect("connect");
    let err = anonymous.record_event(events::view(1)).await.expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated);
    let writer = RankingClient::builder(&endpoint).bearer_token("s3cret").connect().await.expect("connect");
    assert_eq!(writer.record_event(events::view(1)).await.expect("token").outcome(), v1::RecordOutcome::Accepted);
    let _ = &mut app.client;
    app.stop().await;
}

/// A CA, a server certificate for `localhost` and a client certificate, made with openssl.
fn make_pki(dir: &Path) {
    let script = r#"
set -e
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=test-ca" -keyout ca.key -out ca.pem 2>/dev/null
for who in server client; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout $who.key -out $who.csr 2>/dev/null
  printf "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n" > $who.ext
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile $who.ext -out $who.pem 2>/dev/null
done
"#;
    let ok = Command::new("sh").arg("-c").arg(script).current_dir(dir).status().expect("openssl runs");
    assert!(ok.success(), "test certificates created");
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let dir = std::env::temp_dir().join(format!("rk-tls-{:x}", crate::helpers::rand_u64()));
    std::fs::create_dir_all(&dir).expect("dir");
    make_pki(&dir);
    let file = |name: &str| dir.join(name).display().to_string();
    let read = |name: &str| std::fs::read(dir.join(name)).expect("pem");
    let mut app = crate::helpers::TestApp::spawn(&[
        &format!("--tls-cert={}", file("server.pem")),
        &format!("--tls-key={}", file("server.key")),
        &format!("--tls-client-ca={}", file("ca.pem")),
    ])
    .await;
    let _ = &mut app.client; // plaintext harness client: not used against a TLS server
    let port = app.addr.port();

    let plain = RankingClient::builder(format!("http://localhost:{port}")).connect().await;
    let plain_fails = match plain {
        Err(_) => true,
        Ok(c) => c.top_n(v1::GetTopNRequest::default()).await.is_err(),
    };
    assert!(plain_fails, "plaintext is refused");

    let ca = Certificate::from_pem(read("ca.pem"));
    let no_identity = ClientTlsConfig::new().ca_certificate(ca.clone()).domain_name("localhost");
    let anonymous = RankingClient::builder(format!("https://localhost:{port}"))
        .tls(no_identity)
        .retry(RetryPolicy { max_attempts: 1, ..RetryPolicy::default() })
        .connect()
        .await;
    let anonymous_fails = match anonymous {
        Err(_) => true,
        Ok(c) => c.top_n(v1::GetTopNRequest::default()).await.is_err(),
    };
    assert!(anonymous_fails, "a client without a certificate is refused");

    let mutual = ClientTlsConfig::new()
        .ca_certificate(ca)
        .domain_name("localhost")
        .identity(Identity::from_pem(read("client.pem"), read("client.key")));
    let client =
        RankingClient::builder(format!("https://localhost:{port}")).tls(mutual).connect().await.expect("mutual TLS");
    assert_eq!(
        client.record_event(events::order(5, 1_000)).await.expect("call").outcome(),
        v1::RecordOutcome::Accepted
    );
    app.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
