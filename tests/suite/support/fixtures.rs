//! What the end-to-end tests publish and the Terraform configurations that use it.

use std::path::{Path, PathBuf};

use super::*;

pub const NS: &str = "tfreg";

/// What the fixture published.
pub struct Published {
    pub zips_2_1_2: Vec<PathBuf>,
}

/// A directory laid out for `tfreg mirror import`: hashicorp/null 2.1.2
/// (linux_amd64) of registry.terraform.io. Returns the directory and the zip.
pub fn mirror_import_dir(tmp: &Path, tools: &Tools) -> (PathBuf, PathBuf) {
    mirror_import_dir_of(tmp, &tools.path("TFREG_NULL_PROVIDER"))
}

/// [`mirror_import_dir`] with a zip holding `binary` instead of the null provider.
pub fn mirror_import_dir_of(tmp: &Path, binary: &Path) -> (PathBuf, PathBuf) {
    let dir = tmp.join("mirror");
    let zip = dir
        .join("registry.terraform.io/hashicorp/null/terraform-provider-null_2.1.2_linux_amd64.zip");
    std::fs::create_dir_all(zip.parent().unwrap()).unwrap();
    provider_zip(&zip, binary, "terraform-provider-null_v2.1.2_x4");
    (dir, zip)
}

pub fn module_version(src: &Path, host: &str, version: &str) {
    let main = format!(
        r#"terraform {{
  required_providers {{
    null = {{ source = "{host}/{NS}/null" }}
  }}
}}
module "sub" {{
  source   = "./modules/sub"
  greeting = "hello"
}}
resource "null_resource" "this" {{
  triggers = {{ version = "{version}" }}
}}
output "version" {{ value = "{version}" }}
output "sub" {{ value = module.sub.message }}
"#
    );
    write_tree(
        src,
        &[
            ("main.tf", &main),
            (
                "modules/sub/main.tf",
                "variable \"greeting\" {}\noutput \"message\" { value = \"${var.greeting} from sub\" }\n",
            ),
            (".git/config", "[core]\n"),
            (".terraform/junk", "not packed"),
        ],
    );
}

/// Publish null 2.1.2 (linux_amd64, darwin_arm64) and 3.0.0, and module versions 1.0.0, 1.1.0, 2.0.0.
pub fn publish_fixture(server: &Server, token: &str, tmp: &Path) -> Published {
    let binary = Tools::get().path("TFREG_NULL_PROVIDER");
    publish_fixture_of(server, token, tmp, &binary)
}

/// [`publish_fixture`] with provider zips holding `binary` instead of the null provider.
pub fn publish_fixture_of(server: &Server, token: &str, tmp: &Path, binary: &Path) -> Published {
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.join("dist-2.1.2");
    let zips_2_1_2 = provider_dist_of(
        binary,
        &dist,
        "null",
        "2.1.2",
        &["linux_amd64", "darwin_arm64"],
        &gpg,
    );
    let key = dist.join("key.asc");
    let out = ok(
        server.publish_provider(token, &dist, NS, &[]),
        "publish provider 2.1.2",
    );
    assert!(out.contains("published"), "{out}");
    let dist3 = tmp.join("dist-3.0.0");
    provider_dist_of(binary, &dist3, "null", "3.0.0", &["linux_amd64"], &gpg);
    ok(
        server.publish_provider_with_key(token, &dist3, &key, NS, &[]),
        "publish provider 3.0.0",
    );
    for version in ["1.0.0", "1.1.0", "2.0.0"] {
        let src = tmp.join(format!("module-{version}"));
        module_version(&src, &server.host, version);
        ok(
            server.publish_module(token, &src, &format!("{NS}/greeting/null"), version),
            "publish module",
        );
    }
    Published { zips_2_1_2 }
}

pub fn root_config(dir: &Path, host: &str) {
    let main = format!(
        r#"terraform {{
  required_providers {{
    null = {{
      source  = "{host}/{NS}/null"
      version = "~> 2.1"
    }}
  }}
}}
module "greeting" {{
  source  = "{host}/{NS}/greeting/null"
  version = "~> 1.0"
}}
module "sub_only" {{
  source   = "{host}/{NS}/greeting/null//modules/sub"
  version  = "1.0.0"
  greeting = "hi"
}}
output "version" {{ value = module.greeting.version }}
output "sub" {{ value = module.greeting.sub }}
output "sub_only" {{ value = module.sub_only.message }}
"#
    );
    write_tree(dir, &[("main.tf", &main)]);
}

pub fn lock_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(".terraform.lock.hcl"))
        .expect("terraform wrote .terraform.lock.hcl")
}

/// The `h1:` hash of a null provider zip.
pub fn h1(zip: &Path) -> String {
    tfreg_verify::archives::provider_zip::inspect(std::fs::File::open(zip).unwrap(), "null")
        .unwrap()
        .h1
}

pub fn zh(zip: &Path) -> String {
    format!(
        "zh:{}",
        tfreg_model::hashing::sha256_hex(&std::fs::read(zip).unwrap())
    )
}

pub fn credentials(host: &str, token: &str) -> String {
    format!("credentials \"{host}\" {{\n  token = \"{token}\"\n}}\n")
}

/// A CLI configuration installing every provider through the network
/// mirror of the registry at `host`, with `token` for it.
pub fn network_mirror_config(host: &str, token: &str) -> String {
    format!(
        "{}provider_installation {{\n  network_mirror {{\n    url = \"https://{host}/v1/mirror/\"\n  }}\n}}\n",
        credentials(host, token)
    )
}

/// `terraform init` (timed: prints a FIGURE line with `label`), then `apply`.
pub fn init_and_apply(tf: &Terraform, work: &Path, label: &str) {
    let started = std::time::Instant::now();
    ok(
        tf.run(work, &["init", "-no-color"]),
        &format!("{label} init"),
    );
    eprintln!(
        "FIGURE {label} init: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    ok(
        tf.run(work, &["apply", "-auto-approve", "-no-color"]),
        &format!("{label} apply"),
    );
}

/// A CA and a certificate for `names` it signed, as PEM files in `dir`
/// named after `prefix`: (CA, certificate, key).
pub fn tls_files(
    dir: &std::path::Path,
    prefix: &str,
    names: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    let paths = (
        dir.join(format!("{prefix}-ca.pem")),
        dir.join(format!("{prefix}.pem")),
        dir.join(format!("{prefix}-key.pem")),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, leaf.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}
