//! AWS mode: DynamoDB and S3 backends, configuration from the environment, and
//! the Lambda entry point every function in `functions/` calls.

pub mod config;
pub mod dynamodb;
pub mod lambda;
pub mod s3;
