//! Arrow IPC streams per destination, sans-IO.
//!
//! ```text
//!  IpcStreamEncoder::try_new(schema) ─ encode(batch) ─► [schema][dictionaries][batch]
//!                                     ─ encode(batch) ─► [dictionaries][batch]
//!                                     ─ finish()      ─► [end of stream]
//! ```
//!
//! Each call appends the bytes it produced to a caller's buffer: the encoder does no IO and
//! holds nothing between calls but the stream's state (schema sent, dictionaries sent). Body
//! compression is the IPC format's own (LZ4_FRAME or ZSTD, per buffer), so any Arrow reader
//! decodes it.
//!
//! View columns (Utf8View, BinaryView) of a destination's slice still point into the whole
//! input batch's data buffers; encoding them as they are would write those buffers whole into
//! every destination's stream. The encoder compacts a view column whose buffers hold more than
//! the bytes its rows reference, keeping the type.

use crate::{FormatError, Result};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_ipc::CompressionType;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow_schema::{ArrowError, DataType, SchemaRef};
use std::sync::Arc;

/// Body compression of an IPC stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Buffers as they are.
    #[default]
    None,
    /// LZ4 frame format, per buffer.
    Lz4Frame,
    /// Zstandard, per buffer.
    Zstd,
}

/// Encodes one destination's Arrow IPC stream into caller-owned buffers.
pub struct IpcStreamEncoder {
    writer: StreamWriter<Vec<u8>>,
    schema: SchemaRef,
}

impl std::fmt::Debug for IpcStreamEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcStreamEncoder")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl IpcStreamEncoder {
    /// A stream of batches of `schema`; its schema message is emitted with the first
    /// [`encode`](Self::encode) or [`finish`](Self::finish).
    ///
    /// # Errors
    /// [`FormatError::Arrow`] when arrow-rs cannot write the schema.
    pub fn try_new(schema: SchemaRef, compression: Compression) -> Result<Self> {
        let codec = match compression {
            Compression::None => None,
            Compression::Lz4Frame => Some(CompressionType::LZ4_FRAME),
            Compression::Zstd => Some(CompressionType::ZSTD),
        };
        let options = IpcWriteOptions::default().try_with_compression(codec)?;
        let writer = StreamWriter::try_new_with_options(Vec::new(), &schema, options)?;
        Ok(Self { writer, schema })
    }

    /// Appends `batch` (its dictionaries first, and the schema before the first batch) to
    /// `out`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a batch of another schema; [`FormatError::Arrow`]
    /// when arrow-rs cannot encode it.
    pub fn encode(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        if batch.schema().fields() != self.schema.fields() {
            return Err(FormatError::InvalidArgument(format!(
                "a batch of schema {} for a stream of {}",
                batch.schema(),
                self.schema
            )));
        }
        let batch = compact_views(batch)?;
        self.write_into(out, |writer| writer.write(&batch))
    }

    /// Runs `write` with the stream writing straight into `out` (after its contents): no copy
    /// of the encoded bytes, and no buffer kept per stream between calls.
    fn write_into(
        &mut self,
        out: &mut Vec<u8>,
        write: impl FnOnce(&mut StreamWriter<Vec<u8>>) -> std::result::Result<(), ArrowError>,
    ) -> Result<()> {
        // The schema message, written when the stream was opened, comes first.
        out.append(self.writer.get_mut());
        std::mem::swap(self.writer.get_mut(), out);
        let written = write(&mut self.writer);
        std::mem::swap(self.writer.get_mut(), out);
        Ok(written?)
    }

    /// Ends the stream, appending the end-of-stream marker (and the schema, if no batch was
    /// ever encoded) to `out`.
    ///
    /// # Errors
    /// [`FormatError::Arrow`] when arrow-rs cannot write the marker.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<()> {
        self.write_into(out, StreamWriter::finish)
    }
}

/// A copy of `batch` whose view columns hold only the bytes their rows reference, when they
/// hold more; other columns are shared.
fn compact_views(batch: &RecordBatch) -> Result<RecordBatch> {
    let needs = |c: &ArrayRef| match c.data_type() {
        DataType::Utf8View => wasteful(
            c.as_string_view().views(),
            c.as_string_view().data_buffers(),
        ),
        DataType::BinaryView => wasteful(
            c.as_binary_view().views(),
            c.as_binary_view().data_buffers(),
        ),
        _ => false,
    };
    if !batch.columns().iter().any(needs) {
        return Ok(batch.clone());
    }
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View if needs(c) => Arc::new(c.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView if needs(c) => Arc::new(c.as_binary_view().gc()) as ArrayRef,
            _ => c.clone(),
        })
        .collect();
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// Whether data buffers hold more than the out-of-line bytes the views reference.
fn wasteful(views: &[u128], buffers: &[arrow_buffer::Buffer]) -> bool {
    let held: usize = buffers.iter().map(|b| b.len()).sum();
    let referenced: usize = views
        .iter()
        .map(|&v| v as u32 as usize)
        .filter(|&len| len > 12)
        .sum();
    held > referenced
}

/// Decodes a whole IPC stream.
///
/// # Errors
/// [`FormatError::Corrupt`] naming what is wrong with bytes that are not a complete, valid
/// stream (truncated, bad message, bad flatbuffer, buffers out of bounds).
pub fn decode_stream(bytes: &[u8]) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    // arrow-rs's reader trusts the buffer offsets, lengths and compressed sizes it reads and
    // panics or over-allocates on bad ones: check the framing first.
    check_framing(bytes)?;
    let corrupt =
        |e: arrow_schema::ArrowError| FormatError::Corrupt(format!("Arrow IPC stream: {e}"));
    let reader = StreamReader::try_new(bytes, None).map_err(corrupt)?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(corrupt)?;
    for batch in &batches {
        for column in batch.columns() {
            column.to_data().validate_full().map_err(|e| {
                FormatError::Corrupt(format!("Arrow IPC stream: invalid column data: {e}"))
            })?;
        }
    }
    Ok((schema, batches))
}

/// Largest uncompressed size a compressed buffer may claim, relative to its compressed size
/// (and absolutely): a corrupt size must not become a huge allocation.
const MAX_EXPANSION: i64 = 4096;
const MAX_BUFFER: i64 = 1 << 34;

/// Walks the stream's messages and checks, without decoding any data, that every message and
/// body lies inside `bytes`, that every buffer lies inside its body, and that every compressed
/// buffer claims a plausible uncompressed size.
fn check_framing(bytes: &[u8]) -> Result<()> {
    let corrupt = |at: usize, what: String| {
        Err(FormatError::Corrupt(format!(
            "Arrow IPC stream at byte {at}: {what}"
        )))
    };
    let read_i32 = |at: usize| -> Option<i32> {
        bytes
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    let mut pos = 0usize;
    let mut messages = 0usize;
    loop {
        let Some(mut len) = read_i32(pos) else {
            return corrupt(pos, "truncated before the end-of-stream marker".into());
        };
        pos += 4;
        if len == -1 {
            let Some(l) = read_i32(pos) else {
                return corrupt(pos, "truncated message length".into());
            };
            len = l;
            pos += 4;
        }
        if len == 0 {
            return if messages == 0 {
                corrupt(pos, "no schema message".into())
            } else {
                Ok(())
            };
        }
        let Ok(len) = usize::try_from(len) else {
            return corrupt(pos - 4, format!("negative message length {len}"));
        };
        let Some(metadata) = bytes.get(pos..pos + len) else {
            return corrupt(
                pos,
                format!(
                    "message of {len} bytes past the end ({} bytes)",
                    bytes.len()
                ),
            );
        };
        let message = match arrow_ipc::root_as_message(metadata) {
            Ok(m) => m,
            Err(e) => return corrupt(pos, format!("invalid message: {e}")),
        };
        pos += len;
        let body_len = message.bodyLength();
        let body_end = usize::try_from(body_len)
            .ok()
            .and_then(|b| pos.checked_add(b));
        let Some(body_end) = body_end.filter(|&end| end <= bytes.len()) else {
            return corrupt(
                pos,
                format!(
                    "body of {body_len} bytes past the end ({} bytes)",
                    bytes.len()
                ),
            );
        };
        let batch = message
            .header_as_record_batch()
            .or_else(|| message.header_as_dictionary_batch().and_then(|d| d.data()));
        if let Some(batch) = batch {
            let compressed = batch.compression().is_some();
            for (i, buffer) in batch.buffers().into_iter().flatten().enumerate() {
                let (offset, length) = (buffer.offset(), buffer.length());
                if offset < 0
                    || length < 0
                    || offset.checked_add(length).is_none_or(|end| end > body_len)
                {
                    return corrupt(
                        pos,
                        format!(
                            "buffer {i} at {offset}+{length} outside a body of {body_len} bytes"
                        ),
                    );
                }
                if compressed && length >= 8 {
                    let start = pos + offset as usize;
                    let claimed =
                        i64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"));
                    if claimed != -1
                        && (!(0..=MAX_BUFFER).contains(&claimed)
                            || claimed > MAX_EXPANSION * length.max(64))
                    {
                        return corrupt(
                            start,
                            format!("compressed buffer {i} claims {claimed} bytes from {length}"),
                        );
                    }
                }
            }
        }
        messages += 1;
        pos = body_end;
    }
}
