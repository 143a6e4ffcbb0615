//! Verifying a provider release as one pure step: the staged files and the
//! publisher's key in, a verified release or a typed [`ReleaseError`] out. No
//! storage, no network: the publish handler stages and stores, this decides.
//!
//! The chain follows Terraform's own (`internal/getproviders/
//! package_authentication.go`), so what the registry accepts is what Terraform
//! will install:
//! 1. the detached signature over SHA256SUMS verifies with the key, under the
//!    rules of every Terraform version ([`PublicKey::verify_for_terraform`]);
//! 2. every package's sha256 is the one SHA256SUMS lists, and SHA256SUMS lists
//!    no package left out;
//! 3. the plugin protocols (the publisher's, else the release manifest's, else 5.0)
//!    include one Terraform speaks;
//! 4. every package is a safe zip holding the provider binary; its `h1:` hash
//!    is computed on the way ([`archives::provider_zip::inspect`]).
//!
//! Mirror imports have no signature: they run step 4 only ([`verify_packages`]).

use std::io::{Read, Seek};

use crate::archives;
use crate::release_files::{self, ReleaseError};
use crate::signing::{PublicKey, VerifiedSignature};
use tfreg_model::address::Platform;
use tfreg_model::protocol::FileDecl;
use tfreg_model::version::Version;

/// One platform's zip as staged: `decl.sha256` is the digest of the bytes `reader` yields.
pub struct StagedPackage<R> {
    pub platform: Platform,
    pub decl: FileDecl,
    pub reader: R,
}

/// A signed provider release as staged.
pub struct StagedProviderRelease<R> {
    pub provider_type: String,
    pub version: Version,
    pub packages: Vec<StagedPackage<R>>,
    pub shasums: Vec<u8>,
    pub signature: Vec<u8>,
    pub manifest: Option<Vec<u8>>,
    /// The publisher's protocol list, overriding the manifest.
    pub protocols: Option<Vec<String>>,
}

/// A package that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPackage {
    pub platform: Platform,
    pub decl: FileDecl,
    /// Terraform's `h1:` hash of the zip's contents.
    pub h1: String,
}

/// A provider release that passed every check.
#[derive(Debug, Clone)]
pub struct VerifiedProviderRelease {
    pub packages: Vec<VerifiedPackage>,
    pub protocols: Vec<String>,
    pub signature: VerifiedSignature,
    /// What the publisher should hear about (a key old Terraform cannot use).
    pub warnings: Vec<String>,
}

/// Run the whole chain over a staged release, at time `now` (unix seconds)
/// for key and signature expiry.
pub fn verify_provider_release<R: Read + Seek>(
    staged: StagedProviderRelease<R>,
    key: &PublicKey,
    allow_modern_keys: bool,
    now: u64,
) -> Result<VerifiedProviderRelease, ReleaseError> {
    let signature =
        key.verify_for_terraform(&staged.shasums, &staged.signature, allow_modern_keys, now)?;
    let mut warnings = Vec::new();
    if !signature.legacy_compatible {
        warnings.push(format!(
            "signed with a {} key: Terraform 1.5 and older cannot verify it",
            signature.algorithm
        ));
    }
    let sums = release_files::parse_shasums(&staged.shasums)?;
    let zips: Vec<(Platform, FileDecl)> = staged
        .packages
        .iter()
        .map(|p| (p.platform.clone(), p.decl.clone()))
        .collect();
    release_files::check_against_shasums(&sums, &zips, &staged.provider_type, &staged.version)?;
    let manifest_protocols = match &staged.manifest {
        Some(bytes) => release_files::manifest_protocols(bytes)?,
        None => None,
    };
    let protocols = release_files::check_protocols(
        &staged
            .protocols
            .or(manifest_protocols)
            .unwrap_or_else(|| vec!["5.0".into()]),
    )?;
    let packages = verify_packages(&staged.provider_type, staged.packages)?;
    Ok(VerifiedProviderRelease {
        packages,
        protocols,
        signature,
        warnings,
    })
}

/// The first of `keys` whose signature over `shasums` checks out (step 1's
/// cryptography alone, at `now`), to run the whole chain with; none if no
/// key made the signature.
pub fn select_key(
    keys: &[PublicKey],
    shasums: &[u8],
    signature: &[u8],
    now: u64,
) -> Option<PublicKey> {
    keys.iter()
        .find(|k| k.verify_detached(shasums, signature, now).is_ok())
        .cloned()
}

/// Step 4 alone: every zip is safe, holds `terraform-provider-<type>*`, and
/// gets its `h1:` hash.
pub fn verify_packages<R: Read + Seek>(
    provider_type: &str,
    packages: Vec<StagedPackage<R>>,
) -> Result<Vec<VerifiedPackage>, ReleaseError> {
    packages
        .into_iter()
        .map(|p| {
            let zip =
                archives::provider_zip::inspect(p.reader, provider_type).map_err(|source| {
                    ReleaseError::Archive {
                        file: p.decl.name.clone(),
                        source,
                    }
                })?;
            Ok(VerifiedPackage {
                platform: p.platform,
                decl: p.decl,
                h1: zip.h1,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::signing::SignatureError;
    use tfreg_testkit::{TestSigner, decl, provider_release, provider_zip};

    /// The staged form of `provider_release` files (`null` 1.0.0).
    fn staged(files: &[(String, Vec<u8>)]) -> StagedProviderRelease<Cursor<Vec<u8>>> {
        let get = |suffix: &str| {
            files
                .iter()
                .find(|(n, _)| n.ends_with(suffix))
                .map(|(_, b)| b.clone())
        };
        let packages = files
            .iter()
            .filter(|(n, _)| n.ends_with(".zip"))
            .map(|(n, b)| StagedPackage {
                platform: match release_files::ReleaseFileName::parse(n).unwrap().file {
                    release_files::ReleaseFile::Package(p) => p,
                    other => panic!("{other:?}"),
                },
                decl: decl(n, b),
                reader: Cursor::new(b.clone()),
            })
            .collect();
        StagedProviderRelease {
            provider_type: "null".into(),
            version: Version::parse("1.0.0").unwrap(),
            packages,
            shasums: get("_SHA256SUMS").unwrap(),
            signature: get("_SHA256SUMS.sig").unwrap(),
            manifest: get("_manifest.json"),
            protocols: None,
        }
    }

    fn now() -> u64 {
        tfreg_model::unix_now()
    }

    #[test]
    fn a_signed_release_verifies_with_its_hashes() {
        let signer = TestSigner::rsa();
        let key = PublicKey::parse(signer.public_armor).unwrap();
        let files = provider_release("null", "1.0.0", &["linux_amd64", "darwin_arm64"], &signer);
        let verified = verify_provider_release(staged(&files), &key, false, now()).unwrap();
        assert_eq!(verified.protocols, ["5.0"], "from the manifest");
        assert!(verified.warnings.is_empty());
        assert_eq!(verified.signature.key_id, key.info().key_id);
        assert_eq!(verified.packages.len(), 2);
        for p in &verified.packages {
            let (_, bytes) = files.iter().find(|(n, _)| *n == p.decl.name).unwrap();
            let h1 = archives::provider_zip::inspect(Cursor::new(bytes.clone()), "null")
                .unwrap()
                .h1;
            assert_eq!(p.h1, h1);
        }
        let mut with_override = staged(&files);
        with_override.protocols = Some(vec!["6.0".into()]);
        let verified = verify_provider_release(with_override, &key, false, now()).unwrap();
        assert_eq!(verified.protocols, ["6.0"], "the publisher's list wins");
    }

    #[test]
    fn each_link_of_the_chain_refuses_with_its_own_error() {
        let signer = TestSigner::rsa();
        let key = PublicKey::parse(signer.public_armor).unwrap();
        let files = provider_release("null", "1.0.0", &["linux_amd64"], &signer);
        let run = |s| verify_provider_release(s, &key, false, now()).unwrap_err();

        let mut s = staged(&files);
        s.signature[20] ^= 1;
        assert!(matches!(run(s), ReleaseError::Signature(_)));

        let other = TestSigner::expired();
        let other_key = PublicKey::parse(other.public_armor).unwrap();
        let err = verify_provider_release(staged(&files), &other_key, false, now()).unwrap_err();
        assert!(
            matches!(
                err,
                ReleaseError::Signature(SignatureError::UnknownKey { .. })
            ),
            "{err}"
        );

        let mut s = staged(&files);
        s.packages[0].decl.sha256 = "0".repeat(64);
        let err = run(s);
        assert!(
            matches!(&err, ReleaseError::Invalid(m) if m.contains("SHA256SUMS says")),
            "{err}"
        );

        let mut s = staged(&files);
        s.protocols = Some(vec!["4.0".into()]);
        assert!(matches!(run(s), ReleaseError::Invalid(m) if m.contains("protocols")));

        // A zip SHA256SUMS vouches for, whose contents are refused.
        let bad_zip = provider_zip("other", "1.0.0", "x");
        let name = "terraform-provider-null_1.0.0_linux_amd64.zip";
        let mut files = files.clone();
        files.retain(|(n, _)| !n.contains("SHA256SUMS"));
        files.iter_mut().find(|(n, _)| n == name).unwrap().1 = bad_zip;
        let sums: String = files
            .iter()
            .map(|(n, b)| format!("{}  {n}\n", tfreg_model::hashing::sha256_hex(b)))
            .collect();
        files.push((
            "terraform-provider-null_1.0.0_SHA256SUMS.sig".into(),
            signer.sign(sums.as_bytes()),
        ));
        files.push((
            "terraform-provider-null_1.0.0_SHA256SUMS".into(),
            sums.into_bytes(),
        ));
        let err = run(staged(&files));
        assert!(
            matches!(&err, ReleaseError::Archive { file, .. } if file == name),
            "{err}"
        );
    }

    #[test]
    fn expiry_is_checked_at_the_given_time() {
        let signer = TestSigner::expired();
        let key = PublicKey::parse(signer.public_armor).unwrap();
        let files = provider_release("null", "1.0.0", &["linux_amd64"], &signer);
        let err = verify_provider_release(staged(&files), &key, false, now()).unwrap_err();
        assert!(
            matches!(
                err,
                ReleaseError::Signature(SignatureError::KeyExpired { .. })
            ),
            "{err}"
        );
        // 2020-01-01T12:00:00Z, while the key was valid.
        assert!(verify_provider_release(staged(&files), &key, false, 1_577_880_000).is_ok());
    }
}
