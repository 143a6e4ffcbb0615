//! The parsers against hand-made answers and arbitrary bytes, and the pack
//! reader and walk against packs the real `git` makes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use proptest::prelude::*;

use super::pktline::{Pkt, Reader, write_data, write_delim, write_flush};
use super::*;

// ---- pkt-lines and v2 answers ----

fn pkts(lines: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        match *l {
            "0000" => write_flush(&mut out),
            "0001" => write_delim(&mut out),
            l => write_data(&mut out, l.as_bytes()).unwrap(),
        }
    }
    out
}

#[test]
fn pkt_lines_round_trip() {
    let bytes = pkts(&["hello\n", "0001", "", "0000"]);
    assert_eq!(bytes, b"000ahello\n000100040000");
    let mut r = Reader::new(&bytes);
    assert_eq!(r.next_pkt().unwrap(), Some(Pkt::Data(b"hello\n")));
    assert_eq!(r.next_pkt().unwrap(), Some(Pkt::Delim));
    assert_eq!(r.next_pkt().unwrap(), Some(Pkt::Data(b"")));
    assert_eq!(r.next_pkt().unwrap(), Some(Pkt::Flush));
    assert_eq!(r.next_pkt().unwrap(), None);
    assert_eq!(
        Reader::new(b"0002").next_pkt().unwrap(),
        Some(Pkt::ResponseEnd)
    );
    for bad in [&b"0003"[..], b"00", b"zzzz", b"0009abc", b"fff5", b"+00a"] {
        assert!(Reader::new(bad).next_pkt().is_err(), "{bad:?}");
    }
    assert!(write_data(&mut Vec::new(), &[0; 65517]).is_err());
    assert!(write_data(&mut Vec::new(), &[0; 65516]).is_ok());
}

const CAPS: [&str; 5] = [
    "version 2\n",
    "agent=git/2.47.3\n",
    "ls-refs=unborn\n",
    "fetch=shallow wait-for-done\n",
    "object-format=sha1\n",
];

#[test]
fn advertisements_with_and_without_the_service_line() {
    let plain = pkts(&[&CAPS[..], &["0000"]].concat());
    let ad = parse_advertisement(&plain).unwrap();
    assert!(ad.has("ls-refs") && ad.has_feature("fetch", "shallow"));
    assert_eq!(ad.get("agent"), Some(Some("git/2.47.3")));
    let with_service = pkts(
        &[
            &["# service=git-upload-pack\n", "0000"],
            &CAPS[..],
            &["0000"],
        ]
        .concat(),
    );
    assert_eq!(parse_advertisement(&with_service).unwrap(), ad);
    // A v0 server's ref advertisement.
    let v0 = pkts(&[
        "# service=git-upload-pack\n",
        "0000",
        "0123456789012345678901234567890123456789 HEAD\0multi_ack\n",
        "0000",
    ]);
    assert_eq!(parse_advertisement(&v0), Err(PktError::NotV2));
    let no_shallow = pkts(&["version 2\n", "fetch\n", "0000"]);
    assert_eq!(
        parse_advertisement(&no_shallow),
        Err(PktError::Missing("shallow"))
    );
    let sha256 = pkts(&[
        "version 2\n",
        "fetch=shallow\n",
        "object-format=sha256\n",
        "0000",
    ]);
    assert!(matches!(
        parse_advertisement(&sha256),
        Err(PktError::ObjectFormat(_))
    ));
    assert!(parse_advertisement(&pkts(&["version 2\n", "fetch=shallow\n"])).is_err());
}

const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";

#[test]
fn ls_refs_lines_with_peeled_and_symrefs() {
    let body = pkts(&[
        &format!("{A} HEAD symref-target:refs/heads/main\n"),
        &format!("{A} refs/heads/main\n"),
        &format!("{B} refs/tags/v1 peeled:{A}\n"),
        "0000",
    ]);
    let refs = parse_ls_refs(&body).unwrap();
    assert_eq!(refs.len(), 3);
    assert_eq!(refs[0].symref_target.as_deref(), Some("refs/heads/main"));
    assert_eq!(refs[2].target(), ObjectId::from_hex(A).unwrap());
    assert_eq!(refs[2].id, ObjectId::from_hex(B).unwrap());
    assert!(parse_ls_refs(&pkts(&["0000"])).unwrap().is_empty());
    assert!(parse_ls_refs(&pkts(&["nothex refs/heads/x\n", "0000"])).is_err());
    assert!(matches!(
        parse_ls_refs(&pkts(&["ERR no\n"])),
        Err(PktError::Server(_))
    ));
    let request = ls_refs_request(&["refs/tags/v1".into()]).unwrap();
    assert_eq!(
        request,
        pkts(&[
            "command=ls-refs\n",
            "0001",
            "peel\n",
            "symrefs\n",
            "ref-prefix refs/tags/v1\n",
            "0000"
        ])
    );
}

fn band(n: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_data(&mut out, &[&[n][..], data].concat()).unwrap();
    out
}

#[test]
fn fetch_responses_are_demultiplexed() {
    let mut body = pkts(&[
        "shallow-info\n",
        &format!("shallow {A}\n"),
        "0001",
        "packfile\n",
    ]);
    body.extend(band(2, b"Counting objects\n"));
    body.extend(band(1, b"PACK"));
    body.extend(band(1, b"rest"));
    body.extend(pkts(&["0000"]));
    let got = parse_fetch_response(&body, 100).unwrap();
    assert_eq!(got.pack, b"PACKrest");
    assert_eq!(got.shallow, vec![ObjectId::from_hex(A).unwrap()]);
    assert!(parse_fetch_response(&body, 7).is_err(), "over the cap");

    let mut err = pkts(&["packfile\n"]);
    err.extend(band(3, b"upload-pack: not our ref\n"));
    assert_eq!(
        parse_fetch_response(&err, 100),
        Err(PktError::Server("upload-pack: not our ref".into()))
    );
    assert!(matches!(
        parse_fetch_response(&pkts(&["ERR upload-pack: not our ref\n"]), 100),
        Err(PktError::Server(_))
    ));
    assert_eq!(
        parse_fetch_response(&pkts(&["acknowledgments\n", "NAK\n", "0000"]), 100),
        Err(PktError::NoPack)
    );
    assert!(parse_fetch_response(&pkts(&["packfile-uris\n", "0001"]), 100).is_err());
    let request = fetch_request(&ObjectId::from_hex(A).unwrap()).unwrap();
    assert!(
        String::from_utf8(request)
            .unwrap()
            .contains(&format!("want {A}\n"))
    );
}

// ---- packs made by git ----

/// Runs git with a fixed identity and time, in `dir`.
fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    git_in(dir, args, None)
}

fn git_in(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.test")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.test")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim().to_string()
}

/// Bytes that do not compress: only deltas make a pack of many smaller.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 95 + 32) as u8
        })
        .collect()
}

struct Repo {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Repo {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        std::fs::create_dir(&path).unwrap();
        git(&path, &["init", "-q", "-b", "main"]);
        Self { _dir: dir, path }
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        let p = self.path.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn commit(&self, message: &str) -> ObjectId {
        git(&self.path, &["add", "-A"]);
        git(
            &self.path,
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        ObjectId::from_hex(&text(git(&self.path, &["rev-parse", "HEAD"]))).unwrap()
    }

    /// A pack of every object `revs` reach, deltas found in a wide window.
    fn pack(&self, revs: &[&str], ofs: bool) -> Vec<u8> {
        let objects = git(&self.path, &[&["rev-list", "--objects"], revs].concat());
        let mut args = vec![
            "pack-objects",
            "--stdout",
            "-q",
            "--window=250",
            "--depth=50",
        ];
        if ofs {
            args.push("--delta-base-offset");
        }
        git_in(&self.path, &args, Some(&objects))
    }

    /// `git ls-tree -r` with each file's bytes: what a walk must give.
    fn expected(&self, rev: &str, subdir: Option<&str>) -> Vec<TreeEntry> {
        let mut args = vec!["ls-tree", "-r", "-z", rev];
        if let Some(sub) = subdir {
            args.push(sub);
        }
        let listing = git(&self.path, &args);
        let mut out: Vec<TreeEntry> = listing
            .split(|b| *b == 0)
            .filter(|l| !l.is_empty())
            .map(|l| {
                let l = std::str::from_utf8(l).unwrap();
                let (meta, path) = l.split_once('\t').unwrap();
                let mut m = meta.split(' ');
                let (mode, _, id) = (m.next().unwrap(), m.next(), m.next().unwrap());
                let path = match subdir {
                    Some(sub) => path.strip_prefix(&format!("{sub}/")).unwrap(),
                    None => path,
                };
                TreeEntry {
                    path: path.to_string(),
                    executable: mode == "100755",
                    bytes: git(&self.path, &["cat-file", "blob", id]),
                }
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

/// A module of 40 near-identical 16 KiB files (deltas), an executable, a
/// subdirectory, and two commits of history.
fn module_repo() -> (Repo, ObjectId, ObjectId) {
    let repo = Repo::new();
    let base = noise(1, 16 * 1024);
    for i in 0..40 {
        let mut v = base.clone();
        v.extend_from_slice(format!("\n# variant {i}\n").as_bytes());
        repo.write(&format!("modules/m{i:02}/main.tf"), &v);
    }
    repo.write("main.tf", b"variable \"x\" {}\n");
    repo.write("scripts/run.sh", b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        repo.path.join("scripts/run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let first = repo.commit("one");
    repo.write("main.tf", b"variable \"x\" { default = 1 }\n");
    repo.write("modules/m00/extra.tf", &base);
    let second = repo.commit("two");
    (repo, first, second)
}

/// One small real pack, for the property tests' mutations.
fn small_pack() -> &'static (Vec<u8>, ObjectId) {
    static PACK: OnceLock<(Vec<u8>, ObjectId)> = OnceLock::new();
    PACK.get_or_init(|| {
        let repo = Repo::new();
        let base = noise(2, 2048);
        for i in 0..4 {
            let mut v = base.clone();
            v.push(b'0' + i);
            repo.write(&format!("d/f{i}.tf"), &v);
        }
        let head = repo.commit("c");
        (repo.pack(&["HEAD"], true), head)
    })
}

#[test]
fn a_git_pack_with_deltas_walks_to_ls_tree() {
    let (repo, first, second) = module_repo();
    for ofs in [true, false] {
        let bytes = repo.pack(&["HEAD"], ofs);
        // 40 files of 16 KiB that do not compress: only deltas fit them here.
        assert!(
            bytes.len() < 3 * 16 * 1024,
            "no deltas? {} bytes",
            bytes.len()
        );
        let pack = read_pack(&bytes).unwrap();
        for (commit, rev) in [(second, "HEAD"), (first, "HEAD~1")] {
            let files = walk(&pack, &commit, None).unwrap();
            assert_eq!(files, repo.expected(rev, None), "{rev} ofs={ofs}");
        }
        let sub = walk(&pack, &second, Some("modules/m00")).unwrap();
        assert_eq!(sub, repo.expected("HEAD", Some("modules/m00")));
        assert_eq!(sub.len(), 2);
        assert_eq!(
            walk(&pack, &second, Some("./modules//m07/")).unwrap().len(),
            1
        );
        let files = walk(&pack, &second, None).unwrap();
        assert!(
            files
                .iter()
                .any(|f| f.path == "scripts/run.sh" && f.executable)
        );
        assert_eq!(files.len(), 43);
    }
}

#[test]
fn a_shallow_pack_of_one_commit_walks() {
    let (repo, _, second) = module_repo();
    // What `deepen 1` gets: the commit and its tree, not its parent's.
    let objects = git(&repo.path, &["rev-list", "--objects", "--no-walk", "HEAD"]);
    let bytes = git_in(
        &repo.path,
        &["pack-objects", "--stdout", "-q", "--delta-base-offset"],
        Some(&objects),
    );
    let pack = read_pack(&bytes).unwrap();
    assert_eq!(
        walk(&pack, &second, None).unwrap(),
        repo.expected("HEAD", None)
    );
}

#[test]
fn a_wrong_commit_or_a_bad_subdir_is_refused() {
    let (repo, first, second) = module_repo();
    let objects = git(&repo.path, &["rev-list", "--objects", "--no-walk", "HEAD"]);
    let bytes = git_in(
        &repo.path,
        &["pack-objects", "--stdout", "-q"],
        Some(&objects),
    );
    let pack = read_pack(&bytes).unwrap();
    assert!(matches!(
        walk(&pack, &first, None),
        Err(WalkError::Missing { what: "commit", .. })
    ));
    let tree = ObjectId::from_hex(&text(git(&repo.path, &["rev-parse", "HEAD^{tree}"]))).unwrap();
    assert!(matches!(
        walk(&pack, &tree, None),
        Err(WalkError::WrongKind { .. })
    ));
    assert!(matches!(
        walk(&pack, &second, Some("nope")),
        Err(WalkError::NoSubdir(_))
    ));
    assert!(matches!(
        walk(&pack, &second, Some("main.tf")),
        Err(WalkError::NoSubdir(_))
    ));
    assert!(matches!(
        walk(&pack, &second, Some("../x")),
        Err(WalkError::BadSubdir(_))
    ));
}

#[test]
fn a_corrupted_pack_is_refused() {
    let (repo, _, second) = module_repo();
    let bytes = repo.pack(&["HEAD"], true);
    let body = bytes.len() - 20;
    for at in [0, 5, 9, 12, body / 3, body / 2, body - 1] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x40;
        assert!(read_pack(&bad).is_err(), "byte {at} flipped");
        // With the trailer made to match, the object's own hash or zlib's
        // checksum still refuses it (or the commit is no longer there).
        let sum = sha1_checked::Sha1::try_digest(&bad[..body]);
        bad[body..].copy_from_slice(sum.hash().as_slice());
        let walked = read_pack(&bad).map(|p| walk(&p, &second, None));
        assert!(
            !matches!(walked, Ok(Ok(_))),
            "byte {at} flipped, trailer fixed"
        );
    }
    assert_eq!(
        read_pack(&bytes[..bytes.len() - 1]).unwrap_err(),
        PackError::Checksum
    );
}

#[test]
fn symlinks_and_submodules_are_reported() {
    let repo = Repo::new();
    repo.write("main.tf", b"");
    repo.write("sub/ok.tf", b"");
    std::os::unix::fs::symlink("main.tf", repo.path.join("sub/link.tf")).unwrap();
    let head = repo.commit("link");
    let pack = read_pack(&repo.pack(&["HEAD"], true)).unwrap();
    let err = walk(&pack, &head, None).unwrap_err();
    assert_eq!(err, WalkError::Symlink("sub/link.tf".into()));
    assert!(err.is_pass_through());

    let repo = Repo::new();
    repo.write("main.tf", b"");
    repo.commit("one");
    git(
        &repo.path,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{A},vendor/lib"),
        ],
    );
    git(&repo.path, &["commit", "-q", "-m", "submodule"]);
    let head = ObjectId::from_hex(&text(git(&repo.path, &["rev-parse", "HEAD"]))).unwrap();
    let objects = git(&repo.path, &["rev-list", "--objects", "--no-walk", "HEAD"]);
    let pack = read_pack(&git_in(
        &repo.path,
        &["pack-objects", "--stdout", "-q"],
        Some(&objects),
    ))
    .unwrap();
    let err = walk(&pack, &head, None).unwrap_err();
    assert_eq!(err, WalkError::Submodule("vendor/lib".into()));
    assert!(err.is_pass_through());
    assert_eq!(
        walk(&pack, &head, Some("vendor/lib")).unwrap_err(),
        WalkError::Submodule("vendor/lib".into())
    );
}

#[test]
fn pack_entries_is_what_publish_accepts_and_deterministic() {
    use crate::archives::ArchiveError;
    use crate::archives::module::{check_tar_gz, pack_entries};
    let (repo, _, _) = module_repo();
    let mut files = repo.expected("HEAD", None);
    files.push(TreeEntry {
        path: ".git/config".into(),
        executable: false,
        bytes: b"x".to_vec(),
    });
    files.push(TreeEntry {
        path: "a/.terraform/x.tf".into(),
        executable: false,
        bytes: b"x".to_vec(),
    });
    let tgz = pack_entries(&files).unwrap();
    let summary = check_tar_gz(tgz.as_slice()).unwrap();
    assert_eq!(summary.files, 43);
    let mut reversed = files.clone();
    reversed.reverse();
    assert_eq!(pack_entries(&reversed).unwrap(), tgz);
    // What is in it: directories first, modes kept.
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tgz.as_slice()));
    let listed: Vec<(String, u32)> = archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.path().unwrap().display().to_string(),
                e.header().mode().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed[0], ("main.tf".into(), 0o644));
    assert_eq!(listed[1], ("modules/".into(), 0o755));
    assert!(listed.contains(&("scripts/run.sh".into(), 0o755)));
    assert!(
        !listed
            .iter()
            .any(|(p, _)| p.contains(".git") || p.contains(".terraform"))
    );

    let bad = |path: &str| {
        pack_entries(&[TreeEntry {
            path: path.into(),
            executable: false,
            bytes: Vec::new(),
        }])
    };
    assert!(matches!(bad("../x.tf"), Err(ArchiveError::Escapes(_))));
    assert!(matches!(bad("a\\b.tf"), Err(ArchiveError::BadName { .. })));
    let clash = [
        TreeEntry {
            path: "a".into(),
            executable: false,
            bytes: Vec::new(),
        },
        TreeEntry {
            path: "a/b.tf".into(),
            executable: false,
            bytes: Vec::new(),
        },
    ];
    assert!(matches!(
        pack_entries(&clash),
        Err(ArchiveError::Duplicate(_))
    ));
    let long = format!("{}/main.tf", "d".repeat(200));
    let tgz = pack_entries(&[TreeEntry {
        path: long.clone(),
        executable: false,
        bytes: b"x".to_vec(),
    }])
    .unwrap();
    check_tar_gz(tgz.as_slice()).unwrap();
}

// ---- never a panic ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pkt_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut r = Reader::new(&bytes);
        while let Ok(Some(_)) = r.next_pkt() {}
        let _ = parse_advertisement(&bytes);
        let _ = parse_ls_refs(&bytes);
        let _ = parse_fetch_response(&bytes, 1024);
    }

    #[test]
    fn pkt_parsers_never_panic_on_pkt_shaped_input(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("0000".to_string()),
                Just("0001".to_string()),
                Just("version 2\n".to_string()),
                Just("packfile\n".to_string()),
                Just("fetch=shallow\n".to_string()),
                Just(format!("{A} refs/tags/x peeled:{B}\n")),
                "[ -~]{0,30}",
            ],
            0..12,
        ),
        band_bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut body = pkts(&refs);
        let _ = parse_advertisement(&body);
        let _ = parse_ls_refs(&body);
        write_data(&mut body, &band_bytes).unwrap();
        let _ = parse_fetch_response(&body, 1024);
    }

    #[test]
    fn the_pack_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let _ = read_pack(&bytes);
        // With a valid header and trailer, so the objects are read.
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x03".to_vec();
        pack.extend_from_slice(&bytes);
        let sum = sha1_checked::Sha1::try_digest(&pack);
        pack.extend_from_slice(sum.hash().as_slice());
        let _ = read_pack(&pack);
    }

    #[test]
    fn a_mutated_real_pack_never_panics_nor_walks_wrong(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (bytes, head) = small_pack();
        let mut bad = bytes.clone();
        let body = bad.len() - 20;
        for (at, b) in &edits {
            let i = at.index(body);
            bad[i] = *b;
        }
        let sum = sha1_checked::Sha1::try_digest(&bad[..body]);
        bad[body..].copy_from_slice(sum.hash().as_slice());
        if let Ok(pack) = read_pack(&bad)
            && let Ok(files) = walk(&pack, head, None)
        {
            // Only an edit that changed nothing can still walk the commit.
            let good = walk(&read_pack(bytes).unwrap(), head, None).unwrap();
            prop_assert_eq!(files, good);
        }
    }
}
