//! The stream encoders: one destination's stream, or streams sharing one encoder when no
//! column holds dictionaries; view columns compacted before they are written.

use super::slices::{Slice, SliceSource, SlicesEncoder};
use super::{Compression, holds, holds_dictionary, ipc_options};
use crate::{FormatError, Result};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, DataType, SchemaRef};
use std::sync::Arc;

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
        let writer =
            StreamWriter::try_new_with_options(Vec::new(), &schema, ipc_options(compression)?)?;
        Ok(Self { writer, schema })
    }

    /// Appends `batch` (its dictionaries first, and the schema before the first batch) to
    /// `out`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a batch of another schema; [`FormatError::Arrow`]
    /// when arrow-rs cannot encode it.
    pub fn encode(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        check_fields(batch, &self.schema)?;
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

/// The Arrow IPC streams of many destinations, of one schema without dictionaries, through
/// one encoder.
///
/// Without dictionaries a stream carries no state from one batch to the next: its bytes are
/// the schema message, then each batch's message, then the end-of-stream marker, whichever
/// stream they belong to. So one arrow-ipc encoder encodes every destination's batches, and a
/// destination costs a flag (has its stream begun) instead of a writer of its own, whose
/// buffers would be held for every destination: kilobytes each, beyond any memory limit at
/// thousands of destinations.
///
/// A batch's message comes out as parts ([`encode_parts`](Self::encode_parts)): the message
/// header, then the batch's own buffers (shared, not copied; compressed copies with a codec),
/// with padding between them. Written one after the other they are the message, so a sink
/// copies each byte once, straight from the batch.
pub(crate) struct SharedIpcStreams {
    /// Encodes each batch's message as parts; it has emitted its schema message already.
    encoder: arrow_ipc::writer::StreamEncoder,
    schema: SchemaRef,
    /// The schema message that begins every stream.
    schema_message: Buffer,
    /// The end-of-stream marker.
    end: Vec<u8>,
    started: Vec<bool>,
    /// Messages written from slices of rows, when every column's type allows it.
    slices: Option<SlicesEncoder>,
}

impl std::fmt::Debug for SharedIpcStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIpcStreams")
            .field("schema", &self.schema)
            .field("destinations", &self.started.len())
            .finish_non_exhaustive()
    }
}

impl SharedIpcStreams {
    /// Streams of `schema` for `destinations` destinations, or `None` when a column of the
    /// schema holds dictionaries (each stream then keeps which dictionaries it sent).
    ///
    /// # Errors
    /// [`FormatError::Arrow`] when arrow-rs cannot write the schema.
    pub(crate) fn try_new(
        schema: SchemaRef,
        compression: Compression,
        destinations: usize,
    ) -> Result<Option<Self>> {
        if schema
            .fields()
            .iter()
            .any(|f| holds_dictionary(f.data_type()))
        {
            return Ok(None);
        }
        let mut writer = IpcStreamEncoder::try_new(schema.clone(), compression)?;
        // The writer wrote the schema message when it was made; a second writer, ended at
        // once, gives the same message and then the marker.
        let schema_message = std::mem::take(writer.writer.get_mut());
        let mut ended = Vec::new();
        IpcStreamEncoder::try_new(schema.clone(), compression)?.finish(&mut ended)?;
        let end = ended
            .strip_prefix(schema_message.as_slice())
            .ok_or_else(|| {
                FormatError::InvalidArgument(
                    "two IPC writers of one schema wrote different schema messages".into(),
                )
            })?
            .to_vec();
        // The same options as the writer's; an empty batch takes the schema message out of
        // the encoder, which then gives each batch's message alone.
        let mut encoder = arrow_ipc::writer::StreamEncoder::try_new_with_options(
            &schema,
            ipc_options(compression)?,
        )?;
        encoder.encode(&RecordBatch::new_empty(schema.clone()))?;
        let slices = SlicesEncoder::new(schema.clone(), compression)?;
        Ok(Some(Self {
            encoder,
            schema,
            schema_message: Buffer::from_vec(schema_message),
            end,
            started: vec![false; destinations],
            slices,
        }))
    }

    /// Adds destination `p`'s next batch (after its stream's schema message, if this is its
    /// first) to `parts`: what, written in order, is the stream's next bytes.
    ///
    /// # Errors
    /// As [`IpcStreamEncoder::encode`]; `parts` is then as it was.
    ///
    /// # Panics
    /// If there is no destination `p` (the caller checks).
    pub(crate) fn encode_parts(
        &mut self,
        p: usize,
        batch: &RecordBatch,
        parts: &mut Vec<Buffer>,
        views_compact: bool,
    ) -> Result<()> {
        check_fields(batch, &self.schema)?;
        let batch = if views_compact {
            compact_views_given(batch, true)?
        } else {
            compact_views(batch)?
        };
        if self
            .slices
            .as_ref()
            .is_some_and(SlicesEncoder::compresses_with_lz4)
        {
            // LZ4 bodies: the slices encoder compresses each buffer where it lies, with one
            // compressor kept for every buffer (arrow-ipc sets up a frame encoder for each).
            let source = SliceSource::new(&batch);
            return self.encode_slices_parts(p, &[(&source, 0..batch.num_rows())], parts);
        }
        let message = self.encoder.encode(&batch)?;
        if !self.started[p] {
            parts.push(self.schema_message.clone());
            self.started[p] = true;
        }
        parts.extend(message);
        Ok(())
    }

    /// Appends destination `p`'s next batch (after its stream's schema message, if this is
    /// its first) to `out`: its [parts](Self::encode_parts), copied.
    ///
    /// # Errors
    /// As [`IpcStreamEncoder::encode`].
    ///
    /// # Panics
    /// If there is no destination `p` (the caller checks).
    pub(crate) fn encode(
        &mut self,
        p: usize,
        batch: &RecordBatch,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let mut parts = Vec::new();
        self.encode_parts(p, batch, &mut parts, false)?;
        out.reserve(parts.iter().map(Buffer::len).sum());
        for part in &parts {
            out.extend_from_slice(part);
        }
        Ok(())
    }

    /// Appends the end of destination `p`'s stream to `out` (the schema message first, if
    /// it never began), unless `only_begun` and it never began; whether anything was
    /// appended. Destination `p`'s next batch begins a new stream.
    ///
    /// # Panics
    /// If there is no destination `p` (the caller checks).
    pub(crate) fn finish(&mut self, p: usize, out: &mut Vec<u8>, only_begun: bool) -> bool {
        if !self.started[p] {
            if only_begun {
                return false;
            }
            out.extend_from_slice(self.schema_message.as_slice());
        }
        out.extend_from_slice(&self.end);
        self.started[p] = false;
        true
    }

    /// Whether [`encode_slices_parts`](Self::encode_slices_parts) takes this schema.
    pub(crate) fn takes_slices(&self) -> bool {
        self.slices.is_some()
    }

    /// Adds destination `p`'s next rows, `slices` of held batches, as one message (after its
    /// stream's schema message, if this is its first) to `parts`.
    ///
    /// # Errors
    /// As [`SlicesEncoder::encode`]; [`FormatError::InvalidArgument`] when the schema has a
    /// column the slices encoder does not take. `parts` is then as it was.
    ///
    /// # Panics
    /// If there is no destination `p` (the caller checks).
    pub(crate) fn encode_slices_parts(
        &mut self,
        p: usize,
        slices: &[Slice<'_>],
        parts: &mut Vec<Buffer>,
    ) -> Result<()> {
        let Some(encoder) = &mut self.slices else {
            return Err(FormatError::InvalidArgument(
                "a column of this schema cannot be written from slices of rows".into(),
            ));
        };
        let mark = parts.len();
        if !self.started[p] {
            parts.push(self.schema_message.clone());
        }
        match encoder.encode(slices, parts) {
            Ok(()) => {
                self.started[p] = true;
                Ok(())
            }
            Err(e) => {
                parts.truncate(mark);
                Err(e)
            }
        }
    }

    /// Destinations.
    pub(crate) fn len(&self) -> usize {
        self.started.len()
    }
}

/// An error unless `batch` has the fields of a stream of `schema`.
fn check_fields(batch: &RecordBatch, schema: &SchemaRef) -> Result<()> {
    if batch.schema().fields() == schema.fields() {
        return Ok(());
    }
    Err(FormatError::InvalidArgument(format!(
        "a batch of schema {} for a stream of {}",
        batch.schema(),
        schema
    )))
}

/// A copy of `batch` whose view columns hold only the bytes their rows reference, when they
/// hold more; other columns are shared. A batch of no rows gets unsliced empty columns where
/// they hold run-end encoded values: arrow-ipc 59 writes an empty slice of a run array with a
/// run end of 0, which no reader (its own included) accepts.
fn compact_views(batch: &RecordBatch) -> Result<RecordBatch> {
    compact_views_given(batch, false)
}

/// [`compact_views`], but with `views_compact`, the caller's word that the view columns hold
/// only the bytes their rows reference: they are not read to check.
fn compact_views_given(batch: &RecordBatch, views_compact: bool) -> Result<RecordBatch> {
    if batch.num_rows() == 0
        && batch
            .columns()
            .iter()
            .any(|c| holds(c.data_type(), &|t| matches!(t, DataType::RunEndEncoded(..))))
    {
        let columns = batch
            .schema()
            .fields()
            .iter()
            .map(|f| arrow_array::new_empty_array(f.data_type()))
            .collect();
        return Ok(RecordBatch::try_new(batch.schema(), columns)?);
    }
    if views_compact {
        return Ok(batch.clone());
    }
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
