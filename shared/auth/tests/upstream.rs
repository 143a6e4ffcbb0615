//! `Upstream` against the real OpenID Provider (`tests/oidc/provider.mjs`):
//! discovery, a real code flow redeemed and its ID token verified, and every
//! ID token the registry must refuse, each with its own error.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tfreg_auth::oidc::http_client;
use tfreg_auth::{AuthError, OidcConfig, Secret, Upstream};
use tfreg_model::login::{pkce_challenge, random_value};
use tfreg_model::oidc::ClaimError;
use tfreg_testkit::oidc::{Browser, Provider, query_param};

const CLIENT: &str = "tfreg";
const SECRET: &str = "s3cret-for-tests";
const CALLBACK: &str = "https://registry.test/oauth/callback";

fn provider() -> Provider {
    Provider::start(json!({
        "clients": [{"client_id": CLIENT, "client_secret": SECRET,
                     "redirect_uris": [CALLBACK]}],
        "users": [{"sub": "alice", "email": "alice@example.com", "name": "Alice",
                   "groups": ["platform", "acme-publishers"]}],
        "skip_consent": true,
    }))
}

fn tls() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth()
}

async fn upstream(op: &Provider) -> Upstream {
    let config = OidcConfig::new(&op.issuer, CLIENT, Secret::new(SECRET));
    Upstream::discover(config, http_client(tls()).unwrap())
        .await
        .unwrap()
}

fn now() -> u64 {
    tfreg_model::unix_now()
}

/// A token the provider signs with `claims` over its defaults (iss, iat,
/// exp, jti), for our client and nonce "n1" unless `claims` says otherwise.
async fn signed(op: &Provider, alg: &str, claims: Value) -> String {
    let mut all = json!({"sub": "alice", "aud": CLIENT, "nonce": "n1"});
    for (k, v) in claims.as_object().unwrap() {
        all[k] = v.clone();
    }
    op.sign(json!({"claims": all, "alg": alg})).await
}

#[tokio::test]
async fn a_real_sign_in_is_redeemed_and_its_id_token_verified() {
    let op = provider();
    let up = upstream(&op).await;
    let verifier = random_value();
    let nonce = random_value();
    let mut auth = up.authorization_endpoint().clone();
    auth.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", CLIENT)
        .append_pair("redirect_uri", CALLBACK)
        .append_pair("scope", "openid email profile groups")
        .append_pair("state", "s1")
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", &pkce_challenge(&verifier))
        .append_pair("code_challenge_method", "S256");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let hops = Browser::new(client)
        .sign_in(auth.as_str(), "alice", &[CALLBACK])
        .await;
    let back = hops.last().unwrap().location.clone().unwrap();
    let code = query_param(&back, "code").expect("a code");
    assert_eq!(query_param(&back, "state").as_deref(), Some("s1"));

    let id_token = up.redeem(&code, &verifier, CALLBACK).await.unwrap();
    let claims = up.verify_id_token(&id_token, &nonce, now()).await.unwrap();
    assert_eq!(claims.iss, op.issuer);
    assert_eq!(claims.sub, "alice");
    assert_eq!(claims.email.as_deref(), Some("alice@example.com"));
    assert_eq!(claims.groups, ["platform", "acme-publishers"]);

    // The provider's own refusal of a used code is ours to pass on.
    let again = up.redeem(&code, &verifier, CALLBACK).await.unwrap_err();
    assert!(
        matches!(&again, AuthError::CodeRefused(c) if c == "invalid_grant"),
        "{again:?}"
    );
    // A nonce other than the sign-in's.
    let other = up.verify_id_token(&id_token, "another", now()).await;
    assert!(matches!(other, Err(AuthError::BadNonce)), "{other:?}");
}

#[tokio::test]
async fn id_tokens_the_registry_must_refuse_are_refused_each_for_its_reason() {
    let op = provider();
    let up = upstream(&op).await;
    let t = now();
    for alg in ["RS256", "ES256"] {
        let ok = signed(&op, alg, json!({})).await;
        assert!(up.verify_id_token(&ok, "n1", t).await.is_ok(), "{alg}");
    }
    type Expected = fn(&AuthError) -> bool;
    let cases: Vec<(&str, Value, Expected)> = vec![
        ("another audience", json!({"aud": "someone-else"}), |e| {
            matches!(e, AuthError::Claim(ClaimError::WrongAudience { .. }))
        }),
        (
            "several audiences and azp of another",
            json!({"aud": [CLIENT, "other"], "azp": "other"}),
            |e| matches!(e, AuthError::Claim(ClaimError::WrongAzp { .. })),
        ),
        ("another issuer", json!({"iss": "https://evil.test"}), |e| {
            matches!(e, AuthError::WrongIssuer)
        }),
        ("expired", json!({"iat": t - 7200, "exp": t - 3600}), |e| {
            matches!(e, AuthError::Claim(ClaimError::Expired { .. }))
        }),
        (
            "issued in the future",
            json!({"iat": t + 3600, "exp": t + 7200}),
            |e| matches!(e, AuthError::Claim(ClaimError::IssuedInFuture { .. })),
        ),
        ("another nonce", json!({"nonce": "n2"}), |e| {
            matches!(e, AuthError::BadNonce)
        }),
        ("no nonce", json!({"nonce": null}), |e| {
            matches!(e, AuthError::BadNonce)
        }),
    ];
    for (what, claims, expected) in cases {
        let token = signed(&op, "RS256", claims).await;
        let got = up.verify_id_token(&token, "n1", t).await.unwrap_err();
        assert!(expected(&got), "{what}: {got:?}");
    }

    // Signed by a key never published, claiming a published kid.
    let kid = op.ready["signing_kid"].as_str().unwrap();
    let forged = op
        .sign(
            json!({"claims": {"sub": "alice", "aud": CLIENT, "nonce": "n1"},
                     "alg": "RS256", "key": "unpublished", "header": {"kid": kid}}),
        )
        .await;
    let got = up.verify_id_token(&forged, "n1", t).await.unwrap_err();
    assert!(matches!(got, AuthError::BadSignature), "{got:?}");

    // alg none, HS256 (keyed with anything), no kid: refused before any key is used.
    let good = signed(&op, "RS256", json!({})).await;
    let payload = good.split('.').nth(1).unwrap();
    let head = |h: Value| URL_SAFE_NO_PAD.encode(h.to_string());
    for (header, expected) in [
        (json!({"alg": "none", "kid": kid}), "none"),
        (json!({"alg": "HS256", "kid": kid, "typ": "JWT"}), "HS256"),
    ] {
        let token = format!("{}.{payload}.", head(header));
        let got = up.verify_id_token(&token, "n1", t).await.unwrap_err();
        assert!(
            matches!(&got, AuthError::BadAlg(a) if a.contains(expected)),
            "{expected}: {got:?}"
        );
    }
    let no_kid = format!("{}.{payload}.x", head(json!({"alg": "RS256"})));
    let got = up.verify_id_token(&no_kid, "n1", t).await.unwrap_err();
    assert!(matches!(got, AuthError::NoKid), "{got:?}");
    // A key carried in the token itself is never used.
    let carried = format!(
        "{}.{payload}.x",
        head(
            json!({"alg": "RS256", "kid": "mine", "jku": "https://evil.test/jwks",
                    "jwk": {"kty": "oct", "k": "AAAA"}})
        )
    );
    let got = up.verify_id_token(&carried, "n1", t).await.unwrap_err();
    assert!(
        matches!(&got, AuthError::UnknownKey(k) if k == "mine"),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_key_rotation_is_followed_once_per_interval() {
    let op = provider();
    let up = upstream(&op).await;
    let t = now();
    let first = signed(&op, "RS256", json!({})).await;
    assert!(up.verify_id_token(&first, "n1", t).await.is_ok());

    // New keys: the unknown kid makes us fetch the keys again, and it verifies.
    op.rotate(false).await;
    let second = signed(&op, "RS256", json!({})).await;
    let claims = up.verify_id_token(&second, "n1", t).await;
    assert!(claims.is_ok(), "after a rotation: {claims:?}");

    // Rotated again within the minute: no second fetch, the kid is unknown.
    op.rotate(true).await;
    let third = signed(&op, "RS256", json!({})).await;
    let got = up.verify_id_token(&third, "n1", t).await.unwrap_err();
    assert!(matches!(got, AuthError::UnknownKey(_)), "{got:?}");
    // Once the interval has passed, it is fetched and verifies; the retired
    // key's tokens no longer do.
    let up = up.with_refetch_interval(Duration::ZERO);
    assert!(up.verify_id_token(&third, "n1", t).await.is_ok());
    let got = up.verify_id_token(&first, "n1", t).await.unwrap_err();
    assert!(matches!(got, AuthError::UnknownKey(_)), "{got:?}");
}

#[tokio::test]
async fn discovery_must_name_the_configured_issuer_exactly() {
    let op = provider();
    let config = OidcConfig::new(&format!("{}/", op.issuer), CLIENT, Secret::new(SECRET));
    let got = Upstream::discover(config, http_client(tls()).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(got, AuthError::IssuerMismatch { .. }), "{got:?}");
    let config = OidcConfig::new("http://idp.example.com", CLIENT, Secret::new(SECRET));
    let got = Upstream::discover(config, http_client(tls()).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&got, AuthError::Upstream(m) if m.contains("https")),
        "{got:?}"
    );
    assert_eq!(format!("{:?}", Secret::new(SECRET)), "Secret(..)");
}
