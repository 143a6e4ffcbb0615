//! tfreg's read handlers: what `terraform init` asks of a registry. The
//! provider, module and network mirror protocols ([`Read`]: every answer one
//! metadata read) and the archives behind the registry's signed URLs
//! ([`Blob`]). No OpenPGP, archive, HCL, Markdown or template code: a read
//! function links none of it.

mod asked;
mod blob;
mod counted;
mod kept;
mod oci;
mod read;
mod source;
mod views;
mod wait;

/// How long a request waits for a fill before it answers: the functions'
/// timeouts in template.yaml must leave room for it.
pub use wait::{ARCHIVE_WAIT, METADATA_WAIT};

use async_trait::async_trait;
use tfreg_http::body::{Body, Response};
use tfreg_http::{Call, Error, Handler, Registry};
use tfreg_model::blob_key::BlobKey;
use tfreg_model::router::ReadRoute;

/// The provider, module and mirror protocols.
pub struct Read;

#[async_trait]
impl Handler<ReadRoute> for Read {
    async fn handle(
        &self,
        registry: &Registry,
        route: ReadRoute,
        call: Call<'_>,
        _body: Body,
    ) -> Result<Response, Error> {
        read::handle(registry, route, &call).await
    }
}

/// Archives behind signed URLs: HEAD and GET (in AWS, a redirect to a fresh
/// presigned S3 URL), and PUT into an upload slot (`tfreg serve`; in AWS
/// uploads go to S3 directly).
pub struct Blob;

#[async_trait]
impl Handler<BlobKey> for Blob {
    async fn handle(
        &self,
        registry: &Registry,
        key: BlobKey,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        blob::handle(registry, call.method, &key, call.query, call.headers, body).await
    }
}
