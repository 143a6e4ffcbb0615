//! A README in Markdown as HTML that is safe to put in a page: rendered with
//! pulldown-cmark (CommonMark, tables, strikethrough, task lists), then
//! sanitised with ammonia, which keeps an allow-list of tags and attributes.
//! No script survives: `<script>`, `<style>`, `<iframe>`, `<object>`,
//! `<form>` and `<svg>` go, with every `on*` and `style` attribute; links keep
//! only `http`, `https` and `mailto` URLs and in-page anchors (a relative link
//! points into the archive, which no page serves); every link gets
//! `rel="noopener noreferrer nofollow"`. The only `<input>` is a task list's
//! disabled checkbox. Images go too: a private registry's
//! pages load nothing from elsewhere (an image would tell its host who read
//! the page), and the Content-Security-Policy would block them anyway.

use std::collections::HashSet;

use pulldown_cmark::{Options, Parser, html};

/// `markdown` as sanitised HTML.
pub fn render_markdown(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut raw = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut raw, Parser::new_ext(markdown, options));
    ammonia::Builder::default()
        .rm_tags(["img"])
        // Task lists' checkboxes, as pulldown-cmark renders them, and
        // nothing else: every `<input>` is made a disabled checkbox, with no
        // name, value or form target (no fake "enter your token" box).
        .add_tags(["input"])
        .add_tag_attributes("input", ["checked"])
        .set_tag_attribute_value("input", "type", "checkbox")
        .set_tag_attribute_value("input", "disabled", "")
        .add_allowed_classes(
            "code",
            [
                "language-hcl",
                "language-terraform",
                "language-tf",
                "language-sh",
                "language-shell",
                "language-bash",
                "language-console",
                "language-json",
                "language-yaml",
            ],
        )
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .link_rel(Some("noopener noreferrer nofollow"))
        .url_relative(ammonia::UrlRelative::Custom(Box::new(anchor_only)))
        .id_prefix(Some("readme-"))
        .clean(&raw)
        .to_string()
}

/// A relative URL survives only as an in-page anchor.
fn anchor_only(url: &str) -> Option<std::borrow::Cow<'_, str>> {
    url.starts_with('#').then(|| url.into())
}

/// Longest description taken from a README.
pub const MAX_DESCRIPTION_CHARS: usize = 280;

/// The text of the README's first paragraph (headings, badges and HTML
/// skipped), as search results and lists show a module: plain text, at most
/// [`MAX_DESCRIPTION_CHARS`] characters.
pub fn first_paragraph(markdown: &str) -> Option<String> {
    use pulldown_cmark::{Event, Tag, TagEnd};
    let mut depth = 0usize;
    let mut text = String::new();
    for event in Parser::new_ext(markdown, Options::empty()) {
        match event {
            Event::Start(Tag::Paragraph) => depth += 1,
            Event::End(TagEnd::Paragraph) if depth > 0 => {
                depth -= 1;
                let squeezed = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if !squeezed.is_empty() {
                    return Some(shorten(&squeezed));
                }
                text.clear();
            }
            Event::Text(t) | Event::Code(t) if depth > 0 => text.push_str(&t),
            Event::SoftBreak | Event::HardBreak if depth > 0 => text.push(' '),
            _ => {}
        }
    }
    None
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}
