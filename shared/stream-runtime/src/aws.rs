//! The AWS clients a function builds at cold start, all under the one I/O policy.

use aws_types::SdkConfig;

/// The shared SDK configuration, with the SDK's own retries off ([`io_policy::Budget`] retries),
/// and the settings that shape clients.
#[derive(Debug, Clone)]
pub struct Aws {
    sdk: SdkConfig,
    force_path_style: bool,
}

impl Aws {
    /// From the loaded SDK configuration; `force_path_style` is `S3_FORCE_PATH_STYLE`.
    pub fn new(sdk: &SdkConfig, force_path_style: bool) -> Aws {
        Aws {
            sdk: io_policy::without_sdk_retries(sdk),
            force_path_style,
        }
    }

    /// A DynamoDB client.
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk)
    }

    /// An S3 client, path-style when configured so.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&self.sdk)
                .force_path_style(self.force_path_style)
                .build(),
        )
    }

    /// The SDK configuration the clients are built from.
    pub fn sdk(&self) -> &SdkConfig {
        &self.sdk
    }
}
