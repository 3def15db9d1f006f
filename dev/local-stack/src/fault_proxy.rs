//! A fault-injecting HTTP/1 proxy on loopback, between the functions and the AWS
//! emulator. It forwards every request upstream, and to DynamoDB's data-plane operations and S3's
//! object operations it applies faults drawn from a seeded random stream, each counted:
//!
//! | fault | what the client sees | upstream |
//! |---|---|---|
//! | `throttle` | DynamoDB: 400 `ThrottlingException`; S3: 503 `SlowDown`; SQS: 400 `RequestThrottled` | not sent |
//! | `5xx` | 500 `InternalServerError` | not sent |
//! | `partial` | `BatchWriteItem` answered with the second half of its writes as `UnprocessedItems`; `TransactWriteItems` cancelled for a `TransactionConflict` on one of its actions (its counterpart: part of the request told to try again) | the first half only; nothing |
//! | `apply-then-fail` | 500 `InternalServerError` | sent and applied |
//! | `reset` | the connection closed before an answer | not sent |
//! | `stall` | an answer only after `stall-for` (past the client's attempt timeout) | sent |
//! | `late` | (DynamoDB writes only) no answer: the client's attempt times out | sent `late-for` later, whatever the client did meanwhile: a write landing after its invocation's retry |
//! | `latency` | every answer this much later | sent |
//! | `capacity` | beyond this many requests per second (a token bucket holding a tenth of a second's), a throttling answer as above | not sent |
//! | `sink` | (`sink=1`) every request that no fault stops answered here, as a success with an empty body (`{}`; S3: 200 and an `ETag`), after the latency: an ideal service whose every call costs exactly the latency | not sent |
//!
//! Control-plane calls (`CreateTable`, `DescribeTable`, …) and DynamoDB Streams pass through
//! untouched. The spec is `name=value` pairs: rates from 0 to 1, `latency` and `stall-for` in
//! milliseconds (`5ms`), `capacity` in requests per second, `sink` (0 or 1), and `seed`; [`DEFAULT_SPEC`] is
//! what `--faults default` means.
//!
//! Upstream is one emulator, or several with each table on one of them ([`route`]).
//!
//! [`Proxy::hold_writes`] makes a write land late, on purpose and step by step: from then on each
//! DynamoDB write request is kept unsent and never answered (the client's attempt times out, as
//! when a request is on the wire when its invocation ends), until [`Proxy::release_held`] sends
//! the kept requests upstream, after whatever the test has written meanwhile. DynamoDB applies a
//! request it has received whether or not its sender is still waiting, so a superseded
//! invocation's write can land after its retry's and after newer records' writes.
//!
//! [`Proxy::record`] keeps the faultable requests that pass, and [`replay`] sends them again,
//! byte for byte, as a bare client would: a bench's yardstick for what exactly those requests
//! cost the emulator and the latency.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub mod route;

pub use route::Upstreams;

/// What `--faults default` means: every kind, at rates a run of a few thousand records meets
/// each of several times.
pub const DEFAULT_SPEC: &str = "throttle=0.05,5xx=0.02,partial=0.2,apply-then-fail=0.02,reset=0.01,stall=0.003,stall-for=12000ms,latency=2ms,seed=1";

/// A spec that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A part that is not `name=value`, or an unknown name.
    #[error(
        "{0:?} is not a fault: use throttle, 5xx, partial, apply-then-fail, reset, stall, late (rates 0-1), stall-for, late-for, latency (e.g. 5ms), capacity (requests per second), sink (0 or 1) or seed"
    )]
    Unknown(String),
    /// A value out of range.
    #[error("{name}={value}: {reason}")]
    Value {
        /// The fault.
        name: String,
        /// Its value.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

/// Which faults, how often.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// Throttling answers, per request.
    pub throttle: f64,
    /// 500s without applying.
    pub server_error: f64,
    /// `BatchWriteItem`s half applied, the rest returned unprocessed.
    pub partial: f64,
    /// Requests applied, then answered with a 500.
    pub apply_then_fail: f64,
    /// Connections closed before an answer.
    pub reset: f64,
    /// Requests stalled for `stall_for`.
    pub stall: f64,
    /// How long a stall lasts.
    pub stall_for: Duration,
    /// DynamoDB writes never answered and sent upstream `late_for` later.
    pub late: f64,
    /// How long a late write waits before it is sent.
    pub late_for: Duration,
    /// Added to every faultable request.
    pub latency: Duration,
    /// Faultable requests per second served; those beyond are throttled (0: no limit).
    pub capacity: u32,
    /// Faultable requests answered here with an empty success instead of upstream.
    pub sink: bool,
    /// The random stream's seed.
    pub seed: u64,
}

impl Spec {
    /// No faults, no latency: the proxy only forwards (a router).
    pub fn none() -> Spec {
        Spec {
            throttle: 0.0,
            server_error: 0.0,
            partial: 0.0,
            apply_then_fail: 0.0,
            reset: 0.0,
            stall: 0.0,
            stall_for: Duration::from_secs(12),
            late: 0.0,
            late_for: Duration::from_secs(5),
            latency: Duration::ZERO,
            capacity: 0,
            sink: false,
            seed: 1,
        }
    }

    /// Reads `name=value,…`; `default` is [`DEFAULT_SPEC`].
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let text = if text.trim() == "default" { DEFAULT_SPEC } else { text };
        let mut spec = Spec::none();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| SpecError::Unknown(part.to_owned()))?;
            let bad = |reason| SpecError::Value { name: name.to_owned(), value: value.to_owned(), reason };
            let rate = || {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| bad("a rate is a number from 0 to 1"))
            };
            let millis = || {
                value
                    .trim_end_matches("ms")
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| bad("a duration is whole milliseconds, like 5ms"))
            };
            match name {
                "throttle" => spec.throttle = rate()?,
                "5xx" => spec.server_error = rate()?,
                "partial" => spec.partial = rate()?,
                "apply-then-fail" => spec.apply_then_fail = rate()?,
                "reset" => spec.reset = rate()?,
                "stall" => spec.stall = rate()?,
                "stall-for" => spec.stall_for = millis()?,
                "late" => spec.late = rate()?,
                "late-for" => spec.late_for = millis()?,
                "latency" => spec.latency = millis()?,
                "capacity" => {
                    spec.capacity =
                        value.parse().map_err(|_| bad("a capacity is whole requests per second"))?;
                }
                "sink" => {
                    spec.sink = match value {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => return Err(bad("sink is 1 or 0")),
                    }
                }
                "seed" => spec.seed = value.parse().map_err(|_| bad("a seed is a whole number"))?,
                _ => return Err(SpecError::Unknown(part.to_owned())),
            }
        }
        let total =
            spec.throttle + spec.server_error + spec.apply_then_fail + spec.reset + spec.stall + spec.late;
        if total > 1.0 {
            return Err(SpecError::Value {
                name: "the rates".to_owned(),
                value: format!("{total}"),
                reason: "throttle, 5xx, apply-then-fail, reset, stall and late add up to more than 1",
            });
        }
        Ok(spec)
    }
}

/// Faults injected and requests forwarded, counted as they happen.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests sent upstream (whole or in part).
    pub forwarded: AtomicU64,
    /// Throttling answers.
    pub throttled: AtomicU64,
    /// 500s without applying.
    pub server_errors: AtomicU64,
    /// `BatchWriteItem`s half applied.
    pub partial: AtomicU64,
    /// Applied, then answered with a 500.
    pub applied_then_failed: AtomicU64,
    /// Connections closed before an answer.
    pub resets: AtomicU64,
    /// Stalled requests.
    pub stalls: AtomicU64,
    /// Writes sent upstream late: by the `late` fault, or held ([`Proxy::hold_writes`]).
    pub late: AtomicU64,
    /// Of those, the ones DynamoDB refused (a condition or a version guard found a newer write): the
    /// late writes that could have undone newer ones, and did not.
    pub late_refused: AtomicU64,
}

impl Counts {
    /// Each fault kind and its count, in a fixed order, then `forwarded`.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("throttle", get(&self.throttled)),
            ("5xx", get(&self.server_errors)),
            ("partial", get(&self.partial)),
            ("apply-then-fail", get(&self.applied_then_failed)),
            ("reset", get(&self.resets)),
            ("stall", get(&self.stalls)),
            ("late", get(&self.late)),
            ("forwarded", get(&self.forwarded)),
        ]
    }
}

/// A running proxy.
#[derive(Clone)]
pub struct Proxy {
    /// Its address: point the clients' endpoint at `http://{addr}`.
    pub addr: SocketAddr,
    /// What it has done so far.
    pub counts: Arc<Counts>,
    /// Where it sends requests, and how many it has sent to each.
    pub upstreams: Upstreams,
    recorder: Arc<Mutex<Option<Vec<Recorded>>>>,
    state: Arc<State>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("counts", &self.counts)
            .field("upstreams", &self.upstreams)
            .finish_non_exhaustive()
    }
}

/// The DynamoDB operations that write an item.
const WRITES: &[&str] = &["BatchWriteItem", "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem"];

/// A request as it came in, to be sent again by [`replay`].
#[derive(Debug, Clone)]
pub struct Recorded {
    method: hyper::Method,
    path: String,
    headers: hyper::HeaderMap,
    body: Bytes,
}

impl Proxy {
    /// Holds every DynamoDB write request from now on: kept, unsent and unanswered, until
    /// [`Proxy::release_held`].
    pub fn hold_writes(&self) {
        if let Ok(mut held) = self.state.held.lock() {
            held.get_or_insert_with(Vec::new);
        }
    }

    /// Stops holding writes and sends every one held upstream now, in the order they came (each
    /// counted in [`Counts::late`]); the number whose answer was a success.
    pub async fn release_held(&self) -> usize {
        let held = self.state.held.lock().ok().and_then(|mut held| held.take()).unwrap_or_default();
        let mut applied = 0;
        for (request, target) in held {
            let mut parts = Request::builder()
                .method(request.method.clone())
                .uri(request.path.as_str())
                .body(())
                .map(|r| r.into_parts().0)
                .ok();
            if let Some(parts) = parts.as_mut() {
                parts.headers = request.headers.clone();
                if land(&self.state, parts, &target, request.body.clone()).await {
                    applied += 1;
                }
            }
        }
        applied
    }

    /// Starts keeping every faultable request that is forwarded (dropping any kept before).
    pub fn record(&self) {
        if let Ok(mut kept) = self.recorder.lock() {
            *kept = Some(Vec::new());
        }
    }

    /// Stops keeping requests, and returns those kept since [`Proxy::record`].
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorder.lock().ok().and_then(|mut kept| kept.take()).unwrap_or_default()
    }
}

/// Sends `requests` to the proxy at `addr` with at most `concurrency` in flight, the way a bare
/// client would (no signing, no retries), and returns how long they took. Requests the proxy
/// answers with an error count as sent: the time is what matters.
pub async fn replay(
    addr: SocketAddr,
    requests: Vec<Recorded>,
    concurrency: usize,
) -> std::io::Result<Duration> {
    use futures_util::StreamExt as _;
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let started = std::time::Instant::now();
    let answers: Vec<Result<(), String>> = futures_util::stream::iter(requests)
        .map(|r| {
            let client = client.clone();
            async move {
                let mut request = Request::builder().method(r.method).uri(format!("http://{addr}{}", r.path));
                for (name, value) in &r.headers {
                    if name != hyper::header::CONTENT_LENGTH && name != hyper::header::TRANSFER_ENCODING {
                        request = request.header(name, value);
                    }
                }
                let request = request.body(Full::new(r.body)).map_err(|e| e.to_string())?;
                let response = client.request(request).await.map_err(|e| e.to_string())?;
                response.into_body().collect().await.map(drop).map_err(|e| e.to_string())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let elapsed = started.elapsed();
    match answers.into_iter().find_map(Result::err) {
        Some(error) => Err(std::io::Error::other(format!("a replayed request: {error}"))),
        None => Ok(elapsed),
    }
}

struct State {
    upstreams: Upstreams,
    spec: Spec,
    rng: Mutex<fastrand::Rng>,
    bucket: Mutex<Bucket>,
    counts: Arc<Counts>,
    recorder: Arc<Mutex<Option<Vec<Recorded>>>>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// While holding writes ([`Proxy::hold_writes`]), the writes held, with their targets.
    held: Mutex<Option<Vec<(Recorded, String)>>>,
}

/// The `capacity` token bucket: `capacity` tokens a second, holding at most a tenth of that.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

impl Bucket {
    /// Takes a token for a request at `now`, if there is one, under `capacity` per second.
    fn take(&mut self, capacity: u32, now: std::time::Instant) -> bool {
        let rate = f64::from(capacity);
        let burst = (rate / 10.0).max(1.0);
        self.tokens = (self.tokens + rate * now.duration_since(self.at).as_secs_f64()).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Throttle,
    ServerError,
    Partial,
    ApplyThenFail,
    Reset,
    Stall,
    Late,
}

/// Starts a proxy on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT`); it
/// runs until the runtime ends.
pub async fn start(upstream: &str, spec: Spec) -> std::io::Result<Proxy> {
    start_routed(Upstreams::one(upstream), spec).await
}

/// Starts a proxy on a free loopback port in front of `upstreams`, each request sent to the one
/// that holds its tables; it runs until the runtime ends. With a spec of no faults
/// ([`Spec::none`]) it is a plain router.
pub(crate) async fn start_routed(upstreams: Upstreams, spec: Spec) -> std::io::Result<Proxy> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counts = Arc::new(Counts::default());
    let recorder = Arc::new(Mutex::new(None));
    let state = Arc::new(State {
        upstreams: upstreams.clone(),
        spec,
        rng: Mutex::new(fastrand::Rng::with_seed(spec.seed)),
        bucket: Mutex::new(Bucket {
            tokens: (f64::from(spec.capacity) / 10.0).max(1.0),
            at: std::time::Instant::now(),
        }),
        counts: Arc::clone(&counts),
        recorder: Arc::clone(&recorder),
        client: Client::builder(TokioExecutor::new()).build_http(),
        held: Mutex::new(None),
    });
    let serving = Arc::clone(&state);
    serve(listener, move |request| {
        let state = Arc::clone(&serving);
        async move { handle(&state, request).await }
    });
    Ok(Proxy { addr, counts, upstreams, recorder, state })
}

/// Serves HTTP/1 connections accepted on `listener`, each request answered by `handle`, until
/// the runtime ends. A small server's whole loop, shared with other loopback stand-ins (the
/// bench's Runtime API).
pub fn serve<H, F, E>(listener: TcpListener, handle: H)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Full<Bytes>>, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
                    .await;
            });
        }
    });
}

/// The error that makes hyper close the connection without an answer.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by the fault proxy")]
struct Reset;

async fn handle(state: &Arc<State>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Reset> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(http_body_util::Collected::to_bytes).unwrap_or_default();
    let target =
        parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let operation = target.rsplit('.').next().unwrap_or_default();
    let dynamodb = target.starts_with("DynamoDB_20120810.");
    let sqs = target.starts_with("AmazonSQS.");
    let service = if sqs {
        Service::Sqs
    } else if dynamodb {
        Service::DynamoDb
    } else {
        Service::S3
    };
    if dynamodb && WRITES.contains(&operation) && hold(state, &parts, &target, &body) {
        // Never answered: the client gives up on it, and it lands when released.
        return std::future::pending().await;
    }
    let faultable = is_faultable(&target, operation, parts.uri.path());
    let fault = if !faultable {
        Fault::None
    } else if over_capacity(state) {
        Fault::Throttle
    } else {
        choose(state, operation)
    };
    if faultable
        && fault == Fault::None
        && let Ok(mut kept) = state.recorder.lock()
        && let Some(kept) = kept.as_mut()
    {
        kept.push(Recorded {
            method: parts.method.clone(),
            path: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            headers: parts.headers.clone(),
            body: body.clone(),
        });
    }
    let counts = &state.counts;
    if fault == Fault::Late {
        // The client gets no answer; the write lands `late_for` later, whatever it did meanwhile.
        let (state, target) = (Arc::clone(state), target.clone());
        tokio::spawn(async move {
            tokio::time::sleep(state.spec.late_for).await;
            land(&state, &parts, &target, body).await;
        });
        return std::future::pending().await;
    }
    if faultable && !state.spec.latency.is_zero() {
        tokio::time::sleep(state.spec.latency).await;
    }
    match fault {
        Fault::Reset => {
            counts.resets.fetch_add(1, Ordering::Relaxed);
            return Err(Reset);
        }
        Fault::Throttle => {
            counts.throttled.fetch_add(1, Ordering::Relaxed);
            return Ok(match service {
                Service::Sqs => sqs_error(StatusCode::BAD_REQUEST, "RequestThrottled", "Rate exceeded"),
                Service::DynamoDb => dynamodb_error(
                    StatusCode::BAD_REQUEST,
                    "ThrottlingException",
                    "Rate of requests exceeds the allowed throughput.",
                ),
                Service::S3 => s3_error(StatusCode::SERVICE_UNAVAILABLE, "SlowDown"),
            });
        }
        Fault::ServerError => {
            counts.server_errors.fetch_add(1, Ordering::Relaxed);
            return Ok(server_error(service));
        }
        Fault::Stall => {
            counts.stalls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(state.spec.stall_for).await;
        }
        Fault::None | Fault::Partial | Fault::ApplyThenFail | Fault::Late => {}
    }
    if faultable && state.spec.sink && !sqs {
        return Ok(sunk(dynamodb));
    }
    if fault == Fault::Partial
        && let Some(answer) = partial(state, &parts, &target, &body).await
    {
        counts.partial.fetch_add(1, Ordering::Relaxed);
        return Ok(answer);
    }
    let answer = forward(state, &parts, &target, body).await;
    if fault == Fault::ApplyThenFail {
        counts.applied_then_failed.fetch_add(1, Ordering::Relaxed);
        return Ok(server_error(service));
    }
    Ok(answer.unwrap_or_else(|()| server_error(service)))
}

/// Whether a request is one faults apply to: DynamoDB's item operations, S3's object operations
/// (a path with a bucket and a key), and SQS's sends.
fn is_faultable(target: &str, operation: &str, path: &str) -> bool {
    if target.starts_with("AmazonSQS.") {
        matches!(operation, "SendMessage" | "SendMessageBatch")
    } else if target.starts_with("DynamoDB_20120810.") {
        matches!(
            operation,
            "BatchWriteItem"
                | "TransactWriteItems"
                | "PutItem"
                | "UpdateItem"
                | "DeleteItem"
                | "GetItem"
                | "BatchGetItem"
                | "Query"
        )
    } else {
        target.is_empty() && path.trim_start_matches('/').contains('/')
    }
}

/// The `partial` fault's answer: a `BatchWriteItem` with its first half sent and the rest
/// returned unprocessed, or a `TransactWriteItems` cancelled for a conflict; `None` for a
/// request it does not apply to (fewer than two writes, no actions).
async fn partial(
    state: &State,
    parts: &hyper::http::request::Parts,
    target: &str,
    body: &Bytes,
) -> Option<Response<Full<Bytes>>> {
    if target.ends_with(".TransactWriteItems") {
        let cancelled = conflict(body)?;
        let mut response = Response::new(Full::new(Bytes::from(cancelled.to_string())));
        *response.status_mut() = StatusCode::BAD_REQUEST;
        set_content_type(&mut response, "application/x-amz-json-1.0");
        return Some(response);
    }
    let (first, rest) = split_batch(body)?;
    let answer = forward(state, parts, target, Bytes::from(first.to_string())).await;
    if !answer.as_ref().is_ok_and(|r| r.status().is_success()) {
        return Some(answer.unwrap_or_else(|()| server_error(Service::DynamoDb)));
    }
    let body = json!({"UnprocessedItems": rest}).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    set_content_type(&mut response, "application/x-amz-json-1.0");
    Some(response)
}

/// Sends a write upstream late and counts it, and whether DynamoDB refused it; whether it was
/// applied.
async fn land(state: &State, parts: &hyper::http::request::Parts, target: &str, body: Bytes) -> bool {
    state.counts.late.fetch_add(1, Ordering::Relaxed);
    let Ok(answer) = forward(state, parts, target, body).await else {
        return false;
    };
    if answer.status().is_success() {
        return true;
    }
    let refused = answer.status() == StatusCode::BAD_REQUEST && {
        let body = answer.body().clone().collect().await.map(http_body_util::Collected::to_bytes);
        body.is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b);
            text.contains("TransactionCanceledException") || text.contains("ConditionalCheckFailed")
        })
    };
    if refused {
        state.counts.late_refused.fetch_add(1, Ordering::Relaxed);
    }
    false
}

/// Keeps the request if writes are being held; whether it was kept.
fn hold(state: &State, parts: &hyper::http::request::Parts, target: &str, body: &Bytes) -> bool {
    let Ok(mut held) = state.held.lock() else {
        return false;
    };
    let Some(held) = held.as_mut() else {
        return false;
    };
    held.push((
        Recorded {
            method: parts.method.clone(),
            path: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            headers: parts.headers.clone(),
            body: body.clone(),
        },
        target.to_owned(),
    ));
    true
}

/// Whether a request is beyond the `capacity` (never, without one).
fn over_capacity(state: &State) -> bool {
    state.spec.capacity > 0
        && state.bucket.lock().is_ok_and(|mut b| !b.take(state.spec.capacity, std::time::Instant::now()))
}

fn choose(state: &State, operation: &str) -> Fault {
    let spec = &state.spec;
    let Ok(mut rng) = state.rng.lock() else {
        return Fault::None;
    };
    if matches!(operation, "BatchWriteItem" | "TransactWriteItems") && rng.f64() < spec.partial {
        return Fault::Partial;
    }
    let draw = rng.f64();
    let mut edge = 0.0;
    let late = if WRITES.contains(&operation) { spec.late } else { 0.0 };
    for (rate, fault) in [
        (spec.throttle, Fault::Throttle),
        (spec.server_error, Fault::ServerError),
        (spec.apply_then_fail, Fault::ApplyThenFail),
        (spec.reset, Fault::Reset),
        (spec.stall, Fault::Stall),
        (late, Fault::Late),
    ] {
        edge += rate;
        if draw < edge {
            return fault;
        }
    }
    Fault::None
}

/// The answer DynamoDB gives a `TransactWriteItems` that conflicts with another write to one of
/// its items: cancelled, nothing applied, the reason on that action (the middle one here) and
/// `None` on the others. `None` when the body holds no actions.
fn conflict(body: &[u8]) -> Option<Value> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let actions = request.get("TransactItems")?.as_array()?.len();
    if actions == 0 {
        return None;
    }
    let reasons: Vec<Value> = (0..actions)
        .map(|at| {
            if at == actions / 2 {
                json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    let codes: Vec<&str> = reasons.iter().filter_map(|r| r["Code"].as_str()).collect();
    Some(json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    }))
}

/// A `BatchWriteItem` body cut in two: the request with the first half of its writes, and the
/// second half in `RequestItems` form; `None` when it holds fewer than two writes.
fn split_batch(body: &[u8]) -> Option<(Value, Value)> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let items = request.get("RequestItems")?.as_object()?;
    let writes: Vec<(&String, &Value)> = items
        .iter()
        .flat_map(|(table, writes)| writes.as_array().into_iter().flatten().map(move |w| (table, w)))
        .collect();
    if writes.len() < 2 {
        return None;
    }
    let (first, rest) = writes.split_at(writes.len() / 2);
    let group = |part: &[(&String, &Value)]| {
        let mut map = serde_json::Map::new();
        for (table, write) in part {
            if let Some(list) =
                map.entry((*table).clone()).or_insert_with(|| Value::Array(Vec::new())).as_array_mut()
            {
                list.push((*write).clone());
            }
        }
        Value::Object(map)
    };
    let mut sent = request.clone();
    sent["RequestItems"] = group(first);
    Some((sent, group(rest)))
}

/// Sends a request to the upstream that holds its tables; a request no one upstream can answer
/// gets a `ValidationException` that says why.
async fn forward(
    state: &State,
    parts: &hyper::http::request::Parts,
    target: &str,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, ()> {
    let upstream = match state.upstreams.pick(target, &body) {
        Ok(upstream) => upstream,
        Err(unroutable) => {
            return Ok(dynamodb_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                &unroutable.to_string(),
            ));
        }
    };
    state.counts.forwarded.fetch_add(1, Ordering::Relaxed);
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::builder().method(parts.method.clone()).uri(format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != hyper::header::CONTENT_LENGTH && name != hyper::header::TRANSFER_ENCODING {
            request = request.header(name, value);
        }
    }
    let request = request.body(Full::new(body)).map_err(|_| ())?;
    let response = state.client.request(request).await.map_err(|e| {
        tracing::warn!(error = %e, "the upstream did not answer");
    })?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|_| ())?.to_bytes();
    let mut response = Response::from_parts(parts, Full::new(body));
    response.headers_mut().remove(hyper::header::TRANSFER_ENCODING);
    Ok(response)
}

fn dynamodb_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": message});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    set_content_type(&mut response, "application/x-amz-json-1.0");
    response
}

/// An SQS error in its JSON protocol, as the AWS SDKs read it: the code in `__type` and, SQS
/// being query-compatible, in the `x-amzn-query-error` header.
fn sqs_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"__type": format!("com.amazonaws.sqs#{code}"), "message": message});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    set_content_type(&mut response, "application/x-amz-json-1.0");
    if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("{code};Sender")) {
        response.headers_mut().insert("x-amzn-query-error", value);
    }
    response
}

fn s3_error(status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the fault proxy</Message></Error>"
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    set_content_type(&mut response, "application/xml");
    response
}

/// Which service a faulted request is for: each answers a fault in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    DynamoDb,
    S3,
    Sqs,
}

fn server_error(service: Service) -> Response<Full<Bytes>> {
    match service {
        Service::DynamoDb => dynamodb_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "Internal server error (injected)",
        ),
        Service::S3 => s3_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        Service::Sqs => {
            sqs_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "Internal error (injected)")
        }
    }
}

/// The sink's answer: an empty success.
fn sunk(dynamodb: bool) -> Response<Full<Bytes>> {
    if dynamodb {
        let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
        set_content_type(&mut response, "application/x-amz-json-1.0");
        response
    } else {
        let mut response = Response::new(Full::new(Bytes::new()));
        response
            .headers_mut()
            .insert(hyper::header::ETAG, hyper::header::HeaderValue::from_static("\"sink\""));
        response
    }
}

fn set_content_type(response: &mut Response<Full<Bytes>>, value: &'static str) {
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_read_and_bad_ones_named() {
        let spec = Spec::parse("throttle=0.1,5xx=0.05,latency=5ms,seed=7").unwrap();
        assert_eq!((spec.throttle, spec.server_error, spec.seed), (0.1, 0.05, 7));
        assert_eq!(spec.latency, Duration::from_millis(5));
        assert_eq!(Spec::parse("default").unwrap(), Spec::parse(DEFAULT_SPEC).unwrap());
        assert!(Spec::parse("throttle=2").unwrap_err().to_string().contains("from 0 to 1"));
        assert!(Spec::parse("flood=0.1").unwrap_err().to_string().contains("is not a fault"));
        assert!(Spec::parse("throttle=0.6,5xx=0.6").unwrap_err().to_string().contains("more than 1"));
    }

    #[test]
    fn the_capacity_bucket_serves_its_rate_and_a_tenth_of_a_second_at_once() {
        let start = std::time::Instant::now();
        let mut bucket = Bucket { tokens: 10.0, at: start };
        let served = (0..25).filter(|_| bucket.take(100, start)).count();
        assert_eq!(served, 10, "a burst: a tenth of a second's worth");
        let later = start + Duration::from_millis(50);
        let served = (0..25).filter(|_| bucket.take(100, later)).count();
        assert_eq!(served, 5, "50 ms at 100 per second");
        assert_eq!(Spec::parse("capacity=250").unwrap().capacity, 250);
        assert!(Spec::parse("capacity=fast").unwrap_err().to_string().contains("requests per second"));
    }

    #[test]
    fn the_sink_is_switched_on_by_name() {
        assert!(Spec::parse("latency=10ms,sink=1").unwrap().sink);
        assert!(!Spec::parse("latency=10ms").unwrap().sink);
        assert!(Spec::parse("sink=yes").unwrap_err().to_string().contains("sink is 1 or 0"));
    }

    #[test]
    fn a_batch_is_split_in_halves_across_tables() {
        let body = json!({"RequestItems": {
            "a": [{"PutRequest": {"Item": {"k": {"S": "1"}}}}, {"PutRequest": {"Item": {"k": {"S": "2"}}}}],
            "b": [{"DeleteRequest": {"Key": {"k": {"S": "3"}}}}]
        }});
        let (sent, rest) = split_batch(body.to_string().as_bytes()).unwrap();
        assert_eq!(sent["RequestItems"]["a"].as_array().unwrap().len(), 1);
        let rest_count: usize = rest.as_object().unwrap().values().map(|v| v.as_array().unwrap().len()).sum();
        assert_eq!(rest_count, 2);
        let one = json!({"RequestItems": {"a": [{"PutRequest": {"Item": {"k": {"S": "1"}}}}]}});
        assert!(split_batch(one.to_string().as_bytes()).is_none());
    }
}
