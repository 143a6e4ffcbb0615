//! Answers kept while the store is unchanged ([`tfreg_http::answer_cache`]),
//! for the views of every protocol: the registry protocol's ([`crate::read`])
//! and the OCI view's ([`crate::oci`]).

use tfreg_http::answer_cache::Answer;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;

/// The answer kept under the key `key` makes (what the route asks, whoever
/// asks it), else `made`, then kept ([`Registry::keeping`]).
pub(crate) async fn kept(
    registry: &Registry,
    key: impl FnOnce() -> String,
    made: impl std::future::Future<Output = Result<Answer, Error>>,
) -> Result<Answer, Error> {
    let keeping = registry.keeping(key);
    if let Some(kept) = registry.kept_answer(keeping.as_ref()) {
        return Ok(kept);
    }
    let made = made.await?;
    registry.keep_answer(keeping.as_ref(), &made);
    Ok(made)
}
