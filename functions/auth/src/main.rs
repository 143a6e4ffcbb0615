//! The `auth` Lambda function: sign-in, `terraform login` (login.v1) brokered to the identity provider: /oauth/authorize, /oauth/callback, /oauth/token. Reads its client secret from SSM Parameter Store or Secrets Manager at init; the only function that links the JWT and OpenID code.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_signin().await
}
