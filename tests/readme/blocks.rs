//! The README's code, read with a CommonMark parser: fenced blocks (with the
//! `test=NAME` mark that makes one part of the walk-through), inline code
//! spans with the paragraph they stand in, and shell commands as a reader
//! pastes them (continuation lines joined, comments dropped). Pure.

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// A fenced code block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The first word of the info string (`sh`, `hcl`, ...).
    pub lang: String,
    /// `test=NAME` in the info string: the walk-through runs it under NAME.
    pub name: Option<String>,
    pub text: String,
    /// 1-based line of the opening fence.
    pub line: usize,
}

/// An inline code span and the code spans before it in its paragraph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub code: String,
    /// The first code span of the paragraph or list item it stands in.
    pub lead: Option<String>,
    pub line: usize,
}

#[derive(Debug, Default)]
pub struct Readme {
    pub blocks: Vec<Block>,
    pub spans: Vec<Span>,
}

impl Readme {
    pub fn parse(text: &str) -> Readme {
        let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
        let mut readme = Readme::default();
        let mut open: Option<Block> = None;
        let mut lead: Option<String> = None;
        for (event, range) in Parser::new(text).into_offset_iter() {
            match event {
                Event::Start(Tag::CodeBlock(kind)) => {
                    let info = match kind {
                        CodeBlockKind::Fenced(info) => info.to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    let mut words = info.split_whitespace();
                    let lang = words.next().unwrap_or("").to_string();
                    let name = words
                        .find_map(|w| w.strip_prefix("test="))
                        .map(str::to_string);
                    open = Some(Block {
                        lang,
                        name,
                        text: String::new(),
                        line: line_of(range.start),
                    });
                }
                Event::Text(t) if open.is_some() => {
                    if let Some(b) = open.as_mut() {
                        b.text.push_str(&t);
                    }
                }
                Event::End(TagEnd::CodeBlock) => readme.blocks.extend(open.take()),
                Event::Start(Tag::Paragraph | Tag::Item | Tag::TableCell) => lead = None,
                Event::Code(code) => {
                    let code = code.to_string();
                    readme.spans.push(Span {
                        code: code.clone(),
                        lead: lead.clone(),
                        line: line_of(range.start),
                    });
                    lead.get_or_insert(code);
                }
                _ => {}
            }
        }
        readme
    }

    /// The block marked `test=name`.
    pub fn block(&self, name: &str) -> &Block {
        let found: Vec<&Block> = self
            .blocks
            .iter()
            .filter(|b| b.name.as_deref() == Some(name))
            .collect();
        match found[..] {
            [one] => one,
            [] => panic!("README.md has no block marked test={name}: the walk-through needs it"),
            _ => panic!("README.md has {} blocks marked test={name}", found.len()),
        }
    }

    /// The names of every marked block, in README order.
    pub fn names(&self) -> Vec<&str> {
        self.blocks
            .iter()
            .filter_map(|b| b.name.as_deref())
            .collect()
    }
}

/// The commands of a shell block as a reader pastes them: a line ending in
/// `\` continues on the next, `#` starts a comment (outside quotes), blank
/// lines drop out.
pub fn commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let line = line.trim_end();
        let line = if current.is_empty() {
            line
        } else {
            line.trim_start()
        };
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head.trim_end());
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let command = strip_comment(&current).trim().to_string();
        if !command.is_empty() {
            out.push(command);
        }
        current.clear();
    }
    out
}

/// `line` without a trailing `# comment` (a `#` outside quotes, at the
/// start or after a space).
pub fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// A command's words, split as the shell would for the simple commands the
/// README shows (quotes grouped, no expansion).
pub fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# Title\n\nRun `tfreg serve` with `--private` or `--listen ADDR`.\n\n```sh test=one\ntfreg publish module ./m \\\n    --namespace acme   # a comment\n\necho '# not a comment'\n```\n\n- `tfreg token list` and `--json`\n\n```hcl\nx = 1\n```\n";

    #[test]
    fn fenced_blocks_keep_their_mark_text_and_line() {
        let readme = Readme::parse(SAMPLE);
        assert_eq!(readme.blocks.len(), 2);
        let one = readme.block("one");
        assert_eq!(one.lang, "sh");
        assert_eq!(one.line, 5);
        assert!(one.text.starts_with("tfreg publish module ./m \\\n"));
        assert_eq!(readme.blocks[1].lang, "hcl");
        assert_eq!(readme.blocks[1].name, None);
        assert_eq!(readme.names(), ["one"]);
    }

    #[test]
    fn spans_know_the_first_span_of_their_paragraph() {
        let readme = Readme::parse(SAMPLE);
        let leads: Vec<(&str, Option<&str>)> = readme
            .spans
            .iter()
            .map(|s| (s.code.as_str(), s.lead.as_deref()))
            .collect();
        assert_eq!(
            leads,
            [
                ("tfreg serve", None),
                ("--private", Some("tfreg serve")),
                ("--listen ADDR", Some("tfreg serve")),
                ("tfreg token list", None),
                ("--json", Some("tfreg token list")),
            ]
        );
        assert_eq!(readme.spans[0].line, 3);
    }

    #[test]
    fn commands_join_continuations_and_drop_comments() {
        let readme = Readme::parse(SAMPLE);
        assert_eq!(
            commands(&readme.block("one").text),
            [
                "tfreg publish module ./m --namespace acme",
                "echo '# not a comment'"
            ]
        );
        assert_eq!(strip_comment("a#b # c"), "a#b ");
    }

    #[test]
    fn words_group_quotes() {
        assert_eq!(
            words(r#"tfreg deprecate provider acme/w 1.2.0 --message "use 2.x" ''"#),
            [
                "tfreg",
                "deprecate",
                "provider",
                "acme/w",
                "1.2.0",
                "--message",
                "use 2.x",
                ""
            ]
        );
    }

    #[test]
    #[should_panic(expected = "no block marked test=missing")]
    fn a_missing_block_fails_the_walk() {
        Readme::parse(SAMPLE).block("missing");
    }
}
