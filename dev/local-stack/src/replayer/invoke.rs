//! How the replayer calls a function behind a local emulator: Lambda's Invoke API as `cargo
//! lambda watch` serves it. (In-process invokers are `stream_runtime::delivery::in_process`.)
//!
//! Like Lambda, the replayer owns each invocation's timeout: an invoker gets the deadline, which
//! an in-process function sees as its context's deadline, and the replayer cuts the invocation
//! off there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use stream_runtime::delivery::{Invocation, Invoker};

/// An invoker that POSTs to `{endpoint}/2015-03-31/functions/{function}/invocations` (Lambda's
/// Invoke API, which `cargo lambda watch` serves), giving up at the deadline, or after
/// `timeout` if that comes first (the emulator runs the function with its own timeout).
///
/// A 200 answer is the function's response; any other status is a function error, read from
/// the body's `errorType` and `errorMessage`. A refused connection or a timeout is a function
/// error too, so the mapping retries it.
pub fn http(endpoint: &str, function: &str, timeout: Duration) -> Invoker {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("{}/2015-03-31/functions/{function}/invocations", endpoint.trim_end_matches('/'));
    Arc::new(move |event, deadline| {
        let (client, url) = (client.clone(), url.clone());
        let timeout = timeout.min(deadline.saturating_duration_since(Instant::now()));
        Box::pin(async move {
            match tokio::time::timeout(timeout, post(&client, &url, &event)).await {
                Ok(Ok(invocation)) => invocation,
                Ok(Err(message)) => Invocation::Failed {
                    error_type: "Sidestream.InvokeError".into(),
                    message: format!("POST {url}: {message}"),
                },
                Err(_) => Invocation::Failed {
                    error_type: "Sidestream.Timeout".into(),
                    message: format!("POST {url}: no answer within {timeout:?}"),
                },
            }
        })
    })
}

async fn post(
    client: &Client<HttpConnector, Full<Bytes>>,
    url: &str,
    event: &Event,
) -> Result<Invocation, String> {
    let body = serde_json::to_vec(event).map_err(|e| e.to_string())?;
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| DisplayErrorContext(&e).to_string())?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    if status.is_success() {
        return Ok(Invocation::Returned(body));
    }
    let field = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok(Invocation::Failed {
        error_type: field("errorType").unwrap_or_else(|| format!("HTTP {status}")),
        message: field("errorMessage").unwrap_or_else(|| body.to_string()),
    })
}
