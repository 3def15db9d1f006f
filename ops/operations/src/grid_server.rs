//! The web grid. A small HTTP/1 server on loopback that serves one static page
//! (HTML, CSS and JS built into the binary: no build step, no CDN) and the JSON it reads:
//!
//! - `GET /`: the page. `?scope=35e9` opens that scope.
//! - `GET /api/fields?scope=S`: the scope's custom fields, `{"scope":…,"fields":[{"id","name"}],
//!   "names":"definitions"|"data","columns":[…],"source":…}` (`columns`: the order attribute and
//!   the index's projected ones, shown before the fields; `source`: the indexed map): names from the scope's definition item (an item of the base
//!   table whose key is the scope, with a `fields` map of id to name) where it has one, otherwise
//!   the map keys found on the scope's first items.
//! - `GET /api/page?scope=S&field=F[&desc=1][&limit=N][&cursor=C][&from=V][&to=V][&prefix=P]`:
//!   one page from `crate::grid::Grid::page`, as `{"rows":[…],"next":…,"requests":{…},"ms":…}`,
//!   each row as `crate::grid::output` writes it. `from` and `to` are read as numbers when they
//!   parse as one, else as strings.
//! - Errors are `{"error": "…"}` with status 400 (a refused cursor says why) or 502 (DynamoDB).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use crate::grid::{Filter, Grid, GridError, Query};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const PAGE: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/grid.js");
const STYLE: &str = include_str!("../assets/grid.css");

/// How long reading a scope's definition item may take, retries included.
const FIELDS_TIME: std::time::Duration = std::time::Duration::from_secs(20);

/// The attribute of a scope's definition item that names its custom fields.
pub(crate) const DEFINITIONS: &str = "fields";

/// What the server reads: a grid, and the client it reads field definitions with.
#[derive(Debug, Clone)]
pub struct App {
    grid: Arc<Grid>,
    client: aws_sdk_dynamodb::Client,
}

impl App {
    /// The web grid over `grid`; `client` reads the scopes' definition items (it should have
    /// the SDK's own retries off, as the grid's).
    pub fn new(grid: Grid, client: aws_sdk_dynamodb::Client) -> App {
        App { grid: Arc::new(grid), client }
    }

    /// Answers one request.
    pub async fn answer(&self, method: &Method, path: &str, query: &str) -> Response<Full<Bytes>> {
        let params: HashMap<String, String> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
        match (method, path) {
            (&Method::GET, "/") => asset(PAGE, "text/html; charset=utf-8"),
            (&Method::GET, "/grid.js") => asset(SCRIPT, "text/javascript; charset=utf-8"),
            (&Method::GET, "/grid.css") => asset(STYLE, "text/css; charset=utf-8"),
            (&Method::GET, "/api/fields") => match self.fields(&params).await {
                Ok(body) => json_response(StatusCode::OK, &body),
                Err(e) => error(&e),
            },
            (&Method::GET, "/api/page") => match self.page(&params).await {
                Ok(body) => json_response(StatusCode::OK, &body),
                Err(e) => error(&e),
            },
            (&Method::GET, _) => {
                json_response(StatusCode::NOT_FOUND, &json!({"error": format!("no page at {path}")}))
            }
            _ => json_response(StatusCode::METHOD_NOT_ALLOWED, &json!({"error": "only GET is served"})),
        }
    }

    /// Answers one request of the JSON paths only (`/api/page`, `/api/fields`), anything else
    /// with 404: the grid API's function, whose callers sign their requests and read JSON.
    pub async fn answer_api(&self, method: &Method, path: &str, query: &str) -> Response<Full<Bytes>> {
        if path.starts_with("/api/") {
            return self.answer(method, path, query).await;
        }
        let error = format!("no API at {path}: the grid API serves /api/page and /api/fields");
        json_response(StatusCode::NOT_FOUND, &json!({ "error": error }))
    }

    async fn page(&self, params: &HashMap<String, String>) -> Result<Value, ServeError> {
        let query = page_query(params)?;
        let started = Instant::now();
        let page = self
            .grid
            .page(&query, params.get("cursor").map(String::as_str).filter(|c| !c.is_empty()))
            .await?;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut lines = crate::grid::output::json_lines(&page, self.grid.schema(), &query);
        let last = lines.pop().unwrap_or(Value::Null);
        Ok(json!({"rows": lines, "next": last["next"], "requests": last["requests"], "ms": ms}))
    }

    async fn fields(&self, params: &HashMap<String, String>) -> Result<Value, ServeError> {
        let scope = required(params, "scope")?;
        let schema = self.grid.schema();
        // The demo's field names live in an item keyed by the scope alone; a table keyed by two
        // attributes has no such item, and its fields are named by their ids, from the data.
        let defined = match schema.single_key() {
            Some(key) => self.definitions(key, scope).await?,
            None => BTreeMap::new(),
        };
        let (fields, names) = if defined.is_empty() {
            (self.fields_in_data(scope).await?, "data")
        } else {
            (defined, "definitions")
        };
        let mut fields: Vec<(String, String)> = fields.into_iter().collect();
        fields.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        let fields: Vec<Value> =
            fields.into_iter().map(|(id, name)| json!({"id": id, "name": name})).collect();
        let mut columns = vec![schema.order()];
        columns.extend(schema.projected().iter().map(String::as_str));
        Ok(
            json!({"scope": scope, "fields": fields, "names": names, "columns": columns, "source": schema.source()}),
        )
    }

    /// The field names the item keyed `key` = `scope` defines, if there is one.
    async fn definitions(&self, key: &str, scope: &str) -> Result<BTreeMap<String, String>, ServeError> {
        let schema = self.grid.schema();
        // BatchGetItem, not GetItem: the grid reads the base table with Query and BatchGetItem
        // only, and the grid API's role allows no more.
        let wanted = KeysAndAttributes::builder()
            .keys([(key.to_owned(), AttributeValue::S(scope.to_owned()))].into())
            .projection_expression("#d")
            .expression_attribute_names("#d", DEFINITIONS)
            .consistent_read(false)
            .build()
            .map_err(|e| ServeError::Dynamo(e.to_string()))?;
        let budget = io_policy::Policy::default().within(FIELDS_TIME);
        let definition = io_policy::batch_get_item(&budget, &self.client, schema.table(), wanted, || {})
            .await
            .map_err(|failure| ServeError::Dynamo(format!("BatchGetItem {}: {failure}", schema.table())))?
            .into_iter()
            .next();
        Ok(match definition.as_ref().and_then(|i| i.get(DEFINITIONS)) {
            Some(AttributeValue::M(map)) => map
                .iter()
                .map(|(id, name)| (id.clone(), name.as_s().map_or_else(|_| id.clone(), Clone::clone)))
                .collect(),
            _ => BTreeMap::new(),
        })
    }

    /// The map keys on the scope's first page of items (a grid page of a field nobody has,
    /// which lists the scope in order).
    async fn fields_in_data(&self, scope: &str) -> Result<BTreeMap<String, String>, ServeError> {
        let schema = self.grid.schema();
        let query = Query {
            scope: scope.to_owned(),
            field: String::new(),
            descending: false,
            limit: crate::grid::MAX_LIMIT,
            filter: Filter::None,
            attributes: vec![schema.source().to_owned()],
        };
        let page = self.grid.page(&query, None).await?;
        let mut fields = BTreeMap::new();
        for row in &page.rows {
            if let Some(Value::Object(map)) = row.item.get(schema.source()).and_then(|m| m.get("M")) {
                for id in map.keys() {
                    fields.insert(id.clone(), id.clone());
                }
            }
        }
        Ok(fields)
    }
}

/// Why a request cannot be answered.
#[derive(Debug, thiserror::Error)]
enum ServeError {
    /// A parameter is missing or invalid.
    #[error("{0}")]
    BadRequest(String),
    /// The grid refused or failed.
    #[error(transparent)]
    Grid(#[from] GridError),
    /// A DynamoDB request failed.
    #[error("{0}")]
    Dynamo(String),
}

fn error(e: &ServeError) -> Response<Full<Bytes>> {
    let status = match e {
        ServeError::BadRequest(_) | ServeError::Grid(GridError::Query(_) | GridError::Cursor(_)) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::BAD_GATEWAY,
    };
    json_response(status, &json!({"error": e.to_string()}))
}

fn required<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ServeError> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ServeError::BadRequest(format!("the parameter {name} is missing")))
}

/// The grid query a `/api/page` request asks for.
fn page_query(params: &HashMap<String, String>) -> Result<Query, ServeError> {
    let limit = match params.get("limit") {
        None => 25,
        Some(text) => {
            text.parse().map_err(|_| ServeError::BadRequest(format!("limit {text:?} is not a number")))?
        }
    };
    let bound = |name: &str| match params.get(name).map(String::as_str) {
        None | Some("") => Bound::Unbounded,
        Some(text) => Bound::Included(match key_codec::Number::parse(text) {
            Ok(n) => key_codec::Value::Number(n),
            Err(_) => key_codec::Value::String(text.to_owned()),
        }),
    };
    let filter = match params.get("prefix").map(String::as_str) {
        Some(prefix) if !prefix.is_empty() => Filter::Prefix(prefix.to_owned()),
        _ => match (bound("from"), bound("to")) {
            (Bound::Unbounded, Bound::Unbounded) => Filter::None,
            (from, to) => Filter::Range(from, to),
        },
    };
    Ok(Query {
        scope: required(params, "scope")?.to_owned(),
        field: required(params, "field")?.to_owned(),
        descending: params.get("desc").is_some_and(|d| d == "1" || d == "true"),
        limit,
        filter,
        attributes: params
            .get("attributes")
            .map(|a| a.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default(),
    })
}

fn asset(body: &'static str, content_type: &str) -> Response<Full<Bytes>> {
    respond(StatusCode::OK, content_type, Bytes::from_static(body.as_bytes()))
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    respond(status, "application/json", Bytes::from(body.to_string()))
}

fn respond(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    if let Ok(value) = "no-store".parse() {
        response.headers_mut().insert(hyper::header::CACHE_CONTROL, value);
    }
    response
}

/// Serves `app` on `listener` until the task is dropped; each connection on its own task.
pub async fn serve(listener: TcpListener, app: App) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let app = app.clone();
                async move {
                    let (path, query) =
                        (request.uri().path().to_owned(), request.uri().query().unwrap_or("").to_owned());
                    let response = app.answer(request.method(), &path, &query).await;
                    tracing::info!(method = %request.method(), %path, status = response.status().as_u16(), "served");
                    Ok::<_, Infallible>(response)
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "connection closed");
            }
        });
    }
}

/// Binds `addr` (use port 0 for a free one) and returns the listener and its address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Serves `app` on 127.0.0.1:`port` (0: any free port) until Ctrl-C, after printing its address
/// on `out`, opening the scope `scope` when one is given.
pub async fn serve_on_loopback(
    app: App,
    port: u16,
    scope: &str,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let (listener, addr) = bind(([127, 0, 0, 1], port).into())
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let query = if scope.is_empty() { String::new() } else { format!("?scope={scope}") };
    writeln!(out, "\nThe web grid: http://{addr}/{query} (Ctrl-C to stop)")?;
    out.flush()?;
    tokio::select! {
        served = serve(listener, app) => served,
        interrupted = tokio::signal::ctrl_c() => interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn page_parameters_become_a_grid_query() {
        let q = page_query(&params(&[
            ("scope", "35e9"),
            ("field", "3fe6"),
            ("desc", "1"),
            ("limit", "10"),
            ("from", "-2"),
            ("to", "x"),
        ]))
        .unwrap();
        assert_eq!((q.scope.as_str(), q.field.as_str(), q.descending, q.limit), ("35e9", "3fe6", true, 10));
        assert!(matches!(
            q.filter,
            Filter::Range(
                Bound::Included(key_codec::Value::Number(_)),
                Bound::Included(key_codec::Value::String(_))
            )
        ));
        let q = page_query(&params(&[("scope", "s"), ("field", "f"), ("prefix", "ab")])).unwrap();
        assert_eq!(q.filter, Filter::Prefix("ab".into()));
        let e = page_query(&params(&[("field", "f")])).unwrap_err();
        assert_eq!(e.to_string(), "the parameter scope is missing");
        let e = page_query(&params(&[("scope", "s"), ("field", "f"), ("limit", "ten")])).unwrap_err();
        assert_eq!(e.to_string(), "limit \"ten\" is not a number");
    }
}
