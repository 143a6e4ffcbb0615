//! `tfreg aws ...`: set-up helpers for AWS mode. The deployed stack creates its
//! table and bucket from `template.yaml`; these are for emulators and trials.

use clap::{Args, Subcommand};
use tfreg_store::dynamodb::DynamoStore;
use tfreg_store::s3::S3BlobStore;

use crate::cli_error::Result;

#[derive(Subcommand)]
pub enum AwsCommand {
    /// Create the DynamoDB table and S3 bucket tfreg uses (e.g. in the local emulators).
    Init(InitArgs),
}

#[derive(Args)]
pub struct InitArgs {
    #[arg(long, env = "TFREG_TABLE")]
    table: String,
    #[arg(long, env = "TFREG_BUCKET")]
    bucket: String,
    /// Path-style S3 URLs (S3 emulators).
    #[arg(long, env = "TFREG_S3_FORCE_PATH_STYLE")]
    s3_force_path_style: bool,
}

pub async fn run(cmd: AwsCommand) -> Result<()> {
    match cmd {
        AwsCommand::Init(args) => {
            let (dynamodb, s3) = tfreg_store::aws::clients(args.s3_force_path_style).await?;
            DynamoStore::new(dynamodb, &args.table)
                .create_table()
                .await?;
            eprintln!("created DynamoDB table {}", args.table);
            let ttl = std::time::Duration::from_secs(tfreg_http::registry::DEFAULT_URL_TTL_SECS);
            S3BlobStore::new(s3, &args.bucket, ttl)
                .create_bucket()
                .await?;
            eprintln!("created S3 bucket {}", args.bucket);
            Ok(())
        }
    }
}
