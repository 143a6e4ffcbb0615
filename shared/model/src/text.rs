//! Text that one person writes and others read: token names, deprecation
//! and yank messages, namespace names in lists. Terraform prints a
//! deprecation message on every `init`, lists and the audit show names: a
//! control character (newline, ESC: terminal escape sequences) or an
//! invisible format character (bidi overrides, zero-width characters:
//! spoofed text) in them would reach every reader. Refused, with a bound on
//! the length ([`readable`]); where such text is only quoted (a refusal's
//! message naming what a client sent), escaped instead ([`escaped`]).

use crate::error::Invalid;

/// Longest deprecation or yank message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// Unicode's format characters (general category Cf) and the line and
/// paragraph separators: invisible, or reordering the text around them.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Is `c` a character no reader should get: a control or format character?
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || INVISIBLE
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&(c as u32)))
}

/// `text` trimmed, if it is 1 to `max_chars` characters with none
/// [`unprintable`]; else why not, naming `what`.
pub fn readable(what: &str, text: &str, max_chars: usize) -> Result<String, Invalid> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Invalid::bad(format!("{what} is empty")));
    }
    if text.chars().count() > max_chars {
        return Err(Invalid::bad(format!(
            "{what} is longer than {max_chars} characters"
        )));
    }
    if let Some(c) = text.chars().find(|c| unprintable(*c)) {
        return Err(Invalid::bad(format!(
            "{what} holds the invisible or control character U+{:04X}: write plain text",
            c as u32
        )));
    }
    Ok(text.to_string())
}

/// Is `text` fit to be compared byte for byte with what another system
/// sends (a group name, a claim's value): 1 to `max_chars` characters, none
/// [`unprintable`], no spaces at its ends? Never trimmed: what is stored is
/// what matches.
pub fn verbatim(text: &str, max_chars: usize) -> bool {
    !text.is_empty()
        && text.chars().count() <= max_chars
        && text.trim() == text
        && !text.chars().any(unprintable)
}

/// `text` with every [`unprintable`] character written as its escape
/// (`\u{1b}`): for text that may quote what someone sent (a refusal's
/// message in the audit trail) and is shown to others as it is.
pub fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(unprintable) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unprintable(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_text_is_never_trimmed() {
        for ok in ["acme-publishers", "Registry Admins", "/org/team", "使用"] {
            assert!(verbatim(ok, 20), "{ok:?}");
        }
        for bad in ["", " a", "a ", "a\tb", "a\u{200b}b", "a\u{202e}b"] {
            assert!(!verbatim(bad, 20), "{bad:?}");
        }
        assert!(verbatim("使用", 2) && !verbatim("使用中", 2));
    }

    #[test]
    fn escaped_text_holds_no_unprintable_character() {
        assert_eq!(escaped("plain — déjà 使用"), "plain — déjà 使用");
        assert_eq!(
            escaped("a\nb\u{1b}[2J\u{202e}c\u{200b}"),
            "a\\u{a}b\\u{1b}[2J\\u{202e}c\\u{200b}"
        );
    }

    #[test]
    fn plain_text_of_any_script_is_readable() {
        for ok in [
            "use 2.x",
            "ci-acme",
            "déprécié — voir 2.0",
            "使用 2.x",
            "emoji 🚀",
        ] {
            assert_eq!(readable("a message", ok, 50).as_deref(), Ok(ok));
        }
        assert_eq!(
            readable("a name", "  padded  ", 10).as_deref(),
            Ok("padded")
        );
    }

    #[test]
    fn control_and_invisible_characters_are_refused() {
        for bad in [
            "line\nbreak",
            "escape \u{1b}[31mred",
            "bell\u{7}",
            "delete\u{7f}",
            "rtl \u{202e}gpj.exe",
            "zero\u{200b}width",
            "isolate \u{2067}x",
            "bom\u{feff}",
            "soft\u{ad}hyphen",
            "tag \u{e0041}",
            "line\u{2028}separator",
        ] {
            let err = readable("a message", bad, 100).unwrap_err();
            assert!(err.0.contains("U+"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn empty_and_long_text_are_refused() {
        assert!(readable("a name", "   ", 10).is_err());
        assert!(readable("a name", &"x".repeat(11), 10).is_err());
        assert!(
            readable("a name", &"é".repeat(10), 10).is_ok(),
            "characters, not bytes"
        );
    }
}
