//! The AWS clients a function builds at cold start, all under the one I/O policy.

use aws_types::SdkConfig;

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
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&sdk)
                    .force_path_style(force_path_style)
                    .build(),
            ),
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
