//! In AWS the provider's discovery document cannot send the registry to
//! loopback (the Lambda Runtime API), link-local (169.254.169.254, the
//! credentials and metadata endpoints) or other special-purpose addresses:
//! `Upstream::discover_within` checks every URL before fetching it, through
//! the guarded client. A stand-in provider on loopback (allowed here only by
//! the tests' `Reach::PublicAndLoopback`) names such URLs; a second listener
//! proves nothing was fetched from a refused place, and the real provider
//! still works under the same guard.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tfreg_auth::reach::{Reach, guarded_client};
use tfreg_auth::{AuthError, OidcConfig, Secret, Upstream};
use tfreg_testkit::oidc::Provider;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn tls() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// An HTTP server on loopback answering every request with `body` (JSON),
/// recording the paths asked for.
async fn serve(
    body: impl Fn(u16) -> String + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let n = conn.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            log.lock().unwrap().push(path);
            let text = body(port);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        }
    });
    (port, seen)
}

fn config(issuer: &str) -> OidcConfig {
    OidcConfig::new(issuer, "tfreg", Secret::new("s3cret"))
}

async fn discover(issuer: &str, reach: Reach) -> Result<Upstream, AuthError> {
    Upstream::discover_within(config(issuer), guarded_client(tls(), reach).unwrap(), reach).await
}

#[tokio::test]
async fn in_aws_a_provider_on_loopback_is_never_reached() {
    let (port, seen) = serve(|_| "{}".into()).await;
    for issuer in [
        format!("http://127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("https://localhost:{port}"),
    ] {
        let err = discover(&issuer, Reach::Public).await.unwrap_err();
        assert!(
            matches!(&err, AuthError::Upstream(m) if m.contains("refused")),
            "{issuer}: {err:?}"
        );
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "a request reached loopback"
    );
}

#[tokio::test]
async fn discovery_cannot_point_the_registry_at_special_addresses() {
    // The keys (or the token endpoint) where the provider says, when that is
    // a special-purpose address: refused before any request to it.
    let (keys_port, keys_seen) = serve(|_| r#"{"keys": []}"#.into()).await;
    for (jwks_uri, token_endpoint) in [
        (
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/".to_string(),
            None,
        ),
        ("https://169.254.170.2/v2/credentials".to_string(), None),
        ("https://10.0.0.5/jwks".to_string(), None),
        ("https://[fd00:ec2::254]/jwks".to_string(), None),
        (
            format!("http://localhost:{keys_port}/jwks"),
            Some("http://169.254.169.254/token".to_string()),
        ),
    ] {
        let jwks = jwks_uri.clone();
        let token = token_endpoint.clone();
        let (port, seen) = serve(move |port| {
            json!({
                "issuer": format!("http://127.0.0.1:{port}"),
                "authorization_endpoint": format!("http://127.0.0.1:{port}/auth"),
                "token_endpoint": token.clone().unwrap_or(format!("http://127.0.0.1:{port}/token")),
                "jwks_uri": jwks,
            })
            .to_string()
        })
        .await;
        let err = discover(
            &format!("http://127.0.0.1:{port}"),
            Reach::PublicAndLoopback,
        )
        .await
        .unwrap_err();
        // Refused by the guard, or (plain http off loopback) by the scheme rule.
        assert!(
            matches!(&err, AuthError::Upstream(m) if m.contains("refused") || m.contains("must be https")),
            "{jwks_uri} / {token_endpoint:?}: {err:?}"
        );
        assert_eq!(
            *seen.lock().unwrap(),
            ["/.well-known/openid-configuration"],
            "only the discovery document was fetched"
        );
    }
    assert!(
        keys_seen.lock().unwrap().is_empty(),
        "keys fetched though the token endpoint is refused"
    );
}

#[tokio::test]
async fn the_real_provider_works_under_the_tests_guard() {
    let op = Provider::start(json!({
        "clients": [{"client_id": "tfreg", "client_secret": "s3cret",
                     "redirect_uris": ["https://registry.test/oauth/callback"]}],
        "users": [{"sub": "alice", "groups": []}],
        "skip_consent": true,
    }));
    let up = discover(&op.issuer, Reach::PublicAndLoopback)
        .await
        .unwrap();
    assert_eq!(up.issuer(), op.issuer);
    let err = discover(&op.issuer, Reach::Public).await.unwrap_err();
    assert!(
        matches!(&err, AuthError::Upstream(m) if m.contains("refused")),
        "{err:?}"
    );
}
