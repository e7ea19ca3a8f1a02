//! Record batch messages written straight from slices of rows: a destination's rows, held in
//! several partitioned batches, become one IPC message without first being copied into a
//! batch of their own.
//!
//! ```text
//!  held   batch 0 [ d0 d0 | d1 | d2 d2 ]   batch 1 [ d0 | d1 d1 d1 | d2 ]
//!  slices of d1:  (batch 0, 2..3) (batch 1, 1..4)
//!  message of d1: [header][validity][values: b0[2..3] ++ b1[1..4]]...
//! ```
//!
//! Values of fixed width and the bytes of Utf8/Binary columns go into the message by
//! reference when a slice holds at least [`SHARED_SLICE`] bytes of them (the sink then copies them
//! once, where they go), and are copied into the message's own buffer otherwise; offsets are
//! rebased, views rewritten over one data buffer that holds just the bytes they reference,
//! validity and booleans packed anew. Compressed bodies compress each buffer whole, as
//! arrow-ipc does. Only columns of these flat types are taken ([`SlicesEncoder::takes`]); other
//! schemas go through arrow-ipc's encoder.

use super::Compression;
use crate::{FormatError, Result};
use arrow_array::{Array, RecordBatch};
use arrow_buffer::{BooleanBuffer, BooleanBufferBuilder, Buffer, ToByteSlice};
use arrow_data::ArrayData;
use arrow_schema::{DataType, SchemaRef};
use std::ops::Range;

/// Every body buffer starts at a multiple of this, as arrow-ipc writes them.
const ALIGNMENT: usize = 64;
const PADDING: [u8; ALIGNMENT] = [0; ALIGNMENT];

/// Slices holding at least this many bytes of a buffer go into a message by reference.
pub const SHARED_SLICE: usize = 4096;

/// A batch whose rows go into messages as slices: its columns taken apart once, however many
/// destinations' slices it holds.
#[derive(Debug, Clone)]
pub struct SliceSource {
    columns: Vec<ArrayData>,
    rows: usize,
    /// The bytes of its buffers per row, rounded up: what a slice's rows take in a message.
    row_bytes: usize,
    /// The bytes of its buffers.
    bytes: usize,
}

impl SliceSource {
    /// The slices of `batch`.
    pub fn new(batch: &RecordBatch) -> Self {
        let columns: Vec<ArrayData> = batch.columns().iter().map(|c| c.to_data()).collect();
        let rows = batch.num_rows();
        let bytes: usize = columns
            .iter()
            .flat_map(|c| c.buffers())
            .map(Buffer::len)
            .sum();
        Self {
            row_bytes: bytes.div_ceil(rows.max(1)) + columns.len(),
            bytes,
            columns,
            rows,
        }
    }

    /// Its rows.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// The bytes of its columns' buffers.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Rows `range` of a [`SliceSource`].
pub type Slice<'a> = (&'a SliceSource, Range<usize>);

/// Where a piece of a view column's data comes from: a slice's values shared in place (their
/// buffer and first byte), or (`None`) copied.
type Piece<'a> = Option<(&'a Buffer, usize)>;

/// Where a part of the body comes from.
#[derive(Debug)]
enum Segment {
    /// Bytes of the message's own buffer.
    Copied(Range<usize>),
    /// A slice's bytes, by reference.
    Shared(Buffer),
}

/// The codec a compressed body is written with.
enum Codec {
    Lz4(super::Lz4Frames),
    Zstd(zstd::bulk::Compressor<'static>),
}

/// Writes IPC record batch messages of one schema from slices of rows.
pub struct SlicesEncoder {
    schema: SchemaRef,
    codec: Option<Codec>,
    fbb: flatbuffers::FlatBufferBuilder<'static>,
    nodes: Vec<arrow_ipc::FieldNode>,
    buffers: Vec<arrow_ipc::Buffer>,
    variadic: Vec<i64>,
    segments: Vec<Segment>,
    /// The bytes of the message's own buffer: header, copied slices, rebuilt buffers, padding.
    copied: Vec<u8>,
    /// The body written so far, in bytes.
    body: usize,
    /// A compressed body's current buffer, uncompressed, gathered from its pieces...
    raw: Vec<u8>,
    /// ...or its one piece so far, where it lies.
    pending: Option<Buffer>,
    /// A view column's data buffer, being built.
    view_data: Vec<u8>,
    /// The last message's own buffer, taken back for the next when nothing holds it.
    last: Option<Buffer>,
}

impl std::fmt::Debug for SlicesEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlicesEncoder")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// How a column's values are laid out, for the types taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Fixed(usize),
    Bits,
    Offsets32,
    Offsets64,
    Views,
}

fn layout(data_type: &DataType) -> Option<Layout> {
    Some(match data_type {
        DataType::Boolean => Layout::Bits,
        DataType::Utf8 | DataType::Binary => Layout::Offsets32,
        DataType::LargeUtf8 | DataType::LargeBinary => Layout::Offsets64,
        DataType::Utf8View | DataType::BinaryView => Layout::Views,
        DataType::FixedSizeBinary(w) if *w >= 0 => Layout::Fixed(*w as usize),
        t if t.is_primitive() => Layout::Fixed(t.primitive_width()?),
        _ => return None,
    })
}

impl SlicesEncoder {
    /// Whether every column of `schema` is of a type this encoder writes.
    pub fn takes(schema: &arrow_schema::Schema) -> bool {
        schema
            .fields()
            .iter()
            .all(|f| layout(f.data_type()).is_some())
    }

    /// An encoder of `schema`'s batches with `compression`, or `None` when a column's type is
    /// not one it writes.
    pub fn new(schema: SchemaRef, compression: Compression) -> Result<Option<Self>> {
        if !Self::takes(&schema) {
            return Ok(None);
        }
        let codec = match compression {
            Compression::None => None,
            Compression::Lz4 => Some(Codec::Lz4(super::Lz4Frames::new())),
            Compression::Zstd(level) => Some(Codec::Zstd(
                zstd::bulk::Compressor::new(level.get())
                    .map_err(|e| FormatError::InvalidArgument(format!("zstd: {e}")))?,
            )),
            Compression::Snappy => {
                return Err(FormatError::InvalidArgument(
                    "Arrow IPC buffers are compressed with LZ4 or ZSTD, not Snappy".into(),
                ));
            }
        };
        Ok(Some(Self {
            schema,
            codec,
            fbb: flatbuffers::FlatBufferBuilder::new(),
            nodes: Vec::new(),
            buffers: Vec::new(),
            variadic: Vec::new(),
            segments: Vec::new(),
            copied: Vec::new(),
            body: 0,
            raw: Vec::new(),
            pending: None,
            view_data: Vec::new(),
            last: None,
        }))
    }

    /// Whether its bodies are compressed with LZ4.
    pub fn compresses_with_lz4(&self) -> bool {
        matches!(self.codec, Some(Codec::Lz4(_)))
    }

    /// Adds to `parts` the message holding `slices`, in order: the bytes that, written one after
    /// the other, are the message.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] when a slice's batch does not have the encoder's columns
    /// or a slice lies outside its batch; [`FormatError::Arrow`] if compressing fails.
    pub fn encode(&mut self, slices: &[Slice<'_>], parts: &mut Vec<Buffer>) -> Result<()> {
        let columns = self.schema.fields().len();
        for (source, range) in slices {
            if source.columns.len() != columns || range.start > range.end || range.end > source.rows
            {
                return Err(FormatError::InvalidArgument(format!(
                    "a slice of rows {range:?} of a batch of {} rows and {} columns, for a \
                     schema of {columns} columns",
                    source.rows,
                    source.columns.len()
                )));
            }
        }
        for (j, field) in self.schema.fields().iter().enumerate() {
            for (source, _) in slices {
                if source.columns[j].data_type() != field.data_type() {
                    return Err(FormatError::InvalidArgument(format!(
                        "column {j} is {}, not {}",
                        source.columns[j].data_type(),
                        field.data_type()
                    )));
                }
            }
        }
        self.nodes.clear();
        self.buffers.clear();
        self.variadic.clear();
        self.segments.clear();
        // The last message's buffer, unless a sink still holds it.
        if let Some(Ok(vec)) = self.last.take().map(|last| last.into_vec::<u8>()) {
            self.copied = vec;
        }
        self.copied.clear();
        self.body = 0;
        let rows: usize = slices.iter().map(|(_, r)| r.len()).sum();
        let bytes: usize = slices
            .iter()
            .map(|(source, range)| source.row_bytes * range.len())
            .sum();
        self.copied.reserve(bytes + 1024 + columns * 3 * ALIGNMENT);
        for j in 0..columns {
            let layout = layout(self.schema.field(j).data_type()).expect("checked in new");
            self.column(slices, j, rows, layout)?;
        }
        let header = self.header(rows);
        // The header first, then the body, all in the message's own buffer or shared.
        let own = Buffer::from_vec(std::mem::take(&mut self.copied));
        self.last = Some(own.clone());
        parts.push(own.slice_with_length(header.start, header.len()));
        for segment in self.segments.drain(..) {
            parts.push(match segment {
                Segment::Copied(range) => own.slice_with_length(range.start, range.len()),
                Segment::Shared(buffer) => buffer,
            });
        }
        Ok(())
    }

    /// One column's node and buffers.
    fn column(
        &mut self,
        slices: &[Slice<'_>],
        j: usize,
        rows: usize,
        layout: Layout,
    ) -> Result<()> {
        let mut nulls = 0;
        for (source, range) in slices {
            if let Some(n) = source.columns[j].nulls() {
                nulls += range.len() - n.inner().slice(range.start, range.len()).count_set_bits();
            }
        }
        self.nodes
            .push(arrow_ipc::FieldNode::new(rows as i64, nulls as i64));
        // Validity: none written when no row is null, as arrow-ipc does.
        if nulls == 0 {
            self.end_buffer()?;
        } else {
            let mut bits = BooleanBufferBuilder::new(rows);
            for (source, range) in slices {
                match source.columns[j].nulls() {
                    Some(n) => bits.append_buffer(&n.inner().slice(range.start, range.len())),
                    None => bits.append_n(range.len(), true),
                }
            }
            self.put(bits.finish().inner().as_slice());
            self.end_buffer()?;
        }
        match layout {
            Layout::Fixed(width) => {
                for (source, range) in slices {
                    let data = &source.columns[j];
                    let start = (data.offset() + range.start) * width;
                    self.share(&data.buffers()[0], start, range.len() * width);
                }
                self.end_buffer()?;
            }
            Layout::Bits => {
                let mut bits = BooleanBufferBuilder::new(rows);
                for (source, range) in slices {
                    let data = &source.columns[j];
                    let values = BooleanBuffer::new(
                        data.buffers()[0].clone(),
                        data.offset() + range.start,
                        range.len(),
                    );
                    bits.append_buffer(&values);
                }
                self.put(bits.finish().inner().as_slice());
                self.end_buffer()?;
            }
            Layout::Offsets32 => self.offsets::<i32>(slices, j, rows)?,
            Layout::Offsets64 => self.offsets::<i64>(slices, j, rows)?,
            Layout::Views => self.views(slices, j, rows)?,
        }
        Ok(())
    }

    /// The offsets of a Utf8/Binary column, rebased, then its bytes.
    fn offsets<O: arrow_array::OffsetSizeTrait>(
        &mut self,
        slices: &[Slice<'_>],
        j: usize,
        rows: usize,
    ) -> Result<()> {
        let mut rebased: Vec<O> = Vec::with_capacity(rows + 1);
        let mut base = O::zero();
        rebased.push(base);
        for (source, range) in slices {
            let data = &source.columns[j];
            let offsets: &[O] = data.buffers()[0].typed_data();
            let at = data.offset() + range.start;
            let slice = &offsets[at..=at + range.len()];
            let first = slice[0];
            rebased.extend(slice[1..].iter().map(|&o| base + (o - first)));
            base += slice[range.len()] - first;
        }
        self.put(rebased.to_byte_slice());
        self.end_buffer()?;
        for (source, range) in slices {
            let data = &source.columns[j];
            let offsets: &[O] = data.buffers()[0].typed_data();
            let at = data.offset() + range.start;
            let (first, last) = (offsets[at].as_usize(), offsets[at + range.len()].as_usize());
            self.share(&data.buffers()[1], first, last - first);
        }
        self.end_buffer()
    }

    /// A view column: its views rewritten over one data buffer, then that buffer. A slice whose
    /// long values lie back to back in one data buffer (a batch compacted in destination
    /// order) shares their bytes; any other slice's values are copied.
    fn views(&mut self, slices: &[Slice<'_>], j: usize, rows: usize) -> Result<()> {
        let mut views_out: Vec<u128> = Vec::with_capacity(rows);
        let mut copied = std::mem::take(&mut self.view_data);
        copied.clear();
        // The data buffer's pieces: (shared buffer and start, or none for `copied`), length.
        let mut pieces: Vec<(Piece<'_>, Range<usize>)> = Vec::new();
        let mut data_len = 0;
        for (source, range) in slices {
            let data = &source.columns[j];
            let views: &[u128] = data.buffers()[0].typed_data();
            let views = &views[data.offset() + range.start..data.offset() + range.end];
            let buffers = &data.buffers()[1..];
            let mark = views_out.len();
            if let Some(shared) = back_to_back(views, buffers, data_len, &mut views_out) {
                if let Some((buffer, start, end)) = shared {
                    pieces.push((Some((buffer, start)), data_len..data_len + end - start));
                    data_len += end - start;
                }
                continue;
            }
            views_out.truncate(mark);
            let first = copied.len();
            for &view in views {
                let Some((len, buffer, offset)) = out_of_line(view) else {
                    views_out.push(view);
                    continue;
                };
                let bytes = buffers
                    .get(buffer)
                    .and_then(|b| b.as_slice().get(offset..offset + len))
                    .ok_or_else(|| {
                        FormatError::InvalidArgument(format!(
                            "column {j}: a view past the end of its data buffers"
                        ))
                    })?;
                let at = data_len + copied.len() - first;
                copied.extend_from_slice(bytes);
                // Length and prefix kept; buffer 0, at its new offset.
                views_out.push((view & u128::from(u64::MAX)) | ((at as u128) << 96));
            }
            pieces.push((None, first..copied.len()));
            data_len += copied.len() - first;
        }
        self.put(views_out.to_byte_slice());
        self.end_buffer()?;
        for (shared, range) in pieces {
            match shared {
                Some((buffer, start)) => self.share(buffer, start, range.len()),
                None => self.put(&copied[range]),
            }
        }
        self.end_buffer()?;
        self.view_data = copied;
        self.variadic.push(1);
        Ok(())
    }

    /// Appends `bytes` to the current buffer, copied.
    fn put(&mut self, bytes: &[u8]) {
        if self.codec.is_some() {
            self.gather_pending();
            self.raw.extend_from_slice(bytes);
            return;
        }
        self.copy_to_body(bytes);
    }

    /// Moves a compressed body's pending bytes (the current buffer's only piece so far) into
    /// its gathered bytes, before a second piece joins them.
    fn gather_pending(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.raw.extend_from_slice(pending.as_slice());
        }
    }

    fn copy_to_body(&mut self, bytes: &[u8]) {
        let at = self.copied.len();
        self.copied.extend_from_slice(bytes);
        self.copied_to_body(at);
    }

    /// Counts the bytes of the message's own buffer from `at` to its end as the body's next.
    fn copied_to_body(&mut self, at: usize) {
        let len = self.copied.len() - at;
        if len == 0 {
            return;
        }
        self.body += len;
        match self.segments.last_mut() {
            Some(Segment::Copied(range)) if range.end == at => range.end += len,
            _ => self.segments.push(Segment::Copied(at..at + len)),
        }
    }

    /// Appends `len` bytes of `buffer` from `start` to the current buffer: by reference when
    /// they are many and the body is not compressed.
    fn share(&mut self, buffer: &Buffer, start: usize, len: usize) {
        if self.codec.is_some() && self.raw.is_empty() && self.pending.is_none() {
            // Compressed from where it lies if no other piece joins it.
            self.pending = Some(buffer.slice_with_length(start, len));
            return;
        }
        if len >= SHARED_SLICE && self.codec.is_none() {
            self.segments
                .push(Segment::Shared(buffer.slice_with_length(start, len)));
            self.body += len;
        } else {
            self.put(&buffer.as_slice()[start..start + len]);
        }
    }

    /// Ends the current buffer: compresses it if the body is compressed, records where it
    /// lies, pads the body to the alignment.
    fn end_buffer(&mut self) -> Result<()> {
        let start = self.buffers.last().map_or(0, |b| {
            let end = (b.offset() + b.length()) as usize;
            end + pad(end)
        });
        if let Some(codec) = &mut self.codec {
            let raw = match &self.pending {
                Some(pending) => pending.as_slice(),
                None => self.raw.as_slice(),
            };
            if !raw.is_empty() {
                // Compressed straight into the message's own buffer.
                let out = &mut self.copied;
                let at = out.len();
                out.extend_from_slice(&(raw.len() as i64).to_le_bytes());
                match codec {
                    Codec::Lz4(frames) => frames.compress(raw, out),
                    Codec::Zstd(compressor) => {
                        out.extend_from_slice(&compressor.compress(raw).map_err(external)?);
                    }
                }
                if out.len() - at > raw.len() {
                    // Larger compressed: the bytes as they are, marked -1.
                    out.truncate(at);
                    out.extend_from_slice(&(-1i64).to_le_bytes());
                    out.extend_from_slice(raw);
                }
                self.copied_to_body(at);
            }
            self.pending = None;
            self.raw.clear();
        }
        let len = self.body - start;
        self.buffers
            .push(arrow_ipc::Buffer::new(start as i64, len as i64));
        let padding = pad(self.body);
        self.copy_to_body(&PADDING[..padding]);
        Ok(())
    }

    /// Writes the message's header (continuation marker, length, flatbuffer metadata, padding)
    /// into the message's own buffer; its bytes there.
    fn header(&mut self, rows: usize) -> Range<usize> {
        let fbb = &mut self.fbb;
        fbb.reset();
        let compression = self.codec.as_ref().map(|codec| {
            let mut c = arrow_ipc::BodyCompressionBuilder::new(fbb);
            c.add_method(arrow_ipc::BodyCompressionMethod::BUFFER);
            c.add_codec(match codec {
                Codec::Lz4(_) => arrow_ipc::CompressionType::LZ4_FRAME,
                Codec::Zstd(_) => arrow_ipc::CompressionType::ZSTD,
            });
            c.finish()
        });
        let buffers = fbb.create_vector(&self.buffers);
        let nodes = fbb.create_vector(&self.nodes);
        let variadic = (!self.variadic.is_empty()).then(|| fbb.create_vector(&self.variadic));
        let batch = {
            let mut b = arrow_ipc::RecordBatchBuilder::new(fbb);
            b.add_length(rows as i64);
            b.add_nodes(nodes);
            b.add_buffers(buffers);
            if let Some(c) = compression {
                b.add_compression(c);
            }
            if let Some(v) = variadic {
                b.add_variadicBufferCounts(v);
            }
            b.finish().as_union_value()
        };
        let mut message = arrow_ipc::MessageBuilder::new(fbb);
        message.add_version(arrow_ipc::MetadataVersion::V5);
        message.add_header_type(arrow_ipc::MessageHeader::RecordBatch);
        message.add_bodyLength(self.body as i64);
        message.add_header(batch);
        let root = message.finish();
        fbb.finish(root, None);
        let metadata = fbb.finished_data();
        let padded = (metadata.len() + 8).next_multiple_of(ALIGNMENT) - 8;
        let start = self.copied.len();
        self.copied.extend_from_slice(&u32::MAX.to_le_bytes());
        self.copied
            .extend_from_slice(&(padded as i32).to_le_bytes());
        self.copied.extend_from_slice(metadata);
        self.copied
            .extend_from_slice(&PADDING[..padded - metadata.len()]);
        start..self.copied.len()
    }
}

/// An out-of-line view's length, data buffer and offset there; `None` for an inline view.
fn out_of_line(view: u128) -> Option<(usize, usize, usize)> {
    let len = view as u32 as usize;
    (len > 12).then_some((
        len,
        (view >> 64) as u32 as usize,
        (view >> 96) as u32 as usize,
    ))
}

/// When the long values of `views` lie back to back in one of `buffers`: pushes the views,
/// rebased to a data buffer whose byte `base` is their first, to `out`, and gives that buffer
/// and the range of their bytes in it (`Some(None)` when no value is long). `None` otherwise (`out`
/// then holds some of the views; the caller truncates it).
fn back_to_back<'b>(
    views: &[u128],
    buffers: &'b [Buffer],
    base: usize,
    out: &mut Vec<u128>,
) -> Option<Option<(&'b Buffer, usize, usize)>> {
    let mut run: Option<(usize, usize, usize)> = None;
    for &view in views {
        let Some((len, buffer, offset)) = out_of_line(view) else {
            out.push(view);
            continue;
        };
        let start = match &mut run {
            None => {
                run = Some((buffer, offset, offset + len));
                offset
            }
            Some((b, start, next)) if *b == buffer && *next == offset => {
                *next += len;
                *start
            }
            Some(_) => return None,
        };
        out.push((view & u128::from(u64::MAX)) | (((base + offset - start) as u128) << 96));
    }
    match run {
        None => Some(None),
        Some((buffer, start, end)) => {
            let buffer = buffers.get(buffer)?;
            (end <= buffer.len()).then_some(Some((buffer, start, end)))
        }
    }
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> FormatError {
    FormatError::Arrow(arrow_schema::ArrowError::ExternalError(Box::new(e)))
}

/// The padding after `len` bytes, to the alignment.
fn pad(len: usize) -> usize {
    len.next_multiple_of(ALIGNMENT) - len
}
