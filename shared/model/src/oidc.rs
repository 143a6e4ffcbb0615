//! Sign-in's pure claim checks (issue 21): what the registry decides about
//! an OpenID Connect ID token (a person's, from the identity provider) or a
//! CI job's OIDC token (GitHub Actions, GitLab CI) once its signature and
//! `iss` have been verified. No I/O and no clock: the caller passes the
//! registry's `now` (`jsonwebtoken`'s own checks read the system clock, which
//! tests cannot move). What a verified token then gets: [`crate::sso`] for a
//! person's groups, [`crate::trust`] for a CI job.
//!
//! - [`check_times`]: `exp`, `iat`, `nbf` with a leeway, and a cap on the
//!   token's lifetime (CI tokens).
//! - [`check_audience`]: `aud` and `azp` as OpenID Connect Core 3.1.3.7 says.
//! - [`claim_text`], [`claim_strings`]: a claim as text to match, a claim as
//!   a list of strings (the groups claim).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

/// Clock skew allowed between the registry and a token's issuer.
pub const LEEWAY_SECS: u64 = 60;
/// The usual cap on a CI token's lifetime (`exp − iat`), for the caller to pass.
pub const CI_MAX_LIFETIME_SECS: u64 = 3600;

// ---------------------------------------------------------------- times

/// A token's times, Unix seconds. RFC 7519 allows a fractional NumericDate:
/// it is truncated to the second (well inside [`LEEWAY_SECS`]); a negative
/// one, or any other type, is refused when parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    #[serde(deserialize_with = "numeric_date")]
    pub exp: u64,
    #[serde(deserialize_with = "numeric_date")]
    pub iat: u64,
    #[serde(
        default,
        deserialize_with = "optional_numeric_date",
        skip_serializing_if = "Option::is_none"
    )]
    pub nbf: Option<u64>,
}

struct NumericDate;

impl Visitor<'_> for NumericDate {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a time in seconds since 1970")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if v.is_finite() && (0.0..1.8e19).contains(&v) {
            Ok(v as u64)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
}

fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(NumericDate)
}

fn optional_numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Date(u64);
    impl<'de> Deserialize<'de> for Date {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            numeric_date(d).map(Date)
        }
    }
    Ok(Option::<Date>::deserialize(d)?.map(|Date(t)| t))
}

/// Why a verified token's claims are refused. Messages name times and the
/// expected audience, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("the token expires (exp {exp}) no later than it was issued (iat {iat})")]
    ExpiresBeforeIssued { exp: u64, iat: u64 },
    #[error("the token is never valid: nbf {nbf} is not before exp {exp}")]
    NeverValid { nbf: u64, exp: u64 },
    #[error("the token lives {lifetime} s, more than the {max} s accepted")]
    TooLong { lifetime: u64, max: u64 },
    #[error("the token expired at {exp} (now {now})")]
    Expired { exp: u64, now: u64 },
    #[error("the token is issued in the future (iat {iat}, now {now})")]
    IssuedInFuture { iat: u64, now: u64 },
    #[error("the token is not valid before {nbf} (now {now})")]
    NotYetValid { nbf: u64, now: u64 },
    #[error("the token is for another audience: aud does not include {client_id:?}")]
    WrongAudience { client_id: String },
    #[error("the token has several audiences and no azp naming {client_id:?}")]
    MissingAzp { client_id: String },
    #[error("the token was issued to another party: azp is not {client_id:?}")]
    WrongAzp { client_id: String },
}

/// Whether `times` are acceptable at `now`, allowing `leeway_secs` of clock
/// skew each way. Refused: `exp <= iat`; `nbf >= exp` (never valid); a
/// lifetime `exp − iat` over `max_lifetime` (`None`: no cap; CI tokens:
/// [`CI_MAX_LIFETIME_SECS`] unless configured); expired (`exp + leeway <=
/// now`); `iat` or `nbf` after `now + leeway`. The permanent faults are
/// reported before the ones of the moment.
pub fn check_times(
    times: &Times,
    now: u64,
    leeway_secs: u64,
    max_lifetime: Option<u64>,
) -> Result<(), ClaimError> {
    let Times { exp, iat, nbf } = *times;
    if exp <= iat {
        return Err(ClaimError::ExpiresBeforeIssued { exp, iat });
    }
    if let Some(nbf) = nbf
        && nbf >= exp
    {
        return Err(ClaimError::NeverValid { nbf, exp });
    }
    let lifetime = exp - iat;
    if let Some(max) = max_lifetime
        && lifetime > max
    {
        return Err(ClaimError::TooLong { lifetime, max });
    }
    // In u128: `exp + leeway` past u64::MAX is still later than any `now`
    // (a saturating add made it equal to a `now` of u64::MAX: "expired").
    let (leeway, wide) = (u128::from(leeway_secs), u128::from);
    if wide(exp) + leeway <= wide(now) {
        return Err(ClaimError::Expired { exp, now });
    }
    let horizon = wide(now) + leeway;
    if wide(iat) > horizon {
        return Err(ClaimError::IssuedInFuture { iat, now });
    }
    if let Some(nbf) = nbf
        && wide(nbf) > horizon
    {
        return Err(ClaimError::NotYetValid { nbf, now });
    }
    Ok(())
}

// ---------------------------------------------------------------- audience

/// A token's `aud`: one string or a list of them (RFC 7519 4.1.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    /// Every audience named, in order.
    pub fn as_slice(&self) -> &[String] {
        match self {
            Audience::One(a) => std::slice::from_ref(a),
            Audience::Many(list) => list,
        }
    }

    /// Is `audience` one of them, byte for byte?
    pub fn contains(&self, audience: &str) -> bool {
        self.as_slice().iter().any(|a| a == audience)
    }
}

impl Serialize for Audience {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Audience::One(a) => s.serialize_str(a),
            Audience::Many(list) => list.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Audience {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AudienceVisitor;
        impl<'de> Visitor<'de> for AudienceVisitor {
            type Value = Audience;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an audience: a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Audience, E> {
                Ok(Audience::One(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Audience, A::Error> {
                let mut list = Vec::new();
                while let Some(a) = seq.next_element::<String>()? {
                    list.push(a);
                }
                Ok(Audience::Many(list))
            }
        }
        d.deserialize_any(AudienceVisitor)
    }
}

/// OpenID Connect Core 3.1.3.7, items 3 to 5: `aud` must hold `client_id`
/// exactly; with more than one entry (duplicates count) an `azp` is
/// required; an `azp`, when present, must be `client_id`. (For the CI
/// exchange `client_id` is the registry's configured audience; GitHub and
/// GitLab send no `azp`.)
pub fn check_audience(
    aud: &Audience,
    azp: Option<&str>,
    client_id: &str,
) -> Result<(), ClaimError> {
    let client_id_owned = || client_id.to_string();
    if !aud.contains(client_id) {
        return Err(ClaimError::WrongAudience {
            client_id: client_id_owned(),
        });
    }
    match azp {
        None if aud.as_slice().len() > 1 => Err(ClaimError::MissingAzp {
            client_id: client_id_owned(),
        }),
        Some(azp) if azp != client_id => Err(ClaimError::WrongAzp {
            client_id: client_id_owned(),
        }),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------- claims

/// A JWT claim as text to match: a string as it is; a boolean or number by
/// its JSON form (`true`, `12345`), so `ref_protected` matches `"true"`
/// whether GitHub sends the string or an issuer sends the boolean, and an id
/// matches whether sent as `"12345"` or `12345`. Null, lists and objects
/// never match.
pub fn claim_text(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        _ => None,
    }
}

/// The strings of claim `name`: a list's string entries, or a lone string
/// (some providers send one group that way); nothing otherwise.
pub fn claim_strings(claims: &Map<String, Value>, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn times(exp: u64, iat: u64, nbf: Option<u64>) -> Times {
        Times { exp, iat, nbf }
    }

    #[test]
    fn times_pass_within_the_leeway_and_fail_past_it() {
        let t = times(1_000, 900, Some(890));
        assert_eq!(check_times(&t, 950, 60, None), Ok(()));
        assert_eq!(check_times(&t, 1_059, 60, None), Ok(()));
        assert_eq!(
            check_times(&t, 1_060, 60, None),
            Err(ClaimError::Expired {
                exp: 1_000,
                now: 1_060
            })
        );
        // Without leeway, a token is expired at its `exp`.
        assert_eq!(check_times(&t, 999, 0, None), Ok(()));
        assert!(matches!(
            check_times(&t, 1_000, 0, None),
            Err(ClaimError::Expired { .. })
        ));
    }

    #[test]
    fn iat_and_nbf_may_be_ahead_by_the_leeway_only() {
        let now = 10_000;
        let at = |iat, nbf| check_times(&times(now + 600, iat, nbf), now, 60, None);
        assert_eq!(at(now + 60, None), Ok(()));
        assert_eq!(
            at(now + 61, None),
            Err(ClaimError::IssuedInFuture { iat: now + 61, now })
        );
        assert_eq!(at(now, Some(now + 60)), Ok(()));
        assert_eq!(
            at(now, Some(now + 61)),
            Err(ClaimError::NotYetValid { nbf: now + 61, now })
        );
        // GitHub backdates nbf: fine.
        assert_eq!(at(now, Some(now - 600)), Ok(()));
    }

    #[test]
    fn malformed_and_too_long_lived_tokens_are_refused() {
        assert_eq!(
            check_times(&times(100, 100, None), 100, 60, None),
            Err(ClaimError::ExpiresBeforeIssued { exp: 100, iat: 100 })
        );
        assert!(matches!(
            check_times(&times(99, 100, None), 100, 60, None),
            Err(ClaimError::ExpiresBeforeIssued { .. })
        ));
        assert_eq!(
            check_times(&times(200, 100, Some(200)), 150, 60, None),
            Err(ClaimError::NeverValid { nbf: 200, exp: 200 })
        );
        let hour = times(10_000 + 3_600, 10_000, None);
        assert_eq!(
            check_times(&hour, 10_000, 60, Some(CI_MAX_LIFETIME_SECS)),
            Ok(())
        );
        let longer = times(10_000 + 3_601, 10_000, None);
        assert_eq!(
            check_times(&longer, 10_000, 60, Some(CI_MAX_LIFETIME_SECS)),
            Err(ClaimError::TooLong {
                lifetime: 3_601,
                max: 3_600
            })
        );
        assert_eq!(check_times(&longer, 10_000, 60, None), Ok(()));
        // A permanent fault is named before a passing one.
        assert!(matches!(
            check_times(&longer, 100_000, 60, Some(3_600)),
            Err(ClaimError::TooLong { .. })
        ));
    }

    #[test]
    fn times_at_the_ends_of_the_clock_do_not_overflow() {
        let t = times(u64::MAX, u64::MAX - 1, Some(u64::MAX - 1));
        assert_eq!(check_times(&t, u64::MAX - 1, u64::MAX, None), Ok(()));
        assert!(check_times(&t, u64::MAX, 0, None).is_err());
        assert!(check_times(&times(1, 0, None), u64::MAX, u64::MAX, Some(0)).is_err());
    }

    #[test]
    fn times_parse_as_jwts_write_them() {
        let parse = |v: Value| serde_json::from_value::<Times>(v);
        assert_eq!(
            parse(json!({"exp": 200, "iat": 100})).unwrap(),
            times(200, 100, None)
        );
        assert_eq!(
            parse(json!({"exp": 200, "iat": 100, "nbf": null})).unwrap(),
            times(200, 100, None)
        );
        assert_eq!(
            parse(json!({"exp": 200.9, "iat": 100.2, "nbf": 90.5})).unwrap(),
            times(200, 100, Some(90))
        );
        for bad in [
            json!({"exp": -1, "iat": 100}),
            json!({"exp": "200", "iat": 100}),
            json!({"exp": 200}),
            json!({"iat": 100}),
            json!({"exp": 200, "iat": 100, "nbf": "x"}),
            json!({"exp": 1e30, "iat": 100}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let t = times(200, 100, Some(90));
        assert_eq!(parse(serde_json::to_value(t).unwrap()).unwrap(), t);
        assert_eq!(
            serde_json::to_value(times(2, 1, None)).unwrap(),
            json!({"exp": 2, "iat": 1})
        );
    }

    #[test]
    fn audiences_parse_as_one_string_or_a_list() {
        let one: Audience = serde_json::from_value(json!("tfreg")).unwrap();
        assert_eq!(one, Audience::One("tfreg".into()));
        let many: Audience = serde_json::from_value(json!(["a", "tfreg"])).unwrap();
        assert_eq!(many.as_slice(), ["a", "tfreg"]);
        assert!(many.contains("tfreg") && !many.contains("TFREG"));
        assert_eq!(serde_json::to_value(&many).unwrap(), json!(["a", "tfreg"]));
        assert_eq!(serde_json::to_value(&one).unwrap(), json!("tfreg"));
        for bad in [json!(5), json!([5]), json!(null), json!({"a": 1})] {
            let err = serde_json::from_value::<Audience>(bad.clone()).unwrap_err();
            assert!(!err.to_string().is_empty(), "{bad}");
        }
        let err = serde_json::from_value::<Audience>(json!(5)).unwrap_err();
        assert!(err.to_string().contains("a string or a list of strings"));
    }

    #[test]
    fn the_audience_must_name_us_and_azp_must_too() {
        let one = |a: &str| Audience::One(a.into());
        let many = |a: &[&str]| Audience::Many(a.iter().map(|s| s.to_string()).collect());
        assert_eq!(check_audience(&one("tfreg"), None, "tfreg"), Ok(()));
        assert_eq!(
            check_audience(&one("tfreg"), Some("tfreg"), "tfreg"),
            Ok(())
        );
        assert_eq!(
            check_audience(&many(&["api", "tfreg"]), Some("tfreg"), "tfreg"),
            Ok(())
        );
        let wrong = |aud, azp| check_audience(&aud, azp, "tfreg").unwrap_err();
        for (aud, azp) in [
            (one("other"), None),
            (one("TFREG"), None),
            (one("tfreg "), None),
            (one(""), None),
            (many(&[]), None),
            (many(&["api", "other"]), Some("tfreg")),
        ] {
            assert!(matches!(wrong(aud, azp), ClaimError::WrongAudience { .. }));
        }
        assert!(matches!(
            wrong(many(&["api", "tfreg"]), None),
            ClaimError::MissingAzp { .. }
        ));
        assert!(matches!(
            wrong(many(&["tfreg", "tfreg"]), None),
            ClaimError::MissingAzp { .. }
        ));
        assert!(matches!(
            wrong(many(&["api", "tfreg"]), Some("api")),
            ClaimError::WrongAzp { .. }
        ));
        assert!(matches!(
            wrong(one("tfreg"), Some("other")),
            ClaimError::WrongAzp { .. }
        ));
        assert_eq!(
            wrong(one("x"), None).to_string(),
            "the token is for another audience: aud does not include \"tfreg\""
        );
    }

    #[test]
    fn a_leeway_past_the_end_of_time_is_not_expiry() {
        // proptest's find (a fresh clone's run): exp + leeway overflows u64.
        let t = times(17_051_803_401_839_702_047, 0, None);
        assert_eq!(
            check_times(&t, u64::MAX, 1_394_940_671_869_849_569, None),
            Ok(())
        );
        assert!(check_times(&t, u64::MAX, 1_394_940_671_869_849_568, None).is_err());
    }

    #[test]
    fn claim_strings_reads_a_list_or_a_lone_string() {
        let claims = json!({"groups": ["a", 5, "b"], "one": "x", "n": 5, "empty": []});
        let claims = claims.as_object().unwrap();
        assert_eq!(claim_strings(claims, "groups"), ["a", "b"]);
        assert_eq!(claim_strings(claims, "one"), ["x"]);
        assert!(claim_strings(claims, "n").is_empty());
        assert!(claim_strings(claims, "empty").is_empty());
        assert!(claim_strings(claims, "missing").is_empty());
    }

    #[test]
    fn claims_are_compared_by_their_json_text() {
        assert_eq!(claim_text(&json!("x")).as_deref(), Some("x"));
        assert_eq!(claim_text(&json!(true)).as_deref(), Some("true"));
        assert_eq!(claim_text(&json!(false)).as_deref(), Some("false"));
        assert_eq!(claim_text(&json!(12345)).as_deref(), Some("12345"));
        assert_eq!(claim_text(&json!(-3)).as_deref(), Some("-3"));
        assert_eq!(claim_text(&json!(1.5)).as_deref(), Some("1.5"));
        for none in [json!(null), json!(["x"]), json!({"x": 1})] {
            assert_eq!(claim_text(&none), None);
        }
    }

    fn small_time() -> impl Strategy<Value = u64> {
        prop_oneof![0..2_000u64, any::<u64>(), (u64::MAX - 200)..=u64::MAX]
    }

    proptest! {
        #![proptest_config(crate::property_config())]

        /// `check_times` accepts exactly what its documentation says.
        #[test]
        fn check_times_is_its_specification(
            exp in small_time(), iat in small_time(), nbf in proptest::option::of(small_time()),
            now in small_time(), leeway in prop_oneof![0..120u64, any::<u64>()],
            max in proptest::option::of(prop_oneof![0..2_000u64, any::<u64>()]),
        ) {
            let (e, i, n, l) = (exp as u128, iat as u128, now as u128, leeway as u128);
            let spec = e > i
                && nbf.is_none_or(|b| (b as u128) < e && (b as u128) <= n + l)
                && max.is_none_or(|m| e - i <= m as u128)
                && e + l > n
                && i <= n + l;
            let got = check_times(&times(exp, iat, nbf), now, leeway, max);
            prop_assert_eq!(got.is_ok(), spec, "{:?}", got);
        }

        /// `check_audience` accepts exactly what OIDC Core 3.1.3.7 says.
        #[test]
        fn check_audience_is_its_specification(
            aud in proptest::collection::vec("[ab]", 0..4), one in any::<bool>(),
            azp in proptest::option::of("[ab]"),
        ) {
            let audience = if one && !aud.is_empty() {
                Audience::One(aud[0].clone())
            } else {
                Audience::Many(aud.clone())
            };
            let list = audience.as_slice();
            let spec = list.iter().any(|a| a == "a")
                && (list.len() <= 1 || azp.is_some())
                && azp.as_deref().is_none_or(|z| z == "a");
            prop_assert_eq!(check_audience(&audience, azp.as_deref(), "a").is_ok(), spec);
        }
    }
}
