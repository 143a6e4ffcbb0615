//! Modules from git through the pull-through cache (issue 22, plan §4), on
//! `tfreg serve`: the origin is a module registry whose versions are
//! `git::https://…//subdir?ref=<tag>` sources, as registry.terraform.io
//! answers, with the repositories served by git's own `http-backend`
//! (tests/cache/git_origin.py, over HTTPS with a CA of the test's). Real
//! Terraform (1.0.3 and current) installs the module through a `host` block: the tag is pinned
//! to its commit, that commit's tree fetched without a git binary and
//! packed; a tag moved later changes nothing; a tree with a symlink is
//! passed through (online) or refused (sealed); the origin stopped, `init`
//! still works.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cache_mirror::{Rig, files_named};
use crate::support::command::ok;
use crate::support::dist::write_tree;

/// The git origin: a module registry and its repositories on one name.
struct GitOrigin {
    child: Child,
    host: String,
    listen: String,
    ca: PathBuf,
    /// The working copies, pushed to the served bare repositories.
    work: PathBuf,
    log: PathBuf,
}

impl Drop for GitOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
        .args(["-c", "init.defaultBranch=main", "-c", "tag.gpgSign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    ok(out, &format!("git {}", args.join(" ")))
}

impl GitOrigin {
    /// Two repositories: `greet` (a module in `modules/greet`, tag v1.0.0)
    /// and `link` (a symlink in its tree, tag v1.0.0), listed as
    /// `acme/greet/null` and `acme/link/null` 1.0.0.
    fn start(dir: &Path, ip: &str, name: &str) -> GitOrigin {
        Self::start_with_git_host(dir, ip, name, name)
    }

    /// [`GitOrigin::start`] with the repositories' URLs on `git_host`,
    /// another name of the same server (its certificate names both).
    fn start_with_git_host(dir: &Path, ip: &str, name: &str, git_host: &str) -> GitOrigin {
        let work = dir.join("git-work");
        let served = dir.join("git-served");
        std::fs::create_dir_all(&served).unwrap();
        for (repo, files) in [
            (
                "greet",
                vec![
                    ("README.md", "# greet\n"),
                    (
                        "modules/greet/main.tf",
                        "variable \"name\" {\n  type = string\n}\n",
                    ),
                    (
                        "modules/greet/outputs.tf",
                        "output \"greeting\" {\n  value = \"hello from git, ${var.name}\"\n}\n",
                    ),
                ],
            ),
            (
                "link",
                vec![("main.tf", "output \"x\" {\n  value = 1\n}\n")],
            ),
        ] {
            let path = work.join(repo);
            write_tree(&path, &files);
            if repo == "link" {
                std::os::unix::fs::symlink("main.tf", path.join("alias.tf")).unwrap();
            }
            git(&path, &["init", "-q"]);
            git(&path, &["add", "-A"]);
            git(&path, &["commit", "-q", "-m", "first"]);
            git(&path, &["tag", "-a", "v1.0.0", "-m", "v1.0.0"]);
            let bare = served.join(format!("{repo}.git"));
            git(
                dir,
                &[
                    "clone",
                    "-q",
                    "--bare",
                    path.to_str().unwrap(),
                    bare.to_str().unwrap(),
                ],
            );
            git(&path, &["remote", "add", "origin", bare.to_str().unwrap()]);
        }
        let modules = serde_json::json!({
            "acme/greet/null": {"1.0.0": format!("git::https://{git_host}/git/greet.git//modules/greet?ref=v1.0.0")},
            "acme/link/null": {"1.0.0": format!("git::https://{git_host}/git/link.git?ref=v1.0.0")},
        });
        let answers = dir.join("git-modules.json");
        std::fs::write(&answers, modules.to_string()).unwrap();
        let (ca, cert, key) = crate::support::fixtures::tls_files(dir, "git", &[name, git_host]);
        let log = dir.join("git-origin.log");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cache/git_origin.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([ip, "443"])
            .args([&cert, &key, &served, &answers])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("run python3");
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(
            ready.trim(),
            "ready",
            "git origin: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        GitOrigin {
            child,
            host: name.to_string(),
            listen: format!("{ip}:443"),
            ca,
            work,
            log,
        }
    }

    fn upstream_args(&self) -> Vec<String> {
        [
            "upstream",
            "set",
            &self.host,
            "--modules",
            "--module-host",
            &self.host,
            "--connect-to",
            &format!("{}={}", self.host, self.listen),
            "--ca-file",
            self.ca.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The requests it answered, one `METHOD /path STATUS` line each.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Move `tag` of `repo` to a new commit changing `file` to `text`, and
    /// push it (as an origin that retags a release does).
    fn move_tag(&self, repo: &str, tag: &str, file: &str, text: &str) {
        let path = self.work.join(repo);
        std::fs::write(path.join(file), text).unwrap();
        git(&path, &["commit", "-q", "-am", "moved"]);
        git(&path, &["tag", "-f", "-a", tag, "-m", "moved"]);
        git(&path, &["push", "-q", "-f", "origin", "main", tag]);
    }
}

/// The paths in a `.tar.gz`, sorted.
fn tar_paths(path: &Path) -> Vec<String> {
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap());
    let mut archive = tar::Archive::new(gz);
    let mut paths: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.header().entry_type().is_file())
        .map(|e| e.path().unwrap().to_string_lossy().into_owned())
        .collect();
    paths.sort();
    paths
}

#[test]
fn terraform_1_0_installs_a_module_from_git_through_the_cache() {
    module_from_git(
        "TFREG_TERRAFORM_1_0",
        "127.0.0.110",
        "git-tf10.example.test",
    );
}

/// Issue 35: `--connect-to` for one of the upstream's module hosts (not
/// the upstream's own name) was saved and never worked: the module fill
/// was a 502 "resolves to … (loopback): refused". The pinned module host
/// now uses its `--connect-to` address (and only that one).
#[test]
fn a_module_host_pinned_with_connect_to_is_reached() {
    let tmp = tempfile::tempdir().unwrap();
    let (name, git_host) = ("git-mhost.example.test", "code-mhost.example.test");
    let origin = GitOrigin::start_with_git_host(tmp.path(), "127.0.0.153", name, git_host);
    let rig = Rig::caching(
        tmp.path(),
        origin.upstream_args(),
        &[
            "--module-host",
            git_host,
            "--connect-to",
            &format!("{git_host}={}", origin.listen),
        ],
        &[],
    );
    let resp = rig
        .server
        .http
        .get(rig.server.url(&format!(
            "/v1/cache/{name}/modules/acme/greet/null/1.0.0/download"
        )))
        .bearer_auth(&rig.fill)
        .send()
        .unwrap();
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("x-terraform-get")
        .map(|v| v.to_str().unwrap().to_string());
    assert_eq!(status, 204, "{:?}", resp.text());
    let location = location.unwrap();
    assert!(
        location.contains("/v1/blobs/cache/") && location.contains(".tar.gz//modules/greet?"),
        "{location}"
    );
    assert!(
        origin
            .requests()
            .iter()
            .any(|r| r.contains("/git/greet.git/")),
        "{:?}",
        origin.requests()
    );
}

#[test]
fn terraform_new_installs_a_module_from_git_through_the_cache() {
    module_from_git(
        "TFREG_TERRAFORM_NEW",
        "127.0.0.111",
        "git-origin.example.test",
    );
}

fn module_from_git(bin_var: &str, ip: &str, name: &str) {
    use crate::support::fixtures::credentials;
    use crate::support::terraform::Terraform;
    use crate::support::tools::Tools;
    let tmp = tempfile::tempdir().unwrap();
    let origin = GitOrigin::start(tmp.path(), ip, name);
    let rig = Rig::caching(tmp.path(), origin.upstream_args(), &[], &[]);
    let (server, fill) = (&rig.server, rig.fill.clone());
    let pinned = git(
        &origin.work.join("greet"),
        &["rev-parse", "v1.0.0^{commit}"],
    );

    let config = format!(
        "{}host \"{name}\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
        credentials(name, &fill),
        server.url(&format!("/v1/cache/{name}/modules/"))
    );
    let tf = Terraform::new(Tools::get().path(bin_var), server, &config);
    let work = tmp.path().join("work");
    write_tree(
        &work,
        &[(
            "main.tf",
            &format!(
                "module \"greet\" {{\n  source  = \"{name}/acme/greet/null\"\n  version = \"1.0.0\"\n  name    = \"cache\"\n}}\noutput \"greeting\" {{\n  value = module.greet.greeting\n}}\n"
            ),
        )],
    );
    ok(tf.run(&work, &["init", "-no-color"]), "terraform init");
    let applied = ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply",
    );
    assert!(applied.contains("hello from git, cache"), "{applied}");

    // Our archive: the pinned commit's whole tree (go-getter's clone, less
    // .git), the origin's //subdir kept in the answer.
    let archives: Vec<PathBuf> = rig
        .cached_objects()
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    let listed = git(
        &origin.work.join("greet"),
        &["ls-tree", "-r", "--name-only", pinned.trim()],
    );
    let mut expected: Vec<String> = listed.lines().map(str::to_string).collect();
    expected.sort();
    assert_eq!(tar_paths(&archives[0]), expected);
    let resp = server
        .http
        .get(server.url(&format!(
            "/v1/cache/{name}/modules/acme/greet/null/1.0.0/download"
        )))
        .bearer_auth(&fill)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    let location = resp.headers()["x-terraform-get"].to_str().unwrap();
    assert!(
        location.contains(".tar.gz//modules/greet?"),
        "the subdir before the query: {location}"
    );
    let git_fetches = |o: &GitOrigin| {
        o.requests()
            .iter()
            .filter(|l| l.starts_with("POST /git/greet.git/git-upload-pack"))
            .count()
    };
    assert_eq!(
        git_fetches(&origin),
        2,
        "one ls-refs and one fetch: {:?}",
        origin.requests()
    );

    // `tfreg cache list` names where it came from and the pinned commit.
    let out = server.tfreg(&rig.admin, &["cache", "list", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let modules = listed["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 1, "{listed}");
    assert_eq!(modules[0]["name"], "greet");
    assert_eq!(modules[0]["versions"][0]["commit"], pinned.trim());
    assert_eq!(modules[0]["versions"][0]["stored"], true);

    // The tag moves at the origin: the cached version keeps its commit.
    origin.move_tag(
        "greet",
        "v1.0.0",
        "modules/greet/outputs.tf",
        "output \"greeting\" {\n  value = \"moved\"\n}\n",
    );
    std::fs::remove_dir_all(work.join(".terraform")).unwrap();
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init again",
    );
    let applied = ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply again",
    );
    assert!(applied.contains("hello from git, cache"), "{applied}");
    assert_eq!(git_fetches(&origin), 2, "nothing fetched again");

    // A tree with a symlink is not packed: passed through as the origin
    // gave it (online), counted in the audit trail.
    let link = format!("/v1/cache/{name}/modules/acme/link/null/1.0.0/download");
    let resp = server
        .http
        .get(server.url(&link))
        .bearer_auth(&fill)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert_eq!(
        resp.headers()["x-terraform-get"].to_str().unwrap(),
        format!("git::https://{name}/git/link.git?ref=v1.0.0")
    );
    let passed = rig.audit("cache.passthrough");
    assert_eq!(passed.len(), 1, "{passed:?}");
    assert!(
        passed[0]["detail"].as_str().unwrap().contains("symlink"),
        "{passed:?}"
    );

    // The origin gone, .terraform removed: installed from the cache.
    let mut seal = origin.upstream_args();
    drop(origin);
    std::fs::remove_dir_all(work.join(".terraform")).unwrap();
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init, the origin stopped",
    );

    // Sealed: what was passed through is not answered.
    seal.extend(["--mode".to_string(), "sealed".to_string()]);
    let args: Vec<&str> = seal.iter().map(String::as_str).collect();
    ok(server.tfreg(&rig.admin, &args), "seal");
    let (status, body) = rig.get(&link);
    assert_eq!(status, 404, "{body}");
    assert!(files_named(&rig.server_data(), |n| n.starts_with("fill-")).is_empty());
}
