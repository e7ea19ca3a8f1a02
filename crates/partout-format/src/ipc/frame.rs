//! The framing of Arrow IPC messages, sans I/O, and the one table of how much a compressed
//! buffer may claim. Every reader of untrusted IPC bytes in partout frames through
//! [`prefix`] and checks each message with [`MessageCheck`](super::MessageCheck), which
//! bounds compressed buffers by [`decompressed_bound`].
//!
//! ```text
//! message:        [ 0xFFFFFFFF | header length: i32 | Message flatbuffer | body ]
//! legacy message: [ header length: i32 | Message flatbuffer | body ]
//! end of stream:  [ 0xFFFFFFFF | 0 ]  or  [ 0 ]
//! ```

use crate::{FormatError, Result};
use arrow_ipc::CompressionType;

/// The marker before a message's length (the IPC format since 0.15).
pub const CONTINUATION: [u8; 4] = [0xff; 4];

/// The largest buffer any message may claim, compressed or not (16 GiB).
pub const MAX_BUFFER: u64 = 1 << 34;

/// What a message's length prefix says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    /// A message whose flatbuffer header (padding included) is this long follows.
    Message {
        /// Bytes of the header.
        header_len: usize,
    },
    /// The end-of-stream marker.
    End,
}

/// The length prefix at the start of `bytes` and how many bytes it took (4 or 8); `None` when
/// `bytes` is too short to tell (give it 8 bytes, or 4 at the very end of the input).
///
/// # Errors
/// [`FormatError::Corrupt`] for a negative length.
///
/// ```
/// use partout_format::ipc::frame::{Prefix, prefix};
///
/// let mut framed = vec![0xff; 4];
/// framed.extend_from_slice(&136i32.to_le_bytes());
/// assert_eq!(prefix(&framed).unwrap(), Some((Prefix::Message { header_len: 136 }, 8)));
/// assert_eq!(prefix(&[0xff; 4]).unwrap(), None);
/// assert_eq!(prefix(&[0; 4]).unwrap(), Some((Prefix::End, 4)));
/// assert!(prefix(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80]).is_err());
/// ```
pub fn prefix(bytes: &[u8]) -> Result<Option<(Prefix, usize)>> {
    let (word, taken) = match bytes {
        [0xff, 0xff, 0xff, 0xff, rest @ ..] => match rest.first_chunk::<4>() {
            Some(word) => (*word, 8),
            None => return Ok(None),
        },
        _ => match bytes.first_chunk::<4>() {
            Some(word) => (*word, 4),
            None => return Ok(None),
        },
    };
    match i32::from_le_bytes(word) {
        0 => Ok(Some((Prefix::End, taken))),
        len => match usize::try_from(len) {
            Ok(header_len) => Ok(Some((Prefix::Message { header_len }, taken))),
            Err(_) => Err(FormatError::Corrupt(format!(
                "Arrow IPC message: a header length of {len}"
            ))),
        },
    }
}

/// The most bytes a buffer compressed to `compressed` bytes by `codec` can decompress to (at
/// most [`MAX_BUFFER`]): what its first eight bytes may claim. An LZ4 frame makes at most 255
/// bytes of one (a match's length costs a byte per 255); a Zstandard block of four bytes (an
/// RLE block) makes up to 128 KiB.
///
/// ```
/// use arrow_ipc::CompressionType;
/// use partout_format::ipc::frame::decompressed_bound;
///
/// assert_eq!(decompressed_bound(CompressionType::LZ4_FRAME, 1000), 256_000 + 4096);
/// assert!(decompressed_bound(CompressionType::ZSTD, 1000) > 32_000_000);
/// assert_eq!(decompressed_bound(CompressionType::ZSTD, u64::MAX), 1 << 34);
/// ```
pub fn decompressed_bound(codec: CompressionType, compressed: u64) -> u64 {
    let bound = match codec {
        CompressionType::ZSTD => compressed
            .saturating_mul(32 << 10)
            .saturating_add(128 << 10),
        _ => compressed.saturating_mul(256).saturating_add(4 << 10),
    };
    bound.min(MAX_BUFFER)
}
