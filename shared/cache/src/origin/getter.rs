//! A module's source as go-getter reads it, and what the cache can do with
//! it: fetch a git repository over https or an https archive from an
//! allowed host, or pass the source on unchanged (online: our answer repeats
//! it; sealed: 404). Pure; anything unusual is passed through rather than
//! guessed at, since the client's own go-getter is the one that must agree.
//!
//! go-getter's steps kept here: a forced getter (`git::`), then the `//sub`
//! split before the query (`SourceDirSubdir`, the query moving back onto
//! the URL), then `?ref=` for git and `?archive=` or the path's suffix for
//! archives (`archive` removed from the URL, as go-getter removes it).

/// What a module source is, for the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleSource {
    Git {
        /// `https://host/path[.git]`, no query.
        repo_url: url::Url,
        /// `?ref=`: a tag, branch or commit id; `None` is the default branch.
        reference: Option<String>,
        subdir: Option<String>,
    },
    Archive {
        url: url::Url,
        format: ArchiveFormat,
        subdir: Option<String>,
    },
    /// Not fetched by the cache: the source as given, and why.
    PassThrough { source: String, why: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveFormat {
    Zip,
    TarGz,
}

const MAX_SOURCE: usize = 4096;

/// Read `source`; only https URLs on one of `hosts` are fetched.
pub fn parse<S: AsRef<str>>(source: &str, hosts: &[S]) -> ModuleSource {
    match read(source, hosts) {
        Ok(fetched) => fetched,
        Err(why) => ModuleSource::PassThrough {
            source: source.to_string(),
            why,
        },
    }
}

fn read<S: AsRef<str>>(source: &str, hosts: &[S]) -> Result<ModuleSource, &'static str> {
    if source.is_empty()
        || source.len() > MAX_SOURCE
        || source.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("empty, too long, or with spaces or control characters");
    }
    let (forced, rest) = split_forced(source);
    let git = match forced {
        None => false,
        Some("git") => true,
        Some(_) => return Err("a getter the cache does not fetch (s3::, gcs::, hg::, …)"),
    };
    let (src, subdir) = source_dir_subdir(rest);
    let mut url = url::Url::parse(&src)
        .map_err(|_| "no URL: a shorthand, an scp-like git@ address or a local path")?;
    if url.scheme() != "https" {
        return Err("not https (ssh, http, s3, file, …)");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL");
    }
    if url.port().is_some() {
        return Err("a port other than 443");
    }
    let allowed = match url.host() {
        Some(url::Host::Domain(host)) => {
            hosts.iter().any(|h| h.as_ref().eq_ignore_ascii_case(host))
        }
        _ => false,
    };
    if !allowed {
        return Err("a host not in the upstream's module hosts");
    }
    if url.fragment().is_some() {
        return Err("a fragment");
    }
    let subdir = check_subdir(&subdir)?;
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    if git {
        let mut reference = None;
        for (key, value) in &pairs {
            match key.as_str() {
                "ref" if reference.is_none() && is_ref_name(value) => {
                    reference = Some(value.clone())
                }
                "ref" => return Err("a ref that is no plain git ref name"),
                // We fetch one commit's tree, depth 1, whatever is asked.
                "depth" => {}
                _ => return Err("a git option the cache does not handle (sshkey, …)"),
            }
        }
        url.set_query(None);
        return Ok(ModuleSource::Git {
            repo_url: url,
            reference,
            subdir,
        });
    }
    let format = match pairs.iter().find(|(k, _)| k == "archive") {
        Some((_, value)) => {
            let format = match value.as_str() {
                "zip" => ArchiveFormat::Zip,
                "tar.gz" | "tgz" => ArchiveFormat::TarGz,
                _ => return Err("an archive format the cache does not fetch"),
            };
            let mut rest: Vec<&(String, String)> =
                pairs.iter().filter(|(k, _)| k != "archive").collect();
            // go-getter re-encodes the query (`url.Values.Encode`: keys sorted).
            rest.sort_by(|a, b| a.0.cmp(&b.0));
            if rest.is_empty() {
                url.set_query(None);
            } else {
                url.query_pairs_mut().clear().extend_pairs(rest);
            }
            format
        }
        None => suffix_format(url.path())?,
    };
    if pairs
        .iter()
        .any(|(k, _)| k == "checksum" || k == "filename")
    {
        return Err("go-getter's checksum or filename options");
    }
    Ok(ModuleSource::Archive {
        url,
        format,
        subdir,
    })
}

/// go-getter's forced getter: `^([A-Za-z0-9]+)::(.+)$`.
fn split_forced(source: &str) -> (Option<&str>, &str) {
    match source.split_once("::") {
        Some((getter, rest))
            if !getter.is_empty()
                && !rest.is_empty()
                && getter.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            (Some(getter), rest)
        }
        _ => (None, source),
    }
}

/// go-getter's `SourceDirSubdir`: the `//` after the scheme's `://` and
/// before the query splits off a subdirectory; the query stays on the URL.
fn source_dir_subdir(src: &str) -> (String, String) {
    let stop = src.find('?').unwrap_or(src.len());
    let offset = src[..stop].find("://").map_or(0, |i| i + 3);
    let Some(at) = src[offset..stop].find("//") else {
        return (src.to_string(), String::new());
    };
    let at = offset + at;
    let mut subdir = src[at + 2..].to_string();
    let mut dir = src[..at].to_string();
    if let Some(q) = subdir.find('?') {
        dir.push_str(&subdir[q..]);
        subdir.truncate(q);
    }
    (dir, subdir)
}

/// A subdirectory inside the source: relative, no `..`, no glob (go-getter
/// expands globs; we do not), no backslash.
fn check_subdir(subdir: &str) -> Result<Option<String>, &'static str> {
    let subdir = subdir.trim_end_matches('/');
    if subdir.is_empty() {
        return Ok(None);
    }
    let bad = subdir.starts_with('/')
        || subdir.contains(['*', '?', '[', '\\', '%'])
        || subdir
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
    if bad {
        return Err("a subdirectory that leaves the source, or a glob");
    }
    Ok(Some(subdir.to_string()))
}

/// A ref git itself would accept (`git check-ref-format`, roughly), and
/// nothing that reads as an option.
fn is_ref_name(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 255
        && !r.starts_with(['-', '/', '.'])
        && !r.ends_with(['/', '.'])
        && !r.ends_with(".lock")
        && !r.contains("..")
        && !r.contains("//")
        && !r.contains("@{")
        && !r
            .chars()
            .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c) || !c.is_ascii())
}

/// An archive by the path's suffix, as go-getter matches decompressors.
fn suffix_format(path: &str) -> Result<ArchiveFormat, &'static str> {
    let path = path.to_ascii_lowercase();
    if path.ends_with(".zip") {
        Ok(ArchiveFormat::Zip)
    } else if path.ends_with(".tar.gz") || path.ends_with(".tgz") {
        Ok(ArchiveFormat::TarGz)
    } else if [
        ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar", ".gz", ".bz2", ".xz",
        ".zst",
    ]
    .iter()
    .any(|s| path.ends_with(s))
    {
        Err("an archive format the cache does not fetch")
    } else {
        Err("no archive: go-getter would ask this URL for X-Terraform-Get")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOSTS: &[&str] = &["github.com", "files.example.test"];

    fn git(repo: &str, reference: Option<&str>, subdir: Option<&str>) -> ModuleSource {
        ModuleSource::Git {
            repo_url: url::Url::parse(repo).unwrap(),
            reference: reference.map(str::to_string),
            subdir: subdir.map(str::to_string),
        }
    }

    fn archive(url: &str, format: ArchiveFormat, subdir: Option<&str>) -> ModuleSource {
        ModuleSource::Archive {
            url: url::Url::parse(url).unwrap(),
            format,
            subdir: subdir.map(str::to_string),
        }
    }

    #[test]
    fn what_the_origins_answer() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        for (source, expected) in [
            // registry.terraform.io
            (
                format!(
                    "git::https://github.com/terraform-aws-modules/terraform-aws-vpc?ref={commit}"
                ),
                git(
                    "https://github.com/terraform-aws-modules/terraform-aws-vpc",
                    Some(commit),
                    None,
                ),
            ),
            // a tag, a .git suffix and a subdirectory before the query
            (
                "git::https://github.com/acme/mods.git//modules/vpc?ref=v1.2.0".into(),
                git(
                    "https://github.com/acme/mods.git",
                    Some("v1.2.0"),
                    Some("modules/vpc"),
                ),
            ),
            (
                "git::https://github.com/acme/vpc".into(),
                git("https://github.com/acme/vpc", None, None),
            ),
            (
                "git::https://github.com/acme/vpc?ref=v1&depth=1".into(),
                git("https://github.com/acme/vpc", Some("v1"), None),
            ),
            (
                "https://files.example.test/vpc-1.0.0.tar.gz".into(),
                archive(
                    "https://files.example.test/vpc-1.0.0.tar.gz",
                    ArchiveFormat::TarGz,
                    None,
                ),
            ),
            (
                "https://files.example.test/vpc.ZIP//sub/".into(),
                archive(
                    "https://files.example.test/vpc.ZIP",
                    ArchiveFormat::Zip,
                    Some("sub"),
                ),
            ),
            (
                "https://files.example.test/get?id=7&archive=tgz".into(),
                archive(
                    "https://files.example.test/get?id=7",
                    ArchiveFormat::TarGz,
                    None,
                ),
            ),
            (
                "https://files.example.test/get?archive=zip".into(),
                archive("https://files.example.test/get", ArchiveFormat::Zip, None),
            ),
        ] {
            assert_eq!(parse(&source, HOSTS), expected, "{source}");
        }
    }

    #[test]
    fn everything_else_passes_through() {
        for source in [
            "s3::https://s3-eu-west-1.amazonaws.com/bucket/vpc.zip",
            "gcs::https://www.googleapis.com/storage/v1/bucket/vpc.zip",
            "hg::https://files.example.test/repo",
            "git::ssh://git@github.com/acme/vpc.git",
            "git@github.com:acme/vpc.git",
            "github.com/acme/vpc",
            "bitbucket.org/acme/vpc",
            "./modules/vpc",
            "http://files.example.test/vpc.zip",
            "git::http://github.com/acme/vpc",
            "https://evil.example.test/vpc.zip",
            "git::https://gitlab.com/acme/vpc",
            "https://github.com/acme/vpc",
            "https://files.example.test/vpc.tar.bz2",
            "https://files.example.test/vpc.zip?archive=false",
            "https://files.example.test/vpc.zip?checksum=sha256:00",
            "git::https://github.com/acme/vpc?sshkey=AAAA",
            "git::https://github.com/acme/vpc?ref=--upload-pack=x",
            "git::https://github.com/acme/vpc?ref=a..b",
            "git::https://github.com/acme/vpc?ref=v1&ref=v2",
            "git::https://github.com/acme/vpc//../../etc?ref=v1",
            "git::https://github.com/acme/vpc//mods/*?ref=v1",
            "git::https://user:pw@github.com/acme/vpc",
            "git::https://github.com:8443/acme/vpc",
            "git::https://140.82.112.3/acme/vpc",
            "git::https://github.com/acme/vpc#main",
            "git::https://github.com/acme/vpc?ref=v1 ",
            "",
        ] {
            match parse(source, HOSTS) {
                ModuleSource::PassThrough { source: s, .. } => assert_eq!(s, source),
                other => panic!("{source}: {other:?}"),
            }
        }
    }

    #[test]
    fn go_getters_subdir_split() {
        for (src, dir, sub) in [
            (
                "https://h/p//sub/dir?ref=v1",
                "https://h/p?ref=v1",
                "sub/dir",
            ),
            ("https://h/p?x=a//b", "https://h/p?x=a//b", ""),
            ("h/p//s", "h/p", "s"),
            ("https://h/p", "https://h/p", ""),
        ] {
            assert_eq!(
                source_dir_subdir(src),
                (dir.to_string(), sub.to_string()),
                "{src}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// No input makes the parser panic, and whatever it fetches is https
        /// on an allowed host with a subdirectory that stays inside.
        #[test]
        fn never_panics_and_fetches_only_allowed_https(source in ".{0,200}") {
            check_invariants(&source);
        }

        /// The same over inputs shaped like sources.
        #[test]
        fn shaped_inputs(
            forced in prop::sample::select(vec!["", "git::", "s3::", "hg::"]),
            host in prop::sample::select(vec!["github.com", "files.example.test", "evil.test", "127.0.0.1", "GitHub.com"]),
            path in "[a-zA-Z0-9._/-]{0,30}",
            sub in prop::option::of("[a-z./*]{0,12}"),
            query in prop::option::of("(ref|archive|depth|x)=[a-z0-9.:/-]{0,12}"),
        ) {
            let mut source = format!("{forced}https://{host}/{path}");
            if let Some(sub) = sub { source.push_str("//"); source.push_str(&sub); }
            if let Some(q) = query { source.push('?'); source.push_str(&q); }
            check_invariants(&source);
        }
    }

    fn check_invariants(source: &str) {
        let (url, subdir) = match parse(source, HOSTS) {
            ModuleSource::PassThrough { source: s, .. } => {
                assert_eq!(s, source);
                return;
            }
            ModuleSource::Git {
                repo_url,
                subdir,
                reference,
            } => {
                assert_eq!(repo_url.query(), None);
                if let Some(r) = reference {
                    assert!(is_ref_name(&r) && !r.starts_with('-'), "{r}");
                }
                (repo_url, subdir)
            }
            ModuleSource::Archive { url, subdir, .. } => (url, subdir),
        };
        assert_eq!(url.scheme(), "https");
        assert!(HOSTS.iter().any(|h| Some(*h) == url.host_str()), "{url}");
        assert_eq!(url.port(), None);
        if let Some(sub) = subdir {
            assert!(!sub.split('/').any(|s| s == ".." || s.is_empty()), "{sub}");
        }
    }
}
