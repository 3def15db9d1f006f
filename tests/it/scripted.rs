//! A scripted DynamoDB endpoint on loopback: real HTTP, real SDK clients, and answers chosen by
//! the test (throttling, 5xx, unprocessed items or keys, stalls), with every request recorded.
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
    /// The operation, from `X-Amz-Target` (`BatchWriteItem`, `GetItem`, …).
    pub(crate) operation: String,
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
    stall: Duration,
}

impl Reply {
    /// 200 with `body`.
    pub(crate) fn ok(body: Value) -> Reply {
        Reply {
            status: 200,
            body,
            stall: Duration::ZERO,
        }
    }

    /// A DynamoDB error: `status`, with `code` as its `__type`.
    pub(crate) fn error(status: u16, code: &str, message: &str) -> Reply {
        Reply {
            status,
            body: json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": message}),
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
        let body = reply.body.to_string();
        let head = format!(
            "HTTP/1.1 {} Scripted\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\nx-amzn-requestid: scripted\r\n\r\n",
            reply.status,
            body.len()
        );
        let out = stream.get_mut();
        if out.write_all(head.as_bytes()).await.is_err() || out.write_all(body.as_bytes()).await.is_err() {
            return; // the client gave up on this attempt
        }
    }
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut operation = String::new();
    let mut length = 0_usize;
    let mut line = String::new();
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
                "x-amz-target" => {
                    operation = value.rsplit('.').next().unwrap_or(value).to_owned();
                }
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(Request {
        operation,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
    })
}
