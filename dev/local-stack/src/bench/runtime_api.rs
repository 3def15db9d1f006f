//! A minimal Lambda Runtime API on loopback, for timing a function process's cold start: it
//! hands out the queued events one per `GET …/invocation/next`, and notes the instant of each
//! `next` and each response. The first `next` marks the end of init (the process has built its
//! configuration and clients, and primed, when it asks for work).
//!
//! Only what a cold start needs is served: `next`, `response`, `error` and `init/error`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// What the process did, as the API saw it.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// The instant of each `next`.
    pub next: Vec<Instant>,
    /// The instant of each response (or error), and its body.
    pub answers: Vec<(Instant, String)>,
    /// The init error's body, if the process reported one.
    pub init_error: Option<String>,
}

/// A running Runtime API.
#[derive(Debug)]
pub(crate) struct RuntimeApi {
    /// Where it listens: the value of `AWS_LAMBDA_RUNTIME_API`.
    pub addr: SocketAddr,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    events: Mutex<VecDeque<Vec<u8>>>,
    seen: Mutex<Seen>,
    changed: Notify,
}

impl RuntimeApi {
    /// Starts an API on a free loopback port that will hand out `events`, in order.
    pub(crate) async fn start(events: Vec<Vec<u8>>) -> std::io::Result<RuntimeApi> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            events: Mutex::new(events.into()),
            seen: Mutex::new(Seen::default()),
            changed: Notify::new(),
        });
        let serving = Arc::clone(&state);
        crate::fault_proxy::serve(listener, move |request| {
            let state = Arc::clone(&serving);
            async move { handle(&state, request).await }
        });
        Ok(RuntimeApi { addr, state })
    }

    /// Waits until `done` holds of what has been seen, and returns it.
    pub(crate) async fn until(&self, done: impl Fn(&Seen) -> bool) -> Seen {
        loop {
            let changed = self.state.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let seen = self.seen();
            if done(&seen) {
                return seen;
            }
            changed.await;
        }
    }

    /// What has been seen so far.
    pub(crate) fn seen(&self) -> Seen {
        self.state.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

async fn handle(state: &State, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect().await?.to_bytes();
    let now = Instant::now();
    let note = |f: &dyn Fn(&mut Seen)| {
        if let Ok(mut seen) = state.seen.lock() {
            f(&mut seen);
        }
        state.changed.notify_waiters();
    };
    if path.ends_with("/invocation/next") {
        note(&|s| s.next.push(now));
        let event = state.events.lock().ok().and_then(|mut e| e.pop_front());
        let Some(event) = event else {
            // No more work: the process waits here, as a frozen Lambda sandbox would.
            return std::future::pending().await;
        };
        let id = format!("bench-{:016x}", fastrand::u64(..));
        let deadline = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis()) + 900_000;
        let response = Response::builder()
            .header("Lambda-Runtime-Aws-Request-Id", id)
            .header("Lambda-Runtime-Deadline-Ms", deadline.to_string())
            .header(
                "Lambda-Runtime-Invoked-Function-Arn",
                "arn:aws:lambda:us-east-1:123456789012:function:bench",
            )
            .header("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000")
            .body(Full::new(Bytes::from(event)));
        return Ok(response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new()))));
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    if path.ends_with("/init/error") {
        note(&|s| s.init_error = Some(text.clone()));
    } else if path.ends_with("/response") || path.ends_with("/error") {
        note(&|s| s.answers.push((now, text.clone())));
    }
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    *response.status_mut() = StatusCode::ACCEPTED;
    Ok(response)
}
