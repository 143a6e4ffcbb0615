//! Found from outside (issue 35): a 5 MB form body got a connection reset
//! instead of its 413. The server answers an oversize body at once (before
//! reading it: a client that sent `Expect: 100-continue` sends nothing
//! more) and reads what keeps coming after the answer, to a bound, instead
//! of closing on unread data (which makes the kernel reset the connection
//! and lose the answer). Real clients over HTTPS: curl, and reqwest over
//! HTTP/1.1 and HTTP/2.

use std::process::Command;

use crate::support::Server;

const FIVE_MB: usize = 5 * 1024 * 1024;

/// A reqwest client trusting the server's CA, over HTTP/1.1 only or not.
fn client(server: &Server, http1_only: bool) -> reqwest::blocking::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&server.ca).unwrap()).unwrap();
    let builder = reqwest::blocking::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none());
    let builder = if http1_only {
        builder.http1_only()
    } else {
        builder
    };
    builder.build().unwrap()
}

/// curl POSTing `file` as a form to `url`: (status, body).
fn curl(server: &Server, url: &str, file: &std::path::Path, expect: bool) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--http1.1", "--cacert"])
        .arg(&server.ca)
        .args([
            "-H",
            "Content-Type: application/x-www-form-urlencoded",
            "-w",
            "\n%{http_code}",
        ]);
    if !expect {
        // No `Expect: 100-continue`: curl sends the whole body at once.
        cmd.args(["-H", "Expect:"]);
    }
    let out = cmd
        .arg("--data-binary")
        .arg(format!("@{}", file.display()))
        .arg(url)
        .output()
        .expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl (expect: {expect}): {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, status) = stdout.rsplit_once('\n').unwrap();
    (status.trim().parse().unwrap(), body.to_string())
}

#[test]
fn a_5_mb_form_body_gets_its_413_not_a_reset() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let form = format!("token={}", "a".repeat(FIVE_MB));
    let file = tmp.path().join("form");
    std::fs::write(&file, &form).unwrap();
    let sign_in = server.url("/ui/sign-in");
    // The UI's sign-in form: its own error page, with the status.
    for expect in [false, true] {
        for attempt in 0..3 {
            let (status, page) = curl(&server, &sign_in, &file, expect);
            assert_eq!(
                status, 413,
                "curl attempt {attempt} (expect: {expect}): {page}"
            );
            assert!(
                page.contains("request body larger than 4096 bytes"),
                "{page}"
            );
            assert!(page.contains("<html"), "a page: {page}");
        }
    }
    for http1_only in [true, false] {
        let http = client(&server, http1_only);
        for attempt in 0..3 {
            let resp = http
                .post(&sign_in)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form.clone())
                .send()
                .unwrap_or_else(|e| {
                    panic!("reqwest (HTTP/1.1 only: {http1_only}) attempt {attempt}: {e:?}")
                });
            assert_eq!(resp.status(), 413);
            assert!(
                resp.text()
                    .unwrap()
                    .contains("request body larger than 4096 bytes")
            );
        }
    }
    // An API route taking a body: the JSON errors body.
    let token = server.token("publish", None);
    for http1_only in [true, false] {
        let resp = client(&server, http1_only)
            .post(server.url("/v1/publish/modules/hard/big/null/1.0.0/begin"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(vec![b' '; FIVE_MB])
            .send()
            .unwrap_or_else(|e| panic!("reqwest (HTTP/1.1 only: {http1_only}): {e:?}"));
        assert_eq!(resp.status(), 413);
        assert_eq!(
            resp.text().unwrap(),
            r#"{"errors":["request body larger than 1048576 bytes"]}"#
        );
    }
}
