//! The AWS clients a function builds at cold start, all under the one I/O policy.

use aws_types::SdkConfig;
use stream_kit::{ConfigError, Vars};

/// The clients every function and the runtime share, built once from the SDK configuration with
/// the SDK's own retries off ([`io_policy::Budget`] retries). Clients are cheap handles: a clone
/// shares the original's connection pool, so the function's uploads and the runtime's parking
/// go through one pool.
#[derive(Debug, Clone)]
pub struct Aws {
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
}

impl Aws {
    /// From the loaded SDK configuration; `force_path_style` is `S3_FORCE_PATH_STYLE`.
    pub fn new(sdk: &SdkConfig, force_path_style: bool) -> Aws {
        let sdk = io_policy::without_sdk_retries(sdk);
        Aws {
            dynamodb: aws_sdk_dynamodb::Client::new(&sdk),
            s3: s3(&sdk, force_path_style),
        }
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
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(force_path_style)
            .build(),
    )
}
