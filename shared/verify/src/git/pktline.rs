//! pkt-lines (gitprotocol-common) and what protocol v2 says in them
//! (gitprotocol-v2): the capability advertisement, `ls-refs` output and the
//! fetch response, whose `packfile` section is side-band demultiplexed.
//! Every length is checked; nothing here panics on any input.

use super::ObjectId;

/// Most bytes of one pkt-line, its 4 length digits included.
pub const MAX_PKT_LEN: usize = 65520;
/// Most refs one `ls-refs` answer may list.
pub const MAX_REFS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PktError {
    #[error("a pkt-line is cut short")]
    Truncated,
    #[error("a pkt-line has a bad length {0:?}")]
    BadLength(String),
    #[error("the server does not speak protocol version 2")]
    NotV2,
    #[error("the server's fetch lacks {0}")]
    Missing(&'static str),
    #[error("the repository's object format is {0}, not sha1")]
    ObjectFormat(String),
    #[error("the server said: {0}")]
    Server(String),
    #[error("unexpected {what}: {line:?}")]
    Unexpected { what: &'static str, line: String },
    #[error("more than {MAX_REFS} refs")]
    TooManyRefs,
    #[error("the answer has no packfile")]
    NoPack,
}

/// One packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pkt<'a> {
    /// `0000`
    Flush,
    /// `0001`
    Delim,
    /// `0002`
    ResponseEnd,
    Data(&'a [u8]),
}

/// Reads packets off a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next packet; `None` at the end of the input.
    pub fn next_pkt(&mut self) -> Result<Option<Pkt<'a>>, PktError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let head = self.rest.get(..4).ok_or(PktError::Truncated)?;
        let bad = || PktError::BadLength(String::from_utf8_lossy(head).into_owned());
        let text = std::str::from_utf8(head).map_err(|_| bad())?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let len = usize::from_str_radix(text, 16).map_err(|_| bad())?;
        let pkt = match len {
            0 => Pkt::Flush,
            1 => Pkt::Delim,
            2 => Pkt::ResponseEnd,
            3 => return Err(bad()),
            n if n > MAX_PKT_LEN => return Err(bad()),
            n => Pkt::Data(self.rest.get(4..n).ok_or(PktError::Truncated)?),
        };
        self.rest = &self.rest[len.max(4)..];
        Ok(Some(pkt))
    }

    /// The next packet, which must be there.
    fn must(&mut self) -> Result<Pkt<'a>, PktError> {
        self.next_pkt()?.ok_or(PktError::Truncated)
    }
}

/// Append `payload` as one data pkt-line (at most `MAX_PKT_LEN - 4` bytes).
pub fn write_data(out: &mut Vec<u8>, payload: &[u8]) -> Result<(), PktError> {
    let len = payload.len() + 4;
    if len > MAX_PKT_LEN {
        return Err(PktError::BadLength(len.to_string()));
    }
    out.extend_from_slice(format!("{len:04x}").as_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

pub fn write_flush(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0000");
}

pub fn write_delim(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0001");
}

/// A text line: trailing `\n` dropped; not UTF-8 is shown lossily.
fn line(data: &[u8]) -> String {
    String::from_utf8_lossy(data.strip_suffix(b"\n").unwrap_or(data)).into_owned()
}

/// `ERR <message>`, as a server may send instead of any packet.
fn server_error(text: &str) -> Option<PktError> {
    text.strip_prefix("ERR ")
        .map(|m| PktError::Server(m.to_string()))
}

/// A v2 capability advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertisement {
    /// `key[=value]`, in order.
    pub capabilities: Vec<(String, Option<String>)>,
}

impl Advertisement {
    pub fn get(&self, key: &str) -> Option<Option<&str>> {
        self.capabilities
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref())
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Does `command` list `feature` (`fetch=shallow filter`)?
    pub fn has_feature(&self, command: &str, feature: &str) -> bool {
        matches!(self.get(command), Some(Some(v)) if v.split(' ').any(|f| f == feature))
    }
}

/// The answer to `GET info/refs?service=git-upload-pack` with
/// `Git-Protocol: version=2`. As git's `remote-curl.c` reads it: an optional
/// `# service=git-upload-pack` line and its flush (older servers, GitHub),
/// then `version 2` and the capabilities up to a flush. It must offer
/// `fetch` with `shallow` and, if it names one, the sha1 object format.
pub fn parse_advertisement(body: &[u8]) -> Result<Advertisement, PktError> {
    let mut reader = Reader::new(body);
    let mut first = reader.must()?;
    if let Pkt::Data(d) = first
        && line(d).starts_with("# service=")
    {
        if line(d) != "# service=git-upload-pack" {
            return Err(PktError::Unexpected {
                what: "service",
                line: line(d),
            });
        }
        // git tolerates the service line with or without its flush.
        first = reader.must()?;
        if first == Pkt::Flush {
            first = reader.must()?;
        }
    }
    match first {
        Pkt::Data(d) if line(d) == "version 2" => {}
        Pkt::Data(d) => {
            return Err(server_error(&line(d)).unwrap_or(PktError::NotV2));
        }
        _ => return Err(PktError::NotV2),
    }
    let mut capabilities = Vec::new();
    loop {
        match reader.must()? {
            Pkt::Flush => break,
            Pkt::Data(d) => {
                let text = line(d);
                let cap = match text.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (text, None),
                };
                if capabilities.len() >= 1024 {
                    return Err(PktError::Unexpected {
                        what: "capability count",
                        line: cap.0,
                    });
                }
                capabilities.push(cap);
            }
            other => {
                return Err(PktError::Unexpected {
                    what: "packet in the advertisement",
                    line: format!("{other:?}"),
                });
            }
        }
    }
    let ad = Advertisement { capabilities };
    if !ad.has("fetch") {
        return Err(PktError::Missing("the fetch command"));
    }
    if !ad.has_feature("fetch", "shallow") {
        return Err(PktError::Missing("shallow"));
    }
    if let Some(format) = ad.get("object-format") {
        let format = format.unwrap_or_default();
        if format != "sha1" {
            return Err(PktError::ObjectFormat(format.to_string()));
        }
    }
    Ok(ad)
}

/// One ref listed by `ls-refs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRef {
    pub name: String,
    pub id: ObjectId,
    /// `peeled:`: an annotated tag's target.
    pub peeled: Option<ObjectId>,
    /// `symref-target:`.
    pub symref_target: Option<String>,
}

impl RemoteRef {
    /// What the ref names once tags are peeled.
    pub fn target(&self) -> ObjectId {
        self.peeled.unwrap_or(self.id)
    }
}

/// `command=ls-refs` with `peel`, `symrefs` and one `ref-prefix` each.
pub fn ls_refs_request(prefixes: &[String]) -> Result<Vec<u8>, PktError> {
    let mut out = Vec::new();
    write_data(&mut out, b"command=ls-refs\n")?;
    write_delim(&mut out);
    write_data(&mut out, b"peel\n")?;
    write_data(&mut out, b"symrefs\n")?;
    for prefix in prefixes {
        write_data(&mut out, format!("ref-prefix {prefix}\n").as_bytes())?;
    }
    write_flush(&mut out);
    Ok(out)
}

/// `ls-refs` output: `<oid> <name>[ symref-target:<t>][ peeled:<oid>]`
/// lines up to a flush.
pub fn parse_ls_refs(body: &[u8]) -> Result<Vec<RemoteRef>, PktError> {
    let mut reader = Reader::new(body);
    let mut refs = Vec::new();
    loop {
        match reader.must()? {
            Pkt::Flush => break,
            Pkt::Data(d) => {
                let text = line(d);
                if let Some(err) = server_error(&text) {
                    return Err(err);
                }
                if refs.len() >= MAX_REFS {
                    return Err(PktError::TooManyRefs);
                }
                refs.push(parse_ref(&text)?);
            }
            other => {
                return Err(PktError::Unexpected {
                    what: "packet in ls-refs",
                    line: format!("{other:?}"),
                });
            }
        }
    }
    end(reader)?;
    Ok(refs)
}

fn parse_ref(text: &str) -> Result<RemoteRef, PktError> {
    let bad = || PktError::Unexpected {
        what: "ref line",
        line: text.to_string(),
    };
    let mut words = text.split(' ');
    let id = words.next().and_then(ObjectId::from_hex).ok_or_else(bad)?;
    let name = words.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
    let mut r = RemoteRef {
        name: name.to_string(),
        id,
        peeled: None,
        symref_target: None,
    };
    for attr in words {
        if let Some(p) = attr.strip_prefix("peeled:") {
            r.peeled = Some(ObjectId::from_hex(p).ok_or_else(bad)?);
        } else if let Some(t) = attr.strip_prefix("symref-target:") {
            r.symref_target = Some(t.to_string());
        }
        // Other attributes are for other arguments; ignored as git does.
    }
    Ok(r)
}

/// Only a response-end may follow the final flush.
fn end(mut reader: Reader<'_>) -> Result<(), PktError> {
    match reader.next_pkt()? {
        None | Some(Pkt::ResponseEnd) if reader.is_empty() => Ok(()),
        _ => Err(PktError::Unexpected {
            what: "data after the end",
            line: String::new(),
        }),
    }
}

/// `command=fetch` for one commit, its history cut at depth 1: no
/// progress, offset deltas allowed, no thin pack (we have nothing).
pub fn fetch_request(want: &ObjectId) -> Result<Vec<u8>, PktError> {
    let mut out = Vec::new();
    write_data(&mut out, b"command=fetch\n")?;
    write_delim(&mut out);
    for arg in [
        "no-progress\n".to_string(),
        "ofs-delta\n".to_string(),
        "deepen 1\n".to_string(),
        format!("want {want}\n"),
        "done\n".to_string(),
    ] {
        write_data(&mut out, arg.as_bytes())?;
    }
    write_flush(&mut out);
    Ok(out)
}

/// A fetch response: the shallow commits it names and the pack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponse {
    pub shallow: Vec<ObjectId>,
    pub pack: Vec<u8>,
}

/// The sections of a fetch response (`acknowledgments`, `shallow-info`,
/// `wanted-refs`, then `packfile`), each after a delimiter. The packfile's
/// packets are side-band: band 1 is the pack, band 2 progress (ignored),
/// band 3 a fatal error of the server's. `max_pack` bounds the pack.
pub fn parse_fetch_response(body: &[u8], max_pack: usize) -> Result<FetchResponse, PktError> {
    let mut reader = Reader::new(body);
    let mut out = FetchResponse::default();
    loop {
        let header = match reader.must()? {
            Pkt::Data(d) => line(d),
            Pkt::Flush => return Err(PktError::NoPack),
            other => {
                return Err(PktError::Unexpected {
                    what: "section start",
                    line: format!("{other:?}"),
                });
            }
        };
        if let Some(err) = server_error(&header) {
            return Err(err);
        }
        let known = ["acknowledgments", "shallow-info", "wanted-refs"];
        if header == "packfile" {
            read_packfile(&mut reader, &mut out.pack, max_pack)?;
            end(reader)?;
            return Ok(out);
        }
        if !known.contains(&header.as_str()) {
            return Err(PktError::Unexpected {
                what: "section",
                line: header,
            });
        }
        // Lines until the delimiter that starts the next section.
        loop {
            match reader.must()? {
                Pkt::Delim => break,
                Pkt::Flush => return Err(PktError::NoPack),
                Pkt::Data(d) => {
                    let text = line(d);
                    if let Some(err) = server_error(&text) {
                        return Err(err);
                    }
                    if header == "shallow-info"
                        && let Some(id) = text.strip_prefix("shallow ")
                    {
                        let id = ObjectId::from_hex(id).ok_or(PktError::Unexpected {
                            what: "shallow line",
                            line: text.clone(),
                        })?;
                        if out.shallow.len() >= MAX_REFS {
                            return Err(PktError::TooManyRefs);
                        }
                        out.shallow.push(id);
                    }
                }
                Pkt::ResponseEnd => return Err(PktError::Truncated),
            }
        }
    }
}

fn read_packfile(reader: &mut Reader<'_>, pack: &mut Vec<u8>, max: usize) -> Result<(), PktError> {
    loop {
        match reader.must()? {
            Pkt::Flush => return Ok(()),
            Pkt::Data([1, data @ ..]) => {
                if pack.len() + data.len() > max {
                    return Err(PktError::BadLength(format!("a pack over {max} bytes")));
                }
                pack.extend_from_slice(data);
            }
            Pkt::Data([2, ..]) => {}
            Pkt::Data([3, message @ ..]) => return Err(PktError::Server(line(message))),
            Pkt::Data(d) => {
                return Err(PktError::Unexpected {
                    what: "side-band packet",
                    line: line(d.get(..d.len().min(40)).unwrap_or_default()),
                });
            }
            other => {
                return Err(PktError::Unexpected {
                    what: "packet in the packfile",
                    line: format!("{other:?}"),
                });
            }
        }
    }
}
