//! The UI's usage view in a real browser (issue 38): a provider version
//! downloaded by two identities on `tfreg serve --private`; a reader's page
//! shows the counts (in all, the last 30 days' bars, per platform) and no
//! consumer, not even in its HTML; a namespace admin's page shows who
//! downloaded it, with first and last seen. Screenshots under
//! `$CARGO_TARGET_TMPDIR/ui-screenshots` (the README's is
//! docs/screenshots/usage-desktop.png).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::browser::Browser;
use crate::support::fixtures::*;
use crate::support::*;

fn shots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots")
}

#[test]
fn a_reader_sees_the_counts_and_an_admin_the_consumers_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--private"]);
    let admin = server.token("admin", None);
    publish_fixture(&server, &admin, tmp.path());
    let reader = server.token("read", None);
    let ci = server.token("publish", None);
    // Three downloads by the reader (two platforms), two by the CI token.
    let download = |platform: &str| format!("/v1/providers/{NS}/null/2.1.2/download/{platform}");
    for (token, platform) in [
        (&reader, "linux/amd64"),
        (&reader, "linux/amd64"),
        (&reader, "darwin/arm64"),
        (&ci, "linux/amd64"),
        (&ci, "linux/amd64"),
    ] {
        let resp = server.get_as(token, &download(platform));
        assert_eq!(resp.status(), 200, "{platform}");
    }
    // serve writes its tally every 5 s: wait for the admin API to show it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let api = format!("/v1/admin/usage/providers/{NS}/null?version=2.1.2");
    loop {
        let report: serde_json::Value = server.get_as(&admin, &api).json().unwrap();
        if report["versions"][0]["downloads"] == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "not counted: {report}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let page = format!("/ui/providers/{NS}/null/2.1.2");
    let shots = shots();

    // A reader: the counts, no consumer, not even in the HTML.
    let b = Browser::open(&server, 1280, 900, "light");
    b.goto(&server.url("/ui/sign-in"));
    b.type_into("#token", &reader);
    b.click_to_page("#sign-in");
    b.goto(&server.url(&page));
    assert_eq!(b.text("#downloads h2"), "Downloads");
    assert_eq!(b.text("#downloads-total"), "5");
    assert_eq!(b.text("#downloads-recent"), "5");
    let platforms = b.js("return [...document.querySelectorAll('table.download-platforms tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' '))");
    assert_eq!(
        platforms,
        serde_json::json!(["linux_amd64 4", "darwin_arm64 1"]),
        "per platform, most first"
    );
    let bars = b.js("return [...document.querySelectorAll('#downloads svg.bars rect')].map(r => +r.getAttribute('height'))");
    let bars: Vec<u64> = serde_json::from_value(bars).unwrap();
    assert_eq!(bars.len(), 30, "a bar per day");
    assert!(bars[29] > 0, "today's bar is drawn: {bars:?}");
    assert!(bars[..29].iter().all(|h| *h == 0), "{bars:?}");
    assert!(
        b.texts("#consumers-title").is_empty(),
        "no consumers for a reader"
    );
    let html = b.js("return document.documentElement.outerHTML");
    let html = html.as_str().unwrap();
    assert!(
        !html.contains("test-publish"),
        "a consumer's name in a reader's page"
    );
    assert!(
        !html.contains("test-read ("),
        "a consumer's name in a reader's page"
    );
    b.click_to_page("#sign-out");

    // A namespace admin: who downloaded it, and when.
    b.type_into("#token", &admin);
    b.click_to_page("#sign-in");
    b.goto(&server.url(&page));
    assert_eq!(b.text("#consumers-title"), "Consumers admins only");
    let rows: Vec<String> = serde_json::from_value(b.js("return [...document.querySelectorAll('table.consumers tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' '))")).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let today = b.text("#downloads p.meta");
    assert!(today.contains("last on 20"), "{today}");
    let by_name = |name: &str| {
        rows.iter()
            .find(|r| r.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not in {rows:?}"))
            .clone()
    };
    assert!(by_name("test-read (").contains(" token 3 "), "{rows:?}");
    assert!(by_name("test-publish (").contains(" token 2 "), "{rows:?}");
    b.js("document.getElementById('downloads').scrollIntoView(); return null");
    let shot = b.screenshot(&shots, "usage-desktop");
    eprintln!("FIGURE ui usage screenshot: {}", shot.display());
}
