//! AWS mode: DynamoDB and S3 backends, configuration from the environment, and
//! the Lambda entry point every function in `functions/` calls.

pub mod config;
pub mod dynamodb;
pub mod lambda;
pub mod s3;
pub mod tls;

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::storage::StoreError;

/// The raw HTTP response of every AWS SDK client (DynamoDB and S3 share it).
pub(crate) type HttpResponse = aws_sdk_s3::config::http::HttpResponse;

/// Error codes of DynamoDB and S3 that mean "slow down" or "try again".
const TRANSIENT_CODES: [&str; 10] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "ServiceUnavailable",
    "InternalServerError",
    "InternalError",
    "RequestTimeout",
    "TransactionInProgressException",
];

/// A failed AWS SDK call (DynamoDB or S3: both use the same error types) as a
/// short [`StoreError`]: "Code: message" for service errors, the whole chain
/// for transport errors. Transport failures, timeouts, throttling and 5xx
/// answers are [`StoreError::Unavailable`]; anything else (a missing table or
/// bucket, access denied, a request we built wrong) is [`StoreError::Internal`]:
/// retrying will not fix it, an operator must.
pub(crate) fn sdk_error<E>(e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let transient = match &e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ConstructionFailure(_) => false,
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            status >= 500 || status == 429 || e.code().is_some_and(|c| TRANSIENT_CODES.contains(&c))
        }
        _ => false,
    };
    let detail = match (e.code(), e.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_string(),
        _ => DisplayErrorContext(&e).to_string(),
    };
    if transient {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Internal(detail)
    }
}
