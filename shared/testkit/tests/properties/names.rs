//! Addresses ([`tfreg_model::address`]) and versions ([`tfreg_model::version`]): any
//! string is either accepted or refused with a 400, never a panic; what is
//! accepted is normalised, and the normal form parses back to itself. Also the
//! value strategies the router and release file properties build on.

use proptest::prelude::*;

use super::config;
use tfreg_model::Invalid;
use tfreg_model::address::{
    Hostname, ModuleName, Platform, ProviderName, module_name, module_namespace, module_system,
    namespace, platform_part, provider_type,
};
use tfreg_model::version::Version;

/// Strings a path segment or a publisher could send: anything (any unicode),
/// text made of the characters the parsers care about, and long runs.
pub(crate) fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9._~:+%/\\\\ @\\[\\]#?-]{0,80}",
        "[a-zä-ü0-9.-]{0,40}(:[0-9+-]{0,7})?",
        "[0-9]{0,3}\\.[0-9]{0,3}\\.[0-9]{0,3}(-[0-9A-Za-z.+-]{0,20})?",
        ("[a-z0-9]", 60..300usize).prop_map(|(c, n)| c.repeat(n)),
    ]
}

/// A provider namespace or type, as a publisher may spell it (any case).
pub(crate) fn provider_part() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?"
}

/// A module namespace or name, as a publisher may spell it.
pub(crate) fn module_part() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9]([a-zA-Z0-9_-]{0,62}[a-zA-Z0-9])?"
}

pub(crate) fn provider_name() -> impl Strategy<Value = ProviderName> {
    (provider_part(), provider_part()).prop_map(|(ns, ty)| ProviderName::parse(&ns, &ty).unwrap())
}

pub(crate) fn module_name_value() -> impl Strategy<Value = ModuleName> {
    (module_part(), module_part(), "[a-zA-Z0-9]{1,64}")
        .prop_map(|(ns, name, system)| ModuleName::parse(&ns, &name, &system).unwrap())
}

pub(crate) fn platform() -> impl Strategy<Value = Platform> {
    ("[a-z0-9]{1,32}", "[a-z0-9]{1,32}").prop_map(|(os, arch)| Platform::parse(&os, &arch).unwrap())
}

/// A semantic version as written: numbers, and prerelease identifiers that are
/// numbers without leading zeros or contain a letter or dash.
pub(crate) fn version_text() -> impl Strategy<Value = String> {
    let number = prop_oneof![0..20u64, any::<u64>()].prop_map(|n| n.to_string());
    let identifier = prop_oneof![
        number.clone(),
        "[0-9A-Za-z-]{0,5}[A-Za-z-][0-9A-Za-z-]{0,5}",
    ];
    (
        number.clone(),
        number.clone(),
        number,
        prop::collection::vec(identifier, 0..4),
    )
        .prop_map(|(major, minor, patch, pre)| {
            let mut v = format!("{major}.{minor}.{patch}");
            if !pre.is_empty() {
                v = format!("{v}-{}", pre.join("."));
            }
            v
        })
}

pub(crate) fn version() -> impl Strategy<Value = Version> {
    version_text().prop_filter_map("longer than 128 characters", |v| Version::parse(&v).ok())
}

/// A hostname as a user may type it: ASCII or unicode labels (IDNA applies),
/// an IPv4 address, and maybe a port.
pub(crate) fn hostname_text() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        "[a-zA-Z0-9]([a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?",
        "[a-zäöüßéπ]{1,3}",
    ];
    let host = prop_oneof![
        4 => prop::collection::vec(label, 1..100).prop_map(|labels| labels.join(".")),
        1 => any::<[u8; 4]>().prop_map(|ip| std::net::Ipv4Addr::from(ip).to_string()),
    ];
    (host, prop::option::of(1..=u16::MAX)).prop_map(|(host, port)| match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

pub(crate) fn hostname() -> impl Strategy<Value = Hostname> {
    hostname_text().prop_filter_map("not a hostname", |h| Hostname::parse(&h).ok())
}

/// The parser refused with a bounded message, or accepted: every address
/// and version parser's only error is [`Invalid`] (a 400), which the types
/// guarantee; what is left to check is that it returned (no panic) and that
/// its message stays short, whatever the input.
fn bad_request<T: std::fmt::Debug>(r: Result<T, Invalid>) -> Result<(), TestCaseError> {
    if let Err(Invalid(msg)) = r {
        prop_assert!(
            msg.len() <= 400,
            "an unbounded message: {} bytes",
            msg.len()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn any_text_is_accepted_or_refused_with_a_400(s in hostile_text()) {
        bad_request(namespace(&s))?;
        bad_request(module_namespace(&s))?;
        bad_request(provider_type(&s))?;
        bad_request(module_name(&s))?;
        bad_request(module_system(&s))?;
        bad_request(platform_part("os", &s))?;
        bad_request(Hostname::parse(&s))?;
        bad_request(Version::parse(&s))?;
    }

    #[test]
    fn accepted_parts_are_safe_and_normal(s in hostile_text()) {
        // Whatever an address parser accepts is one path segment, no dot-dot,
        // no escape, already in its normal form.
        for part in [namespace(&s), module_namespace(&s), provider_type(&s), module_name(&s), module_system(&s)]
            .into_iter()
            .flatten()
        {
            prop_assert!(!part.is_empty() && part.len() <= 64);
            prop_assert!(part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'), "{part:?}");
            prop_assert_eq!(module_namespace(&part).unwrap(), part.clone());
        }
    }

    #[test]
    fn a_hostname_normalises_to_a_form_that_parses_to_itself(s in prop_oneof![hostname_text(), hostile_text()]) {
        if let Ok(host) = Hostname::parse(&s) {
            let normal = host.as_str();
            prop_assert!(normal.len() <= 253 + 6, "{normal:?} is longer than a DNS name");
            prop_assert!(normal.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-:".contains(&b)), "{normal:?}");
            prop_assert_eq!(Hostname::parse(normal).ok(), Some(host.clone()));
            prop_assert_eq!(Hostname::parse(&host.to_string()).ok(), Some(host));
        }
    }

    #[test]
    fn names_print_and_parse_back(p in provider_name(), m in module_name_value(), pl in platform()) {
        let printed = p.to_string();
        let (ns, ty) = printed.split_once('/').unwrap();
        prop_assert_eq!(ProviderName::parse(ns, ty).unwrap(), p);
        let printed = m.to_string();
        let parts: Vec<&str> = printed.split('/').collect();
        prop_assert_eq!(ModuleName::parse(parts[0], parts[1], parts[2]).unwrap(), m);
        let printed = pl.to_string();
        let (os, arch) = printed.split_once('_').unwrap();
        prop_assert_eq!(Platform::parse(os, arch).unwrap(), pl);
    }

    #[test]
    fn versions_print_as_written_and_parse_back(v in version_text()) {
        match Version::parse(&v) {
            Ok(parsed) => {
                prop_assert_eq!(parsed.to_string(), v.clone());
                prop_assert_eq!(Version::parse(&parsed.to_string()).unwrap(), parsed);
            }
            // Only the length limit refuses a well-formed version.
            Err(_) => prop_assert!(v.len() > 128, "{v:?} refused"),
        }
    }

    #[test]
    fn accepted_text_is_the_version_it_prints(s in hostile_text()) {
        if let Ok(v) = Version::parse(&s) {
            prop_assert_eq!(v.to_string(), s);
        }
    }

    #[test]
    fn version_order_agrees_with_equality(a in version(), b in version()) {
        prop_assert_eq!(a == b, a.cmp(&b) == std::cmp::Ordering::Equal);
        prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
    }
}
