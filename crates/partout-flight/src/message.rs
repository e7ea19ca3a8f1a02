//! [`Message`]: one unit of a destination's output as the exchange holds and sends it, an Arrow
//! IPC record batch (with the dictionaries it needs) or a Presto page, and the conversions
//! between them for a protocol that wants the other one.
//!
//! Each IPC message carries every dictionary its batch refers to, so that any message can be
//! sent first: a consumer resuming at any sequence decodes what it gets. Dictionaries are
//! numbered as the schema message numbers them (arrow-ipc gives the ids when it encodes the
//! schema, depth first), so the stream's schema message fits every message.

use crate::error::{ExchangeError, Result};
use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_flight::{FlightData, SchemaAsIpc};
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
use arrow_schema::{DataType, Schema, SchemaRef};
use bytes::Bytes;
use partout_format::ipc::MessageCheck;
use partout_format::ipc::frame::{Frame, MessageReader};
use partout_format::presto::{PageOptions, check_page, decode_page, encode_page};
use partout_format::{Encoding, Format, StreamEncoders};
use std::collections::HashMap;
use std::sync::Arc;

/// One unit of a destination's output.
#[derive(Debug, Clone)]
pub enum Message {
    /// An Arrow IPC record batch message, after the dictionary messages it needs.
    Ipc {
        /// Dictionary messages, in the order they are sent.
        dictionaries: Vec<FlightData>,
        /// The record batch message.
        batch: FlightData,
        /// Its rows.
        rows: u64,
    },
    /// One Presto SerializedPage (header and body).
    Page {
        /// The page's bytes.
        page: Bytes,
        /// Its rows.
        rows: u64,
    },
}

impl Message {
    /// Rows in the message.
    pub fn rows(&self) -> u64 {
        match self {
            Self::Ipc { rows, .. } | Self::Page { rows, .. } => *rows,
        }
    }

    /// Bytes the message holds.
    pub fn size(&self) -> usize {
        let flight = |d: &FlightData| d.data_header.len() + d.data_body.len();
        match self {
            Self::Ipc {
                dictionaries,
                batch,
                ..
            } => dictionaries.iter().map(flight).sum::<usize>() + flight(batch),
            Self::Page { page, .. } => page.len(),
        }
    }

    /// Writes the message for a spill file: its kind and rows, then each part's length and
    /// bytes (see [`read_from`](Self::read_from)).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        fn part(out: &mut Vec<u8>, bytes: &[u8]) {
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        match self {
            Self::Ipc {
                dictionaries,
                batch,
                rows,
            } => {
                out.push(0);
                out.extend_from_slice(&rows.to_le_bytes());
                out.extend_from_slice(&(dictionaries.len() as u64).to_le_bytes());
                for data in dictionaries.iter().chain([batch]) {
                    part(out, &data.data_header);
                    part(out, &data.data_body);
                }
            }
            Self::Page { page, rows } => {
                out.push(1);
                out.extend_from_slice(&rows.to_le_bytes());
                part(out, page);
            }
        }
    }

    /// Reads back what [`write_to`](Self::write_to) wrote, every length checked against the
    /// bytes there are.
    ///
    /// # Errors
    /// [`ExchangeError::Corrupt`] for bytes that do not hold a message.
    pub fn read_from(bytes: &[u8]) -> Result<Self> {
        let corrupt = || ExchangeError::corrupt("a spilled message that does not read back");
        let mut at = 0usize;
        let word = |at: &mut usize| -> Result<u64> {
            let end = at
                .checked_add(8)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(corrupt)?;
            let value = u64::from_le_bytes(bytes[*at..end].try_into().map_err(|_| corrupt())?);
            *at = end;
            Ok(value)
        };
        let kind = *bytes.first().ok_or_else(corrupt)?;
        at += 1;
        let rows = word(&mut at)?;
        let part = |at: &mut usize| -> Result<Bytes> {
            let len = usize::try_from(word(at)?).map_err(|_| corrupt())?;
            let end = at
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(corrupt)?;
            let piece = Bytes::copy_from_slice(&bytes[*at..end]);
            *at = end;
            Ok(piece)
        };
        let message = match kind {
            0 => {
                let count = word(&mut at)?;
                let data = |at: &mut usize| -> Result<FlightData> {
                    let header = part(at)?;
                    let body = part(at)?;
                    Ok(FlightData::new()
                        .with_data_header(header)
                        .with_data_body(body))
                };
                // Each dictionary takes at least 16 bytes: a count past that is corrupt.
                if count > (bytes.len() / 16) as u64 {
                    return Err(corrupt());
                }
                let dictionaries = (0..count)
                    .map(|_| data(&mut at))
                    .collect::<Result<Vec<_>>>()?;
                let batch = data(&mut at)?;
                Self::Ipc {
                    dictionaries,
                    batch,
                    rows,
                }
            }
            1 => Self::Page {
                page: part(&mut at)?,
                rows,
            },
            _ => return Err(corrupt()),
        };
        match at == bytes.len() {
            true => Ok(message),
            false => Err(corrupt()),
        }
    }

    /// A Presto page read from storage or the network, checked: its header against its
    /// bytes, and its checksum when it has one.
    ///
    /// # Errors
    /// [`ExchangeError::Corrupt`] naming what does not hold.
    pub fn page(page: Bytes) -> Result<Self> {
        let rows = check_page(&page)?;
        Ok(Self::Page {
            page,
            rows: rows as u64,
        })
    }

    /// The message's batch, decoded.
    ///
    /// # Errors
    /// [`ExchangeError::Corrupt`] when it does not decode as `schema`.
    pub fn to_batch(&self, schema: &SchemaRef) -> Result<RecordBatch> {
        match self {
            Self::Ipc {
                dictionaries,
                batch,
                ..
            } => {
                // The decoder finds a column's dictionary by the id in its field: the ids of
                // the schema as its IPC message gives them, which a schema built in memory
                // lacks.
                let numbered = has_dictionaries(schema)
                    .then(|| with_dictionary_ids(schema))
                    .transpose()?;
                let ipc_schema = numbered.as_ref().unwrap_or(schema);
                // Messages read from an output's files may be damaged: each passes the one
                // IPC check before arrow-ipc decodes it, and the columns are validated after.
                let mut check = MessageCheck::with_schema(ipc_schema.as_ref().clone());
                let checked = |check: &mut MessageCheck, data: &FlightData| {
                    check
                        .check(&data.data_header, &data.data_body)
                        .map_err(|e| ExchangeError::corrupt_because("an IPC message", e))
                };
                let mut by_id: HashMap<i64, ArrayRef> = HashMap::new();
                for dictionary in dictionaries {
                    checked(&mut check, dictionary)?;
                    let message =
                        arrow_ipc::root_as_message(&dictionary.data_header).map_err(|e| {
                            ExchangeError::corrupt_because("a dictionary", e.to_string())
                        })?;
                    let header = message.header_as_dictionary_batch().ok_or_else(|| {
                        ExchangeError::corrupt("a dictionary message of another kind")
                    })?;
                    arrow_ipc::reader::read_dictionary(
                        &Buffer::from(dictionary.data_body.clone()),
                        header,
                        ipc_schema,
                        &mut by_id,
                        &message.version(),
                    )?;
                }
                checked(&mut check, batch)?;
                let decoded = arrow_flight::utils::flight_data_to_arrow_batch(
                    batch,
                    ipc_schema.clone(),
                    &by_id,
                )?;
                for column in decoded.columns() {
                    column.to_data().validate_full().map_err(|e| {
                        ExchangeError::corrupt_because("an IPC message's columns", e)
                    })?;
                }
                match numbered {
                    None => Ok(decoded),
                    // The columns under the schema asked for.
                    Some(_) => Ok(RecordBatch::try_new_with_options(
                        schema.clone(),
                        decoded.columns().to_vec(),
                        &RecordBatchOptions::new().with_row_count(Some(decoded.num_rows())),
                    )?),
                }
            }
            Self::Page { page, .. } => Ok(decode_page(page, schema)?.0),
        }
    }

    /// The message as an IPC one: itself, or its page decoded and encoded with `options`.
    ///
    /// # Errors
    /// As [`to_batch`](Self::to_batch), and the encoder's.
    pub fn into_ipc(self, schema: &SchemaRef, options: &IpcWriteOptions) -> Result<Self> {
        match self {
            Self::Ipc { .. } => Ok(self),
            Self::Page { .. } => encode_ipc(&self.to_batch(schema)?, options),
        }
    }

    /// The message as a Presto page: itself, or its batch decoded and encoded with `options`.
    ///
    /// # Errors
    /// As [`to_batch`](Self::to_batch), and the encoder's (for a type Presto cannot carry).
    pub fn into_page(self, schema: &SchemaRef, options: PageOptions) -> Result<Self> {
        match self {
            Self::Page { .. } => Ok(self),
            Self::Ipc { .. } => {
                let mut page = Vec::new();
                let batch = self.to_batch(schema)?;
                encode_page(&batch, options, &mut page)?;
                Ok(Self::Page {
                    page: page.into(),
                    rows: batch.num_rows() as u64,
                })
            }
        }
    }
}

/// `batch` as an IPC message with every dictionary it needs, numbered as the schema message
/// of its schema numbers them.
///
/// # Errors
/// arrow-ipc's.
pub fn encode_ipc(batch: &RecordBatch, options: &IpcWriteOptions) -> Result<Message> {
    let generator = IpcDataGenerator::default();
    // A tracker of its own, which has sent no dictionary yet: the message carries them all.
    // It learns the dictionaries' ids from the schema, as the schema message's encoder does.
    let mut tracker = DictionaryTracker::new(false);
    generator.schema_to_bytes_with_dictionary_tracker(batch.schema_ref(), &mut tracker, options);
    let (dictionaries, encoded) = generator.encode(
        batch,
        &mut tracker,
        options,
        &mut IpcWriteContext::default(),
    )?;
    Ok(Message::Ipc {
        dictionaries: dictionaries.into_iter().map(FlightData::from).collect(),
        batch: FlightData::from(encoded),
        rows: batch.num_rows() as u64,
    })
}

/// Encodes batches as the messages of one exchange.
///
/// IPC messages of a schema without dictionaries come from partout's stream encoder, whose
/// parts share the batch's buffers: the message is copied once, into a buffer of its exact
/// size (arrow-ipc's `IpcDataGenerator` grows its body buffer as it goes, copying it again).
#[derive(Debug)]
pub struct MessageEncoder {
    schema: SchemaRef,
    encoding: Encoding,
    ipc: IpcWriteOptions,
    /// The one-destination stream encoder of the fast path, made at first use (`None` for
    /// schemas with dictionaries and for Presto pages).
    stream: Option<StreamEncoders>,
    parts: Vec<Buffer>,
}

impl Clone for MessageEncoder {
    /// The same encoder, its stream state not shared (a clone's is made at its first use).
    fn clone(&self) -> Self {
        Self {
            schema: self.schema.clone(),
            encoding: self.encoding,
            ipc: self.ipc.clone(),
            stream: None,
            parts: Vec::new(),
        }
    }
}

impl MessageEncoder {
    /// Messages of batches of `schema`, as `encoding` says.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a column the format cannot carry.
    pub fn try_new(schema: SchemaRef, encoding: Encoding) -> Result<Self> {
        encoding.check_schema(&schema)?;
        let ipc = partout_format::ipc::ipc_options(encoding.compression())?;
        Ok(Self {
            schema,
            encoding,
            ipc,
            stream: None,
            parts: Vec::new(),
        })
    }

    /// Whether IPC messages take the fast path: no dictionary anywhere in the schema.
    fn fast_ipc(&self) -> bool {
        self.encoding.format() == Format::Ipc && !has_dictionaries(&self.schema)
    }

    /// `batch` as one IPC message through the stream encoder.
    fn encode_fast(&mut self, batch: &RecordBatch) -> Result<Message> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            slot => slot.insert(StreamEncoders::try_new(
                self.schema.clone(),
                1,
                self.encoding,
            )?),
        };
        self.parts.clear();
        stream.encode_parts(0, batch, &mut self.parts)?;
        // The parts in one buffer of their exact size (the body's one copy), which the
        // message's header and body share.
        let mut bytes = Vec::with_capacity(self.parts.iter().map(|p| p.len()).sum());
        for part in self.parts.drain(..) {
            bytes.extend_from_slice(&part);
        }
        let bytes = Bytes::from(bytes);
        let mut reader = MessageReader::new(&bytes[..], bytes.len() as u64);
        while let Some(Frame::Message(header)) = reader.next_frame()? {
            let at = reader.position() as usize;
            let body = reader.body_slice(&header)?.len();
            // The stream's schema comes before its first batch.
            if header.message()?.header_type() == arrow_ipc::MessageHeader::RecordBatch {
                let start = header.at() as usize;
                return Ok(Message::Ipc {
                    dictionaries: Vec::new(),
                    batch: FlightData {
                        data_header: bytes.slice(start..at),
                        data_body: bytes.slice(at..at + body),
                        ..Default::default()
                    },
                    rows: batch.num_rows() as u64,
                });
            }
        }
        Err(ExchangeError::corrupt(
            "an encoded batch without its message",
        ))
    }

    /// The schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The IPC options (for IPC messages made of pages too).
    pub fn ipc_options(&self) -> &IpcWriteOptions {
        &self.ipc
    }

    /// The schema as the first message of a Flight stream.
    pub fn schema_message(&self) -> FlightData {
        SchemaAsIpc::new(&self.schema, &self.ipc).into()
    }

    /// `batch` as a message.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a batch whose columns differ from the schema's;
    /// the encoder's errors.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Message> {
        let fields = self.schema.fields();
        let given = batch.schema();
        if given.fields().len() != fields.len()
            || fields
                .iter()
                .zip(given.fields())
                .any(|(a, b)| a.data_type() != b.data_type())
        {
            return Err(ExchangeError::InvalidArgument(format!(
                "a batch of columns ({}) for an exchange of ({})",
                describe(given.fields()),
                describe(fields)
            )));
        }
        match self.encoding.format() {
            Format::Ipc if self.fast_ipc() => self.encode_fast(batch),
            // An encoding is Arrow IPC or Presto pages, never Parquet.
            Format::Ipc | Format::Parquet => encode_ipc(batch, &self.ipc),
            Format::Presto => {
                let mut page = Vec::new();
                encode_page(batch, self.encoding.page_options(), &mut page)?;
                Ok(Message::Page {
                    page: page.into(),
                    rows: batch.num_rows() as u64,
                })
            }
        }
    }

    /// `message` as an IPC one.
    ///
    /// # Errors
    /// As [`Message::into_ipc`].
    pub fn to_ipc(&self, message: Message) -> Result<Message> {
        message.into_ipc(&self.schema, &self.ipc)
    }

    /// `message` as a Presto page.
    ///
    /// # Errors
    /// As [`Message::into_page`].
    pub fn to_page(&self, message: Message) -> Result<Message> {
        message.into_page(&self.schema, self.encoding.page_options())
    }
}

/// Whether `data_type` holds a dictionary at any depth.
fn has_dictionary(data_type: &DataType) -> bool {
    partout_format::ipc::holds(data_type, &|t| matches!(t, DataType::Dictionary(..)))
}

/// Whether a column of `schema` holds a dictionary at any depth.
fn has_dictionaries(schema: &Schema) -> bool {
    schema
        .fields()
        .iter()
        .any(|f| has_dictionary(f.data_type()))
}

/// `schema` as its IPC schema message gives it back: every dictionary field (nested ones
/// too) with the id arrow-ipc gave its dictionary, which decoding dictionaries and batches
/// needs.
fn with_dictionary_ids(schema: &Schema) -> Result<SchemaRef> {
    let encoded = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
        schema,
        &mut DictionaryTracker::new(false),
        &IpcWriteOptions::default(),
    );
    let numbered = arrow_ipc::convert::try_schema_from_flatbuffer_bytes(&encoded.ipc_message)?;
    Ok(Arc::new(numbered))
}

/// Column names and types, for errors.
pub(crate) fn describe(fields: &arrow_schema::Fields) -> String {
    fields
        .iter()
        .map(|f| {
            let null = if f.is_nullable() { "" } else { " not null" };
            format!("{}: {}{null}", f.name(), f.data_type())
        })
        .collect::<Vec<_>>()
        .join(", ")
}
