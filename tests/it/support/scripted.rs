//! A scripted AWS endpoint on loopback: real HTTP, real SDK clients (DynamoDB's JSON protocol and
//! S3's REST one), and answers chosen by the test (throttling, 5xx, unprocessed items or keys,
//! S3 errors, stalls), with every request recorded.
//!
//! moto never throttles and never leaves work unprocessed; this endpoint does exactly what a test
//! scripts, so the I/O policy's paths can be driven one by one and their requests counted.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One request as the endpoint received it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The operation: from `X-Amz-Target` (`BatchWriteItem`, `GetItem`, …) for DynamoDB, else
    /// the HTTP method (S3: `PUT`, `GET`, …).
    pub(crate) operation: String,
    /// The request path (S3, path-style: `/bucket/key`).
    pub(crate) path: String,
    /// The JSON body.
    pub(crate) body: Value,
    /// When its body had been read.
    pub(crate) at: Instant,
}

/// One answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    status: u16,
    body: Value,
    content_type: &'static str,
    stall: Duration,
}

impl Reply {
    /// 200 with `body`.
    pub(crate) fn ok(body: Value) -> Reply {
        Reply { status: 200, body, content_type: "application/x-amz-json-1.0", stall: Duration::ZERO }
    }

    /// S3's empty 200 (a `PutObject` that succeeded).
    pub(crate) fn s3_ok() -> Reply {
        Reply {
            status: 200,
            body: Value::String(String::new()),
            content_type: "application/xml",
            stall: Duration::ZERO,
        }
    }

    /// S3's 200 with `body` as `content_type` (an object's bytes, a listing's XML).
    pub(crate) fn s3_body(content_type: &'static str, body: &str) -> Reply {
        Reply { status: 200, body: Value::String(body.to_owned()), content_type, stall: Duration::ZERO }
    }

    /// An S3 error: `status`, with `code` in S3's XML error document.
    pub(crate) fn s3_error(status: u16, code: &str) -> Reply {
        Reply {
            status,
            body: Value::String(format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>scripted {code}</Message><RequestId>scripted</RequestId></Error>"
            )),
            content_type: "application/xml",
            stall: Duration::ZERO,
        }
    }

    /// A DynamoDB error: `status`, with `code` as its `__type`.
    pub(crate) fn error(status: u16, code: &str, message: &str) -> Reply {
        Reply {
            status,
            body: json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": message}),
            content_type: "application/x-amz-json-1.0",
            stall: Duration::ZERO,
        }
    }

    /// 400 `ProvisionedThroughputExceededException`, as DynamoDB throttles.
    pub(crate) fn throttled() -> Reply {
        Reply::error(
            400,
            "ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded.",
        )
    }

    /// 500 `InternalServerError`.
    pub(crate) fn server_error() -> Reply {
        Reply::error(500, "InternalServerError", "Internal server error")
    }

    /// This reply, sent only after `stall`.
    pub(crate) fn after(mut self, stall: Duration) -> Reply {
        self.stall = stall;
        self
    }
}

type Script = Box<dyn FnMut(&Request) -> Reply + Send>;

/// The endpoint: a listener on 127.0.0.1 answering by its script.
pub(crate) struct Scripted {
    endpoint: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Scripted {
    /// Starts an endpoint that answers each request with `script(request)`.
    pub(crate) async fn start(script: impl FnMut(&Request) -> Reply + Send + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(script)));
        let recorded = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&script), Arc::clone(&recorded)));
            }
        });
        Scripted { endpoint, seen }
    }

    /// Starts an endpoint that answers with `replies` in order, then with `rest` for good.
    pub(crate) async fn replies(replies: Vec<Reply>, rest: Reply) -> Scripted {
        let mut replies = VecDeque::from(replies);
        Scripted::start(move |_| replies.pop_front().unwrap_or_else(|| rest.clone())).await
    }

    /// An SDK configuration for this endpoint, with the SDK's own retries off.
    pub(crate) fn sdk(&self) -> SdkConfig {
        let sdk = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(&self.endpoint)
            .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
                aws_sdk_dynamodb::config::Credentials::new("testing", "testing", None, None, "scripted"),
            ))
            .build();
        io_policy::without_sdk_retries(&sdk)
    }

    /// A DynamoDB client for this endpoint, with the SDK's own retries off.
    pub(crate) fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk())
    }

    /// Every request received so far, in order.
    pub(crate) fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    /// The operations received so far, in order.
    pub(crate) fn operations(&self) -> Vec<String> {
        self.seen().into_iter().map(|r| r.operation).collect()
    }
}

/// Answers the requests of one connection (HTTP/1.1, kept alive) until the client closes it.
async fn serve(stream: TcpStream, script: Arc<Mutex<Script>>, seen: Arc<Mutex<Vec<Request>>>) {
    let mut stream = BufReader::new(stream);
    loop {
        let Some(request) = read_request(&mut stream).await else {
            return;
        };
        let reply = (script.lock().unwrap())(&request);
        seen.lock().unwrap().push(request);
        tokio::time::sleep(reply.stall).await;
        let body = match reply.body {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let head = format!(
            "HTTP/1.1 {} Scripted\r\ncontent-type: {}\r\ncontent-length: {}\r\nx-amzn-requestid: scripted\r\netag: \"scripted\"\r\n\r\n",
            reply.status,
            reply.content_type,
            body.len()
        );
        let out = stream.get_mut();
        if out.write_all(head.as_bytes()).await.is_err() || out.write_all(body.as_bytes()).await.is_err() {
            return; // the client gave up on this attempt
        }
    }
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if stream.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), percent_decoded(parts.next()?));
    let mut operation = method.clone();
    let mut length = 0_usize;
    let mut chunked = false;
    loop {
        line.clear();
        if stream.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().ok()?,
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "x-amz-target" => {
                    operation = value.rsplit('.').next().unwrap_or(value).to_owned();
                }
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    if chunked {
        loop {
            line.clear();
            stream.read_line(&mut line).await.ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                // Trailers, if any, then the empty line that ends the body.
                loop {
                    line.clear();
                    stream.read_line(&mut line).await.ok()?;
                    if line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk).await.ok()?;
            body.extend_from_slice(&chunk[..size]);
        }
    }
    Some(Request {
        operation,
        path,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
    })
}

/// A request path with its `%XX` escapes decoded (S3 keys arrive percent-encoded).
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
