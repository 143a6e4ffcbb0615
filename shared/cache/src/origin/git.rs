//! One commit's tree from a git server over smart HTTP, protocol v2,
//! without a `git` binary (tests/cache/plan.md §4): the advertisement,
//! `ls-refs` to resolve a tag or branch, and a depth-1 `fetch` of the
//! commit, whose pack `tfreg-verify` reads and walks (every object hashed,
//! the commit's id the one asked for). Every request goes through the
//! origin client's checks (URL, each redirect hop, addresses), carries no
//! credentials, reads under the git caps and runs under the deadline.

use tfreg_verify::git::{
    self as pure, Advertisement, ObjectId, PackError, PktError, TreeEntry, WalkError,
};
use tokio::time::Instant;

use super::OriginClient;
use super::error::{OriginError, shown};
use super::fetch::{Capped, Kind, Outgoing, within};

const ADVERTISEMENT: &str = "application/x-git-upload-pack-advertisement";
const REQUEST: &str = "application/x-git-upload-pack-request";
const RESULT: &str = "application/x-git-upload-pack-result";
const V2: (&str, &str) = ("git-protocol", "version=2");

/// What can go wrong, in the fill engine's classes: the origin's own
/// (transient, refused, not found, protocol: [`OriginError`]), or a source
/// the cache does not store but a client's go-getter would fetch, which the
/// caller passes through.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error(transparent)]
    Origin(#[from] OriginError),
    /// The tag, branch or commit is not at the origin (as far as `ls-refs`
    /// or the server's "not our ref" tell).
    #[error("{repo}: no ref {reference}")]
    NoSuchRef { repo: String, reference: String },
    /// The server asks for credentials (401/403: a private repository, or
    /// GitHub's answer for one that does not exist). The cache never sends
    /// any to a git server; a client's go-getter may have its own.
    #[error("{url}: the git server wants credentials ({status})")]
    Private { url: String, status: u16 },
    /// The commit's tree (or the subdirectory asked) is not one the cache
    /// stores: a symlink, a submodule or no such subdirectory (pass
    /// through, [`WalkError::is_pass_through`]), or a tree out of bounds.
    #[error("{repo}: {why}")]
    Tree { repo: String, why: WalkError },
}

impl GitError {
    /// Worth trying again later.
    pub fn is_transient(&self) -> bool {
        matches!(self, GitError::Origin(e) if e.is_transient())
    }

    /// Not for the cache to store: the source goes to the client as it is.
    pub fn is_pass_through(&self) -> bool {
        match self {
            GitError::NoSuchRef { .. } | GitError::Private { .. } => true,
            GitError::Tree { why, .. } => why.is_pass_through(),
            GitError::Origin(_) => false,
        }
    }
}

/// The commit `reference` names at `repo` (`https://host/path[.git]`): a
/// 40-hex reference is the commit itself; otherwise a tag (peeled),
/// preferred as git prefers it, else a branch of exactly that name;
/// `None` is the default branch (`HEAD`).
pub async fn resolve(
    client: &OriginClient,
    repo: &url::Url,
    reference: Option<&str>,
    deadline: Instant,
) -> Result<ObjectId, GitError> {
    if let Some(id) = reference.and_then(ObjectId::from_hex) {
        return Ok(id);
    }
    if let Some(r) = reference
        && !is_ref_name(r)
    {
        // Never written into a request: it could add arguments of its own.
        return Err(GitError::NoSuchRef {
            repo: shown(repo),
            reference: r.escape_debug().to_string(),
        });
    }
    within(deadline, repo, async {
        let (base, ad) = advertise(client, repo).await?;
        if !ad.has("ls-refs") {
            return Err(protocol(&base, "the server offers no ls-refs").into());
        }
        let prefixes = match reference {
            Some(r) => vec![format!("refs/tags/{r}"), format!("refs/heads/{r}")],
            None => vec!["HEAD".to_string()],
        };
        let request = pure::ls_refs_request(&prefixes).map_err(|e| protocol(&base, e))?;
        let body = post(client, &base, Kind::GitRefs, &request).await?;
        let refs = pure::parse_ls_refs(&body).map_err(|e| pkt_error(&base, e, reference))?;
        prefixes
            .iter()
            .find_map(|name| refs.iter().find(|r| &r.name == name))
            .map(pure::RemoteRef::target)
            .ok_or_else(|| GitError::NoSuchRef {
                repo: shown(repo),
                reference: reference.unwrap_or("HEAD").to_string(),
            })
    })
    .await
}

/// The files of `commit` at `repo`, or of its `subdir`, sorted by path:
/// a depth-1 fetch of the commit, its pack read and checked, its tree
/// walked.
pub async fn fetch_tree(
    client: &OriginClient,
    repo: &url::Url,
    commit: &ObjectId,
    subdir: Option<&str>,
    deadline: Instant,
) -> Result<Vec<TreeEntry>, GitError> {
    let want = commit.to_hex();
    let body = within(deadline, repo, async {
        let (base, _) = advertise(client, repo).await?;
        let request = pure::fetch_request(commit).map_err(|e| protocol(&base, e))?;
        let body = post(client, &base, Kind::GitPack, &request).await?;
        Ok::<_, GitError>((base, body))
    })
    .await?;
    let (base, body) = body;
    let cap = usize::try_from(client.settings.caps.git_pack).unwrap_or(usize::MAX);
    let (commit, subdir) = (*commit, subdir.map(str::to_string));
    // Reading a pack is CPU work of up to seconds: off the async threads.
    let walked = tokio::task::spawn_blocking(move || {
        let response = pure::parse_fetch_response(&body, cap).map_err(Unpacked::Pkt)?;
        drop(body);
        let pack = pure::read_pack(&response.pack).map_err(Unpacked::Pack)?;
        pure::walk(&pack, &commit, subdir.as_deref()).map_err(Unpacked::Walk)
    });
    let walked = match tokio::time::timeout_at(deadline, walked).await {
        Err(_) => {
            let why = "the pack was not read before the deadline";
            return Err(OriginError::transient(&base, why).into());
        }
        Ok(Err(join)) => {
            return Err(protocol(&base, format!("reading the pack failed: {join}")).into());
        }
        Ok(Ok(walked)) => walked,
    };
    walked.map_err(|e| match e {
        Unpacked::Pkt(pkt) => pkt_error(&base, pkt, Some(&want)),
        Unpacked::Pack(pack) => protocol(&base, format!("the pack: {pack}")).into(),
        Unpacked::Walk(why) => GitError::Tree {
            repo: shown(repo),
            why,
        },
    })
}

/// Where reading a fetch answer stopped.
enum Unpacked {
    Pkt(PktError),
    Pack(PackError),
    Walk(WalkError),
}

/// `GET <repo>/info/refs?service=git-upload-pack` with `Git-Protocol:
/// version=2`: the v2 capabilities, and the URL the POSTs go to (the
/// repository's URL after any redirect, as git's `remote-curl.c` keeps it).
async fn advertise(
    client: &OriginClient,
    repo: &url::Url,
) -> Result<(url::Url, Advertisement), GitError> {
    let mut url = repo.clone();
    url.set_query(None);
    url.set_fragment(None);
    let path = format!("{}/info/refs", url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(Some("service=git-upload-pack"));
    let out = Outgoing {
        post: None,
        headers: &[V2],
    };
    let answer = client.fetcher.send(url, Kind::GitRefs, out).await?;
    let at = answer.url.clone();
    let body = read(answer, Kind::GitRefs, ADVERTISEMENT, client).await?;
    // Redirected: the repository is where the redirect went.
    let base = at
        .path()
        .strip_suffix("/info/refs")
        .filter(|_| at.query() == Some("service=git-upload-pack"))
        .map(|p| {
            let mut base = at.clone();
            base.set_path(p);
            base.set_query(None);
            base
        })
        .ok_or_else(|| protocol(&at, "redirected to no info/refs"))?;
    let ad = pure::parse_advertisement(&body).map_err(|e| pkt_error(&base, e, None))?;
    Ok((base, ad))
}

/// `POST <base>/git-upload-pack` of a v2 command.
async fn post(
    client: &OriginClient,
    base: &url::Url,
    kind: Kind,
    request: &[u8],
) -> Result<Vec<u8>, GitError> {
    let mut url = base.clone();
    let path = format!("{}/git-upload-pack", base.path().trim_end_matches('/'));
    url.set_path(&path);
    let out = Outgoing {
        post: Some((REQUEST, request)),
        headers: &[V2, ("accept", RESULT)],
    };
    let answer = client.fetcher.send(url, kind, out).await?;
    read(answer, kind, RESULT, client).await
}

/// A 200 answer of `media_type`, whole, under `kind`'s cap.
async fn read(
    answer: super::fetch::Answer,
    kind: Kind,
    media_type: &str,
    client: &OriginClient,
) -> Result<Vec<u8>, GitError> {
    let status = answer.response.status();
    if matches!(status.as_u16(), 401 | 403) {
        return Err(GitError::Private {
            url: shown(&answer.url),
            status: status.as_u16(),
        });
    }
    if status != 200 {
        return Err(OriginError::from_status(
            &answer.url,
            status,
            answer.response.headers(),
            false,
        )
        .into());
    }
    let got = answer
        .response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or_default();
    if !got.eq_ignore_ascii_case(media_type) {
        // A dumb-HTTP server, or a page of the host's instead of git's.
        return Err(protocol(&answer.url, format!("answered {got:?}, not {media_type}")).into());
    }
    let cap = kind.cap(&client.settings.caps);
    Ok(Capped::new(answer, cap)?.read_all().await?)
}

/// A name `git check-ref-format` could accept under `refs/tags/`: no
/// space, control or special character, no `..`, `@{`, `//`, no leading
/// `-` or `/`, no `.lock` or `/` at the end; at most 255 bytes.
fn is_ref_name(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 255
        && !r
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
        && !r.contains("..")
        && !r.contains("@{")
        && !r.contains("//")
        && !r.starts_with(['-', '/', '.'])
        && !r.ends_with(['/', '.'])
        && !r.ends_with(".lock")
        && r != "@"
}

fn protocol(url: &url::Url, why: impl ToString) -> OriginError {
    OriginError::protocol(url, why.to_string())
}

/// A pkt-line answer that does not parse, or the server's own error: "not
/// our ref" is a commit the server does not have.
fn pkt_error(url: &url::Url, e: PktError, reference: Option<&str>) -> GitError {
    match e {
        PktError::Server(m) if m.contains("not our ref") => GitError::NoSuchRef {
            repo: shown(url),
            reference: reference.unwrap_or("HEAD").to_string(),
        },
        e => protocol(url, e).into(),
    }
}
