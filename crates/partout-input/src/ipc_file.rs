//! Arrow IPC files and streams read message by message, every length checked against the
//! file before anything is allocated by it.
//!
//! arrow-ipc's `FileReader` and `StreamReader` allocate what a message or a footer claims
//! before reading it (a stream of eight bytes can ask for two gigabytes, a footer block for
//! any size), and decompress a buffer into room for the length its first eight bytes claim.
//! So a stream is framed by partout-format's `MessageReader`, bounded by the bytes left in the
//! file, and a file's blocks here, bounded by the file's size; each message's buffers
//! are checked to lie in its body, and each compressed buffer's claimed length against what
//! its codec can make of its bytes. The messages are then decoded by arrow-ipc (`FileDecoder`,
//! `read_record_batch`, `read_dictionary`).
//!
//! ```text
//! message: [ 0xFFFFFFFF | meta len: i32 | Message flatbuffer | body ]  (len 0: end of stream)
//! file:    [ "ARROW1\0\0" | schema message | messages ... | Footer flatbuffer | len: i32 | "ARROW1" ]
//! ```

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::Block;
use arrow_ipc::reader::{FileDecoder, read_dictionary, read_record_batch};
use arrow_schema::{ArrowError, SchemaRef};
use partout_format::ipc::MessageCheck;
use partout_format::ipc::frame::{CONTINUATION, MessageReader, Next};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

const MAGIC: &[u8; 6] = b"ARROW1";

fn corrupt(what: impl Into<String>) -> ArrowError {
    ArrowError::ParseError(what.into())
}

/// A refusal of partout-format's checks (or the file's failure to read) as the Arrow error
/// these readers give.
fn refused(e: partout_format::FormatError) -> ArrowError {
    match e {
        partout_format::FormatError::Io(e) => ArrowError::from(e),
        other => corrupt(other.to_string()),
    }
}

/// One message of a stream: its flatbuffer and body in one buffer, and where the body starts.
struct Message {
    bytes: Buffer,
    body: usize,
}

impl Message {
    fn parsed(&self) -> Result<arrow_ipc::Message<'_>, ArrowError> {
        arrow_ipc::root_as_message(&self.bytes[..self.body])
            .map_err(|e| corrupt(format!("a message that is not one: {e}")))
    }
}

/// An Arrow IPC stream, read a message at a time.
pub(crate) struct IpcStream<R> {
    reader: MessageReader<R>,
    schema: SchemaRef,
    dictionaries: HashMap<i64, ArrayRef>,
    /// Every message passes it before arrow-ipc decodes it.
    check: MessageCheck,
    done: bool,
}

impl<R: Read> IpcStream<R> {
    /// A stream of `len` bytes, read up to its schema.
    pub(crate) fn try_new(reader: R, len: u64) -> Result<(SchemaRef, Self), ArrowError> {
        let mut stream = Self {
            reader: MessageReader::new(reader, len),
            schema: Arc::new(arrow_schema::Schema::empty()),
            dictionaries: HashMap::new(),
            check: MessageCheck::new(),
            done: false,
        };
        // The check refuses a first message that is not a schema, and converts it.
        stream
            .next_message()?
            .ok_or_else(|| corrupt("an empty stream"))?;
        let schema = stream
            .check
            .schema()
            .cloned()
            .ok_or_else(|| corrupt("a stream that does not start with its schema"))?;
        stream.schema = Arc::new(schema);
        Ok((stream.schema.clone(), stream))
    }

    /// The next message, whole and checked; `None` at the stream's end.
    fn next_message(&mut self) -> Result<Option<Message>, ArrowError> {
        let header = match self.reader.next_frame().map_err(refused)? {
            None | Some(Next::End) => return Ok(None),
            Some(Next::Message(header)) => header,
        };
        let body = header.bytes().len();
        let bytes = self.reader.read_message(header).map_err(refused)?;
        self.check
            .check(&bytes[..body], &bytes[body..])
            .map_err(refused)?;
        Ok(Some(Message {
            bytes: Buffer::from(bytes),
            body,
        }))
    }

    /// The next record batch, reading the dictionaries before it.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        while let Some(message) = self.next_message()? {
            let parsed = message.parsed()?;
            let body = message.bytes.slice(message.body);
            let version = parsed.version();
            if let Some(batch) = parsed.header_as_record_batch() {
                let batch = read_record_batch(
                    &body,
                    batch,
                    self.schema.clone(),
                    &self.dictionaries,
                    None,
                    &version,
                )?;
                return Ok(Some(batch));
            }
            if let Some(dictionary) = parsed.header_as_dictionary_batch() {
                read_dictionary(
                    &body,
                    dictionary,
                    &self.schema,
                    &mut self.dictionaries,
                    &version,
                )?;
                continue;
            }
            return Err(corrupt(format!(
                "a {:?} message among the batches",
                parsed.header_type()
            )));
        }
        Ok(None)
    }
}

impl<R: Read> Iterator for IpcStream<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_batch().transpose();
        self.done = !matches!(next, Some(Ok(_)));
        next
    }
}

/// An Arrow IPC file: its footer read, its record batches `next..end` to be read.
pub(crate) struct IpcFile<R> {
    reader: R,
    decoder: FileDecoder,
    /// Every block passes it before arrow-ipc decodes it.
    check: MessageCheck,
    blocks: Vec<Block>,
    next: usize,
    end: usize,
}

impl<R: Read + Seek> IpcFile<R> {
    /// A file of `len` bytes: its footer and dictionaries read, every block checked to lie
    /// within the file.
    pub(crate) fn try_new(mut reader: R, len: u64) -> Result<(SchemaRef, Self), ArrowError> {
        if len < 18 {
            return Err(corrupt(format!(
                "{len} bytes are too few for an Arrow IPC file"
            )));
        }
        let mut tail = [0u8; 10];
        reader.seek(SeekFrom::Start(len - 10))?;
        reader.read_exact(&mut tail)?;
        if &tail[4..] != MAGIC {
            return Err(corrupt("no ARROW1 magic at its end"));
        }
        let footer_len = i32::from_le_bytes(tail[..4].try_into().expect("4 bytes"));
        let footer_start = u64::try_from(footer_len)
            .ok()
            .and_then(|footer_len| (len - 10).checked_sub(footer_len))
            .filter(|&start| start >= 8)
            .ok_or_else(|| corrupt(format!("a footer of {footer_len} bytes in {len} bytes")))?;
        let mut footer = vec![0u8; footer_len as usize];
        reader.seek(SeekFrom::Start(footer_start))?;
        reader.read_exact(&mut footer)?;
        let parsed = arrow_ipc::root_as_footer(&footer)
            .map_err(|e| corrupt(format!("a footer that is not one: {e}")))?;
        let ipc_schema = parsed
            .schema()
            .ok_or_else(|| corrupt("a footer without a schema"))?;
        if !ipc_schema.endianness().equals_to_target_endianness() {
            return Err(corrupt("a file of the other endianness"));
        }
        let schema = Arc::new(partout_format::ipc::convert_schema(ipc_schema).map_err(refused)?);
        let check = |kind: &str, block: &Block| {
            let meta = u64::try_from(block.metaDataLength())
                .ok()
                .filter(|&m| m >= 8);
            let body = u64::try_from(block.bodyLength()).ok();
            let fits = u64::try_from(block.offset())
                .ok()
                .zip(meta.zip(body))
                .and_then(|(offset, (meta, body))| offset.checked_add(meta)?.checked_add(body))
                .is_some_and(|end| end <= footer_start);
            match fits {
                true => Ok(*block),
                false => Err(corrupt(format!(
                    "a {kind} block ({} + {} bytes at {}) outside the file's {footer_start} bytes of messages",
                    block.metaDataLength(),
                    block.bodyLength(),
                    block.offset()
                ))),
            }
        };
        let blocks: Vec<Block> = parsed
            .recordBatches()
            .into_iter()
            .flatten()
            .map(|block| check("record batch", block))
            .collect::<Result<_, _>>()?;
        let dictionaries: Vec<Block> = parsed
            .dictionaries()
            .into_iter()
            .flatten()
            .map(|block| check("dictionary", block))
            .collect::<Result<_, _>>()?;
        let mut file = Self {
            reader,
            decoder: FileDecoder::new(schema.clone(), parsed.version()),
            check: MessageCheck::with_schema(schema.as_ref().clone()),
            end: blocks.len(),
            blocks,
            next: 0,
        };
        for block in &dictionaries {
            let buffer = file.read_block(block)?;
            file.decoder.read_dictionary(block, &buffer)?;
        }
        Ok((schema, file))
    }

    /// Its record batches.
    pub(crate) fn num_batches(&self) -> usize {
        self.blocks.len()
    }

    /// Reads record batches `start..end` only.
    pub(crate) fn with_range(mut self, start: usize, end: usize) -> Result<Self, ArrowError> {
        if start > end || end > self.blocks.len() {
            return Err(ArrowError::InvalidArgumentError(format!(
                "batches {start}..{end} of {}",
                self.blocks.len()
            )));
        }
        (self.next, self.end) = (start, end);
        Ok(self)
    }

    /// A block's message, checked (the block itself lies within the file).
    fn read_block(&mut self, block: &Block) -> Result<Buffer, ArrowError> {
        let meta = block.metaDataLength() as usize;
        let len = meta + block.bodyLength() as usize;
        let mut message = Vec::with_capacity(len);
        self.reader.seek(SeekFrom::Start(block.offset() as u64))?;
        (&mut self.reader)
            .take(len as u64)
            .read_to_end(&mut message)?;
        if message.len() != len {
            return Err(corrupt("a file shorter than it was"));
        }
        // FileDecoder reads the flatbuffer from the whole block, after the prefix.
        let flatbuffer = if message.starts_with(&CONTINUATION) {
            8
        } else {
            4
        };
        if meta < flatbuffer {
            return Err(corrupt(format!("a block's header of {meta} bytes")));
        }
        self.check
            .check(&message[flatbuffer..meta], &message[meta..])
            .map_err(refused)?;
        Ok(Buffer::from(message))
    }
}

impl<R: Read + Seek> Iterator for IpcFile<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let block = self.blocks[self.next];
            self.next += 1;
            let batch = self
                .read_block(&block)
                .and_then(|buffer| self.decoder.read_record_batch(&block, &buffer));
            match batch {
                Ok(Some(batch)) => return Some(Ok(batch)),
                Ok(None) => {}
                Err(e) => {
                    self.next = self.end;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}
