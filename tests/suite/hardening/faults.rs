//! The embedded store and `tfreg serve` when things break: a database made
//! read-only or locked by another process, a full disk, a killed client or
//! server, a stop during start-up, and what is on disk for others to read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{connect, declaring, declaring_archive, publish_module_bytes, publish_step, send};
use crate::support::log::requests;
use crate::support::tools::{Tools, tfreg_bin};
use crate::support::{Server, Terraform, ok, write_tree};

fn module(marker: &str) -> Vec<u8> {
    tfreg_testkit::module_archive(&[("main.tf", &format!("# {marker}\n"))])
}

/// `tfreg serve` on `data` with `address` 1.0.0 published; the server and a
/// publish token.
fn serving_a_module(data: &Path, address: &str) -> (Server, String) {
    let server = Server::start(data, &[]);
    let token = server.token("publish", None);
    let (status, body) = publish_module_bytes(&server, &token, address, "1.0.0", &module(address));
    assert_eq!(status, 201, "{body}");
    (server, token)
}

/// `chattr +i` on a file (immutable, even for root), undone on drop.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Immutable {
        ok(
            Command::new("chattr").arg("+i").arg(path).output().unwrap(),
            "chattr +i",
        );
        Immutable(path.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// A 503 that asks to retry and names its request id, without the cause.
fn assert_unavailable(status: u16, body: &str, retry_after: Option<&str>) {
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after, Some("5"), "503 carries Retry-After");
    assert!(body.contains("request id"), "{body}");
    for leak in ["readonly", "read-only", "os error", "sqlite", "No space"] {
        assert!(!body.contains(leak), "the 503 body leaks {leak:?}: {body}");
    }
}

#[test]
fn a_read_only_database_gives_503_for_writes_and_recovers_without_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let db = data.join("registry.db");
    let (server, token) = serving_a_module(&data, "ro/m/null");

    let frozen = Immutable::set(&db);
    let versions = server.get("/v1/modules/ro/m/null/versions");
    assert_eq!(versions.status(), 200, "reads go on while writes cannot");
    let begin = begin_ro(&server, &token, "2.0.0");
    let retry = begin
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let id = begin.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_unavailable(
        begin.status().as_u16(),
        &begin.text().unwrap(),
        retry.as_deref(),
    );
    assert!(
        alive(server.pid()),
        "the server survives a read-only database"
    );
    let log = server.server_log();
    let line = log
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("no log line for {id}:\n{log}"));
    assert!(line.contains("error="), "the log keeps the cause: {line}");

    drop(frozen);
    let (status, body) = publish_module_bytes(&server, &token, "ro/m/null", "2.0.0", &module("b"));
    assert_eq!(status, 201, "writable again, no restart: {body}");

    // Started on a read-only database: serves reads, refuses writes, recovers.
    drop(server);
    let frozen = Immutable::set(&db);
    let server = Server::start(&data, &[]);
    assert_eq!(server.get("/v1/modules/ro/m/null/versions").status(), 200);
    let (status, _) = publish_module_bytes_status(&server, &token, "3.0.0");
    assert_eq!(status, 503);
    drop(frozen);
    let (status, body) = publish_module_bytes(&server, &token, "ro/m/null", "3.0.0", &module("c"));
    assert_eq!(status, 201, "{body}");
}

/// A begin for `ro/m/null` at `version` (it writes the publish's record).
fn begin_ro(server: &Server, token: &str, version: &str) -> reqwest::blocking::Response {
    let request = declaring("m.tar.gz", 10, "0".repeat(64));
    publish_step(server, token, "ro/m/null", version, "begin", &request)
}

/// [`begin_ro`]'s status and body.
fn publish_module_bytes_status(server: &Server, token: &str, version: &str) -> (u16, String) {
    let resp = begin_ro(server, token, version);
    (resp.status().as_u16(), resp.text().unwrap())
}

/// Another process holding an exclusive lock on the database for `secs`.
fn lock_database(db: &Path, secs: f64) -> Child {
    let python = Tools::get().path("TFREG_VENV_BIN").join("python");
    Command::new(python)
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             time.sleep(float(sys.argv[2]))\n\
             c.execute('COMMIT')",
        ])
        .arg(db)
        .arg(secs.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_locked(child: &mut Child) {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
}

#[test]
fn terraform_init_started_while_the_database_is_locked_finishes_once_it_is_free() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (server, _) = serving_a_module(&data, "locked/m/null");
    let work = tmp.path().join("work");
    write_tree(
        &work,
        &[(
            "main.tf",
            &format!(
                "module \"m\" {{\n  source  = \"{}/locked/m/null\"\n  version = \"1.0.0\"\n}}\n",
                server.host
            ),
        )],
    );
    // Locked until Terraform has had its 503 (the server waits 3 s for a
    // lock, then answers 503), and released then: its retry must succeed.
    let mut locker = lock_database(&data.join("registry.db"), 120.0);
    wait_locked(&mut locker);
    let started = Instant::now();
    let tf = Terraform::new(tools.path("TFREG_TERRAFORM_NEW"), &server, "");
    let init = std::thread::spawn(move || {
        let out = tf.run(&work, &["init", "-no-color"]);
        (tf, out)
    });
    let versions = |log: &str| -> Vec<u16> {
        requests(log)
            .into_iter()
            .filter(|r| r.path == "/v1/modules/locked/m/null/versions")
            .map(|r| r.status)
            .collect()
    };
    wait_until("Terraform gets a 503 while the database is locked", || {
        versions(&server.server_log()).contains(&503)
    });
    let outage = started.elapsed();
    locker.kill().unwrap();
    locker.wait().unwrap();
    let (_tf, out) = init.join().unwrap();
    ok(out, "terraform init through a locked database");
    eprintln!(
        "FIGURE terraform init through a {:.1} s lock: {:.1} s",
        outage.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let log = server.server_log();
    let versions = versions(&log);
    assert_eq!(
        versions,
        [503, 200],
        "a 503 while locked, then Terraform's retry succeeds:\n{log}"
    );
}

/// A small tmpfs, unmounted (after the server in it stops) on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        ok(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(at)
                .output()
                .unwrap(),
            "mount tmpfs",
        );
        Tmpfs(at.to_path_buf())
    }

    /// Fill it to the last byte (a file of zeros, written until ENOSPC).
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", filler.display()))
            .stderr(Stdio::null())
            .status();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn temp_files(data: &Path) -> Vec<String> {
    std::fs::read_dir(data.join("blobs/.tmp"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_full_disk_gives_503_and_leaves_no_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&tmp.path().join("disk"), "8m");
    let data = disk.0.join("data");
    let server = Server::start(&data, &[]);
    let token = server.token("publish", None);
    let filler = disk.fill();
    // The database cannot grow: begin's record is refused.
    let (status, body) = publish_module_bytes_status(&server, &token, "1.0.0");
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains("No space"), "{body}");
    // Room for the database, not for the archive: the upload fails half-way.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(std::fs::metadata(&filler).unwrap().len() - 256 * 1024)
        .unwrap();
    let mut noise = vec![0u8; 1_500_000];
    rand::fill(&mut noise[..]);
    let archive = tfreg_testkit::module_archive(&[
        ("main.tf", "# big\n"),
        ("data.txt", &hex::encode(&noise)),
    ]);
    assert!(archive.len() > 1 << 20, "{} bytes", archive.len());
    let put = try_publish(&server, &token, "full/m/null", "1.0.0", &archive);
    assert_eq!(put, 503, "an upload that meets a full disk");
    assert!(
        temp_files(&data).is_empty(),
        "left behind: {:?}",
        temp_files(&data)
    );
    assert!(alive(server.pid()));
    // Space again: the same publish goes through.
    std::fs::remove_file(&filler).unwrap();
    let (status, body) = publish_module_bytes(&server, &token, "full/m/null", "1.0.0", &archive);
    assert_eq!(status, 201, "{body}");
    drop(server);
}

/// begin + PUT of one archive; the status of the PUT.
fn try_publish(server: &Server, token: &str, module: &str, version: &str, archive: &[u8]) -> u16 {
    let request = declaring_archive(archive);
    let begin: tfreg_model::protocol::PublishBegin =
        publish_step(server, token, module, version, "begin", &request)
            .json()
            .unwrap();
    let put = server
        .http
        .put(&begin.uploads[0].url)
        .body(archive.to_vec())
        .send()
        .unwrap();
    put.status().as_u16()
}

/// begin for a 10 MB archive and the head of its PUT plus 5 MB of it, over a
/// connection the caller holds (or drops).
fn half_upload(server: &Server, token: &str, version: &str) -> super::Tls {
    let size = 10 << 20;
    let request = declaring("module.tar.gz", size, "0".repeat(64));
    let begin: tfreg_model::protocol::PublishBegin =
        publish_step(server, token, "cut/m/null", version, "begin", &request)
            .json()
            .unwrap();
    let url = url::Url::parse(&begin.uploads[0].url).unwrap();
    let target = format!("{}?{}", url.path(), url.query().unwrap_or(""));
    let mut tls = connect(server);
    send(
        &mut tls,
        format!(
            "PUT {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: {size}\r\n\r\n",
            server.host
        )
        .as_bytes(),
    );
    send(&mut tls, &vec![7u8; 5 << 20]);
    tls
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_client_or_server_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let token = server.token("publish", None);
    // A client that goes away half-way: its partial file goes with it.
    let conn = half_upload(&server, &token, "1.0.0");
    wait_until("the partial upload reaches the disk", || {
        !temp_files(&data).is_empty()
    });
    drop(conn);
    wait_until("a cancelled upload removes its partial file", || {
        temp_files(&data).is_empty()
    });
    // A server killed half-way: the next start sweeps what it left.
    let _conn = half_upload(&server, &token, "2.0.0");
    wait_until("the partial upload reaches the disk", || {
        !temp_files(&data).is_empty()
    });
    ok(
        Command::new("kill")
            .args(["-KILL", &server.pid().to_string()])
            .output()
            .unwrap(),
        "kill -9",
    );
    wait_until("the server is dead", || !alive(server.pid()));
    let left = temp_files(&data);
    assert_eq!(left.len(), 1, "kill -9 leaves the partial file: {left:?}");
    drop(server);
    let server = Server::start(&data, &[]);
    assert!(
        temp_files(&data).is_empty(),
        "swept at start: {:?}",
        temp_files(&data)
    );
    let log = server.server_log();
    assert!(log.contains("swept temporary files"), "{log}");
}

#[test]
fn the_data_directory_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (server, _) = serving_a_module(&data, "private/m/null");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    for entry in walkdir::WalkDir::new(&data).min_depth(1) {
        let entry = entry.unwrap();
        let m = mode(entry.path());
        let want = if entry.file_type().is_dir() {
            0o700
        } else {
            0o600
        };
        assert_eq!(m, want, "{} is {m:o}", entry.path().display());
    }
    drop(server);
    // An older data directory is tightened on open.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        data.join("registry.db"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let _server = Server::start(&data, &[]);
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("registry.db")), 0o600);
}

fn serve(data: &Path, listen: &str) -> Command {
    let mut cmd = Command::new(tfreg_bin());
    cmd.args(["serve", "--data-dir"])
        .arg(data)
        .args(["--listen", listen, "--hostname", "127.0.0.1.nip.io"])
        .env("TFREG_LOG", "info");
    cmd
}

#[test]
fn serve_fails_at_start_in_one_line_and_stops_on_sigterm_at_any_moment() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    // A port in use; a data directory in use.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = tmp.path().join("other");
    let out = serve(&other, &busy.local_addr().unwrap().to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    let out = serve(&data, "127.0.0.1:0").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("another tfreg serve (pid {})", server.pid())),
        "{stderr}"
    );
    drop(server);

    // SIGTERM while start-up waits for a locked database.
    let mut locker = lock_database(&data.join("registry.db"), 20.0);
    wait_locked(&mut locker);
    let log = tmp.path().join("start.log");
    let mut child = serve(&data, "127.0.0.1:0")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Its handlers are installed before it says it is starting.
    wait_until("tfreg serve starts", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("starting")
    });
    std::thread::sleep(Duration::from_millis(200));
    let signalled = Instant::now();
    ok(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .output()
            .unwrap(),
        "kill -TERM",
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "tfreg serve ignored SIGTERM during start-up"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = locker.kill();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status:?}: {text}");
    assert!(text.contains("stopped during start-up"), "{text}");
    eprintln!(
        "FIGURE SIGTERM during start-up: stopped after {:.2} s",
        signalled.elapsed().as_secs_f64()
    );
}
