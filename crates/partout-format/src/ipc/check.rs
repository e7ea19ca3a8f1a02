//! Decoding an untrusted Arrow IPC stream: every message, buffer, length and schema enum
//! arrow-ipc's reader trusts is checked first, so that bad bytes are an error naming what is
//! wrong, never a panic or a huge allocation.

use super::frame::{self, Next};
use crate::{FormatError, Result};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, UnionFields, UnionMode};

/// Decodes a whole IPC stream.
///
/// # Errors
/// [`FormatError::Corrupt`] naming what is wrong with bytes that are not a complete, valid
/// stream (truncated, bad message, bad flatbuffer, buffers out of bounds).
pub fn decode_stream(bytes: &[u8]) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    // arrow-rs's reader trusts much of what it reads (buffer offsets and lengths, compressed
    // sizes, schema enums, node and buffer counts) and panics or over-allocates on bad values:
    // check the stream first.
    check_stream(bytes)?;
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

/// Most rows a batch or one of its arrays may claim.
const MAX_LENGTH: i64 = i32::MAX as i64;

/// Walks the stream's messages without decoding any data and checks what arrow-ipc's reader
/// (59.x) trusts, panicking or over-allocating on bad values, before it sees them:
///
/// * every message and body lies inside `bytes`, every buffer inside its body, and every
///   compressed buffer claims a plausible uncompressed size;
/// * the first message is a schema, and every schema is one arrow-ipc can convert
///   ([`check_schema`]);
/// * every record batch and dictionary batch has the field nodes, buffers and variadic buffer
///   counts the reader will take for the schema, with lengths it can use ([`BatchWalk`]).
///
/// Nothing here recurses deeper than the flatbuffer verifier allows (64 tables).
fn check_stream(bytes: &[u8]) -> Result<()> {
    let corrupt = |at: u64, what: String| {
        FormatError::Corrupt(format!("Arrow IPC stream at byte {at}: {what}"))
    };
    // The reader's errors say at which byte.
    let framing = |e: FormatError| match e {
        FormatError::Corrupt(what) => FormatError::Corrupt(format!("Arrow IPC stream {what}")),
        other => other,
    };
    let mut reader = frame::MessageReader::new(bytes, bytes.len() as u64);
    let mut checker = MessageCheck::new();
    loop {
        let header = match reader.next_frame().map_err(framing)? {
            None => {
                let what = "truncated before the end-of-stream marker".into();
                return Err(corrupt(reader.position(), what));
            }
            Some(Next::End) if checker.schema.is_none() => {
                return Err(corrupt(reader.position(), "no schema message".into()));
            }
            Some(Next::End) => return Ok(()),
            Some(Next::Message(header)) => header,
        };
        let message = header.message().map_err(framing)?;
        let body_at = reader.position();
        let body = reader.body_slice(&header).map_err(framing)?;
        match checker.check_parsed(message, body) {
            Ok(()) => {}
            Err(Fault::Message(what)) => return Err(corrupt(header.at(), what)),
            Err(Fault::Body(what)) => return Err(corrupt(body_at, what)),
        }
    }
}

/// What is wrong with a message: in its header, or in its body.
enum Fault {
    Message(String),
    Body(String),
}

/// The checks [`decode_stream`] makes, one message at a time, for messages that come framed
/// some other way (Arrow Flight's `FlightData`: a header and a body): the first is a schema
/// arrow-ipc can convert, and every record batch and dictionary batch has the nodes, buffers
/// and lengths the schema asks for, inside its body, with plausible compressed sizes. A
/// message that passes can be given to arrow-ipc's readers without panicking them or making
/// them allocate past what the body can hold; the arrays it decodes still want
/// `validate_full` before use, as [`decode_stream`] does.
///
/// ```
/// use partout_format::ipc::MessageCheck;
///
/// let mut check = MessageCheck::new();
/// let err = check.check(b"not a flatbuffer", &[]).unwrap_err().to_string();
/// assert!(err.contains("invalid message"), "{err}");
/// ```
#[derive(Debug, Default)]
pub struct MessageCheck {
    schema: Option<Schema>,
}

impl MessageCheck {
    /// No message seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages that follow `schema`'s (an IPC file's, from its footer; a stream's, known
    /// already): none may be another schema. `schema` must come from
    /// [`convert_schema`] (or be built in memory): it is trusted as it is.
    pub fn with_schema(schema: Schema) -> Self {
        Self {
            schema: Some(schema),
        }
    }

    /// The schema of the stream, once its schema message was checked.
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// Checks the next message: its flatbuffer `header` and its `body`.
    ///
    /// # Errors
    /// [`FormatError::Corrupt`] naming what is wrong.
    pub fn check(&mut self, header: &[u8], body: &[u8]) -> Result<()> {
        let corrupt =
            |what: String| Err(FormatError::Corrupt(format!("Arrow IPC message: {what}")));
        let message = match arrow_ipc::root_as_message(header) {
            Ok(m) => m,
            Err(e) => return corrupt(format!("invalid message: {e}")),
        };
        if usize::try_from(message.bodyLength()).ok() != Some(body.len()) {
            return corrupt(format!(
                "a body of {} bytes where the header says {}",
                body.len(),
                message.bodyLength()
            ));
        }
        match self.check_parsed(message, body) {
            Ok(()) => Ok(()),
            Err(Fault::Message(what) | Fault::Body(what)) => corrupt(what),
        }
    }

    /// Checks a parsed message and its body.
    fn check_parsed(&mut self, message: arrow_ipc::Message<'_>, body: &[u8]) -> Result<(), Fault> {
        if let Some(fb) = message.header_as_schema() {
            if let Err(what) = check_schema(fb) {
                return Err(Fault::Message(format!("schema: {what}")));
            }
            if self.schema.is_some() {
                // A reader taking the second would decode what follows by a schema this
                // check never saw.
                return Err(Fault::Message(
                    "a second schema message: a stream has one, first".into(),
                ));
            }
            self.schema = Some(arrow_ipc::convert::fb_to_schema(fb));
        } else if self.schema.is_none() {
            return Err(Fault::Message(format!(
                "the first message is a {:?}, not a schema",
                message.header_type()
            )));
        }
        let v4 = message.version() < arrow_ipc::MetadataVersion::V5;
        let fields = self
            .schema
            .as_ref()
            .map_or_else(Fields::empty, |s| s.fields().clone());
        let batch = match (
            message.header_as_record_batch(),
            message.header_as_dictionary_batch(),
        ) {
            (Some(batch), _) => Some((batch, fields)),
            (None, Some(dictionary)) => {
                let Some(batch) = dictionary.data() else {
                    return Err(Fault::Message("a dictionary batch without data".into()));
                };
                // The reader decodes a dictionary as a batch of one column of its values'
                // type, found by id in the schema (and refuses an unknown id itself).
                #[allow(deprecated)]
                let value_type = self
                    .schema
                    .as_ref()
                    .and_then(|s| s.fields_with_dict_id(dictionary.id()).first().cloned())
                    .map(|f| f.data_type().clone());
                match value_type {
                    Some(DataType::Dictionary(_, value)) => {
                        Some((batch, Fields::from(vec![Field::new("", *value, true)])))
                    }
                    _ => {
                        return Err(Fault::Message(format!(
                            "a dictionary batch of id {}, which no dictionary field of the \
                             schema has",
                            dictionary.id()
                        )));
                    }
                }
            }
            (None, None) => None,
        };
        if let Some((batch, fields)) = batch {
            check_buffers(batch, body).map_err(Fault::Body)?;
            BatchWalk::new(batch, body, v4)
                .and_then(|mut w| w.fields(&fields))
                .map_err(Fault::Message)?;
        }
        Ok(())
    }
}

/// Every buffer of `batch` inside `body`; every compressed one claiming a plausible size.
fn check_buffers(batch: arrow_ipc::RecordBatch<'_>, body: &[u8]) -> Result<(), String> {
    let body_len = body.len() as i64;
    let codec = batch.compression().map(|c| c.codec());
    for (i, buffer) in batch.buffers().into_iter().flatten().enumerate() {
        let (offset, length) = (buffer.offset(), buffer.length());
        if offset < 0 || length < 0 || offset.checked_add(length).is_none_or(|end| end > body_len) {
            return Err(format!(
                "buffer {i} at {offset}+{length} outside a body of {body_len} bytes"
            ));
        }
        if let (Some(codec), true) = (codec, length >= 8) {
            let start = offset as usize;
            let claimed = i64::from_le_bytes(body[start..start + 8].try_into().expect("8 bytes"));
            // -1: stored uncompressed.
            let bound = frame::decompressed_bound(codec, length as u64 - 8);
            if claimed != -1 && u64::try_from(claimed).map_or(true, |c| c > bound) {
                return Err(format!(
                    "compressed buffer {i} claims {claimed} bytes from {length} ({codec:?} \
                     makes {bound} at most)"
                ));
            }
        }
    }
    Ok(())
}

/// An IPC schema message's schema as an Arrow schema, for bytes from anywhere: arrow-ipc's
/// conversion (`fb_to_schema`) panics on a schema without its list of fields, on malformed
/// types and on a decimal in a big-endian schema; these are refused here first, with what was
/// wrong. Every reader of untrusted IPC schemas in partout converts through this.
///
/// # Errors
/// [`FormatError::Corrupt`](crate::FormatError::Corrupt) naming what the conversion would
/// have panicked on.
pub fn convert_schema(schema: arrow_ipc::Schema<'_>) -> crate::Result<arrow_schema::Schema> {
    check_schema(schema).map_err(|what| crate::FormatError::Corrupt(format!("schema: {what}")))?;
    Ok(arrow_ipc::convert::fb_to_schema(schema))
}

/// Refuses a schema arrow-ipc's conversion (`fb_to_schema`) would panic on: no fields, a
/// decimal in a big-endian schema, or a field [`check_field`] refuses.
fn check_schema(schema: arrow_ipc::Schema<'_>) -> Result<(), String> {
    let fields = schema.fields().ok_or("no fields")?;
    for field in fields {
        if field.type_type() == arrow_ipc::Type::Decimal
            && schema.endianness() == arrow_ipc::Endianness::Big
        {
            return Err("a decimal in a big-endian schema".into());
        }
        check_field(field)?;
    }
    Ok(())
}

/// Refuses a field arrow-ipc's conversion would panic on: an unknown type or enum value, a
/// type without its parameters, a nested type with the wrong number of children, integer,
/// float, time and decimal widths it has no type for, union ids it cannot use; and the same in
/// every child it converts.
fn check_field(field: arrow_ipc::Field<'_>) -> Result<(), String> {
    use arrow_ipc::{DateUnit, IntervalUnit, Precision, TimeUnit, Type, UnionMode};
    let name = field.name().unwrap_or_default();
    let missing = || format!("field {name:?}: its type has no parameters");
    let children = |n: usize| match field.children() {
        Some(c) if c.len() == n => Ok(c),
        c => Err(format!(
            "field {name:?}: a {:?} needs {n} children, not {}",
            field.type_type(),
            c.map_or(0, |c| c.len())
        )),
    };
    let int = |bits: i32, signed: bool| match (bits, signed) {
        (8 | 16 | 32 | 64, _) => Ok(()),
        _ => Err(format!("field {name:?}: no {bits}-bit integer type")),
    };
    if let Some(dictionary) = field.dictionary() {
        let index = dictionary
            .indexType()
            .ok_or_else(|| format!("field {name:?}: a dictionary without an index type"))?;
        int(index.bitWidth(), index.is_signed())?;
    }
    let unit = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("field {name:?}: unknown {what}"))
        }
    };
    match field.type_type() {
        Type::Null
        | Type::Bool
        | Type::Binary
        | Type::BinaryView
        | Type::LargeBinary
        | Type::Utf8
        | Type::Utf8View
        | Type::LargeUtf8 => Ok(()),
        Type::Int => {
            let t = field.type_as_int().ok_or_else(missing)?;
            int(t.bitWidth(), t.is_signed())
        }
        Type::FixedSizeBinary => {
            let t = field.type_as_fixed_size_binary().ok_or_else(missing)?;
            unit(t.byteWidth() >= 0, "negative byte width")
        }
        Type::FloatingPoint => {
            let t = field.type_as_floating_point().ok_or_else(missing)?;
            let p = t.precision();
            unit(
                p == Precision::HALF || p == Precision::SINGLE || p == Precision::DOUBLE,
                "float precision",
            )
        }
        Type::Date => {
            let t = field.type_as_date().ok_or_else(missing)?;
            unit(
                t.unit() == DateUnit::DAY || t.unit() == DateUnit::MILLISECOND,
                "date unit",
            )
        }
        Type::Time => {
            let t = field.type_as_time().ok_or_else(missing)?;
            let ok = match t.bitWidth() {
                32 => t.unit() == TimeUnit::SECOND || t.unit() == TimeUnit::MILLISECOND,
                64 => t.unit() == TimeUnit::MICROSECOND || t.unit() == TimeUnit::NANOSECOND,
                _ => false,
            };
            unit(ok, "time width and unit")
        }
        Type::Timestamp => {
            let t = field.type_as_timestamp().ok_or_else(missing)?;
            unit(known_time_unit(t.unit()), "timestamp unit")
        }
        Type::Duration => {
            let t = field.type_as_duration().ok_or_else(missing)?;
            unit(known_time_unit(t.unit()), "duration unit")
        }
        Type::Interval => {
            let t = field.type_as_interval().ok_or_else(missing)?;
            let u = t.unit();
            unit(
                u == IntervalUnit::YEAR_MONTH
                    || u == IntervalUnit::DAY_TIME
                    || u == IntervalUnit::MONTH_DAY_NANO,
                "interval unit",
            )
        }
        Type::List | Type::LargeList | Type::ListView | Type::LargeListView => {
            check_field(children(1)?.get(0))
        }
        Type::FixedSizeList => {
            let t = field.type_as_fixed_size_list().ok_or_else(missing)?;
            unit(t.listSize() >= 0, "negative list size")?;
            check_field(children(1)?.get(0))
        }
        Type::Map => {
            field.type_as_map().ok_or_else(missing)?;
            check_field(children(1)?.get(0))
        }
        Type::RunEndEncoded => children(2)?.iter().try_for_each(check_field),
        Type::Struct_ => field
            .children()
            .into_iter()
            .flatten()
            .try_for_each(check_field),
        Type::Decimal => {
            let t = field.type_as_decimal().ok_or_else(missing)?;
            let ok = u8::try_from(t.precision()).is_ok()
                && i8::try_from(t.scale()).is_ok()
                && matches!(t.bitWidth(), 32 | 64 | 128 | 256);
            unit(ok, "decimal precision, scale or width")
        }
        Type::Union => {
            let t = field.type_as_union().ok_or_else(missing)?;
            unit(
                t.mode() == UnionMode::Sparse || t.mode() == UnionMode::Dense,
                "union mode",
            )?;
            let count = field.children().map_or(0, |c| c.len());
            let ids_ok = match t.typeIds() {
                // As arrow-rs builds the union's fields: ids cast to i8, unique, one per child.
                Some(ids) => {
                    let placeholders =
                        (0..count).map(|i| Field::new(i.to_string(), DataType::Null, true));
                    UnionFields::try_new(ids.iter().map(|id| id as i8), placeholders).is_ok()
                }
                None => count <= 128,
            };
            unit(ids_ok, "union type ids")?;
            field
                .children()
                .into_iter()
                .flatten()
                .try_for_each(check_field)
        }
        other => Err(format!("field {name:?}: unknown type {other:?}")),
    }
}

fn known_time_unit(unit: arrow_ipc::TimeUnit) -> bool {
    use arrow_ipc::TimeUnit;
    unit == TimeUnit::SECOND
        || unit == TimeUnit::MILLISECOND
        || unit == TimeUnit::MICROSECOND
        || unit == TimeUnit::NANOSECOND
}

/// A record batch's field nodes and buffers, taken in the order arrow-ipc's reader takes them
/// for a schema (`RecordBatchDecoder::create_array`, 59.x), to refuse before it reads them what
/// it would panic on: more variadic buffer counts than view columns, a negative or huge count
/// or length, null bits shorter than the rows of an array with nulls, a buffer of offsets or
/// values whose length is not a multiple of their width, a union's type ids or offsets
/// shorter than its length.
struct BatchWalk<'a> {
    /// (length, null count) of each field node.
    nodes: std::vec::IntoIter<(i64, i64)>,
    /// (offset, length) of each buffer in the body, checked to lie inside it.
    buffers: std::vec::IntoIter<(usize, usize)>,
    variadic: std::collections::VecDeque<i64>,
    body: &'a [u8],
    compressed: bool,
    /// Before format version 5, unions have a null buffer.
    v4: bool,
}

impl<'a> BatchWalk<'a> {
    fn new(batch: arrow_ipc::RecordBatch<'_>, body: &'a [u8], v4: bool) -> Result<Self, String> {
        if !(0..=MAX_LENGTH).contains(&batch.length()) {
            return Err(format!("a batch of {} rows", batch.length()));
        }
        let nodes = batch.nodes().ok_or("a batch without field nodes")?;
        let buffers = batch.buffers().ok_or("a batch without buffers")?;
        Ok(Self {
            nodes: nodes
                .iter()
                .map(|n| (n.length(), n.null_count()))
                .collect::<Vec<_>>()
                .into_iter(),
            // Offsets and lengths checked non-negative and inside the body by `check_buffers`.
            buffers: buffers
                .iter()
                .map(|b| (b.offset() as usize, b.length() as usize))
                .collect::<Vec<_>>()
                .into_iter(),
            variadic: batch.variadicBufferCounts().into_iter().flatten().collect(),
            body,
            compressed: batch.compression().is_some(),
            v4,
        })
    }

    /// Walks the columns of `fields`; every variadic buffer count must be used.
    fn fields(&mut self, fields: &Fields) -> Result<(), String> {
        for field in fields {
            self.field(field.data_type())?;
        }
        if !self.variadic.is_empty() {
            return Err(format!(
                "{} variadic buffer counts for no view column",
                self.variadic.len()
            ));
        }
        Ok(())
    }

    fn node(&mut self) -> Result<(usize, usize), String> {
        let (length, nulls) = self.nodes.next().ok_or("fewer field nodes than fields")?;
        if !(0..=MAX_LENGTH).contains(&length) || !(0..=length).contains(&nulls) {
            return Err(format!("a field node of {length} rows, {nulls} null"));
        }
        Ok((length as usize, nulls as usize))
    }

    /// The next buffer's length once read (decompressed, if the batch is compressed).
    fn buffer(&mut self) -> Result<usize, String> {
        let (offset, length) = self
            .buffers
            .next()
            .ok_or("fewer buffers than fields need")?;
        if !self.compressed || length == 0 {
            return Ok(length);
        }
        let prefix = self
            .body
            .get(offset..offset + 8)
            .filter(|_| length >= 8)
            .ok_or_else(|| format!("a compressed buffer of {length} bytes"))?;
        match i64::from_le_bytes(prefix.try_into().expect("8 bytes")) {
            -1 => Ok(length - 8),
            // Checked against MAX_BUFFER by `check_buffers`.
            claimed if claimed >= 0 => Ok(claimed as usize),
            claimed => Err(format!("a compressed buffer claiming {claimed} bytes")),
        }
    }

    /// The next buffer, which holds values of `width` bytes (so its length must be a multiple of
    /// it: arrow-buffer asserts that when it reads them as a typed slice).
    fn values(&mut self, width: usize) -> Result<usize, String> {
        let length = self.buffer()?;
        if length % width != 0 {
            return Err(format!(
                "a buffer of {length} bytes for values of {width} bytes"
            ));
        }
        Ok(length)
    }

    fn skip(&mut self, buffers: usize) -> Result<(), String> {
        (0..buffers).try_for_each(|_| self.buffer().map(|_| ()))
    }

    /// A node and its validity buffer, which must hold a bit per row when the node has nulls
    /// (arrow-data asserts it).
    fn node_with_validity(&mut self) -> Result<(), String> {
        let (length, nulls) = self.node()?;
        let validity = self.buffer()?;
        check_validity(length, nulls, validity)
    }

    fn field(&mut self, data_type: &DataType) -> Result<(), String> {
        let offsets = |data_type: &DataType| match data_type {
            DataType::LargeUtf8
            | DataType::LargeBinary
            | DataType::LargeList(_)
            | DataType::LargeListView(_) => 8,
            _ => 4,
        };
        match data_type {
            DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
                self.node_with_validity()?;
                self.values(offsets(data_type))?;
                self.skip(1)
            }
            DataType::Utf8View | DataType::BinaryView => {
                let count = self
                    .variadic
                    .pop_front()
                    .ok_or("a view column without its count")?;
                let count = usize::try_from(count)
                    .ok()
                    .filter(|&c| c < self.buffers.len())
                    .ok_or_else(|| format!("a view column of {count} data buffers"))?;
                // Here the reader takes the buffers first, then the node.
                let validity = self.buffer()?;
                self.values(16)?;
                self.skip(count)?;
                let (length, nulls) = self.node()?;
                check_validity(length, nulls, validity)
            }
            DataType::List(item) | DataType::LargeList(item) | DataType::Map(item, _) => {
                self.node_with_validity()?;
                self.values(offsets(data_type))?;
                self.field(item.data_type())
            }
            DataType::ListView(item) | DataType::LargeListView(item) => {
                self.node_with_validity()?;
                self.values(offsets(data_type))?;
                self.values(offsets(data_type))?;
                self.field(item.data_type())
            }
            DataType::FixedSizeList(item, _) => {
                self.node_with_validity()?;
                self.field(item.data_type())
            }
            DataType::Struct(fields) => {
                self.node_with_validity()?;
                fields.iter().try_for_each(|f| self.field(f.data_type()))
            }
            DataType::RunEndEncoded(run_ends, values) => {
                self.node()?;
                self.field(run_ends.data_type())?;
                self.field(values.data_type())
            }
            DataType::Union(fields, mode) => {
                let (length, _) = self.node()?;
                if self.v4 {
                    self.skip(1)?;
                }
                let ids = self.buffer()?;
                let offsets = match mode {
                    UnionMode::Dense => self.values(4)? / 4,
                    UnionMode::Sparse => length,
                };
                if ids < length || offsets < length {
                    return Err(format!(
                        "a union of {length} rows with {ids} type ids and {offsets} offsets"
                    ));
                }
                fields
                    .iter()
                    .try_for_each(|(_, f)| self.field(f.data_type()))
            }
            DataType::Null => self.node().map(|_| ()),
            // Keys here, values in their own dictionary batches.
            DataType::Dictionary(key, _) => {
                self.node_with_validity()?;
                self.values(key.primitive_width().unwrap_or(1))?;
                Ok(())
            }
            // Booleans (bits), fixed-size binaries (bytes) and fixed-width types.
            _ => {
                self.node_with_validity()?;
                self.values(data_type.primitive_width().unwrap_or(1))?;
                Ok(())
            }
        }
    }
}

fn check_validity(length: usize, nulls: usize, validity: usize) -> Result<(), String> {
    if nulls > 0 && validity < length.div_ceil(8) {
        return Err(format!(
            "{length} rows, {nulls} null, with {validity} bytes of null bits"
        ));
    }
    Ok(())
}
