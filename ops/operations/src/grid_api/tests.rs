//! The grid API's configuration, its reading of a function URL's request, and its answers that
//! need no table: what it refuses, as JSON, with the status that says which input was wrong.

use serde_json::json;

use super::*;

fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
}

const INDEXES: &str = r#"{"base_key":["id"],"indexes":[{"name":"f","table":"index","source":"custom_fields","scope":["project"],"tiebreakers":["num"],"include":["name"]}]}"#;

#[test]
fn the_configuration_names_each_variable() {
    let lookup =
        vars(&[("MULTIKEY_INDEXES", INDEXES), ("GRID_TABLE", "issues"), ("GRID_CURSOR_SECRET", "arn:s")]);
    let config = Config::from_vars(&Vars::new(&lookup)).unwrap();
    assert_eq!(
        (config.table.as_str(), config.nulls_index.as_str(), config.secret.as_str()),
        ("issues", "project-num", "arn:s")
    );
    let lookup = vars(&[("MULTIKEY_INDEXES", INDEXES), ("GRID_TABLE", "issues")]);
    let error = Config::from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
    assert!(error.contains("GRID_CURSOR_SECRET"), "{error}");
    let lookup = vars(&[("MULTIKEY_INDEXES", INDEXES), ("GRID_CURSOR_SECRET", "s")]);
    let error = Config::from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
    assert!(error.contains("GRID_TABLE"), "{error}");
}

/// A function URL's request as Lambda delivers it (payload format 2.0, IAM-authorized).
#[test]
fn a_function_url_request_reads_as_delivered() {
    let event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/api/page",
        "rawQueryString": "scope=35e9&field=3fe6&limit=4",
        "headers": {"host": "abc.lambda-url.us-east-1.on.aws", "x-amz-date": "20261128T120000Z"},
        "queryStringParameters": {"scope": "35e9", "field": "3fe6", "limit": "4"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc",
            "authorizer": {"iam": {"accessKey": "AKIA", "accountId": "123456789012", "callerId": "AIDA", "userArn": "arn:aws:iam::123456789012:user/app", "userId": "AIDA"}},
            "domainName": "abc.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abc",
            "http": {"method": "GET", "path": "/api/page", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1", "userAgent": "botocore"},
            "requestId": "r",
            "routeKey": "$default",
            "stage": "$default",
            "time": "28/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1_795_867_200_000_u64
        },
        "isBase64Encoded": false
    });
    let request: UrlRequest = serde_json::from_value(event).unwrap();
    assert_eq!(request, UrlRequest::new("GET", "/api/page", "scope=35e9&field=3fe6&limit=4"));
}

fn api() -> Api {
    let lookup =
        vars(&[("MULTIKEY_INDEXES", INDEXES), ("GRID_TABLE", "issues"), ("GRID_CURSOR_SECRET", "s")]);
    let config = Config::from_vars(&Vars::new(&lookup)).unwrap();
    let dynamodb = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .build();
    Api::new(&config, aws_sdk_dynamodb::Client::from_conf(dynamodb), &[7; 32]).unwrap()
}

/// Answers that need no table: each names what was wrong, with its status.
#[tokio::test]
async fn refusals_are_json_with_the_status_that_says_which_input() {
    let api = api();
    let cases = [
        (UrlRequest::new("GET", "/", ""), 404, "no API at /: the grid API serves /api/page and /api/fields"),
        (UrlRequest::new("GET", "/grid.js", ""), 404, "no API at /grid.js"),
        (UrlRequest::new("GET", "/api/page", "field=f"), 400, "the parameter scope is missing"),
        (UrlRequest::new("GET", "/api/page", "scope=p"), 400, "the parameter field is missing"),
        (UrlRequest::new("GET", "/api/page", "scope=p&field=f&limit=x"), 400, "limit \"x\" is not a number"),
        (UrlRequest::new("GET", "/api/nothing", ""), 404, "no page at /api/nothing"),
        (UrlRequest::new("POST", "/api/page", ""), 405, "only GET is served"),
    ];
    for (request, status, error) in cases {
        let response = api.handle(&request).await;
        let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(response.status, status, "{request:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains(error), "{request:?}: {body}");
        assert_eq!(response.headers["content-type"], "application/json");
        assert!(!response.base64);
    }
}
