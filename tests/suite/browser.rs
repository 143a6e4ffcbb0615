//! The web UI in a real browser: headless Chromium from Debian, driven over
//! WebDriver, against `tfreg serve --private` and against the Lambda
//! functions on the emulators, over real HTTPS. A person's flows: signed out,
//! every page leads to sign-in; sign in with a token; search; open a module
//! and read its inputs; copy its usage snippet (and `terraform init` with
//! it); open a provider and see its platforms; sign out and be refused. A
//! hostile README runs nothing. Screenshots of the main pages, desktop and
//! phone width, light and dark, are saved under
//! `$CARGO_TARGET_TMPDIR/ui-screenshots` (docs/screenshots/ has the latest).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::browser::Browser;
use crate::support::fixtures::*;
use crate::support::*;

/// A README that tries everything that could run in a page.
const HOSTILE_README: &str = r#"# VPC

Creates a VPC with public and private subnets.

<script>window.__xss = "script"</script>
<img src="x" onerror="window.__xss = 'img'">
<iframe src="https://example.com"></iframe>
<a href="javascript:window.__xss='link'" id="evil-link">click me</a>
<div onmouseover="window.__xss = 'hover'" id="evil-div">hover me</div>

[markdown link](javascript:window.__xss='md')

| input | what |
|---|---|
| name | the VPC's name |
"#;

fn module_tree(dir: &Path, host: &str) {
    let variables = r#"
variable "name" {
  description = "Name given to every resource"
  type        = string
}

variable "cidr" {
  description = "The VPC's IPv4 block"
  type        = string
  default     = "10.0.0.0/16"
  validation {
    condition     = can(cidrhost(var.cidr, 0))
    error_message = "Must be a CIDR block."
  }
}

variable "subnets" {
  type = map(object({
    cidr = string
    public = optional(bool, false)
  }))
  default = {}
}

variable "token" {
  type      = string
  sensitive = true
  default   = null
}
"#;
    let main = format!(
        r#"terraform {{
  required_version = ">= 1.0"
  required_providers {{
    null = {{ source = "{host}/{NS}/null", version = "~> 2.1" }}
  }}
}}

resource "null_resource" "vpc" {{
  triggers = {{ name = var.name }}
}}

output "id" {{
  description = "The VPC's id"
  value       = null_resource.vpc.id
}}
"#
    );
    write_tree(
        dir,
        &[
            ("README.md", HOSTILE_README),
            ("variables.tf", variables),
            ("main.tf", &main),
            (
                "modules/endpoints/main.tf",
                "variable \"vpc_id\" {}\noutput \"ids\" { value = [] }\n",
            ),
            (
                "examples/simple/main.tf",
                "module \"vpc\" {\n  source = \"../../\"\n  name   = \"x\"\n}\n",
            ),
        ],
    );
}

fn shots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots")
}

/// Sign in through the form with `token`, from wherever the browser is.
fn sign_in(b: &Browser, server: &Server, token: &str) {
    if !b.path().starts_with("/ui/sign-in") {
        b.goto(&server.url("/ui/sign-in"));
    }
    b.type_into("#token", token);
    b.click_to_page("#sign-in");
}

/// Wait (a few seconds at most) until `script` returns something not null.
fn wait_for(b: &Browser, script: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = b.js(script);
        if !v.is_null() || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The page has nothing wider than the window (reads on a phone).
fn fits_width(b: &Browser) -> bool {
    b.js("return document.documentElement.scrollWidth <= window.innerWidth")
        .as_bool()
        .unwrap()
}

/// A registry with the fixture's provider and modules and the documented `vpc` module.
fn published(server: &Server, tmp: &Path) -> Published {
    let admin = server.token("admin", None);
    let fixture = publish_fixture(server, &admin, tmp);
    let src = tmp.join("vpc");
    module_tree(&src, &server.host);
    ok(
        server.publish_module(&admin, &src, &format!("{NS}/vpc/null"), "1.4.2"),
        "publish the documented module",
    );
    fixture
}

#[test]
fn a_person_uses_the_ui_in_chromium_on_tfreg_serve() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--private"]);
    let host = server.host.clone();
    let fixture = published(&server, tmp.path());
    let reader = server.token("read", None);
    let shots = shots();

    let b = Browser::open(&server, 1280, 900, "light");
    // Signed out, every page leads to sign-in, and back after it.
    b.goto(&server.url("/"));
    assert!(b.path().starts_with("/ui/sign-in?next="), "{}", b.path());
    b.screenshot(&shots, "sign-in-desktop");
    sign_in(&b, &server, "tfreg_not_a_real_token");
    assert!(b.text("#sign-in-error").contains("not valid"));
    b.type_into("#token", &reader);
    b.click_to_page("#sign-in");
    assert_eq!(b.path(), "/ui/home");
    let listed = b.texts("li.row a.address");
    for address in [
        format!("{NS}/vpc/null"),
        format!("{NS}/greeting/null"),
        format!("{NS}/null"),
    ] {
        assert!(listed.contains(&address), "{address} not in {listed:?}");
    }
    b.screenshot(&shots, "home-desktop");

    // Search from the header.
    b.type_into("header input[name=q]", "subnets");
    b.click_to_page("header form.search button");
    assert!(b.path().starts_with("/ui/search?q=subnets"), "{}", b.path());
    assert_eq!(b.texts("li.row a.address"), [format!("{NS}/vpc/null")]);
    b.screenshot(&shots, "search-desktop");

    // A module's page: its inputs, read from its .tf files at publish.
    b.click_to_page("li.row a.address");
    assert_eq!(b.path(), format!("/ui/modules/{NS}/vpc/null"));
    let names = b.texts("section.interface table.inputs tbody tr td:first-child code");
    assert_eq!(names, ["cidr", "name", "subnets", "token"]);
    assert!(b.text("tr[data-input=name]").contains("required"));
    assert_eq!(b.text("tr[data-input=name] code.type"), "string");
    assert!(
        b.text("tr[data-input=subnets] code.type")
            .contains("optional(bool, false)")
    );
    assert_eq!(
        b.text("tr[data-input=cidr] code.default"),
        "\"10.0.0.0/16\""
    );
    assert!(
        b.text("tr[data-input=cidr]")
            .contains("Must be a CIDR block.")
    );
    assert!(b.text("tr[data-input=token]").contains("sensitive"));
    assert!(b.text("#main").contains("Submodule modules/endpoints"));
    // OpenTofu's `oci://` source of the version shown (issue 40).
    assert!(
        b.text("#oci-source").contains(&format!(
            "source = \"oci://{host}/modules/{NS}/vpc/null?tag=1.4.2\""
        )),
        "{}",
        b.text("#oci-source")
    );
    b.screenshot(&shots, "module-desktop");

    // The hostile README: its text is there, nothing of it ran or can run.
    assert!(
        b.text(".readme")
            .contains("Creates a VPC with public and private subnets.")
    );
    b.click("#readme a");
    b.run(async {
        // Hovering is what the removed handler listened to.
        if let Ok(e) = b.client.find(fantoccini::Locator::Css(".readme div")).await {
            let _ = e.click().await;
        }
    });
    assert_eq!(
        b.js("return typeof window.__xss"),
        "undefined",
        "a script of the README ran"
    );
    assert_eq!(
        b.js("return document.querySelectorAll('.readme script, .readme iframe, .readme img, .readme [onerror], .readme [onmouseover], .readme a[href^=javascript]').length"),
        0
    );

    // Copy the usage snippet with the page's own button (its script loaded
    // under the CSP), and init a configuration made of exactly that text.
    assert_eq!(
        b.js("return document.querySelector('button[data-copy=usage]').hidden"),
        false,
        "tfreg.js shows the copy buttons"
    );
    b.js("window.__copied = null; navigator.clipboard.writeText = (t) => { window.__copied = t; return Promise.resolve(); }; return 0");
    b.click("button[data-copy=usage]");
    let snippet = wait_for(&b, "return window.__copied");
    let snippet = snippet
        .as_str()
        .expect("the button copied text")
        .to_string();
    assert!(
        snippet.contains(&format!("source  = \"{host}/{NS}/vpc/null\"")),
        "{snippet}"
    );
    assert!(snippet.contains("version = \"~> 1.4\""), "{snippet}");
    assert!(snippet.contains("# name = string"), "{snippet}");
    let work = tmp.path().join("work-snippet");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("main.tf"), &snippet).unwrap();
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        &server,
        &credentials(&host, &reader),
    );
    let init = ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init with the copied snippet",
    );
    assert!(
        init.contains("Terraform has been successfully initialized"),
        "{init}"
    );
    assert!(
        std::fs::read_to_string(work.join(".terraform/modules/modules.json"))
            .unwrap()
            .contains("\"Version\":\"1.4.2\""),
        "the snippet's constraint chose the published version"
    );

    // A provider's page: platforms, key, lock file hashes.
    b.goto(&server.url(&format!("/ui/providers/{NS}/null")));
    assert_eq!(b.text("h1 .version"), "3.0.0", "the latest");
    b.goto(&server.url(&format!("/ui/providers/{NS}/null/2.1.2")));
    let platforms = b.texts("table.platforms tbody tr");
    assert_eq!(platforms.len(), 2, "{platforms:?}");
    assert!(
        platforms.iter().any(|p| p.starts_with("darwin arm64")),
        "{platforms:?}"
    );
    assert!(
        platforms.iter().any(|p| p.starts_with("linux amd64")),
        "{platforms:?}"
    );
    assert_eq!(b.text("#key-id").len(), 16);
    // OpenTofu's `oci_mirror` block for it (issue 40).
    let oci = b.text("#oci-mirror");
    assert!(
        oci.contains(&format!(
            "repository_template = \"{host}/providers/${{namespace}}/${{type}}\""
        )) && oci.contains(&format!("include             = [\"{host}/{NS}/null\"]")),
        "{oci}"
    );
    // Every platform's hashes, ready for a lock file (the fixture's two
    // zips are the same bytes, so each hash is listed once).
    let lock = b.text("#lock");
    for zip in &fixture.zips_2_1_2 {
        assert!(lock.contains(&format!("\"{}\"", zh(zip))), "{lock}");
        assert!(lock.contains(&format!("\"{}\"", h1(zip))), "{lock}");
    }
    b.screenshot(&shots, "provider-desktop");

    // A clear 404.
    b.goto(&server.url(&format!("/ui/modules/{NS}/nope/null")));
    assert_eq!(b.text("#error-heading"), "Not found");
    b.screenshot(&shots, "not-found-desktop");

    // Sign out, and be refused.
    b.click_to_page("#sign-out");
    assert!(b.path().starts_with("/ui/sign-in"), "{}", b.path());
    assert!(b.text("#main").contains("Signed out"));
    b.goto(&server.url(&format!("/ui/modules/{NS}/vpc/null")));
    assert!(b.path().starts_with("/ui/sign-in?next="), "{}", b.path());
    let status = server
        .http
        .get(server.url(&format!("/ui/modules/{NS}/vpc/null")))
        .send()
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 303, "no session, no page");
    drop(b);

    // On a phone, and in dark mode: nothing wider than the screen.
    for (scheme, width, height, suffix) in [
        ("light", 390, 844, "phone"),
        ("dark", 390, 844, "phone-dark"),
        ("dark", 1280, 900, "desktop-dark"),
    ] {
        let b = Browser::open(&server, width, height, scheme);
        sign_in(&b, &server, &reader);
        for (page, name) in [
            ("/ui/home".to_string(), "home"),
            (format!("/ui/modules/{NS}/vpc/null"), "module"),
            (format!("/ui/providers/{NS}/null/2.1.2"), "provider"),
        ] {
            b.goto(&server.url(&page));
            assert!(fits_width(&b), "{page} is wider than {width} px");
            b.screenshot(&shots, &format!("{name}-{suffix}"));
        }
        let background = b.js("return getComputedStyle(document.body).backgroundColor");
        let dark = background == "rgb(13, 17, 23)";
        assert_eq!(
            dark,
            scheme == "dark",
            "{scheme}: body background {background}"
        );
    }
    eprintln!("FIGURE ui screenshots: {}", shots.display());
}

/// On the Lambda functions under `cargo lambda watch`. There the browser
/// presents its token as a header: `lambda_http` hands API Gateway a
/// response's `Set-Cookie` in the payload's `cookies` field, which API
/// Gateway honours and `cargo lambda watch` drops (cargo-lambda PR #252, open),
/// so no session cookie can reach a browser here. The sign-in itself is
/// checked: the function answers it with a session.
#[test]
fn a_person_uses_the_ui_in_chromium_on_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_lambda(&tmp.path().join("lambda"));
    published(&server, tmp.path());
    let reader = server.token("read", Some(NS));
    let b = Browser::open(&server, 1280, 900, "light");
    b.goto(&server.url("/ui/home"));
    assert!(b.path().starts_with("/ui/sign-in?next="), "{}", b.path());
    sign_in(&b, &server, "tfreg_not_a_real_token");
    assert!(b.text("#sign-in-error").contains("not valid"));

    b.send_token(&reader);
    b.goto(&server.url("/ui/home"));
    assert_eq!(b.path(), "/ui/home");
    b.type_into("header input[name=q]", "vpc");
    b.click_to_page("header form.search button");
    assert_eq!(b.texts("li.row a.address"), [format!("{NS}/vpc/null")]);
    b.click_to_page("li.row a.address");
    let names = b.texts("section.interface table.inputs tbody tr td:first-child code");
    assert_eq!(names, ["cidr", "name", "subnets", "token"]);
    assert_eq!(b.js("return typeof window.__xss"), "undefined");
    b.goto(&server.url(&format!("/ui/providers/{NS}/null/2.1.2")));
    assert_eq!(b.texts("table.platforms tbody tr").len(), 2);
    // The static files come from the function, cacheable for a year.
    let css = b.js("return document.querySelector('link[rel=stylesheet]').href");
    let css = css.as_str().unwrap().to_string();
    let resp = server.http.get(&css).send().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        resp.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );

    // The function opens a session for a valid token (its Set-Cookie is what
    // lambda_http moves to API Gateway's `cookies`).
    let form = format!("token={reader}&next=%2Fui%2Fhome");
    let resp = server
        .http
        .post(server.url("/ui/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 303, "a valid token signs in");
    assert_eq!(resp.headers()["location"], "/ui/home");
}

/// The cache's page (issue 22) in Chromium, on `tfreg serve --private`
/// caching a second `tfreg serve` (the origin of `cache_mirror`): filled
/// for real first (`tfreg cache warm` with a fill token: a provider
/// version's linux archive and a module, fetched, verified and stored), so
/// the page reads what the cache wrote. A read token is offered no link and
/// refused the page (403; no session: sign in first); an admin token
/// follows the header's link and sees the upstream, the provider version
/// with its signer and stored platform, and the module version stored.
#[test]
fn an_admin_sees_what_the_cache_holds_in_chromium() {
    use crate::cache_mirror::{Origin, Rig};
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.141", "origin-ui.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let server = &rig.server;
    let host = origin.host.clone();
    let warmed = ok(
        server.tfreg(
            &rig.fill,
            &[
                "cache",
                "warm",
                "--provider",
                &format!("{host}/hashicorp/null@1.0.0"),
                "--platform",
                "linux_amd64",
                "--module",
                &format!("{host}/hashicorp/greeting/null@1.0.0"),
            ],
        ),
        "tfreg cache warm",
    );
    assert!(
        warmed.contains(&format!("warmed {host}/hashicorp/null 1.0.0 linux_amd64")),
        "{warmed}"
    );
    let reader = server.token("read", None);
    let shots = shots();

    // Without a session or with a token that may only read: no page.
    let no_session = server.http.get(server.url("/ui/cache")).send().unwrap();
    assert_eq!(no_session.status().as_u16(), 303);
    assert_eq!(
        no_session.headers()["location"],
        "/ui/sign-in?next=%2Fui%2Fcache"
    );
    let as_reader = server
        .http
        .get(server.url("/ui/cache"))
        .bearer_auth(&reader)
        .send()
        .unwrap();
    assert_eq!(as_reader.status().as_u16(), 403);
    let body = as_reader.text().unwrap();
    assert!(!body.contains("hashicorp/null"), "{body}");

    let b = Browser::open(server, 1280, 900, "light");
    b.goto(&server.url("/ui/cache"));
    assert_eq!(b.path(), "/ui/sign-in?next=%2Fui%2Fcache");
    b.type_into("#token", &reader);
    b.click_to_page("#sign-in");
    assert_eq!(b.path(), "/ui/cache", "back where it was going");
    assert_eq!(b.text("#error-heading"), "Not allowed");
    assert!(b.text("#main").contains("HTTP 403"));
    assert!(b.texts("section.upstream").is_empty());
    b.goto(&server.url("/ui/home"));
    assert!(b.texts("#nav-cache").is_empty(), "no link for a reader");
    b.click_to_page("#sign-out");

    // An admin: from the home page's header to the page.
    sign_in(&b, server, &rig.admin);
    assert_eq!(b.path(), "/ui/home");
    b.click_to_page("#nav-cache");
    assert_eq!(b.path(), "/ui/cache");
    let upstream = format!("section.upstream[data-host='{host}']");
    assert_eq!(b.text(&format!("{upstream} h2 code.host")), host);
    assert_eq!(b.text(&format!("{upstream} h2 .mark.mode")), "online");
    assert!(
        b.text(&format!("{upstream} p.serves"))
            .contains("Serves providers and modules")
    );
    let provider = format!("{upstream} article[data-provider='hashicorp/null']");
    assert_eq!(
        b.text(&format!("{provider} h4")),
        format!("{host}/hashicorp/null")
    );
    assert!(
        b.text(&format!("{provider} p.meta"))
            .starts_with("List fetched 20")
    );
    let version = format!("{provider} tr[data-version='1.0.0']");
    assert_eq!(
        b.texts(&format!("{version} code.platform")),
        ["linux_amd64"],
        "the platform warmed, and only it"
    );
    assert_eq!(b.text(&format!("{version} code.key-id")).len(), 16);
    let module = format!("{upstream} article[data-module='hashicorp/greeting/null']");
    let module_version = format!("{module} tr[data-version='1.0.0']");
    assert_eq!(b.text(&format!("{module_version} td.state")), "stored");
    assert!(
        b.text(&format!("{module_version} code.source"))
            .starts_with("https://")
    );
    b.screenshot(&shots, "cache-desktop");
    drop(b);

    // On a phone: nothing wider than the screen.
    let b = Browser::open(server, 390, 844, "dark");
    sign_in(&b, server, &rig.admin);
    b.goto(&server.url("/ui/cache"));
    assert_eq!(
        b.texts(&format!("{version} code.platform")),
        ["linux_amd64"]
    );
    assert!(fits_width(&b), "/ui/cache is wider than 390 px");
    b.screenshot(&shots, "cache-phone-dark");
}
