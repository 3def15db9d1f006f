//! The AWS clients a function builds at cold start, all under the one I/O policy; the S3 client
//! and the listing operator tools use.

use crate::{ConfigError, Vars};
use aws_types::SdkConfig;

/// The clients every function and the runtime share, built once from the SDK configuration with
/// the SDK's own retries off ([`io_policy::Budget`] retries). Clients are cheap handles: a clone
/// shares the original's connection pool, so the function's uploads and the runtime's parking
/// go through one pool.
#[derive(Debug, Clone)]
pub struct Aws {
    sdk: SdkConfig,
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
}

impl Aws {
    /// From the loaded SDK configuration; `force_path_style` is `S3_FORCE_PATH_STYLE`.
    pub fn new(sdk: &SdkConfig, force_path_style: bool) -> Aws {
        let sdk = io_policy::without_sdk_retries(sdk);
        Aws { dynamodb: aws_sdk_dynamodb::Client::new(&sdk), s3: s3(&sdk, force_path_style), sdk }
    }

    /// From the loaded SDK configuration, path-style S3 as `S3_FORCE_PATH_STYLE` says: for a
    /// task that writes under the I/O policy as the functions do.
    pub fn from_vars(sdk: &SdkConfig, vars: &Vars<'_>) -> Result<Aws, ConfigError> {
        Ok(Aws::new(sdk, crate::settings::path_style(vars)?))
    }

    /// The SDK configuration the clients are built from, the SDK's own retries off: for a
    /// function to build the other clients it needs (SQS, say), under the same policy.
    pub fn sdk_config(&self) -> &SdkConfig {
        &self.sdk
    }

    /// The DynamoDB client.
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        self.dynamodb.clone()
    }

    /// The S3 client, path-style when configured so.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        self.s3.clone()
    }
}

/// An S3 client for operator tools (archives, failures), path-style when `S3_FORCE_PATH_STYLE`
/// in `vars` says so, with the SDK configuration's own retry settings.
pub fn s3_client(sdk: &SdkConfig, vars: &Vars<'_>) -> Result<aws_sdk_s3::Client, ConfigError> {
    Ok(s3(sdk, crate::settings::path_style(vars)?))
}

/// An S3 client from `sdk`, path-style if `force_path_style`.
pub fn s3(sdk: &SdkConfig, force_path_style: bool) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(sdk).force_path_style(force_path_style).build(),
    )
}

/// The bytes of `s3://bucket/key`; `None` when there is no such key. The request (its body
/// read included) is sent under `budget`: a transient failure (`SlowDown`, a 5xx, a cut
/// connection) is retried, with backoff, while the budget lasts, so that a client built with
/// the SDK's own retries off ([`Aws`]) still reads through them.
pub async fn get_object(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    budget: &io_policy::Budget,
) -> Result<Option<Vec<u8>>, io_policy::RequestFailed> {
    let target = || format!("s3://{bucket}/{key}");
    budget
        .call(|| async {
            let object = match s3.get_object().bucket(bucket).key(key).send().await {
                Ok(object) => object,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(aws_sdk_s3::operation::get_object::GetObjectError::is_no_such_key) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(io_policy::classify("GetObject", &e)),
            };
            let body =
                object.body.collect().await.map_err(|e| io_policy::Failure::transient(e.to_string()))?;
            Ok(Some(body.into_bytes().to_vec()))
        })
        .await
        .map_err(|failure| io_policy::RequestFailed::new("GetObject", target(), failure))
}

/// The keys under `s3://bucket/prefix` that `keep` keeps, sorted, read page by page, each page
/// sent under `budget` as [`get_object`] sends its request.
pub async fn list_keys(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    keep: impl Fn(&str) -> bool,
    budget: &io_policy::Budget,
) -> Result<Vec<String>, io_policy::RequestFailed> {
    let mut keys = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = budget
            .call(|| {
                let request =
                    s3.list_objects_v2().bucket(bucket).prefix(prefix).set_continuation_token(token.clone());
                async move { request.send().await.map_err(|e| io_policy::classify("ListObjectsV2", &e)) }
            })
            .await
            .map_err(|failure| {
                io_policy::RequestFailed::new("ListObjectsV2", format!("s3://{bucket}/{prefix}"), failure)
            })?;
        keys.extend(page.contents().iter().filter_map(|o| o.key()).filter(|k| keep(k)).map(str::to_owned));
        if page.is_truncated() != Some(true) {
            break;
        }
        // A truncated page names where the next starts (ListObjectsV2's reference). One that
        // names nothing, or the token it was asked with, would end the listing short or never:
        // no endpoint of S3's does either, and no retry mends it.
        let next = page.next_continuation_token().unwrap_or_default();
        if next.is_empty() || token.as_deref() == Some(next) {
            let failure = io_policy::Failure::systemic(format!(
                "a truncated page gave {} continuation token: the listing cannot go on",
                if next.is_empty() { "no" } else { "the same" }
            ));
            return Err(io_policy::RequestFailed::new(
                "ListObjectsV2",
                format!("s3://{bucket}/{prefix}"),
                failure,
            ));
        }
        token = Some(next.to_owned());
    }
    keys.sort();
    Ok(keys)
}
