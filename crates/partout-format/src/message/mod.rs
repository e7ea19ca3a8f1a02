//! [`Message`]: one unit of a destination's output as it is held, spilled, sent and read
//! back: an Arrow IPC record batch (with the dictionaries it needs) or a Presto page; the
//! conversions between the two for a consumer that wants the other one; and the
//! [`MessageEncoder`] that makes them from batches.
//!
//! A message is bytes: an IPC message is its flatbuffer header and its body, as the IPC
//! stream and Arrow Flight carry them (a protocol wraps them at its edge, e.g. in Flight's
//! `FlightData`). Each IPC message carries every dictionary its batch refers to, so that any
//! message can be sent first: a consumer resuming at any sequence decodes what it gets.
//! Dictionaries are numbered as the schema message numbers them (arrow-ipc gives the ids
//! when it encodes the schema, depth first), so the stream's schema message fits every
//! message.
//!
//! Messages read back — from a spill file ([`Message::read_from`]), an output's files or the
//! network ([`Message::page`]) — are checked before they are decoded: every length against
//! the bytes there are, each IPC message by [`MessageCheck`], each page's header and
//! checksum, and the decoded columns validated.

mod encoder;

pub use encoder::{MessageEncoder, describe, encode_ipc};

use crate::ipc::MessageCheck;
use crate::presto::{PageOptions, check_page, decode_page, encode_page};
use crate::{FormatError, Result};
use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use arrow_schema::{DataType, Schema, SchemaRef};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

/// One Arrow IPC message: its flatbuffer header (without the stream's length prefix) and
/// its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpcMessage {
    /// The flatbuffer `Message`.
    pub header: Bytes,
    /// The body the header describes.
    pub body: Bytes,
}

impl IpcMessage {
    /// Bytes of header and body.
    pub fn len(&self) -> usize {
        self.header.len() + self.body.len()
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<arrow_ipc::writer::EncodedData> for IpcMessage {
    fn from(data: arrow_ipc::writer::EncodedData) -> Self {
        Self {
            header: data.ipc_message.into(),
            body: data.arrow_data.into(),
        }
    }
}

/// One unit of a destination's output.
#[derive(Debug, Clone)]
pub enum Message {
    /// An Arrow IPC record batch message, after the dictionary messages it needs.
    Ipc {
        /// Dictionary messages, in the order they are sent.
        dictionaries: Vec<IpcMessage>,
        /// The record batch message.
        batch: IpcMessage,
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
        match self {
            Self::Ipc {
                dictionaries,
                batch,
                ..
            } => dictionaries.iter().map(IpcMessage::len).sum::<usize>() + batch.len(),
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
                    part(out, &data.header);
                    part(out, &data.body);
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
    /// [`FormatError::Corrupt`] for bytes that do not hold a message.
    pub fn read_from(bytes: &[u8]) -> Result<Self> {
        let corrupt = || FormatError::Corrupt("a spilled message that does not read back".into());
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
                let data = |at: &mut usize| -> Result<IpcMessage> {
                    let header = part(at)?;
                    let body = part(at)?;
                    Ok(IpcMessage { header, body })
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
    /// [`FormatError::Corrupt`] naming what does not hold.
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
    /// [`FormatError::Corrupt`] when it does not decode as `schema`.
    pub fn to_batch(&self, schema: &SchemaRef) -> Result<RecordBatch> {
        match self {
            Self::Ipc {
                dictionaries,
                batch,
                ..
            } => decode_ipc(dictionaries, batch, schema),
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

/// An IPC record batch message and its dictionaries, checked and decoded as `schema`.
fn decode_ipc(
    dictionaries: &[IpcMessage],
    batch: &IpcMessage,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let corrupt =
        |what: &str, e: &dyn std::fmt::Display| FormatError::Corrupt(format!("{what}: {e}"));
    // The decoder finds a column's dictionary by the id in its field: the ids of the schema
    // as its IPC message gives them, which a schema built in memory lacks.
    let numbered = has_dictionaries(schema)
        .then(|| with_dictionary_ids(schema))
        .transpose()?;
    let ipc_schema = numbered.as_ref().unwrap_or(schema);
    // Messages read back may be damaged: each passes the one IPC check before arrow-ipc
    // decodes it, and the columns are validated after.
    let mut check = MessageCheck::with_schema(ipc_schema.as_ref().clone());
    let mut by_id: HashMap<i64, ArrayRef> = HashMap::new();
    for dictionary in dictionaries {
        check
            .check(&dictionary.header, &dictionary.body)
            .map_err(|e| corrupt("an IPC dictionary message", &e))?;
        let message = arrow_ipc::root_as_message(&dictionary.header)
            .map_err(|e| corrupt("a dictionary", &e))?;
        let header = message
            .header_as_dictionary_batch()
            .ok_or_else(|| FormatError::Corrupt("a dictionary message of another kind".into()))?;
        arrow_ipc::reader::read_dictionary(
            &Buffer::from(dictionary.body.clone()),
            header,
            ipc_schema,
            &mut by_id,
            &message.version(),
        )
        .map_err(|e| corrupt("a dictionary", &e))?;
    }
    check
        .check(&batch.header, &batch.body)
        .map_err(|e| corrupt("an IPC message", &e))?;
    let message =
        arrow_ipc::root_as_message(&batch.header).map_err(|e| corrupt("an IPC message", &e))?;
    let header = message
        .header_as_record_batch()
        .ok_or_else(|| FormatError::Corrupt("a record batch message of another kind".into()))?;
    let decoded = arrow_ipc::reader::read_record_batch(
        &Buffer::from(batch.body.clone()),
        header,
        ipc_schema.clone(),
        &by_id,
        None,
        &message.version(),
    )
    .map_err(|e| corrupt("an IPC message", &e))?;
    for column in decoded.columns() {
        column
            .to_data()
            .validate_full()
            .map_err(|e| corrupt("an IPC message's columns", &e))?;
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

/// Whether `data_type` holds a dictionary at any depth.
fn has_dictionary(data_type: &DataType) -> bool {
    crate::ipc::holds(data_type, &|t| matches!(t, DataType::Dictionary(..)))
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
