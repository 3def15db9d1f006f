//! The grid API as its function URL (`AuthType: AWS_IAM`) serves it, on loopback: each request's
//! SigV4 signature checked ([`crate::sigv4`]) with the local stack's key pair for the service
//! `lambda`, what is unsigned or wrongly signed refused with 403 `{"Message":"Forbidden"}` as a
//! function URL refuses it, and the rest handed to the grid API function's own handler
//! (`operations::grid_api`), configured from its template environment, its cursor key read from
//! the stack's secret as the function reads it at cold start.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use aws_config::SdkConfig;
use aws_credential_types::provider::ProvideCredentials as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use operations::grid_api::{Api, Config, UrlRequest};
use stream_runtime::Vars;
use tokio::net::TcpListener;

use crate::sigv4::{Signed, Verifier};
use crate::{Stack, StackError, environment};

/// The grid API on loopback; it stops when dropped.
#[derive(Debug)]
pub struct GridApi {
    /// Its URL, as the stack's `GridApiUrl` output gives a function URL's: `http://127.0.0.1:<port>/`.
    pub url: String,
    /// Requests refused for their signature.
    pub refused: Arc<AtomicU64>,
    /// Requests answered by the function.
    pub served: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GridApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves the stack's grid API function (with `GridApi=true`) on a loopback port.
pub async fn serve_grid_api(sdk: &SdkConfig, stack: &Stack) -> Result<GridApi, StackError> {
    let function = stack.function("grid-api")?;
    let env = environment(function);
    let lookup = |name: &str| env.get(name).cloned();
    let config = Config::from_vars(&Vars::new(&lookup))
        .map_err(|source| StackError::Config { function: function.logical_id.clone(), cause: source })?;
    // The function acts under its role; its callers sign with theirs (`sdk`'s).
    let api = operations::grid_api::start(&config, &crate::iam::as_function(sdk, function))
        .await
        .map_err(|e| StackError::Unusable(format!("{}: {e}", function.logical_id)))?;
    let credentials = sdk
        .credentials_provider()
        .ok_or_else(|| StackError::Unusable("the SDK configuration has no credentials".to_owned()))?
        .provide_credentials()
        .await
        .map_err(|e| StackError::Unusable(format!("no credentials to check signatures with: {e}")))?;
    let verifier = Arc::new(Verifier {
        access_key: credentials.access_key_id().to_owned(),
        secret_key: credentials.secret_access_key().to_owned(),
        region: sdk.region().map_or_else(|| "us-east-1".to_owned(), ToString::to_string),
        service: "lambda".to_owned(),
    });
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| StackError::Unusable(format!("cannot listen on loopback: {e}")))?;
    let port = listener.local_addr().map_err(|e| StackError::Unusable(e.to_string()))?.port();
    let (refused, served) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let state = Arc::new((api, verifier, Arc::clone(&refused), Arc::clone(&served)));
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = Arc::clone(&state);
                    async move {
                        let (api, verifier, refused, served) = &*state;
                        Ok::<_, Infallible>(answer(api, verifier, request, refused, served).await)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(GridApi { url: format!("http://127.0.0.1:{port}/"), refused, served, task })
}

/// One request: its signature checked, then the function's answer.
async fn answer(
    api: &Api,
    verifier: &Verifier,
    request: Request<Incoming>,
    refused: &AtomicU64,
    served: &AtomicU64,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(http_body_util::Collected::to_bytes).unwrap_or_default();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let (path, query) = (parts.uri.path(), parts.uri.query().unwrap_or_default());
    let signed = Signed { method: parts.method.as_str(), path, query, headers: &headers, body: &body };
    if let Err(why) = verifier.verify(&signed, SystemTime::now()) {
        refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(%path, why, "grid API request refused");
        return respond(
            StatusCode::FORBIDDEN,
            &[("content-type".to_owned(), "application/json".to_owned())],
            r#"{"Message":"Forbidden"}"#.to_owned(),
        );
    }
    served.fetch_add(1, Ordering::Relaxed);
    let response = api.handle(&UrlRequest::new(parts.method.as_str(), path, query)).await;
    let headers: Vec<(String, String)> = response.headers.into_iter().collect();
    respond(StatusCode::from_u16(response.status).unwrap_or(StatusCode::BAD_GATEWAY), &headers, response.body)
}

fn respond(status: StatusCode, headers: &[(String, String)], body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
