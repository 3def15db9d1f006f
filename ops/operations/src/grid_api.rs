//! The grid API: the web grid's JSON (`/api/page`, `/api/fields`) as a Lambda function behind a
//! function URL with `AuthType: AWS_IAM`, for apps in any language. A function URL's request
//! (payload format 2.0) is answered by [`crate::grid_server::App::answer`], the code path
//! `sidestream serve` answers with, so the two cannot drift; the page and its assets are not
//! served (a browser cannot sign its requests).
//!
//! Cursors are signed with a key read at cold start from the Secrets Manager secret
//! `GRID_CURSOR_SECRET` (the template's `GridApiCursorSecret`), never the development key.

use std::collections::BTreeMap;

use http_body_util::BodyExt as _;
use hyper::Method;
use io_policy::RequestFailed;
use serde::{Deserialize, Serialize};
use stream_runtime::{ConfigError, Vars};

use crate::grid::{Grid, GridSchema};
use crate::grid_server::App;

/// The shortest cursor key accepted: HMAC-SHA256 wants at least its 32 bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// How long a cursor is accepted.
pub const CURSOR_SECONDS: u64 = 24 * 3600;

/// The grid API function's configuration, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The index, as the indexer's `MULTIKEY_INDEXES` defines it.
    pub indexes: multikey_indexer::Indexes,
    /// Which of its indexes (`GRID_INDEX`; the only one when unset).
    pub index: Option<String>,
    /// The base table (`GRID_TABLE`).
    pub table: String,
    /// Its index of a scope's items in tiebreaker order (`GRID_NULLS_INDEX`, default
    /// `project-num`).
    pub nulls_index: String,
    /// The secret holding the cursor key (`GRID_CURSOR_SECRET`: a name or an ARN).
    pub secret: String,
    /// Whether the key is read at cold start (`PRIME_AT_INIT`, default true), or at the first
    /// request.
    pub prime: bool,
}

impl Config {
    /// Reads the variables above.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config {
            indexes: multikey_indexer::Indexes::from_vars(vars)?,
            index: vars.optional("GRID_INDEX"),
            table: vars.required("GRID_TABLE", "the base table the grid pages through")?,
            nulls_index: vars.optional("GRID_NULLS_INDEX").unwrap_or_else(|| "project-num".to_owned()),
            secret: vars.required(
                "GRID_CURSOR_SECRET",
                "the Secrets Manager secret whose string signs the grid's cursors",
            )?,
            prime: vars.flag("PRIME_AT_INIT", true)?,
        })
    }
}

/// Why the grid API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GridApiError {
    /// `MULTIKEY_INDEXES` and the table do not make a grid.
    #[error("GRID_INDEX, GRID_TABLE or MULTIKEY_INDEXES: {0}")]
    Schema(#[from] crate::grid::SchemaError),
    /// The cursor key's secret cannot be read.
    #[error("GRID_CURSOR_SECRET: {0}")]
    Secret(#[from] RequestFailed),
    /// The secret is no key.
    #[error("GRID_CURSOR_SECRET: {0}")]
    Key(String),
}

/// A function URL's request: what the API reads of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlRequest {
    /// The path, as the caller sent it (`/api/page`).
    #[serde(rename = "rawPath")]
    pub raw_path: String,
    /// The query string, as sent, without `?`.
    #[serde(rename = "rawQueryString", default)]
    pub raw_query: String,
    /// The request's context: its method.
    #[serde(rename = "requestContext")]
    pub context: UrlContext,
}

/// A function URL request's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlContext {
    /// Its HTTP part.
    pub http: UrlHttp,
}

/// A function URL request's HTTP part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlHttp {
    /// `GET`, `POST`, …
    pub method: String,
}

impl UrlRequest {
    /// A request for `method` `path?query`, as a function URL delivers it.
    pub fn new(method: &str, path: &str, query: &str) -> UrlRequest {
        UrlRequest {
            raw_path: path.to_owned(),
            raw_query: query.to_owned(),
            context: UrlContext { http: UrlHttp { method: method.to_owned() } },
        }
    }
}

/// A function URL's response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlResponse {
    /// The HTTP status.
    #[serde(rename = "statusCode")]
    pub status: u16,
    /// Its headers.
    pub headers: BTreeMap<String, String>,
    /// The body: JSON.
    pub body: String,
    /// Always false: the body is text.
    #[serde(rename = "isBase64Encoded")]
    pub base64: bool,
}

/// The grid API: the web grid's app, serving its JSON paths only, made once its cursor key is
/// read.
#[derive(Debug)]
pub struct Api {
    config: Config,
    dynamodb: aws_sdk_dynamodb::Client,
    secrets: Option<aws_sdk_secretsmanager::Client>,
    app: tokio::sync::OnceCell<App>,
}

impl Api {
    /// The API over `config`'s grid, its cursors signed with `key`; `client` with the SDK's
    /// retries off (every call is under the I/O policy).
    pub fn new(config: &Config, client: aws_sdk_dynamodb::Client, key: &[u8]) -> Result<Api, GridApiError> {
        let app = app(config, client.clone(), key)?;
        Ok(Api {
            config: config.clone(),
            dynamodb: client,
            secrets: None,
            app: tokio::sync::OnceCell::from(app),
        })
    }

    /// The app, made on first use when the key was not read at cold start.
    async fn app(&self) -> Result<&App, GridApiError> {
        self.app
            .get_or_try_init(|| async {
                let secrets = self
                    .secrets
                    .as_ref()
                    .ok_or_else(|| GridApiError::Key("no key, and no secret to read it from".to_owned()))?;
                let key = cursor_key(secrets, &self.config.secret).await?;
                app(&self.config, self.dynamodb.clone(), &key)
            })
            .await
    }

    /// Answers one request, as JSON: `/api/…` by the web grid's app, anything else 404; 502 when
    /// the cursor key cannot be read (read at the first request with `PRIME_AT_INIT=false`).
    pub async fn handle(&self, request: &UrlRequest) -> UrlResponse {
        let method = Method::from_bytes(request.context.http.method.as_bytes()).unwrap_or(Method::OPTIONS);
        let app = match self.app().await {
            Ok(app) => app,
            Err(e) => {
                tracing::error!(error = %e, "the grid API cannot sign cursors");
                let body = serde_json::json!({"error": e.to_string()}).to_string();
                let headers = BTreeMap::from([("content-type".to_owned(), "application/json".to_owned())]);
                return UrlResponse { status: 502, headers, body, base64: false };
            }
        };
        let response = app.answer_api(&method, &request.raw_path, &request.raw_query).await;
        let status = response.status().as_u16();
        let headers: BTreeMap<String, String> = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        let body =
            response.into_body().collect().await.map(http_body_util::Collected::to_bytes).unwrap_or_default();
        UrlResponse { status, headers, body: String::from_utf8_lossy(&body).into_owned(), base64: false }
    }
}

/// The web grid's app over `config`'s grid, cursors signed with `key`.
fn app(config: &Config, client: aws_sdk_dynamodb::Client, key: &[u8]) -> Result<App, GridApiError> {
    let schema =
        GridSchema::new(&config.indexes, config.index.as_deref(), &config.table, &config.nulls_index)?;
    let grid = Grid::new(client.clone(), schema, formats::cursor::Signer::new(key, CURSOR_SECONDS));
    Ok(App::new(grid, client))
}

/// The API as the function starts it, once, its clients made from `sdk` (DynamoDB's with the
/// SDK's retries off). The grid's schema is checked now. With [`Config::prime`] the cursor key
/// is read now too, and a failure fails the cold start; otherwise at the first request.
pub async fn start(config: &Config, sdk: &aws_types::SdkConfig) -> Result<Api, GridApiError> {
    GridSchema::new(&config.indexes, config.index.as_deref(), &config.table, &config.nulls_index)?;
    let api = Api {
        config: config.clone(),
        dynamodb: aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk)),
        secrets: Some(aws_sdk_secretsmanager::Client::new(sdk)),
        app: tokio::sync::OnceCell::new(),
    };
    if config.prime {
        api.app().await?;
    }
    Ok(api)
}

/// The cursor key: the secret's string, at least [`MIN_KEY_BYTES`] long.
pub async fn cursor_key(
    client: &aws_sdk_secretsmanager::Client,
    secret: &str,
) -> Result<Vec<u8>, GridApiError> {
    let value = client
        .get_secret_value()
        .secret_id(secret)
        .send()
        .await
        .map_err(|e| RequestFailed::sdk("GetSecretValue", secret, &e))?;
    let key = value.secret_string().unwrap_or_default().as_bytes().to_vec();
    if key.len() < MIN_KEY_BYTES {
        return Err(GridApiError::Key(format!(
            "the secret {secret} holds {} bytes of string; a cursor key needs at least {MIN_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(key)
}

/// The grid-api Lambda: configured once at cold start, the cursor key read from its secret, then
/// a function URL's request per invocation, always answered (an error is a response with its
/// status).
impl stream_runtime::task::Task for Api {
    const NAME: &'static str = "grid-api";
    const ERROR_TYPE: &'static str = "GridApiError";
    type Input = UrlRequest;
    type Output = UrlResponse;
    type Error = std::convert::Infallible;

    async fn init(
        vars: &Vars<'_>,
        sdk: &aws_types::SdkConfig,
    ) -> Result<Api, stream_runtime::task::InitError> {
        Ok(start(&Config::from_vars(vars)?, sdk).await?)
    }

    async fn handle(
        &self,
        request: UrlRequest,
        _deadline: std::time::Instant,
    ) -> Result<UrlResponse, Self::Error> {
        let response = Api::handle(self, &request).await;
        tracing::info!(path = request.raw_path, status = response.status, "answered");
        Ok(response)
    }
}

#[cfg(test)]
mod tests;
