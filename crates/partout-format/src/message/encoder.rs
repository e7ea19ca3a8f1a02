//! [`MessageEncoder`]: batches as the [`Message`]s of one exchange.

use super::{IpcMessage, Message, has_dictionaries};
use crate::ipc::frame::{MessageReader, Next};
use crate::presto::encode_page;
use crate::{Encoding, Format, FormatError, Result, StreamEncoders};
use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
use arrow_schema::{Fields, SchemaRef};
use bytes::Bytes;

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
        dictionaries: dictionaries.into_iter().map(IpcMessage::from).collect(),
        batch: IpcMessage::from(encoded),
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
    /// [`FormatError::InvalidArgument`] for a column the format cannot carry.
    pub fn try_new(schema: SchemaRef, encoding: Encoding) -> Result<Self> {
        encoding.check_schema(&schema)?;
        let ipc = crate::ipc::ipc_options(encoding.compression())?;
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
        while let Some(Next::Message(header)) = reader.next_frame()? {
            let at = reader.position() as usize;
            let body = reader.body_slice(&header)?.len();
            // The stream's schema comes before its first batch.
            if header.message()?.header_type() == arrow_ipc::MessageHeader::RecordBatch {
                let start = header.at() as usize;
                return Ok(Message::Ipc {
                    dictionaries: Vec::new(),
                    batch: IpcMessage {
                        header: bytes.slice(start..at),
                        body: bytes.slice(at..at + body),
                    },
                    rows: batch.num_rows() as u64,
                });
            }
        }
        Err(FormatError::Corrupt(
            "an encoded batch without its message".into(),
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

    /// The IPC options (for IPC messages made of pages too, and the schema message).
    pub fn ipc_options(&self) -> &IpcWriteOptions {
        &self.ipc
    }

    /// `batch` as a message.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a batch whose columns differ from the schema's;
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
            return Err(FormatError::InvalidArgument(format!(
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

/// Column names and types, for errors.
pub fn describe(fields: &Fields) -> String {
    fields
        .iter()
        .map(|f| {
            let null = if f.is_nullable() { "" } else { " not null" };
            format!("{}: {}{null}", f.name(), f.data_type())
        })
        .collect::<Vec<_>>()
        .join(", ")
}
