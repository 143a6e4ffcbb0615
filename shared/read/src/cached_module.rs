//! The module registry protocol for a configured upstream (issue 22):
//! Terraform's `host "<upstream>" { services = { "modules.v1" = ... } }`
//! points here, so module sources stay as users wrote them. Versions come
//! from the origin's list as cached; a download answers our archive of the
//! version (its git commit pinned, or its https archive kept as it was),
//! fetched on the first request that may fill; a source the cache does not
//! fetch is answered as the origin gave it (online), never when sealed.

use http::StatusCode;
use tfreg_http::answer_cache::Answer;
use tfreg_http::body::header_value;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::ModuleName;
use tfreg_model::blob_key::{BlobKey, FileName};
use tfreg_model::cache::lease::FillWhat;
use tfreg_model::cache::module::CachedModuleRelease;
use tfreg_model::protocol::{ModuleVersionEntry, ModuleVersionList, ModuleVersions};
use tfreg_model::token::Principal;
use tfreg_model::upstream::{Mode, UpstreamRecord};
use tfreg_store::catalog::cached_module::CachedModule;

use crate::asked::Asked;

/// One upstream module, as one request sees it.
struct Module<'a> {
    asked: Asked<'a, CachedModule>,
    module: &'a ModuleName,
}

impl<'a> std::ops::Deref for Module<'a> {
    type Target = Asked<'a, CachedModule>;
    fn deref(&self) -> &Self::Target {
        &self.asked
    }
}

impl<'a> Module<'a> {
    fn new(
        registry: &'a Registry,
        upstream: &'a UpstreamRecord,
        module: &'a ModuleName,
        principal: &Principal,
    ) -> Result<Self, Error> {
        let place = CachedModule::new(
            upstream.hostname.as_str(),
            &module.namespace,
            &module.name,
            &module.system,
        );
        Ok(Module {
            asked: Asked::new(
                registry,
                upstream,
                principal,
                ("modules", upstream.settings.serves.modules),
                (&module.namespace, &module.name),
                module,
                place,
            )?,
            module,
        })
    }

    /// A version as resolved and stored, fetched first if need be.
    async fn release(&self, version: &str) -> Result<CachedModuleRelease, Error> {
        let items = self.registry.items.as_ref();
        let what = FillWhat::ModuleVersion {
            system: self.module.system.clone(),
            version: version.to_string(),
        };
        self.version(version, what, || async {
            Ok(self.place.release(items, version).await?)
        })
        .await
    }
}

/// The module versions list of a configured upstream's module: the
/// origin's list as cached; when answered degraded, only the versions whose
/// archives are stored (or, online, passed through).
pub async fn module_versions(
    registry: &Registry,
    upstream: &UpstreamRecord,
    module: &ModuleName,
    principal: &Principal,
) -> Result<Answer, Error> {
    let m = Module::new(registry, upstream, module, principal)?;
    let items = registry.items.as_ref();
    let (list, degraded) = m
        .list(FillWhat::ModuleList {
            system: module.system.clone(),
        })
        .await?;
    let mut versions = Vec::new();
    for v in list.versions {
        if degraded {
            let answerable = match m.place.release(items, &v.version).await? {
                Some(r) => r.stored.is_some() || upstream.settings.mode == Mode::Online,
                None => false,
            };
            if !answerable {
                continue;
            }
        }
        versions.push(ModuleVersionEntry {
            version: v.version,
            deprecation: None,
        });
    }
    if versions.is_empty() {
        return Err(Error::not_found(format!(
            "no version of {} can be answered from the cache now",
            m.name
        )));
    }
    Ok(Answer::json(
        StatusCode::OK,
        &ModuleVersions {
            modules: vec![ModuleVersionList { versions }],
        },
    ))
}

/// A configured upstream's module download: 204 with `X-Terraform-Get`
/// naming our archive (with the origin's `//subdir`), or the origin's own
/// source when the cache passes it through (never when sealed).
pub async fn module_download(
    registry: &Registry,
    upstream: &UpstreamRecord,
    module: &ModuleName,
    version: &str,
    principal: &Principal,
) -> Result<Answer, Error> {
    let m = Module::new(registry, upstream, module, principal)?;
    let release = m.release(version).await?;
    let archive_url = match release.file_name() {
        Some(file) => {
            let file = FileName::parse(&file).map_err(Error::internal)?;
            let key = BlobKey::cached_module(
                upstream.hostname.as_str(),
                &module.namespace,
                &module.name,
                &module.system,
                version,
                &file,
            )
            .map_err(Error::internal)?;
            Some(registry.read_url(&key).await?)
        }
        None if upstream.settings.mode == Mode::Sealed => {
            return Err(Error::not_found(format!(
                "{} {version}'s source is not cached here ({})",
                m.name, release.origin_source
            )));
        }
        None => None,
    };
    let location = release
        .location(archive_url.as_deref())
        .ok_or_else(|| Error::internal("a cached module version without its archive"))?;
    Ok(Answer::empty(StatusCode::NO_CONTENT).with_header(
        http::HeaderName::from_static("x-terraform-get"),
        header_value(&location)?,
    ))
}
