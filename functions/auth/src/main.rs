//! The `auth` Lambda function: sign-in. `terraform login` (login.v1) and the web UI's single sign-on brokered to the identity provider (/oauth/authorize, /oauth/callback, /oauth/token, /oauth/sso; its client secret read from SSM Parameter Store or Secrets Manager at init), and the CI token exchange (/v1/auth/exchange). Either without the other; the only function that links the JWT and OpenID code.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_signin().await
}
