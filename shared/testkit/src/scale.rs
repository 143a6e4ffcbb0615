//! Catalogs of many versions, written straight through the catalog's bulk
//! import (not thousands of HTTP publishes): for the scale test and the
//! scale benchmark. Release items are the real shape, signing key included;
//! their archive keys point at nothing (only lists and downloads URLs are read).

use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::blob_key::BlobKey;
use tfreg_store::ItemStore;
use tfreg_store::catalog::{
    self, Lifecycle, ModuleRelease, Origin, ProviderPackage, ProviderRelease, SigningKey,
    StoredFile,
};

/// `n` distinct versions, oldest first: `1.0.0` … (100 patches a minor).
pub fn versions(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("1.{}.{}", i / 100, i % 100))
        .collect()
}

/// `n` platforms, Terraform-like (`linux_amd64`, `darwin_arm64`, …).
pub fn platforms(n: usize) -> Vec<(String, String)> {
    const OS: &[&str] = &[
        "linux", "darwin", "windows", "freebsd", "openbsd", "solaris",
    ];
    const ARCH: &[&str] = &["amd64", "arm64", "386", "arm"];
    (0..n)
        .map(|i| {
            let os = OS[i % OS.len()];
            let arch = ARCH[(i / OS.len()) % ARCH.len()];
            let round = i / (OS.len() * ARCH.len());
            let arch = if round == 0 {
                arch.to_string()
            } else {
                format!("{arch}v{round}")
            };
            (os.to_string(), arch)
        })
        .collect()
}

fn stored(version: &str, name: &str) -> StoredFile {
    let id = tfreg_model::hashing::sha256_hex(format!("{version}/{name}").as_bytes());
    StoredFile {
        filename: name.to_string(),
        sha256: id.clone(),
        size: 20_000_000,
        key: BlobKey::parse(&format!("archives/{}/{name}", &id[..32])).expect("a valid key"),
    }
}

/// A provider release of `version` for `platforms`, signed (on paper) with
/// the key `armor`: what a real publish stores.
pub fn provider_release(
    provider_type: &str,
    version: &str,
    platforms: &[(String, String)],
    armor: &str,
) -> ProviderRelease {
    let base = format!("terraform-provider-{provider_type}_{version}");
    ProviderRelease {
        version: version.to_string(),
        protocols: vec!["5.0".into()],
        packages: platforms
            .iter()
            .map(|(os, arch)| ProviderPackage {
                os: os.clone(),
                arch: arch.clone(),
                file: stored(version, &format!("{base}_{os}_{arch}.zip")),
                h1: format!(
                    "h1:{}",
                    &tfreg_model::hashing::sha256_hex(format!("{version}{os}{arch}").as_bytes())
                        [..43]
                ),
            })
            .collect(),
        shasums: Some(stored(version, &format!("{base}_SHA256SUMS"))),
        shasums_signature: Some(stored(version, &format!("{base}_SHA256SUMS.sig"))),
        signing_key: Some(SigningKey {
            key_id: "0123456789ABCDEF".into(),
            ascii_armor: armor.to_string(),
        }),
        published_at: 1_700_000_000,
        lifecycle: Lifecycle::default(),
    }
}

/// A module release of `version`.
pub fn module_release(version: &str) -> ModuleRelease {
    ModuleRelease {
        version: version.to_string(),
        file: stored(version, "module.tar.gz"),
        published_at: 1_700_000_000,
        lifecycle: Lifecycle::default(),
    }
}

/// Store `versions` of `provider`, each with `platforms`, and its index.
pub async fn seed_provider(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
    versions: &[String],
    platforms: &[(String, String)],
    armor: &str,
) -> Result<(), tfreg_store::StoreError> {
    let releases: Vec<ProviderRelease> = versions
        .iter()
        .map(|v| provider_release(&provider.r#type, v, platforms, armor))
        .collect();
    catalog::import_provider_releases(store, origin, provider, &releases).await
}

/// Store `versions` of `module`, and its index.
pub async fn seed_module(
    store: &dyn ItemStore,
    module: &ModuleName,
    versions: &[String],
) -> Result<(), tfreg_store::StoreError> {
    let releases: Vec<ModuleRelease> = versions.iter().map(|v| module_release(v)).collect();
    catalog::import_module_releases(store, module, &releases).await
}
