//! A server that stopped has ended every task it started: the data dir is
//! free for the next server at once, whatever was in flight.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::AsyncReadExt as _;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::support::{TestServer, free_text};

/// The receiver listens on loopback, which webhooks reach only when allowed.
fn settings() -> lev_server::Settings {
    let mut settings = lev_server::Settings::default();
    settings.webhooks.allow = vec![lev_server::outbound::Cidr::parse("127.0.0.0/8").unwrap()];
    settings
}

/// A receiver that takes every connection and never answers; counts them.
async fn hanging_receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let _ = tx.send(());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    (url, rx)
}

/// Each round leaves work in flight when the server stops: a webhook
/// delivery to a receiver that never answers, an operator connected on its
/// WebSocket, an event stream the client keeps reading, and one it dropped.
/// The stop is prompt and the next server on the same data dir starts at
/// once (the SQLite lock is free), three times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_leaves_nothing_running_and_its_data_dir_free() {
    let (url, mut deliveries) = hanging_receiver().await;
    let mut s = TestServer::start_with(settings()).await;
    let (status, v) = s
        .post(
            "/v1/webhooks",
            &s.admin,
            &json!({"url": url, "events": ["interaction.created"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (worker, approver) = s.worker_and_approver().await;
    let operator = s.token("main-ai", "operator", None).await;
    for round in 0..3 {
        // An operator connected on its WebSocket.
        let ws_url = format!("{}/v1/operators/s-op/ws", s.url.replacen("http", "ws", 1));
        let mut req = ws_url.into_client_request().unwrap();
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {operator}").parse().unwrap(),
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        // An event stream kept open, and one dropped.
        let kept = s
            .req(reqwest::Method::GET, "/v1/events", &approver)
            .send()
            .await
            .unwrap();
        assert_eq!(kept.status(), StatusCode::OK);
        let dropped = s
            .req(reqwest::Method::GET, "/v1/events", &approver)
            .send()
            .await
            .unwrap();
        drop(dropped);
        // A delivery in flight to the receiver that never answers.
        s.create(&worker, &free_text("s-1", &format!("round {round}")))
            .await;
        tokio::time::timeout(Duration::from_secs(20), deliveries.recv())
            .await
            .expect("the delivery reaches the receiver")
            .unwrap();

        let started = Instant::now();
        let dir = s.stop().await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(4), "the stop took {took:?}");
        drop(kept);
        // The operator's socket was closed by the server.
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
        assert!(closed.is_ok(), "the operator's socket stays open");
        // The next server takes the same data dir at once.
        s = TestServer::start_in(dir, settings()).await;
    }
    drop(s);
}
