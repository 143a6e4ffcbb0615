//! Tokens as the registry knows them (never the secret itself): scopes,
//! the realm an action applies in, what a route needs, who made a request.
//! Pure data and validation; storing tokens is the store's, checking a
//! request's token the HTTP pipeline's.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::grants::{GrantsError, TokenGrant};
use crate::scope::Namespaces;

/// Prefix of every token, so a leaked one is easy to recognise and scan for.
pub const TOKEN_PREFIX: &str = "tfreg_";
/// The partition holding every token.
pub const TOKENS_PK: &str = "TOKENS";
/// Hex digits of a token's hash that make its public id.
pub const TOKEN_ID_LEN: usize = 12;
/// A token's last use is recorded at most this often.
pub const TOUCH_INTERVAL_SECS: u64 = 3600;
/// How long a process trusts a token it verified, by default.
pub const DEFAULT_TOKEN_CACHE_SECS: u64 = 10;
/// Longest token cache an operator may configure.
pub const MAX_TOKEN_CACHE_SECS: u64 = 300;
/// Longest token name.
pub const MAX_NAME_LEN: usize = 64;
/// How long a token is kept after it expired (refused as expired, listed
/// with `--all`) before the store deletes it by itself.
pub const EXPIRED_TOKEN_KEPT_SECS: u64 = 24 * 3600;
pub use crate::scope::{MAX_NAMESPACES, Realm, Scope};

/// Whom a token was issued to: the identity provider's account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub iss: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The CI job a token exchange issued it to, from the job token's
    /// verified claims (none: a sign-in, or an exchange before this was
    /// kept): what usage counts name a CI consumer by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CiJob>,
}

/// A CI job, as usage names it: the repository and the workflow file that
/// ran (GitHub's `repository` and `workflow_ref`, GitLab's `project_path`
/// and `ci_config_ref_uri`), without the ref it ran at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiJob {
    pub repository: String,
    pub workflow: String,
}

impl Subject {
    /// `alice@example.com` (or the name, or the `sub`), for a token's name.
    pub fn label(&self) -> &str {
        self.email
            .as_deref()
            .or(self.name.as_deref())
            .unwrap_or(&self.sub)
    }
}

/// What a route needs ([`crate::router::Route::access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// Anyone: discovery, and archives behind the registry's signed URLs.
    Public,
    /// Anyone, never refused; a live web UI session names who asked (the
    /// sign-out: it must work for any session, even one whose token is gone,
    /// and its audit line names the token whose session ended).
    Session,
    /// A token with `scope` covering `realm` (reads: none while anonymous
    /// reads are on).
    Token { scope: Scope, realm: Realm<'a> },
}

/// What the store keeps about a token (never the token itself).
///
/// Stored and listed as JSON with `grants`; a token with one grant also
/// carries it the first way tokens were written (`scopes`, and `namespaces`
/// with none for every one), so an older reader (a rollback, an older
/// `tfreg token list`) sees the same token, and a record of that first form
/// (no `grants`) reads as that one grant. An older reader refuses a token of
/// several grants (it finds no `scopes`): never more rights than given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredRecord", into = "StoredRecord")]
pub struct TokenRecord {
    /// Public id: the first hex digits of the token's sha256.
    pub id: String,
    pub name: String,
    /// What it may do ([`crate::grants`]), normalised.
    pub grants: Vec<TokenGrant>,
    pub created_at: u64,
    pub expires_at: Option<u64>,
    /// Who made it ([`Actor::describe`]).
    pub created_by: String,
    /// The identity-provider account a sign-in issued it to (none: made by
    /// an admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_to: Option<Subject>,
    /// May its requests make the pull-through cache fetch from an upstream
    /// (`tfreg token create --fill`)? Admin tokens may anyway.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fill: bool,
}

/// [`TokenRecord`] as JSON, both forms.
#[derive(Serialize, Deserialize)]
struct StoredRecord {
    id: String,
    name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    grants: Vec<TokenGrant>,
    /// The first form: scopes (each including the ones below it) ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<Scope>,
    /// ... over these namespaces (none: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    namespaces: Vec<String>,
    created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    created_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issued_to: Option<Subject>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fill: bool,
}

impl From<StoredRecord> for TokenRecord {
    fn from(r: StoredRecord) -> Self {
        let grants = if !r.grants.is_empty() {
            r.grants
        } else {
            // The highest scope includes the others; the list as stored
            // (validated when the token was made).
            r.scopes
                .iter()
                .max()
                .map(|&scope| {
                    let namespaces = match r.namespaces.is_empty() {
                        true => Namespaces::All,
                        false => Namespaces::Only(r.namespaces.clone()),
                    };
                    vec![TokenGrant::new(scope, namespaces)]
                })
                .unwrap_or_default()
        };
        TokenRecord {
            id: r.id,
            name: r.name,
            grants,
            created_at: r.created_at,
            expires_at: r.expires_at,
            created_by: r.created_by,
            issued_to: r.issued_to,
            fill: r.fill,
        }
    }
}

impl From<TokenRecord> for StoredRecord {
    fn from(r: TokenRecord) -> Self {
        let (scopes, namespaces) = match r.grants.as_slice() {
            [one] => (vec![one.scope], one.namespaces.for_token()),
            _ => (Vec::new(), Vec::new()),
        };
        StoredRecord {
            id: r.id,
            name: r.name,
            grants: r.grants,
            scopes,
            namespaces,
            created_at: r.created_at,
            expires_at: r.expires_at,
            created_by: r.created_by,
            issued_to: r.issued_to,
            fill: r.fill,
        }
    }
}

impl TokenRecord {
    /// Does some grant include `scope` (over whatever namespaces)?
    pub fn has(&self, scope: Scope) -> bool {
        self.grants.iter().any(|g| g.scope >= scope)
    }

    /// May it do what needs `scope` in `realm`: does some grant of at least
    /// `scope` cover it?
    pub fn allows(&self, scope: Scope, realm: Realm<'_>) -> bool {
        crate::grants::allows(&self.grants, scope, realm)
    }

    /// Does it cover `realm` for reading (every grant includes read)?
    pub fn covers(&self, realm: Realm<'_>) -> bool {
        self.allows(Scope::Read, realm)
    }

    /// Its grants as one line: `read:*, publish:acme`.
    pub fn describe_grants(&self) -> String {
        crate::grants::describe(&self.grants)
    }

    /// Expired at `now`?
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// When the store may delete it: [`EXPIRED_TOKEN_KEPT_SECS`] after it
    /// expires (never, for a token that never expires).
    pub fn removable_at(&self) -> Option<u64> {
        self.expires_at
            .map(|at| at.saturating_add(EXPIRED_TOKEN_KEPT_SECS))
    }
}

/// A token as listed: its record and when it was last used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    #[serde(flatten)]
    pub record: TokenRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<u64>,
}

/// What a new token should be (validated by [`NewToken::check`]): its
/// grants, or (the first form, still accepted) scopes over namespaces, which
/// is one grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewToken {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<Scope>,
    /// With `scopes`: the namespaces; none: every namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<TokenGrant>,
    /// Unix seconds; none: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// See [`TokenRecord::fill`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fill: bool,
}

impl NewToken {
    /// A token of `grants`, never expiring.
    pub fn with_grants(name: &str, grants: Vec<TokenGrant>) -> Self {
        Self {
            name: name.to_string(),
            scopes: Vec::new(),
            namespaces: Vec::new(),
            grants,
            expires_at: None,
            fill: false,
        }
    }

    /// Normalise and validate: a name of 1..=64 printable characters (no
    /// control, invisible or filler ones, no lone or stacked combining
    /// marks, no space but U+0020: names show in lists and the audit,
    /// [`crate::text::name`]); grants
    /// or scopes (not both), normalised ([`crate::grants::normalise`]: at
    /// least one, valid namespaces, at most [`MAX_NAMESPACES`] in all); an
    /// expiry in the future. Afterwards `grants` says it all (`scopes` and
    /// `namespaces` are emptied).
    pub fn check(mut self, now: u64) -> Result<Self, Invalid> {
        self.name = crate::text::name("a token's name", &self.name, MAX_NAME_LEN)?;
        let first_form = !self.scopes.is_empty() || !self.namespaces.is_empty();
        if first_form && !self.grants.is_empty() {
            return Err(Invalid::bad(
                "give a token grants, or scopes (and namespaces), not both",
            ));
        }
        if first_form {
            let namespaces = match self.namespaces.is_empty() {
                true => Namespaces::All,
                false => {
                    let names = std::mem::take(&mut self.namespaces);
                    let unique: std::collections::BTreeSet<String> = names
                        .iter()
                        .map(|ns| crate::address::module_namespace(ns))
                        .collect::<Result<_, _>>()?;
                    if unique.len() > MAX_NAMESPACES {
                        return Err(GrantsError::TooManyNamespaces(unique.len()).into());
                    }
                    Namespaces::parse(&unique.into_iter().collect::<Vec<_>>())?
                }
            };
            let scopes = std::mem::take(&mut self.scopes);
            self.grants = scopes
                .into_iter()
                .map(|scope| TokenGrant::new(scope, namespaces.clone()))
                .collect();
            if self.grants.is_empty() {
                return Err(Invalid::bad(
                    "a token needs a scope: read, publish or admin",
                ));
            }
        }
        self.grants = crate::grants::normalise(std::mem::take(&mut self.grants))?;
        if let Some(at) = self.expires_at
            && at <= now
        {
            return Err(Invalid::bad("the token's expiry is in the past"));
        }
        Ok(self)
    }
}

/// Who made a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// Nobody identified (discovery, archives, anonymous reads).
    Anonymous,
    /// A holder of this token.
    Token(Arc<TokenRecord>),
    /// Someone with the data directory or the AWS account: the `tfreg` CLI
    /// working on the stores directly (`--data-dir`, `--table`). May do anything.
    Operator,
}

/// Who, as the audit trail names them: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `token`, `operator` or `anonymous`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_name: Option<String>,
}

impl Actor {
    /// `token ci (3f2a…)`, `operator`, `anonymous`.
    pub fn describe(&self) -> String {
        match (&self.token_name, &self.token_id) {
            (Some(name), Some(id)) => format!("token {name} ({id})"),
            _ => self.kind.clone(),
        }
    }
}

impl Principal {
    pub fn actor(&self) -> Actor {
        match self {
            Principal::Anonymous => Actor {
                kind: "anonymous".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Operator => Actor {
                kind: "operator".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Token(t) => Actor {
                kind: "token".into(),
                token_id: Some(t.id.clone()),
                token_name: Some(t.name.clone()),
            },
        }
    }

    /// Is this someone the registry knows (worth an audit record in the store)?
    pub fn identified(&self) -> bool {
        !matches!(self, Principal::Anonymous)
    }
}

/// The sha256 (hex) a token is stored under: the token itself never is.
pub fn hash_of(token: &str) -> String {
    crate::hashing::sha256_hex(token.as_bytes())
}

/// A token's public id: the first [`TOKEN_ID_LEN`] hex digits of its hash.
pub fn id_of(hash: &str) -> String {
    hash[..TOKEN_ID_LEN.min(hash.len())].to_string()
}

/// The hash a presented token is stored under, if it looks like one of ours.
pub fn presented_hash(token: &str) -> Option<String> {
    (token.starts_with(TOKEN_PREFIX) && token.len() <= 200).then(|| hash_of(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new(scopes: &[Scope], namespaces: &[&str]) -> NewToken {
        NewToken {
            name: "ci".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            grants: Vec::new(),
            expires_at: None,
            fill: false,
        }
    }

    fn grant(scope: Scope, names: &[&str]) -> TokenGrant {
        TokenGrant::new(scope, Namespaces::parse(names).unwrap())
    }

    fn record(grants: Vec<TokenGrant>) -> TokenRecord {
        TokenRecord {
            id: "0".repeat(TOKEN_ID_LEN),
            name: "t".into(),
            grants,
            created_at: 0,
            expires_at: Some(100),
            created_by: "operator".into(),
            issued_to: None,
            fill: false,
        }
    }

    #[test]
    fn the_fill_mark_is_kept_and_absent_means_no() {
        let mut r = record(vec![grant(Scope::Read, &["*"])]);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("fill"), "not written when false: {text}");
        assert!(!serde_json::from_str::<TokenRecord>(&text).unwrap().fill);
        r.fill = true;
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""fill":true"#), "{text}");
        assert_eq!(serde_json::from_str::<TokenRecord>(&text).unwrap(), r);
        let new: NewToken =
            serde_json::from_str(r#"{"name": "ci", "scopes": ["read"], "fill": true}"#).unwrap();
        assert!(new.fill);
    }

    #[test]
    fn scopes_include_the_lesser_ones_and_namespaces_limit_them() {
        let admin = record(vec![grant(Scope::Admin, &["*"])]);
        assert!(admin.has(Scope::Read) && admin.has(Scope::Publish) && admin.has(Scope::Admin));
        let reader = record(vec![grant(Scope::Read, &["a"])]);
        assert!(reader.has(Scope::Read) && !reader.has(Scope::Publish));
        assert!(reader.covers(Realm::Namespace("a")));
        assert!(!reader.covers(Realm::Namespace("b")));
        assert!(!reader.covers(Realm::Registry));
        assert!(admin.covers(Realm::Registry));
        assert!(reader.covers(Realm::AnyNamespace) && admin.covers(Realm::AnyNamespace));
        assert!(!admin.expired(99) && admin.expired(100));
    }

    #[test]
    fn a_token_of_two_grants_reads_everywhere_and_publishes_to_acme_only() {
        let t = record(vec![
            grant(Scope::Read, &["*"]),
            grant(Scope::Publish, &["acme"]),
        ]);
        assert!(t.allows(Scope::Read, Realm::Namespace("other")));
        assert!(t.allows(Scope::Read, Realm::Registry));
        assert!(t.allows(Scope::Publish, Realm::Namespace("acme")));
        assert!(!t.allows(Scope::Publish, Realm::Namespace("other")));
        assert!(!t.allows(Scope::Admin, Realm::Namespace("acme")));
        assert!(t.has(Scope::Publish) && !t.has(Scope::Admin));
        assert_eq!(t.describe_grants(), "read:*, publish:acme");
    }

    /// Records stored before grants (scopes and namespaces) read as one
    /// grant, exactly as they were allowed; one-grant records are written
    /// both ways, several grants only as grants.
    #[test]
    fn records_of_the_first_form_read_as_one_grant() {
        let old = json!({
            "id": "3f2a7c1e5b6d", "name": "ci-acme", "scopes": ["publish"],
            "namespaces": ["acme", "infra"], "created_at": 1700000000,
            "created_by": "operator"
        });
        let r: TokenRecord = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(r.grants, [grant(Scope::Publish, &["acme", "infra"])]);
        assert!(r.allows(Scope::Publish, Realm::Namespace("infra")));
        assert!(!r.allows(Scope::Read, Realm::Namespace("other")));
        assert_eq!(r.expires_at, None);
        // Every namespace, several scopes (the highest includes the rest).
        let all: TokenRecord = serde_json::from_value(json!({
            "id": "0", "name": "n", "scopes": ["read", "admin"], "created_at": 1,
            "expires_at": 9, "created_by": "operator"
        }))
        .unwrap();
        assert_eq!(all.grants, [grant(Scope::Admin, &["*"])]);
        assert_eq!(all.expires_at, Some(9));
        // Written back: the old fields too, for an older reader.
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["scopes"], json!(["publish"]));
        assert_eq!(back["namespaces"], json!(["acme", "infra"]));
        assert_eq!(
            back["grants"],
            json!([{"scope": "publish", "namespaces": ["acme", "infra"]}])
        );
        assert_eq!(serde_json::from_value::<TokenRecord>(back).unwrap(), r);
        let every = serde_json::to_value(&all).unwrap();
        assert_eq!(every["scopes"], json!(["admin"]));
        assert!(every.get("namespaces").is_none(), "none: every namespace");
        let two = record(vec![
            grant(Scope::Read, &["*"]),
            grant(Scope::Publish, &["acme"]),
        ]);
        let json = serde_json::to_value(&two).unwrap();
        assert!(json.get("scopes").is_none() && json.get("namespaces").is_none());
        assert_eq!(serde_json::from_value::<TokenRecord>(json).unwrap(), two);
        // A record with no rights at all allows nothing.
        let none: TokenRecord = serde_json::from_value(json!({
            "id": "0", "name": "n", "scopes": [], "created_at": 1, "created_by": "o"
        }))
        .unwrap();
        assert!(none.grants.is_empty() && !none.has(Scope::Read));
    }

    #[test]
    fn new_tokens_are_checked() {
        let ok = new(&[Scope::Read, Scope::Read], &["b", "A", "a"])
            .check(5)
            .unwrap();
        assert_eq!(ok.grants, [grant(Scope::Read, &["a", "b"])]);
        assert!(ok.scopes.is_empty() && ok.namespaces.is_empty());
        let every = new(&[Scope::Publish, Scope::Read], &[]).check(5).unwrap();
        assert_eq!(every.grants, [grant(Scope::Publish, &["*"])]);
        let two = NewToken::with_grants(
            "alice",
            vec![grant(Scope::Publish, &["acme"]), grant(Scope::Read, &["*"])],
        )
        .check(5)
        .unwrap();
        assert_eq!(
            two.grants,
            [grant(Scope::Read, &["*"]), grant(Scope::Publish, &["acme"])]
        );
        let both = NewToken {
            grants: vec![grant(Scope::Read, &["*"])],
            ..new(&[Scope::Admin], &[])
        };
        for bad in [
            NewToken {
                name: " ".into(),
                ..new(&[Scope::Read], &[])
            },
            NewToken {
                name: "ci\u{202e}nimda".into(),
                ..new(&[Scope::Read], &[])
            },
            NewToken {
                name: "a\u{200b}b".into(),
                ..new(&[Scope::Read], &[])
            },
            new(&[], &[]),
            new(&[], &["a"]),
            new(&[Scope::Read], &["bad/ns"]),
            NewToken {
                expires_at: Some(5),
                ..new(&[Scope::Read], &[])
            },
            both,
            NewToken::with_grants("none", vec![]),
        ] {
            assert!(matches!(bad.clone().check(5), Err(Invalid(_))), "{bad:?}");
        }
        // The API's body: grants as JSON.
        let body: NewToken = serde_json::from_value(json!({
            "name": "alice",
            "grants": [{"scope": "read", "namespaces": ["*"]},
                       {"scope": "publish", "namespaces": ["acme"]}]
        }))
        .unwrap();
        assert_eq!(body.check(0).unwrap().grants, two.grants);
    }

    #[test]
    fn a_token_lists_at_most_100_namespaces() {
        let names: Vec<String> = (0..101).map(|i| format!("ns{i:03}")).collect();
        let refs = |n: usize| names[..n].iter().map(String::as_str).collect::<Vec<_>>();
        let ok = new(&[Scope::Read], &refs(100)).check(0).unwrap();
        assert_eq!(ok.grants[0].namespaces.for_token().len(), 100);
        let err = new(&[Scope::Read], &refs(101)).check(0).unwrap_err();
        assert!(
            err.0.contains(&format!("{MAX_NAMESPACES} namespaces")),
            "{err}"
        );
        // Counted once normalised.
        let mut twice = refs(100);
        twice.push("NS000");
        assert!(new(&[Scope::Read], &twice).check(0).is_ok());
    }
}
