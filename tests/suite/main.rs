//! tfreg's integration suite, one test binary (one link) for all of it:
//!
//! - `e2e_terraform`, `e2e_lambda`: the real Terraform CLI over real HTTPS against
//!   `tfreg serve` and against the Lambda functions on the DynamoDB and S3 emulators.
//! - `edge`: the CloudFront stand-in (`support/cloudfront-edge.py`) against the
//!   reference signer (botocore): CloudFront's 403s, key rotation (issue 37).
//! - `edge_lambda`: the real Terraform 1.0.3 and 1.11.4 on the Lambda functions in
//!   cloudfront mode, their archives through that stand-in (issue 37).
//! - `e2e_access`: the real Terraform CLI (1.0.3, 1.11, 1.12) against
//!   `tfreg serve --private`: credentials blocks and `TF_TOKEN_<host>`, refusals
//!   without a token and after a revoke, deprecation warnings, yanked versions,
//!   the audit trail.
//! - `bad_input`: refusals through the real server and the real `tfreg` CLI.
//! - `cli_admin`: the admin commands of the real `tfreg` CLI on a data dir and
//!   through the admin API of a running `tfreg serve`.
//! - `cli_network`: whom the CLI trusts over TLS, and its network errors, with
//!   real `tfreg serve`, openssl, curl and `tfreg publish` processes.
//! - `backend_contract`: the storage contract and the publish path, in-process,
//!   on both backends (embedded, and DynamoDB + S3 on the emulators).
//! - `publish_attacks`: the attacks found by probing a release build, each
//!   refused, on both backends.
//! - `handlers`: bad input and access rules, in-process.
//! - `hardening`: hostile and slow clients, a broken database or disk, killed
//!   processes, against the real `tfreg serve`.
//! - `concurrent_publish`: many publishes at once, on both backends: every
//!   version whole, one winner per contested version, no orphan.
//! - `load`: h2load over HTTPS against `tfreg serve` and the Lambda functions,
//!   bounded in count and time; zero errors, figures printed.
//! - `aws_outage`: DynamoDB and S3 stopped and restarted under an in-process
//!   registry (emulators of its own): 503 with `Retry-After`, then recovery.
//!
//! - `access`: access control in-process on both backends: the endpoint ×
//!   credential matrix, revocation and expiry bounds, authorisation cost
//!   (counted), last use, the audit trail, release lifecycle, namespace keys.
//!
//! - `browser`: the web UI in headless Chromium over WebDriver, on `tfreg
//!   serve` and on the Lambda functions: sign in, search, a module's inputs,
//!   its copied snippet through `terraform init`, a provider's platforms, sign
//!   out; a hostile README runs nothing; screenshots, phone and dark included.
//!
//! - `scale`: a provider and a module of 5,000 versions, on both backends:
//!   every read endpoint costs one storage request, counted.
//!
//! - `probes`: holes found by probing from outside, each closed, on both
//!   backends: archives served as attachments (never sniffed), text others
//!   read without control or invisible characters, bounds on publishes in
//!   progress and on a token's namespaces, signing keys that cannot sign.
//!
//! - `template`: `template.yaml`, the functions' packages, the router and
//!   `cargo lambda watch`'s routes agree; least privilege per function; the
//!   CloudFront Function answers discovery as the code does.
//!
//! - `oidc_fixture`: the OpenID Provider of the sign-in tests, driven over
//!   HTTP by `tests/oidc/drive.sh`.
//!
//! - `login`: `terraform login`'s protocol (login.v1) against `tfreg serve`
//!   brokering to that provider: a token for mapped groups only, used once
//!   codes, tampered state, cookie or verifier refused.
//!
//! - `ci_exchange`: CI jobs' OIDC tokens (GitHub- and GitLab-shaped, from
//!   that provider over HTTPS) exchanged for publish tokens, in-process
//!   (every attack, the token's rights and expiry) and through `tfreg serve`
//!   and `tfreg publish --oidc`.
//!
//! - `login_cli`: the real `terraform login` (1.0.3, 1.11.4, 1.12.2) then
//!   `terraform init` of a private module, on `tfreg serve` and on the Lambda
//!   functions (the auth function's secret in SSM on moto); another
//!   namespace's member refused.
//!
//! - `signin_secret`: the auth function's client secret from SSM Parameter
//!   Store and Secrets Manager on moto's server.
//!
//! - `token_lifecycle`: issued tokens expire and leave lists, a bound on a CI
//!   identity's live exchanged tokens, `crit` headers, trust policies for
//!   issuers not allow-listed, names that draw nothing (issue 35).
//! - `signin_outside`: sign-in as found from outside (issue 35), on both
//!   backends: unauthenticated starts store nothing, a long `next` refused;
//!   the real `terraform login` (each version) and `tfreg login` refused
//!   end at once, saying why; the sign-in page names the provider.
//!
//! - `least_privilege`: every function's role in template.yaml grants
//!   exactly the AWS calls its code makes (infra/aws-calls.json), on
//!   exactly their resources and partitions, and nothing else (issue 36).
//! - `roles`: the rehearsed stack on moto with IAM enforcement, each
//!   function's real binary under its own role (STS AssumeRole), and the
//!   user path through them with the real Terraform; a read function's
//!   writes refused; the calls each function made are the list's.
//! - `rehearsal`: the deploy rehearsal (`infra/rehearse`): template.yaml
//!   transformed as `sam deploy` would and created on moto's server with IAM
//!   enforcement, in the guided and full configurations: every resource made
//!   (moto's CloudFormation or the gap filler), outputs resolved, TTL on,
//!   routes, a read role refused a write, retention on delete.
//!
//! `support` is the harness, split by job.

mod access;
mod answer_cache;
mod aws_outage;
mod backend_contract;
mod bad_input;
mod browser;
mod browser_sso;
mod browser_usage;
mod cache_attacks;
mod cache_git;
mod cache_lambda;
mod cache_mirror;
mod cache_operator;
mod cache_store;
mod ci_examples;
mod ci_exchange;
mod cli_admin;
mod cli_network;
mod cloudfront_signer;
mod concurrent_publish;
mod docs_bomb;
mod e2e_access;
mod e2e_lambda;
mod e2e_terraform;
mod edge;
mod edge_lambda;
mod handlers;
mod hardening;
mod issuer_ca;
mod layers;
mod least_privilege;
mod load;
mod login;
mod login_cli;
mod maintenance;
mod metrics;
mod oci;
mod oidc_fixture;
mod probes;
mod publish_attacks;
mod rehearsal;
mod roles;
mod scale;
mod shared_build;
mod signin_lambda;
mod signin_outside;
mod signin_secret;
mod sso_admin;
mod support;
mod sync;
mod template;
mod tfreg_login;
mod token_lifecycle;
mod transfer;
mod upstream_admin;
mod usage_counts;
