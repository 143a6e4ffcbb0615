//! Addresses an origin's URLs, redirects or DNS may never make us connect to.

use std::sync::Arc;

use tfreg_cache::origin::{Connect, OriginError, SmallFile};
use tfreg_outbound::{Deployment, ScriptedLookup, UrlRefused};

use crate::support::{HOST, Origin, Pki, Rig, Script, at, client, settings, soon, url};

/// The refused address of an error, or a panic naming what came instead.
fn refused_ip(err: OriginError) -> (std::net::IpAddr, &'static str) {
    match err {
        OriginError::Refused {
            why: UrlRefused::Address(r),
            ..
        } => (r.ip, r.range),
        other => panic!("not refused by address: {other:?}"),
    }
}

/// An IP literal is connected to without any lookup (hyper-util), so the
/// URL check is what stops it: refused, no lookup, no connection.
#[tokio::test]
async fn ip_literal_urls_are_refused_without_a_connect() {
    let rig = Rig::new().await;
    let port = rig.trap.addr.port();
    for (target, ip, range) in [
        (
            format!("https://127.0.0.1:{port}/SHA256SUMS"),
            "127.0.0.1",
            "loopback",
        ),
        (
            format!("https://[::ffff:127.0.0.1]:{port}/x"),
            "::ffff:127.0.0.1",
            "loopback",
        ),
        (
            format!("https://2130706433:{port}/x"),
            "127.0.0.1",
            "loopback",
        ),
        (
            "https://169.254.169.254/latest/meta-data/".into(),
            "169.254.169.254",
            "link-local",
        ),
        (
            "https://[fd00:ec2::254]/latest/api/token".into(),
            "fd00:ec2::254",
            "unique local",
        ),
        ("https://10.0.0.1/x".into(), "10.0.0.1", "private"),
        (
            "https://100.64.0.1/x".into(),
            "100.64.0.1",
            "shared address space (CGNAT)",
        ),
    ] {
        let err = rig
            .client
            .fetch_small(&url(&target), SmallFile::Shasums, soon())
            .await
            .unwrap_err();
        assert_eq!(refused_ip(err), (ip.parse().unwrap(), range), "{target}");
    }
    assert_eq!(rig.trap.accepts(), 0, "a connection reached the trap");
    assert_eq!(rig.client.stats().lookups, 0);
}

/// A name resolving to a special-purpose address is refused by the
/// resolver: the error names the name and the address, nothing connects.
/// The upstream's exception covers its own name only.
#[tokio::test]
async fn a_name_resolving_to_a_refused_address_is_never_connected() {
    let rig = Rig::new().await;
    rig.dns
        .answer("evil.example.test", [rig.trap.addr])
        .answer(
            "imds.example.test",
            ["169.254.169.254:443".parse().unwrap()],
        )
        .answer("files.example.test", [rig.origin.addr]);
    rig.origin.script("/SHA256SUMS", Script::bytes("sums"));
    for (name, ip) in [
        ("evil.example.test", "127.0.0.1"),
        ("imds.example.test", "169.254.169.254"),
        // the origin's own address, under another name than the upstream's
        ("files.example.test", "127.0.0.50"),
    ] {
        let target = url(&format!("https://{name}/SHA256SUMS"));
        let err = rig
            .client
            .fetch_small(&target, SmallFile::Shasums, soon())
            .await
            .unwrap_err();
        let message = err.to_string();
        assert_eq!(refused_ip(err).0, ip.parse::<std::net::IpAddr>().unwrap());
        assert!(
            message.contains(&format!("{name} resolves to {ip}")),
            "{message}"
        );
    }
    assert_eq!((rig.trap.accepts(), rig.origin.accepts()), (0, 0));
    // The same file under the upstream's own name is fetched.
    let sums = rig
        .client
        .fetch_small(&at("/SHA256SUMS"), SmallFile::Shasums, soon())
        .await
        .unwrap();
    assert_eq!(sums, b"sums");
}

/// DNS that answers an allowed address first and 127.0.0.1 next: the
/// second connection is refused at its own lookup, never made.
#[tokio::test]
async fn dns_that_changes_between_lookups_gains_nothing() {
    let pki = Pki::new();
    let origin = Origin::start("127.0.0.50", &pki).await;
    let trap = Origin::start("127.0.0.1", &pki).await;
    origin.script("/.well-known/terraform.json", Script::json("{}"));
    let dns = Arc::new(ScriptedLookup::new());
    dns.answer(HOST, [origin.addr]).answer(HOST, [trap.addr]);
    // Not pinned this time: the upstream's name is looked up, and may
    // resolve into 127.0.0.50/32 only.
    let mut s = settings(&pki, &origin);
    s.connect = Some(Connect {
        to: Default::default(),
        ca_pem: Some(pki.ca_pem.clone().into_bytes()),
        allow_nets: vec!["127.0.0.50/32".parse().unwrap()],
    });
    let client = client(s, &dns);
    client.discover(soon()).await.unwrap();
    let err = client.discover(soon()).await.unwrap_err();
    assert_eq!(refused_ip(err), ("127.0.0.1".parse().unwrap(), "loopback"));
    assert_eq!(
        dns.asked(HOST),
        2,
        "each connection resolved the name again"
    );
    assert_eq!(trap.accepts(), 0, "a connection reached 127.0.0.1");
    assert_eq!(origin.count("/.well-known/terraform.json"), 1);
}

/// In AWS the `connect` hook cannot open loopback: refused when saved and
/// when connecting.
#[tokio::test]
async fn in_aws_the_hook_never_opens_loopback() {
    let rig = Rig::with(|s| s.deployment = Deployment::Aws).await;
    assert_eq!(rig.client.settings().check().unwrap_err().range, "loopback");
    rig.serve_discovery();
    let err = rig.client.discover(soon()).await.unwrap_err();
    assert_eq!(refused_ip(err), ("127.0.0.50".parse().unwrap(), "loopback"));
    assert_eq!(rig.origin.accepts(), 0);
}

/// A redirect is a URL like any other: each hop is checked and resolved
/// afresh, so none leads to a refused place.
#[tokio::test]
async fn redirects_to_refused_places_are_not_followed() {
    let rig = Rig::new().await;
    rig.dns.answer("evil.example.test", [rig.trap.addr]);
    let trap_port = rig.trap.addr.port();
    for (location, why) in [
        (
            format!("https://127.0.0.1:{trap_port}/x"),
            "127.0.0.1 is loopback",
        ),
        (
            "https://169.254.169.254/latest/meta-data/".into(),
            "link-local",
        ),
        (
            "https://[fd00:ec2::254]/latest/api/token".into(),
            "unique local",
        ),
        (
            "https://evil.example.test/x".into(),
            "evil.example.test resolves to 127.0.0.1",
        ),
        (format!("http://{HOST}/x"), "only https"),
        (format!("https://{HOST}:{trap_port}/x"), "port"),
        ("file:///etc/passwd".into(), "only https"),
    ] {
        rig.origin.script(
            "/.well-known/terraform.json",
            Script::redirect(302, &location),
        );
        let err = rig.client.discover(soon()).await.unwrap_err();
        assert!(
            matches!(err, OriginError::Refused { .. }),
            "{location}: {err:?}"
        );
        assert!(err.to_string().contains(why), "{location}: {err}");
        // The same through an archive's download URL.
        rig.origin
            .script("/files/p.zip", Script::redirect(307, &location));
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("p.zip");
        let err = rig
            .client
            .fetch_archive(&at("/files/p.zip"), &dest, 1 << 20, soon())
            .await
            .unwrap_err();
        assert!(
            matches!(err, OriginError::Refused { .. }),
            "{location}: {err:?}"
        );
        assert!(!dest.exists());
    }
    assert_eq!(rig.trap.accepts(), 0);
}
