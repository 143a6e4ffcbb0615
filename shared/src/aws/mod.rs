//! AWS mode: DynamoDB and S3 backends, configuration from the environment, and
//! the Lambda entry point every function in `functions/` calls.

pub mod config;
pub mod dynamodb;
pub mod lambda;
pub mod s3;

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::storage::StoreError;

/// A failed AWS SDK call (DynamoDB or S3: both use the same error types) as a
/// short [`StoreError`]: "Code: message" for service errors, the whole chain
/// for transport errors.
pub(crate) fn sdk_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match (e.code(), e.message()) {
        (Some(code), Some(message)) => StoreError::Backend(format!("{code}: {message}")),
        (Some(code), None) => StoreError::Backend(code.to_string()),
        _ => StoreError::Backend(DisplayErrorContext(e).to_string()),
    }
}
