//! The framing of Arrow IPC messages and the one table of how much a compressed buffer may
//! claim. Every reader of untrusted IPC streams in partout reads their messages through
//! [`MessageReader`] (from a slice or any `Read`, every length checked against the bytes
//! left), which reads length prefixes by [`prefix`]; each message is then checked by
//! [`MessageCheck`](super::MessageCheck), which bounds compressed buffers by
//! [`decompressed_bound`].
//!
//! ```text
//! message:        [ 0xFFFFFFFF | header length: i32 | Message flatbuffer | body ]
//! legacy message: [ header length: i32 | Message flatbuffer | body ]
//! end of stream:  [ 0xFFFFFFFF | 0 ]  or  [ 0 ]
//! ```

use crate::{FormatError, Result};
use arrow_ipc::CompressionType;
use std::io::{self, Read};

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

/// One message's header as [`MessageReader`] read it: its flatbuffer (with the padding its
/// length prefix counts), checked to parse, and the length of the body that follows it,
/// checked to lie within the bytes left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    bytes: Vec<u8>,
    body_len: u64,
    /// Where the flatbuffer starts, in bytes from the reader's start.
    at: u64,
}

impl Header {
    /// The flatbuffer's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The flatbuffer's bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The length of the message's body.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Where the flatbuffer starts, in bytes from the reader's start (its body starts
    /// [`bytes`](Self::bytes)`().len()` later).
    pub fn at(&self) -> u64 {
        self.at
    }

    /// The message, parsed (it parsed once already, when it was read).
    ///
    /// # Errors
    /// [`FormatError::Corrupt`] as when it was read (never, for the same bytes).
    pub fn message(&self) -> Result<arrow_ipc::Message<'_>> {
        parse(&self.bytes)
    }
}

/// What comes next in a stream of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A message: its header read, its body next.
    Message(Header),
    /// The end-of-stream marker (what follows, if anything, is another stream).
    End,
}

/// A flatbuffer `Message`, verified.
fn parse(header: &[u8]) -> Result<arrow_ipc::Message<'_>> {
    arrow_ipc::root_as_message(header)
        .map_err(|e| FormatError::Corrupt(format!("invalid message: {e}")))
}

/// Bytes a reader can pass over without reading them: a file seeks, a slice moves on. The
/// default reads them and drops them.
pub trait Skip: Read {
    /// Passes over the next `n` bytes.
    ///
    /// # Errors
    /// The reader's; [`io::ErrorKind::UnexpectedEof`] when fewer are there.
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let passed = io::copy(&mut self.take(n), &mut io::sink())?;
        match passed == n {
            true => Ok(()),
            false => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

impl Skip for &[u8] {
    fn skip(&mut self, n: u64) -> io::Result<()> {
        match usize::try_from(n).ok().and_then(|n| self.get(n..)) {
            Some(rest) => {
                *self = rest;
                Ok(())
            }
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// Reads Arrow IPC messages one at a time from `len` bytes of a reader: the one reader of
/// message framing in partout. Every length (prefix, header, body) is checked against the
/// bytes left before anything is allocated for it, and every header parses as a `Message`
/// flatbuffer before its body length is believed; what a message holds is
/// [`MessageCheck`](super::MessageCheck)'s to check.
///
/// Errors are [`FormatError::Corrupt`] saying at which byte (from the reader's start) the
/// part that is wrong (length prefix, header or body) starts, and [`FormatError::Io`] for the
/// reader's own failures.
///
/// ```
/// use arrow_array::{Int32Array, RecordBatch};
/// use partout_format::ipc::IpcStreamEncoder;
/// use partout_format::ipc::frame::{MessageReader, Next};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([("a", Arc::new(Int32Array::from(vec![1, 2])) as _)])
///     .unwrap();
/// let mut bytes = Vec::new();
/// let mut encoder = IpcStreamEncoder::try_new(batch.schema(), Default::default()).unwrap();
/// encoder.encode(&batch, &mut bytes).unwrap();
/// encoder.finish(&mut bytes).unwrap();
///
/// let mut reader = MessageReader::new(&bytes[..], bytes.len() as u64);
/// let mut kinds = Vec::new();
/// while let Some(Next::Message(header)) = reader.next_frame().unwrap() {
///     kinds.push(header.message().unwrap().header_type());
///     reader.body_slice(&header).unwrap();
/// }
/// assert_eq!(kinds.len(), 2);
/// assert_eq!(reader.left(), 0);
///
/// // A header that claims more bytes than there are is an error, before any allocation.
/// let claims = [[0xff; 4], i32::MAX.to_le_bytes(), [0; 4]].concat();
/// let err = MessageReader::new(&claims[..], 12).next_frame().unwrap_err().to_string();
/// assert!(err.contains("2147483647 bytes asked for where 4 are left"), "{err}");
/// ```
#[derive(Debug)]
pub struct MessageReader<R> {
    reader: R,
    /// Bytes not yet read.
    left: u64,
    /// Bytes read.
    at: u64,
}

impl<R: Read> MessageReader<R> {
    /// Messages from the next `len` bytes of `reader`.
    pub fn new(reader: R, len: u64) -> Self {
        Self {
            reader,
            left: len,
            at: 0,
        }
    }

    /// Bytes not yet read.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Bytes read (or passed over) so far.
    pub fn position(&self) -> u64 {
        self.at
    }

    /// The reader.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// The reader (reading from it directly leaves this reader's count of bytes behind).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.reader
    }

    /// The next message's header (its body is next), or the end-of-stream marker; `None`
    /// when no bytes are left.
    ///
    /// # Errors
    /// A prefix, header or body length past the bytes left, a negative length, a header that
    /// is not a `Message` flatbuffer; the reader's errors.
    pub fn next_frame(&mut self) -> Result<Option<Next>> {
        if self.left == 0 {
            return Ok(None);
        }
        let corrupt = |at: u64| {
            move |e: FormatError| match e {
                FormatError::Corrupt(what) => FormatError::Corrupt(format!("at byte {at}: {what}")),
                other => other,
            }
        };
        let start = self.at;
        let mut word = Vec::with_capacity(8);
        self.read(4, &mut word).map_err(corrupt(start))?;
        if word[..] == CONTINUATION {
            self.read(4, &mut word).map_err(corrupt(start))?;
        }
        let header_len = match prefix(&word).map_err(corrupt(start))? {
            Some((Prefix::Message { header_len }, _)) => header_len,
            Some((Prefix::End, _)) => return Ok(Some(Next::End)),
            None => {
                let cut = FormatError::Corrupt("a length cut short".into());
                return Err(corrupt(start)(cut));
            }
        };
        let at = self.at;
        let mut bytes = Vec::new();
        self.read(header_len as u64, &mut bytes)
            .map_err(corrupt(at))?;
        let body_len = parse(&bytes).map_err(corrupt(at))?.bodyLength();
        let body_len = u64::try_from(body_len)
            .ok()
            .filter(|&len| len <= self.left)
            .ok_or_else(|| {
                corrupt(self.at)(FormatError::Corrupt(format!(
                    "a message body of {body_len} bytes where {} are left",
                    self.left
                )))
            })?;
        Ok(Some(Next::Message(Header {
            bytes,
            body_len,
            at,
        })))
    }

    /// Appends the body of the message `header` heads (read just before) to `out`.
    ///
    /// # Errors
    /// The reader's, and bytes missing ([`FormatError::Corrupt`]).
    pub fn read_body(&mut self, header: &Header, out: &mut Vec<u8>) -> Result<()> {
        out.reserve_exact(header.body_len as usize);
        let at = self.at;
        self.read(header.body_len, out).map_err(|e| match e {
            FormatError::Corrupt(what) => FormatError::Corrupt(format!("at byte {at}: {what}")),
            other => other,
        })
    }

    /// The message `header` heads (read just before) as one buffer: its flatbuffer, then its
    /// body (which starts at `header.bytes().len()`).
    ///
    /// # Errors
    /// As [`read_body`](Self::read_body).
    pub fn read_message(&mut self, header: Header) -> Result<Vec<u8>> {
        let body = Header {
            bytes: Vec::new(),
            ..header
        };
        let mut bytes = header.bytes;
        self.read_body(&body, &mut bytes)?;
        Ok(bytes)
    }

    /// Appends `n` bytes to `out`, checked against the bytes left first.
    fn read(&mut self, n: u64, out: &mut Vec<u8>) -> Result<()> {
        if n > self.left {
            return Err(FormatError::Corrupt(format!(
                "{n} bytes asked for where {} are left",
                self.left
            )));
        }
        let read = (&mut self.reader).take(n).read_to_end(out)? as u64;
        self.left -= read;
        self.at += read;
        match read == n {
            true => Ok(()),
            false => Err(FormatError::Corrupt(format!(
                "the input ended {} bytes early",
                n - read
            ))),
        }
    }
}

impl<R: Skip> MessageReader<R> {
    /// Passes over the body of the message `header` heads (read just before).
    ///
    /// # Errors
    /// The reader's.
    pub fn skip_body(&mut self, header: &Header) -> Result<()> {
        self.reader.skip(header.body_len)?;
        self.left -= header.body_len;
        self.at += header.body_len;
        Ok(())
    }
}

impl<'a> MessageReader<&'a [u8]> {
    /// The body of the message `header` heads (read just before), as a slice of the bytes.
    ///
    /// # Errors
    /// Never for a header this reader gave ([`FormatError::Corrupt`] otherwise).
    pub fn body_slice(&mut self, header: &Header) -> Result<&'a [u8]> {
        let len = usize::try_from(header.body_len)
            .ok()
            .filter(|&len| len <= self.reader.len())
            .ok_or_else(|| {
                FormatError::Corrupt(format!(
                    "at byte {}: a message body of {} bytes where {} are left",
                    self.at,
                    header.body_len,
                    self.reader.len()
                ))
            })?;
        let (body, rest) = self.reader.split_at(len);
        self.reader = rest;
        self.left -= len as u64;
        self.at += len as u64;
        Ok(body)
    }
}
