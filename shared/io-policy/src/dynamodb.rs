//! DynamoDB under the policy: `BatchGetItem` drained of its unprocessed keys, and the answer to
//! a conditional write told apart from its condition failing.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::{Budget, Failure, classify};

/// An item as DynamoDB returns it.
pub type Item = HashMap<String, AttributeValue>;

/// The items of `table` that `wanted` asks for, in the order the answers came: `BatchGetItem`
/// sent, then its unprocessed keys asked again as retries under `budget` until none are left.
/// `sent` is called before each request (to count them).
pub async fn batch_get_item(
    budget: &Budget,
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    wanted: KeysAndAttributes,
    mut sent: impl FnMut(),
) -> Result<Vec<Item>, Failure> {
    let answers = budget
        .drain("BatchGetItem", wanted, |wanted| {
            sent();
            let request = client.batch_get_item().request_items(table, wanted).send();
            async move {
                let mut output = request.await.map_err(|e| classify("BatchGetItem", &e))?;
                let items = output.responses.and_then(|mut r| r.remove(table)).unwrap_or_default();
                let rest = output.unprocessed_keys.take().and_then(|mut u| u.remove(table));
                Ok((items, rest.filter(|r| !r.keys().is_empty())))
            }
        })
        .await?;
    Ok(answers.into_iter().flatten().collect())
}

/// A conditional write's answer: `Some` when it was applied, `None` when its condition failed
/// (`ConditionalCheckFailedException`, an expected outcome rather than an error), and any other
/// error of `operation` classified.
pub fn conditional<T, E>(
    operation: &str,
    sent: Result<T, SdkError<E, Response>>,
) -> Result<Option<T>, Failure>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match sent {
        Ok(answer) => Ok(Some(answer)),
        Err(SdkError::ServiceError(ctx)) if ctx.err().code() == Some("ConditionalCheckFailedException") => {
            Ok(None)
        }
        Err(e) => Err(classify(operation, &e)),
    }
}
