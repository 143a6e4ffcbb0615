//! Modules from git: refs resolved and one commit's tree fetched from a
//! real `git http-backend` over HTTPS ([`GitServer`]), compared with what
//! `git` itself says of the repository.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tfreg_cache::origin::git::{self, GitError};
use tfreg_cache::origin::{OriginClient, OriginError};
use tfreg_outbound::{ScriptedLookup, UrlRefused};
use tfreg_verify::git::{ObjectId, TreeEntry, WalkError};

use crate::git_server::GitServer;
use tokio::time::Instant;

use crate::support::{Body, HOST, Pki, Rig, Script, at, client, settings_at, soon, url};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.test")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.test")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository `<root>/<name>.git` made in a work tree beside it.
struct Repo {
    work: PathBuf,
}

impl Repo {
    fn new(root: &Path, name: &str) -> Self {
        let work = root.join(format!("{name}.git"));
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        Self { work }
    }

    fn write(&self, rel: &str, bytes: &str) -> &Self {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
        self
    }

    fn commit(&self, message: &str) -> ObjectId {
        git(&self.work, &["add", "-A"]);
        git(
            &self.work,
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        self.id("HEAD")
    }

    fn id(&self, rev: &str) -> ObjectId {
        ObjectId::from_hex(&git(&self.work, &["rev-parse", rev])).unwrap()
    }

    fn run(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }

    /// `git ls-tree -r` of `rev` with each file's bytes.
    fn expected(&self, rev: &str) -> Vec<TreeEntry> {
        let listing = git(&self.work, &["ls-tree", "-r", rev]);
        let mut out: Vec<TreeEntry> = listing
            .lines()
            .map(|l| {
                let (meta, path) = l.split_once('\t').unwrap();
                let parts: Vec<&str> = meta.split(' ').collect();
                let bytes = Command::new("git")
                    .args(["cat-file", "blob", parts[2]])
                    .current_dir(&self.work)
                    .output()
                    .unwrap()
                    .stdout;
                TreeEntry {
                    path: path.to_string(),
                    executable: parts[0] == "100755",
                    bytes,
                }
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

/// The repositories' root, a git server on 127.0.0.50 serving them as
/// `registry.example.test`, a trap on 127.0.0.1 and a client.
struct GitRig {
    root: tempfile::TempDir,
    server: GitServer,
    trap: GitServer,
    dns: Arc<ScriptedLookup>,
    client: OriginClient,
}

impl GitRig {
    async fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let pki = Pki::new();
        let server = GitServer::start("127.0.0.50", &pki, root.path()).await;
        let trap = GitServer::start("127.0.0.1", &pki, root.path()).await;
        let dns = Arc::new(ScriptedLookup::new());
        let client = client(settings_at(&pki, server.addr), &dns);
        Self {
            root,
            server,
            trap,
            dns,
            client,
        }
    }

    fn repo(&self, name: &str) -> Repo {
        Repo::new(self.root.path(), name)
    }

    fn url(&self, name: &str) -> url::Url {
        url(&format!("https://{HOST}/{name}.git"))
    }

    async fn resolve(&self, name: &str, reference: Option<&str>) -> Result<ObjectId, GitError> {
        git::resolve(&self.client, &self.url(name), reference, soon()).await
    }

    async fn tree(
        &self,
        name: &str,
        commit: &ObjectId,
        subdir: Option<&str>,
    ) -> Result<Vec<TreeEntry>, GitError> {
        git::fetch_tree(&self.client, &self.url(name), commit, subdir, soon()).await
    }
}

/// main (2 commits), a lightweight tag, an annotated tag, a branch, and a
/// tag and branch of the same name on different commits.
fn tagged(rig: &GitRig) -> Repo {
    let repo = rig.repo("tagged");
    repo.write("main.tf", "variable \"x\" {}\n")
        .write("modules/net/main.tf", "# net\n")
        .write("modules/net/README.md", "net\n");
    let c1 = repo.commit("one");
    repo.run(&["tag", "v1.0.0"]);
    repo.run(&["tag", "-a", "-m", "annotated", "v2.0.0"]);
    repo.run(&["branch", "feature"]);
    repo.run(&["branch", "both"]);
    repo.write("main.tf", "variable \"x\" { default = 2 }\n");
    let c2 = repo.commit("two");
    repo.run(&["tag", "both"]);
    assert_ne!(c1, c2);
    repo
}

#[tokio::test]
async fn tags_branches_and_commits_resolve_as_git_does() {
    let rig = GitRig::new().await;
    let repo = tagged(&rig);
    let c1 = repo.id("HEAD~1");
    let c2 = repo.id("HEAD");
    assert_eq!(rig.resolve("tagged", Some("v1.0.0")).await.unwrap(), c1);
    // Annotated: the tag object peeled to its commit.
    assert_ne!(repo.id("refs/tags/v2.0.0"), c1);
    assert_eq!(rig.resolve("tagged", Some("v2.0.0")).await.unwrap(), c1);
    assert_eq!(rig.resolve("tagged", Some("feature")).await.unwrap(), c1);
    // A tag and a branch of one name: the tag.
    assert_eq!(rig.resolve("tagged", Some("both")).await.unwrap(), c2);
    assert_eq!(rig.resolve("tagged", None).await.unwrap(), c2);
    // Prefixes are not names: `v1` is no ref, nor is `heads/main`.
    let injected = "v1.0.0\nref-prefix refs/heads/feature";
    for missing in ["v1", "nope", "heads/main", injected, "a..b", "-x", ""] {
        match rig.resolve("tagged", Some(missing)).await {
            Err(e @ GitError::NoSuchRef { .. }) => assert!(e.is_pass_through()),
            other => panic!("{missing}: {other:?}"),
        }
    }
    // A commit id is the commit: nothing asked.
    let before = rig.server.hits().len();
    let id = c1.to_hex();
    assert_eq!(rig.resolve("tagged", Some(&id)).await.unwrap(), c1);
    assert_eq!(rig.server.hits().len(), before);
    // Every request spoke v2 and carried no credentials.
    let hits = rig.server.hits();
    assert!(
        hits.iter()
            .all(|h| h.git_protocol.as_deref() == Some("version=2"))
    );
    assert!(hits.iter().all(|h| h.authorization.is_none()));
    assert!(
        hits.iter()
            .any(|h| h.method == "POST" && h.target == "/tagged.git/git-upload-pack")
    );
}

#[tokio::test]
async fn a_commits_tree_is_what_git_ls_tree_says() {
    let rig = GitRig::new().await;
    let repo = tagged(&rig);
    repo.write("bin/tool.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        repo.work.join("bin/tool.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // Many similar versions, so the server's pack has deltas.
    for i in 0..20 {
        repo.write(
            "big.tf",
            &format!("{}\n# {i}\n", "locals { a = 1 }\n".repeat(400)),
        );
        repo.commit(&format!("v{i}"));
    }
    repo.run(&["gc", "-q", "--aggressive"]);
    let head = rig.resolve("tagged", None).await.unwrap();
    let files = rig.tree("tagged", &head, None).await.unwrap();
    assert_eq!(files, repo.expected("HEAD"));
    assert!(
        files
            .iter()
            .any(|f| f.path == "bin/tool.sh" && f.executable)
    );
    // An older commit, by id.
    let c1 = repo.id("v1.0.0");
    assert_eq!(
        rig.tree("tagged", &c1, None).await.unwrap(),
        repo.expected("v1.0.0")
    );
    // Only a subdirectory, its paths relative to it.
    let sub = rig.tree("tagged", &c1, Some("modules/net")).await.unwrap();
    let paths: Vec<&str> = sub.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["README.md", "main.tf"]);
    // No such subdirectory: go-getter's own error (or its glob) decides.
    match rig.tree("tagged", &c1, Some("modules/none")).await {
        Err(
            e @ GitError::Tree {
                why: WalkError::NoSubdir(_),
                ..
            },
        ) => assert!(e.is_pass_through()),
        other => panic!("{other:?}"),
    }
    // What the cache would store: publish accepts it.
    let tgz = tfreg_verify::archives::module::pack_entries(&files).unwrap();
    tfreg_verify::archives::module::check_tar_gz(tgz.as_slice()).unwrap();
}

#[tokio::test]
async fn a_moved_tag_resolves_anew_and_the_old_commit_stays_fetchable() {
    let rig = GitRig::new().await;
    let repo = rig.repo("moving");
    repo.write("main.tf", "# old\n");
    repo.run(&["checkout", "-q", "-b", "side"]);
    let old = repo.commit("old");
    repo.run(&["tag", "v1"]);
    repo.run(&["checkout", "-q", "--orphan", "main"]);
    repo.write("main.tf", "# new\n");
    let new = repo.commit("new");
    assert_eq!(rig.resolve("moving", Some("v1")).await.unwrap(), old);
    repo.run(&["tag", "-f", "v1", "main"]);
    repo.run(&["branch", "-D", "side"]);
    assert_eq!(rig.resolve("moving", Some("v1")).await.unwrap(), new);
    // No ref reaches the old commit now; protocol v2 fetches it by id.
    let files = rig.tree("moving", &old, None).await.unwrap();
    assert_eq!(files[0].bytes, b"# old\n");
    // A commit the server never had.
    let never = ObjectId([7; 20]);
    match rig.tree("moving", &never, None).await {
        Err(e @ GitError::NoSuchRef { .. }) => assert!(e.is_pass_through()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn symlinks_and_submodules_pass_through() {
    let rig = GitRig::new().await;
    let links = rig.repo("links");
    links.write("main.tf", "");
    std::os::unix::fs::symlink("main.tf", links.work.join("other.tf")).unwrap();
    let head = links.commit("link");
    let err = rig.tree("links", &head, None).await.unwrap_err();
    assert!(err.is_pass_through(), "{err:?}");
    assert!(matches!(
        err,
        GitError::Tree {
            why: WalkError::Symlink(_),
            ..
        }
    ));

    let subs = rig.repo("subs");
    subs.write("main.tf", "");
    let inner = subs.commit("one");
    subs.run(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{inner},vendor/mod"),
    ]);
    subs.run(&["commit", "-q", "-m", "submodule"]);
    let head = rig.resolve("subs", None).await.unwrap();
    let err = rig.tree("subs", &head, None).await.unwrap_err();
    assert!(err.is_pass_through(), "{err:?}");
    assert!(matches!(
        err,
        GitError::Tree {
            why: WalkError::Submodule(_),
            ..
        }
    ));
    // A subdirectory without them is fine.
    let other = rig.repo("mixed");
    other.write("ok/main.tf", "").write("bad/main.tf", "");
    std::os::unix::fs::symlink("main.tf", other.work.join("bad/link.tf")).unwrap();
    let head = other.commit("mixed");
    assert_eq!(rig.tree("mixed", &head, Some("ok")).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_missing_repository_is_not_found() {
    let rig = GitRig::new().await;
    match rig.resolve("absent", Some("v1")).await {
        Err(GitError::Origin(OriginError::NotFound { .. })) => {}
        other => panic!("{other:?}"),
    }
}

fn pkt(lines: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        match *l {
            "0000" => out.extend_from_slice(b"0000"),
            l => out.extend_from_slice(format!("{:04x}{l}", l.len() + 4).as_bytes()),
        }
    }
    out
}

const ADVERTISEMENT: &str = "application/x-git-upload-pack-advertisement";

/// Answers that are not a v2 smart-HTTP server's are refused as protocol
/// errors (never passed through, never stored); a slow one is transient.
#[tokio::test]
async fn not_a_v2_git_server_is_refused() {
    let rig = Rig::new().await;
    let repo = at("/x.git");
    rig.origin.script(
        "/x.git/info/refs",
        Script::bytes("<html>").header("content-type", "text/html"),
    );
    let err = git::resolve(&rig.client, &repo, Some("v1"), soon())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitError::Origin(OriginError::Protocol { .. })),
        "{err:?}"
    );
    let v0 = pkt(&[
        "# service=git-upload-pack\n",
        "0000",
        "1111111111111111111111111111111111111111 HEAD\0multi_ack\n",
        "0000",
    ]);
    rig.origin.script(
        "/x.git/info/refs",
        Script::bytes(v0).header("content-type", ADVERTISEMENT),
    );
    let err = git::resolve(&rig.client, &repo, Some("v1"), soon())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("version 2"), "{err}");
    assert!(!err.is_pass_through() && !err.is_transient());
    rig.origin.script("/x.git/info/refs", Script::status(401));
    let err = git::resolve(&rig.client, &repo, Some("v1"), soon())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitError::Private { status: 401, .. }),
        "{err:?}"
    );
    assert!(err.is_pass_through());
    rig.origin.script(
        "/x.git/info/refs",
        Script::body(200, Body::Drip(Duration::from_millis(50)))
            .header("content-type", ADVERTISEMENT),
    );
    let deadline = Instant::now() + Duration::from_millis(300);
    let err = git::fetch_tree(&rig.client, &repo, &ObjectId([1; 20]), None, deadline)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

/// A redirected advertisement moves the repository, as git's remote-curl
/// does: the POST goes to the new place, and carries its body.
#[tokio::test]
async fn a_redirected_repository_is_asked_where_it_went() {
    let rig = Rig::new().await;
    let ad = pkt(&["version 2\n", "ls-refs\n", "fetch=shallow\n", "0000"]);
    rig.origin
        .script(
            "/old.git/info/refs",
            Script::redirect(301, "/new.git/info/refs?service=git-upload-pack"),
        )
        .script(
            "/new.git/info/refs",
            Script::bytes(ad).header("content-type", ADVERTISEMENT),
        )
        .script(
            "/new.git/git-upload-pack",
            Script::bytes(pkt(&[
                "1111111111111111111111111111111111111111 refs/tags/v1\n",
                "0000",
            ]))
            .header("content-type", "application/x-git-upload-pack-result"),
        );
    let got = git::resolve(&rig.client, &at("/old.git"), Some("v1"), soon())
        .await
        .unwrap();
    assert_eq!(got, ObjectId([0x11; 20]));
    assert_eq!(rig.origin.count("/new.git/git-upload-pack"), 1);
    assert_eq!(rig.origin.count("/old.git/git-upload-pack"), 0);
    // A POST sent elsewhere as a GET (301/302/303) is refused; 307 keeps
    // the POST and its body.
    rig.origin.script(
        "/new.git/git-upload-pack",
        Script::redirect(302, "/other.git/git-upload-pack"),
    );
    let err = git::resolve(&rig.client, &at("/old.git"), Some("v1"), soon())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("a POST answered 302"), "{err}");
    rig.origin
        .script(
            "/new.git/git-upload-pack",
            Script::redirect(307, "/other.git/git-upload-pack"),
        )
        .script(
            "/other.git/git-upload-pack",
            Script::bytes(pkt(&[
                "2222222222222222222222222222222222222222 refs/heads/v1\n",
                "0000",
            ]))
            .header("content-type", "application/x-git-upload-pack-result"),
        );
    let got = git::resolve(&rig.client, &at("/old.git"), Some("v1"), soon())
        .await
        .unwrap();
    assert_eq!(got, ObjectId([0x22; 20]));
    // Redirected somewhere that is no info/refs: refused.
    rig.origin
        .script("/odd.git/info/refs", Script::redirect(302, "/elsewhere"));
    rig.origin.script(
        "/elsewhere",
        Script::bytes("x").header("content-type", ADVERTISEMENT),
    );
    let err = git::resolve(&rig.client, &at("/odd.git"), Some("v1"), soon())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitError::Origin(OriginError::Protocol { .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_the_policy_refuses_is_never_connected() {
    let rig = GitRig::new().await;
    tagged(&rig);
    let port = rig.trap.addr.port();
    rig.dns.answer("git.example.test", [rig.trap.addr]);
    for repo in [
        format!("https://127.0.0.1:{port}/tagged.git"),
        "https://git.example.test/tagged.git".to_string(),
        "https://169.254.169.254/tagged.git".to_string(),
    ] {
        let repo = url(&repo);
        for err in [
            git::resolve(&rig.client, &repo, Some("v1.0.0"), soon())
                .await
                .unwrap_err(),
            git::fetch_tree(&rig.client, &repo, &ObjectId([1; 20]), None, soon())
                .await
                .unwrap_err(),
        ] {
            match err {
                GitError::Origin(OriginError::Refused {
                    why: UrlRefused::Address(_),
                    ..
                }) => {}
                other => panic!("{repo}: {other:?}"),
            }
        }
    }
    assert_eq!(rig.trap.accepts(), 0, "a connection reached the trap");
}
