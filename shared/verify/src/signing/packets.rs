//! The packet framing scan: the tag of every packet, independently of whether rPGP
//! can parse its body (RFC 9580 section 4.2).

use std::io::ErrorKind;

use pgp::packet::PacketHeader;
use pgp::types::{PacketLength, Tag};

const TRUNCATED: &str = "it is truncated (a packet is cut short)";

/// The tags of the packets in `data`, or why `data` is not a sequence of packets.
pub(super) fn scan_packets(data: &[u8]) -> Result<Vec<Tag>, String> {
    let mut rest = data;
    let mut tags = Vec::new();
    while !rest.is_empty() {
        // At least the first header byte is there, so running out of data means a
        // length field is cut short; any other error is a first byte that is no
        // packet header.
        let header = PacketHeader::try_from_reader(&mut rest).map_err(|e| {
            if e.kind() == ErrorKind::UnexpectedEof {
                TRUNCATED.to_string()
            } else if tags.is_empty() {
                "it is not OpenPGP data".to_string()
            } else {
                "it has trailing bytes that are not an OpenPGP packet".to_string()
            }
        })?;
        match header.packet_length() {
            PacketLength::Fixed(len) => skip(&mut rest, len)?,
            PacketLength::Indeterminate => rest = &[],
            PacketLength::Partial(first) => {
                // Partial body lengths: chunks, each followed by the next length,
                // until a fixed length marks the last chunk.
                let mut len = first;
                loop {
                    skip(&mut rest, len)?;
                    match PacketLength::try_from_reader(&mut rest)
                        .map_err(|_| TRUNCATED.to_string())?
                    {
                        PacketLength::Partial(next) => len = next,
                        PacketLength::Fixed(last) => {
                            skip(&mut rest, last)?;
                            break;
                        }
                        // Not produced by the new-format length reader; it would
                        // mean "the rest of the data".
                        PacketLength::Indeterminate => {
                            rest = &[];
                            break;
                        }
                    }
                }
            }
        }
        let tag = header.tag();
        if u8::from(tag) == 0 {
            return Err("it contains an invalid packet (tag 0)".to_string());
        }
        tags.push(tag);
    }
    Ok(tags)
}

/// Skip a packet body (or one chunk of it) of `len` bytes.
fn skip(rest: &mut &[u8], len: u32) -> Result<(), String> {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    *rest = rest.get(len..).ok_or_else(|| TRUNCATED.to_string())?;
    Ok(())
}
