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

// ---- packs made by hand: deltas and bounds ----

/// One object of a hand-made pack.
enum Raw<'a> {
    Whole(u8, &'a [u8]),
    Ref(ObjectId, &'a [u8]),
    /// A delta on the entry this many entries back.
    Ofs(usize, &'a [u8]),
}

fn varint(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A delta: sizes, then one insert of `data` (at most 127 bytes).
fn insert_delta(base_len: usize, data: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    varint(base_len, &mut d);
    varint(data.len(), &mut d);
    d.push(data.len() as u8);
    d.extend_from_slice(data);
    d
}

fn make_pack(objects: &[Raw<'_>]) -> Vec<u8> {
    use std::io::Write;
    let mut out = b"PACK\0\0\0\x02".to_vec();
    out.extend_from_slice(&(objects.len() as u32).to_be_bytes());
    let mut offsets = Vec::new();
    for o in objects {
        offsets.push(out.len());
        let (ty, data) = match o {
            Raw::Whole(ty, d) => (*ty, *d),
            Raw::Ref(_, d) => (7, *d),
            Raw::Ofs(_, d) => (6, *d),
        };
        let mut n = data.len();
        let mut first = (ty << 4) | (n & 15) as u8;
        n >>= 4;
        if n > 0 {
            first |= 0x80;
        }
        out.push(first);
        while n > 0 {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n > 0 { b | 0x80 } else { b });
        }
        match o {
            Raw::Ref(id, _) => out.extend_from_slice(&id.0),
            Raw::Ofs(back, _) => {
                let base = offsets[offsets.len() - 1 - back];
                let mut v = offsets[offsets.len() - 1] - base;
                let mut bytes = vec![(v & 0x7f) as u8];
                v >>= 7;
                while v > 0 {
                    v -= 1;
                    bytes.push(0x80 | (v & 0x7f) as u8);
                    v >>= 7;
                }
                bytes.reverse();
                out.extend_from_slice(&bytes);
            }
            Raw::Whole(..) => {}
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        out.extend_from_slice(&z.finish().unwrap());
    }
    let sum = sha1_checked::Sha1::try_digest(&out);
    out.extend_from_slice(sum.hash().as_slice());
    out
}

fn tree_bytes(items: &[(&str, &str, ObjectId)]) -> Vec<u8> {
    let mut t = Vec::new();
    for (mode, name, id) in items {
        t.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        t.extend_from_slice(&id.0);
    }
    t
}

fn commit_bytes(tree: &ObjectId) -> Vec<u8> {
    format!("tree {tree}\nauthor a <a> 0 +0000\ncommitter a <a> 0 +0000\n\nm\n").into_bytes()
}

#[test]
fn a_ref_delta_before_its_base_and_an_ofs_chain_resolve() {
    let blob = b"hello world".to_vec();
    let blob_id = pack::object_id(Kind::Blob, &blob).unwrap();
    let delta = insert_delta(blob.len(), b"variable {}");
    let changed_id = pack::object_id(Kind::Blob, b"variable {}").unwrap();
    let again = insert_delta(11, b"third");
    let third_id = pack::object_id(Kind::Blob, b"third").unwrap();
    let tree = tree_bytes(&[
        ("100644", "a.tf", blob_id),
        ("100755", "b.tf", changed_id),
        ("100644", "c.tf", third_id),
    ]);
    let tree_id = pack::object_id(Kind::Tree, &tree).unwrap();
    let commit = commit_bytes(&tree_id);
    let commit_id = pack::object_id(Kind::Commit, &commit).unwrap();
    let bytes = make_pack(&[
        Raw::Ref(blob_id, &delta),
        Raw::Whole(3, &blob),
        Raw::Ofs(2, &again),
        Raw::Whole(2, &tree),
        Raw::Whole(1, &commit),
    ]);
    let pack = read_pack(&bytes).unwrap();
    assert_eq!(pack.len(), 5);
    let files = walk(&pack, &commit_id, None).unwrap();
    let got: Vec<(&str, bool, &[u8])> = files
        .iter()
        .map(|f| (f.path.as_str(), f.executable, f.bytes.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            ("a.tf", false, &b"hello world"[..]),
            ("b.tf", true, b"variable {}"),
            ("c.tf", false, b"third"),
        ]
    );
}

#[test]
fn bad_deltas_and_sizes_are_refused() {
    let blob = b"hello".to_vec();
    let id = pack::object_id(Kind::Blob, &blob).unwrap();
    // A delta for a base of another size.
    let wrong_base = insert_delta(4, b"x");
    assert!(matches!(
        read_pack(&make_pack(&[
            Raw::Whole(3, &blob),
            Raw::Ref(id, &wrong_base)
        ])),
        Err(PackError::Corrupt { .. })
    ));
    // Copying outside the base.
    let mut outside = Vec::new();
    varint(5, &mut outside);
    varint(4, &mut outside);
    outside.extend_from_slice(&[0x91, 3, 4]);
    assert!(matches!(
        read_pack(&make_pack(&[Raw::Whole(3, &blob), Raw::Ref(id, &outside)])),
        Err(PackError::Corrupt { .. })
    ));
    // More than the result size it declares.
    let mut long = insert_delta(5, b"ab");
    long[1] = 1;
    assert!(read_pack(&make_pack(&[Raw::Whole(3, &blob), Raw::Ref(id, &long)])).is_err());
    // The reserved opcode.
    let mut zero = insert_delta(5, b"");
    zero.push(0);
    assert!(read_pack(&make_pack(&[Raw::Whole(3, &blob), Raw::Ref(id, &zero)])).is_err());
    // A base that is not in the pack (a thin pack).
    let missing = ObjectId([9; 20]);
    assert_eq!(
        read_pack(&make_pack(&[Raw::Ref(missing, &insert_delta(1, b"x"))])).unwrap_err(),
        PackError::MissingBase(missing.to_hex())
    );
    // An object type that does not exist.
    assert!(read_pack(&make_pack(&[Raw::Whole(5, b"x")])).is_err());
    // A header claiming more objects than it holds, or too many.
    let mut short = make_pack(&[Raw::Whole(3, b"x")]);
    short[11] = 2;
    let body = short.len() - 20;
    let sum = sha1_checked::Sha1::try_digest(&short[..body]);
    short[body..].copy_from_slice(sum.hash().as_slice());
    assert!(read_pack(&short).is_err());
    let mut many = make_pack(&[]);
    many[8..12].copy_from_slice(&(pack::MAX_OBJECTS + 1).to_be_bytes());
    let sum = sha1_checked::Sha1::try_digest(&many[..12]);
    many[12..].copy_from_slice(sum.hash().as_slice());
    assert_eq!(read_pack(&many).unwrap_err(), PackError::TooManyObjects);
}

#[test]
fn a_delta_chain_past_the_bound_is_refused() {
    let delta = insert_delta(1, b"x");
    let mut objects = vec![Raw::Whole(3, &b"x"[..])];
    for _ in 0..pack::MAX_DELTA_DEPTH {
        objects.push(Raw::Ofs(1, &delta));
    }
    read_pack(&make_pack(&objects)).unwrap();
    objects.push(Raw::Ofs(1, &delta));
    assert_eq!(
        read_pack(&make_pack(&objects)).unwrap_err(),
        PackError::TooDeep
    );
}

#[test]
fn bad_trees_are_refused() {
    let blob_id = pack::object_id(Kind::Blob, b"").unwrap();
    for (tree, why) in [
        (tree_bytes(&[("100600", "a", blob_id)]), "mode"),
        (tree_bytes(&[("100644", "..", blob_id)]), "dotdot"),
        (tree_bytes(&[("100644", "a/b", blob_id)]), "slash"),
        (
            tree_bytes(&[("100644", "a", ObjectId([3; 20]))]),
            "missing blob",
        ),
        (b"100644 a\0short".to_vec(), "cut"),
        (b"100644a".to_vec(), "no name"),
    ] {
        let tree_id = pack::object_id(Kind::Tree, &tree).unwrap();
        let commit = commit_bytes(&tree_id);
        let commit_id = pack::object_id(Kind::Commit, &commit).unwrap();
        let pack = read_pack(&make_pack(&[
            Raw::Whole(3, b""),
            Raw::Whole(2, &tree),
            Raw::Whole(1, &commit),
        ]))
        .unwrap();
        assert!(walk(&pack, &commit_id, None).is_err(), "{why}");
    }
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

    #[test]
    fn a_walk_never_panics_on_any_tree(tree in proptest::collection::vec(any::<u8>(), 0..256)) {
        let tree_id = pack::object_id(Kind::Tree, &tree).unwrap();
        let commit = commit_bytes(&tree_id);
        let commit_id = pack::object_id(Kind::Commit, &commit).unwrap();
        let pack = read_pack(&make_pack(&[Raw::Whole(2, &tree), Raw::Whole(1, &commit)])).unwrap();
        let _ = walk(&pack, &commit_id, None);
        let _ = walk(&pack, &commit_id, Some("a/b"));
    }
}
