//! The copy-paste blocks of the UI's pages, with this registry's hostname:
//! pure text, tested without a page.

use tfreg_model::version::Version;
use tfreg_store::catalog::ProviderRelease;

/// The pessimistic constraint that accepts `version` and its later minor
/// releases: `~> 1.4` for 1.4.2 (a 0.x version: `~> 0.4.2`, as 0.x minor
/// releases may break), or exactly the version for a prerelease (Terraform
/// selects a prerelease only by its exact version).
pub fn constraint(version: &Version) -> String {
    let v = version.to_string();
    if version.is_prerelease() {
        return format!("= {v}");
    }
    let parts: Vec<&str> = v.split(['.', '+']).collect();
    match parts.as_slice() {
        ["0", minor, patch, ..] => format!("~> 0.{minor}.{patch}"),
        [major, minor, ..] => format!("~> {major}.{minor}"),
        _ => format!("= {v}"),
    }
}

/// A `module` block using `address` (`host/ns/name/system`) at `version`,
/// its required inputs (name, type) listed as comments to fill in: the
/// block parses as it is, so `terraform init` works before they are set.
pub fn module_usage(
    name: &str,
    address: &str,
    version: &Version,
    required: &[(&str, &str)],
) -> String {
    let mut block = format!(
        "module \"{name}\" {{\n  source  = \"{address}\"\n  version = \"{}\"\n",
        constraint(version)
    );
    if !required.is_empty() {
        block.push_str("\n  # Required inputs:\n");
        let width = required.iter().map(|r| r.0.len()).max().unwrap_or(0);
        for (input, ty) in required {
            let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
            block.push_str(&format!("  # {input:<width$} = {ty}\n"));
        }
    }
    block.push_str("}\n");
    block
}

/// The same module as an OpenTofu `oci://` source (1.10+, issue 40): the
/// repository `modules/NS/NAME/SYSTEM` of `host`, the version as its tag
/// (`_` for `+`).
pub fn module_oci_source(name: &str, host: &str, module: &str, version: &Version) -> String {
    format!(
        "# OpenTofu 1.10 or later\nmodule \"{name}\" {{\n  source = \"oci://{host}/modules/{module}?tag={}\"\n}}\n",
        tfreg_model::oci::tag_of(version)
    )
}

/// A `terraform { required_providers }` block for `source` (`host/ns/type`).
pub fn required_providers(local_name: &str, source: &str, version: &Version) -> String {
    format!(
        "terraform {{\n  required_providers {{\n    {local_name} = {{\n      source  = \"{source}\"\n      version = \"{}\"\n    }}\n  }}\n}}\n",
        constraint(version)
    )
}

/// OpenTofu's CLI configuration (1.10+) that installs `namespace/type` of
/// `host` from this registry's OCI view: the `oci_mirror` block with the
/// repository template (`repository` `providers/` for this registry's own,
/// `mirror/${hostname}` for any host it mirrors), the other providers as
/// before, and the token as the OCI password.
pub fn oci_mirror(host: &str, namespace: &str, r#type: &str) -> String {
    let address = format!("{host}/{namespace}/{type}", type = r#type);
    format!(
        "# ~/.tofurc (OpenTofu 1.10 or later)\nprovider_installation {{\n  oci_mirror {{\n    repository_template = \"{host}/providers/${{namespace}}/${{type}}\"\n    include             = [\"{address}\"]\n  }}\n  direct {{\n    exclude = [\"{address}\"]\n  }}\n}}\n\noci_credentials \"{host}\" {{\n  username = \"tfreg\"\n  password = \"<a tfreg token>\"\n}}\n"
    )
}

/// The `.terraform.lock.hcl` entry of a release: every platform's `h1:` and
/// `zh:` hash, sorted as Terraform writes them.
pub fn lock_entry(source: &str, release: &ProviderRelease, version: &Version) -> String {
    let mut hashes: Vec<String> = release.packages.iter().flat_map(|p| p.hashes()).collect();
    hashes.sort();
    hashes.dedup();
    let mut entry = format!(
        "provider \"{source}\" {{\n  version     = \"{}\"\n  constraints = \"{}\"\n  hashes = [\n",
        release.version,
        constraint(version)
    );
    for h in hashes {
        entry.push_str(&format!("    \"{h}\",\n"));
    }
    entry.push_str("  ]\n}\n");
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn constraints_accept_the_version_and_later_compatible_ones() {
        assert_eq!(constraint(&v("1.4.2")), "~> 1.4");
        assert_eq!(constraint(&v("2.0.0")), "~> 2.0");
        assert_eq!(constraint(&v("0.4.2")), "~> 0.4.2");
        assert_eq!(constraint(&v("1.0.0-rc.1")), "= 1.0.0-rc.1");
    }

    #[test]
    fn a_module_block_names_the_required_inputs() {
        let required = [("name", "string"), ("azs", "list(\n  string\n)")];
        let block = module_usage(
            "vpc",
            "reg.example.com/team/vpc/aws",
            &v("1.4.2"),
            &required,
        );
        assert_eq!(
            block,
            "module \"vpc\" {\n  source  = \"reg.example.com/team/vpc/aws\"\n  version = \"~> 1.4\"\n\n  # Required inputs:\n  # name = string\n  # azs  = list( string )\n}\n"
        );
        assert!(!module_usage("m", "h/a/b/c", &v("1.0.0"), &[]).contains("Required"));
    }

    #[test]
    fn a_module_s_oci_source_names_its_repository_and_tag() {
        assert_eq!(
            module_oci_source("net", "reg.example.com", "acme/net/aws", &v("1.2.0-rc.1")),
            "# OpenTofu 1.10 or later\nmodule \"net\" {\n  source = \"oci://reg.example.com/modules/acme/net/aws?tag=1.2.0-rc.1\"\n}\n"
        );
    }

    #[test]
    fn an_oci_mirror_block_names_the_provider_s_repository() {
        let block = oci_mirror("reg.example.com", "team", "widget");
        assert_eq!(
            block,
            concat!(
                "# ~/.tofurc (OpenTofu 1.10 or later)\n",
                "provider_installation {\n",
                "  oci_mirror {\n",
                "    repository_template = \"reg.example.com/providers/${namespace}/${type}\"\n",
                "    include             = [\"reg.example.com/team/widget\"]\n",
                "  }\n",
                "  direct {\n",
                "    exclude = [\"reg.example.com/team/widget\"]\n",
                "  }\n",
                "}\n",
                "\n",
                "oci_credentials \"reg.example.com\" {\n",
                "  username = \"tfreg\"\n",
                "  password = \"<a tfreg token>\"\n",
                "}\n",
            )
        );
    }

    #[test]
    fn a_lock_entry_lists_every_hash_once_sorted() {
        use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
        use tfreg_store::catalog::{ProviderPackage, StoredFile};
        let package = |os: &str, h1: &str, sha: &str| ProviderPackage {
            os: os.into(),
            arch: "amd64".into(),
            file: StoredFile {
                filename: format!("p_{os}.zip"),
                sha256: sha.into(),
                size: 1,
                key: BlobKey::archive(
                    &UploadId::parse(&"a".repeat(32)).unwrap(),
                    &FileName::parse("p.zip").unwrap(),
                ),
            },
            h1: h1.into(),
        };
        let release = ProviderRelease {
            version: "1.2.0".into(),
            protocols: vec!["5.0".into()],
            packages: vec![
                package("linux", "h1:b", "02"),
                package("darwin", "h1:a", "01"),
            ],
            shasums: None,
            shasums_signature: None,
            signing_key: None,
            published_at: 0,
            lifecycle: Default::default(),
        };
        let entry = lock_entry("reg.example.com/team/x", &release, &v("1.2.0"));
        assert_eq!(
            entry,
            "provider \"reg.example.com/team/x\" {\n  version     = \"1.2.0\"\n  constraints = \"~> 1.2\"\n  hashes = [\n    \"h1:a\",\n    \"h1:b\",\n    \"zh:01\",\n    \"zh:02\",\n  ]\n}\n"
        );
    }
}
