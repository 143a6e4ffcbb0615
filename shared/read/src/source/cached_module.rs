//! A configured upstream's modules as a source (issues 22, 40):
//! Terraform's `host "<upstream>" { services = { "modules.v1" = ... } }`
//! points here, so module sources stay as users wrote them. Versions come
//! from the origin's list as cached; a download answers our archive of the
//! version (its git commit pinned, or its https archive kept as it was),
//! fetched on the first request that may fill; a source the cache does not
//! fetch is answered as the origin gave it (online), never when sealed.

use async_trait::async_trait;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::ModuleName;
use tfreg_model::blob_key::{BlobKey, FileName};
use tfreg_model::cache::lease::FillWhat;
use tfreg_model::cache::module::CachedModuleRelease;
use tfreg_model::token::Principal;
use tfreg_model::upstream::{Mode, UpstreamRecord};
use tfreg_model::version::Version;
use tfreg_store::catalog::cached_module::CachedModule;

use super::{Listed, ModuleSource};
use crate::asked::Asked;

/// One upstream module, as one request sees it.
pub(crate) struct Module<'a> {
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
    pub fn new(
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

#[async_trait]
impl ModuleSource for Module<'_> {
    /// The origin's list as cached; when answered degraded, only the
    /// versions whose archives are stored (or, online, passed through).
    async fn versions(&self) -> Result<Vec<Listed>, Error> {
        let items = self.registry.items.as_ref();
        let (list, degraded) = self
            .list(FillWhat::ModuleList {
                system: self.module.system.clone(),
            })
            .await?;
        let mut versions = Vec::new();
        for v in list.versions {
            if degraded {
                let answerable = match self.place.release(items, &v.version).await? {
                    Some(r) => r.stored.is_some() || self.upstream.settings.mode == Mode::Online,
                    None => false,
                };
                if !answerable {
                    continue;
                }
            }
            versions.push(Listed {
                version: v.version,
                protocols: Vec::new(),
                platforms: Vec::new(),
                deprecated: None,
            });
        }
        if versions.is_empty() {
            return Err(Error::not_found(format!(
                "no version of {} can be answered from the cache now",
                self.name
            )));
        }
        Ok(versions)
    }

    /// Our archive of it (with the origin's `//subdir`), or the origin's
    /// own source when the cache passes it through (never when sealed).
    async fn location(&self, version: &Version) -> Result<String, Error> {
        let (registry, upstream, module) = (self.registry, self.upstream, self.module);
        let version = version.to_string();
        let release = self.release(&version).await?;
        let archive_url = match release.file_name() {
            Some(file) => {
                let file = FileName::parse(&file).map_err(Error::internal)?;
                let key = BlobKey::cached_module(
                    upstream.hostname.as_str(),
                    &module.namespace,
                    &module.name,
                    &module.system,
                    &version,
                    &file,
                )
                .map_err(Error::internal)?;
                Some(registry.read_url(&key).await?)
            }
            None if upstream.settings.mode == Mode::Sealed => {
                return Err(Error::not_found(format!(
                    "{} {version}'s source is not cached here ({})",
                    self.name, release.origin_source
                )));
            }
            None => None,
        };
        release
            .location(archive_url.as_deref())
            .ok_or_else(|| Error::internal("a cached module version without its archive"))
    }
}
