//! Text that one person writes and others read: token names, deprecation
//! and yank messages, namespace names in lists. Terraform prints a
//! deprecation message on every `init`, lists and the audit show names: a
//! control character (newline, ESC: terminal escape sequences) or an
//! invisible format character (bidi overrides, zero-width characters:
//! spoofed text) in them would reach every reader, and so would characters
//! that draw nothing (Hangul fillers), marks with nothing to combine with
//! and marks stacked past any script's need. Refused, with a bound on the
//! length ([`readable`]; names also only the plain space, [`name`]); where
//! such text is only quoted (a refusal's message naming what a client
//! sent), escaped instead ([`escaped`]). Categories come from
//! `unicode-properties` (unicode-rs), so the format characters are every
//! Cf of its Unicode version, not a list kept here.

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

use crate::error::Invalid;

/// Longest deprecation or yank message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// Most combining marks one character may carry: enough for any script's
/// stacked vowels and tones (Vietnamese has 2, Tibetan 3 or 4); more is
/// "Zalgo" text, spilling over the lines above and below it.
pub const MAX_MARKS: usize = 4;

/// Characters that draw nothing though they are neither controls nor format
/// characters: the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0, letters
/// by category, often used for blank names), the combining grapheme joiner
/// and Khmer's inherent vowels (marks that are default-ignorable), and the
/// braille pattern blank.
const BLANK: &[char] = &[
    '\u{034F}', '\u{115F}', '\u{1160}', '\u{17B4}', '\u{17B5}', '\u{2800}', '\u{3164}', '\u{FFA0}',
];

/// Is `c` a character no reader should get: a control character (Cc), a
/// format character (Cf: bidi overrides, zero-width ones, tags), a line or
/// paragraph separator, one of the [`BLANK`]s, or a code point Unicode
/// keeps default-ignorable for the future (U+FFF0..U+FFF8,
/// U+E0000..U+E0FFF: a later font draws them as nothing)?
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c.general_category(),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
        || BLANK.contains(&c)
        || ('\u{FFF0}'..='\u{FFF8}').contains(&c)
        || ('\u{E0000}'..='\u{E0FFF}').contains(&c)
}

/// Why `text` would not show to its readers as it is, naming `what`: an
/// [`unprintable`] character; a combining mark (or variation selector) with
/// nothing to combine with (first, or after a space: drawn alone, on a
/// dotted circle or not at all); more than [`MAX_MARKS`] marks on one
/// character.
fn unshown(what: &str, text: &str) -> Option<Invalid> {
    let mut marks = 0;
    let mut base = false;
    for c in text.chars() {
        if unprintable(c) {
            return Some(Invalid::bad(format!(
                "{what} holds the invisible or control character U+{:04X}: write plain text",
                c as u32
            )));
        }
        if c.general_category_group() != GeneralCategoryGroup::Mark {
            marks = 0;
            base = !c.is_whitespace();
            continue;
        }
        if !base {
            return Some(Invalid::bad(format!(
                "{what} holds the combining mark U+{:04X} with no letter before it to combine with: write plain text",
                c as u32
            )));
        }
        marks += 1;
        if marks > MAX_MARKS {
            return Some(Invalid::bad(format!(
                "{what} stacks more than {MAX_MARKS} combining marks on one character: write plain text"
            )));
        }
    }
    None
}

/// `text` trimmed, if it is 1 to `max_chars` characters and shows as it is
/// (no [`unprintable`] character, no combining mark without a letter, at
/// most [`MAX_MARKS`] marks on one); else why not, naming `what`.
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
    match unshown(what, text) {
        Some(e) => Err(e),
        None => Ok(text.to_string()),
    }
}

/// A name people tell apart by eye (a token's): [`readable`], and its only
/// space the plain one, U+0020 (a no-break, ideographic or em space looks
/// like it, or like nothing, and makes a second name that reads the same).
pub fn name(what: &str, text: &str, max_chars: usize) -> Result<String, Invalid> {
    let text = readable(what, text, max_chars)?;
    if let Some(c) = text
        .chars()
        .find(|&c| c != ' ' && c.general_category() == GeneralCategory::SpaceSeparator)
    {
        return Err(Invalid::bad(format!(
            "{what} holds the space character U+{:04X}: use a plain space",
            c as u32
        )));
    }
    Ok(text)
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

    /// Names and messages that draw nothing or spoof: each refused with why.
    #[test]
    fn fillers_lone_and_stacked_marks_and_odd_spaces_are_refused() {
        let says = |text: &str| name("a token's name", text, 64).unwrap_err().0;
        for filler in [
            '\u{3164}', '\u{115F}', '\u{1160}', '\u{FFA0}', '\u{2800}', '\u{034F}',
        ] {
            assert_eq!(
                says(&format!("ci{filler}")),
                format!(
                    "a token's name holds the invisible or control character U+{:04X}: write plain text",
                    filler as u32
                )
            );
            // A name of fillers only (trim keeps them: they are not whitespace).
            assert!(readable("a name", &filler.to_string().repeat(3), 10).is_err());
        }
        assert_eq!(
            says("\u{0301}ci"),
            "a token's name holds the combining mark U+0301 with no letter before it to combine with: write plain text"
        );
        assert_eq!(
            says("ci \u{20DD}"),
            "a token's name holds the combining mark U+20DD with no letter before it to combine with: write plain text"
        );
        assert_eq!(
            says(&format!("ci{}", "\u{0300}".repeat(5))),
            "a token's name stacks more than 4 combining marks on one character: write plain text"
        );
        for space in ['\u{00A0}', '\u{2003}', '\u{3000}', '\u{202F}'] {
            assert_eq!(
                says(&format!("ci{space}prod")),
                format!(
                    "a token's name holds the space character U+{:04X}: use a plain space",
                    space as u32
                )
            );
        }
        // Unassigned default-ignorable code points, and a Cf this file never listed.
        assert!(unprintable('\u{E0100}') && unprintable('\u{FFF0}'));
        assert!(unprintable('\u{2061}') && unprintable('\u{110BD}'));
    }

    /// Every script's marks on their letters, emoji with their selector: kept.
    #[test]
    fn marks_on_letters_and_emoji_selectors_are_text() {
        for ok in [
            "cafe\u{0301}",         // NFD é, as macOS may send it
            "Vie\u{0323}\u{0302}t", // two marks on one letter
            "हिन्दी टोकन",
            "ภาษาไทย",
            "שָׁלוֹם",
            "❤\u{FE0F} ci",
            "ci prod",
        ] {
            assert_eq!(name("a name", ok, 64).as_deref(), Ok(ok), "{ok:?}");
        }
        // A message may hold other spaces (French typography, CJK text).
        assert!(readable("a message", "voir\u{00A0}: 2.0\u{3000}使用", 50).is_ok());
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
