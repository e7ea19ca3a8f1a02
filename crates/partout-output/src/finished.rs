//! Reading a finished output back, from a local directory or a store's prefix (by ranged
//! GETs): [`FinishedOutput`] opens an output through its manifest
//! (the spec it records, its files, its shuffle indexes) and a [`FileCursor`] reads one
//! destination's [`Message`]s in order, one at a time, through the shuffle index or from the
//! destination's own file — never the whole destination at once. Every reader of an output
//! reads through here: the Flight and Presto servers, Python's `read` and `partout inspect`.
//!
//! Bytes are framed by one reader per format — IPC messages by
//! [`MessageReader`], Presto pages by their header's size ([`body_size`]) — and every length
//! is checked against the bytes the ranges hold before anything is allocated; each message is
//! checked again when it is decoded ([`Message::to_batch`]).

use crate::Location;
use crate::location::StorePrefix;
use crate::manifest::{Layout, MANIFEST_FILE, Manifest};
use crate::{parse_shuffle_index, read_shuffle_index};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use partout_exchange::ExchangeError;
use partout_format::ipc::frame::{Header, MessageReader, Next, Skip};
use partout_format::presto::{HEADER_SIZE, body_size};
use partout_format::{Format, IpcMessage, Message};
use partout_input::StorageOptions;
use partout_input::{Opened, StoreObject};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reading an output back fails as serving it does: [`ExchangeError::NotFound`],
/// [`ExchangeError::InvalidArgument`] or [`ExchangeError::Corrupt`] naming the file.
type Result<T, E = ExchangeError> = std::result::Result<T, E>;

/// One stream of a destination: byte ranges of one file, concatenated.
#[derive(Debug, Clone)]
struct Segment {
    /// The file, as errors show it.
    path: PathBuf,
    /// The object, when the file is one of a store.
    object: Option<Arc<StoreObject>>,
    ranges: Vec<(u64, u64)>,
}

/// A finished output (its manifest read, its schema known for Arrow IPC), in a local
/// directory or under a store's prefix.
#[derive(Debug)]
pub struct FinishedOutput {
    /// The directory, or the prefix's URL.
    dir: PathBuf,
    store: Option<StorePrefix>,
    manifest: Manifest,
    schema: Option<SchemaRef>,
}

/// A file of a finished output: as errors show it, the object when in a store, its length.
type OutputFile = (PathBuf, Option<Arc<StoreObject>>, u64);

impl FinishedOutput {
    /// The finished `repartition` output in `dir` (Arrow IPC or Presto pages, files or shuffle
    /// layout).
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] without a readable manifest; [`ExchangeError::InvalidArgument`]
    /// for a Parquet output; [`ExchangeError::Corrupt`] when no stream's schema can be read.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = Manifest::read(&dir)
            .map_err(|e| ExchangeError::NotFound(format!("{}: {e}", dir.display())))?;
        Self::with_manifest(Location::local(&dir), dir, None, manifest)
    }

    /// The finished output `location` names: a local directory, or a prefix of an object
    /// store (`s3://bucket/out`, …; its client configured from the environment, then
    /// `options`), its files read by ranged GETs.
    ///
    /// # Errors
    /// As [`open`](Self::open); [`ExchangeError::InvalidArgument`] for a location that names
    /// no place or options its store does not take.
    pub fn open_at(location: &str, options: &StorageOptions) -> Result<Self> {
        let prefix = match Location::parse(location, options) {
            Ok(Location::Store(prefix)) => prefix,
            Ok(Location::Local(dir)) => return Self::open(dir.path()),
            Err(e) => return Err(ExchangeError::InvalidArgument(e.to_string())),
        };
        let dir = PathBuf::from(prefix.url());
        let object = prefix
            .open_object(MANIFEST_FILE)
            .map_err(|e| ExchangeError::NotFound(format!("{}: {e}", dir.display())))?;
        let bytes = object
            .get(0..object.size)
            .map_err(|e| ExchangeError::NotFound(format!("{}: {e}", dir.display())))?;
        let manifest = Manifest::parse(&bytes, &dir.join(MANIFEST_FILE))
            .map_err(|e| ExchangeError::NotFound(format!("{}: {e}", dir.display())))?;
        Self::with_manifest(Location::Store(prefix.clone()), dir, Some(prefix), manifest)
    }

    /// The output `manifest` describes, at `location`.
    fn with_manifest(
        location: Location,
        dir: PathBuf,
        store: Option<StorePrefix>,
        manifest: Manifest,
    ) -> Result<Self> {
        // The output is what its manifest records, as the output layer reads it back: a spec
        // no run writes (Parquet in the shuffle layout, Snappy streams) is a damaged manifest.
        let spec = manifest
            .output_spec(location)
            .map_err(|e| ExchangeError::corrupt(format!("{}: {e}", dir.display())))?;
        if spec.format() == Format::Parquet {
            return Err(ExchangeError::InvalidArgument(format!(
                "{}: a Parquet output, whose files are read by a Parquet reader, not as messages",
                dir.display()
            )));
        }
        let mut output = Self {
            dir,
            store,
            manifest,
            schema: None,
        };
        if output.manifest.format == Format::Ipc {
            for p in 0..output.manifest.partitions {
                if let Some(schema) = output.cursor(p)?.ipc_schema()? {
                    output.schema = Some(schema);
                    break;
                }
            }
            if output.schema.is_none() {
                return Err(ExchangeError::corrupt(format!(
                    "{}: no destination holds a stream",
                    output.dir.display()
                )));
            }
        }
        Ok(output)
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The schema: known for Arrow IPC outputs (Presto pages do not carry theirs).
    pub fn schema(&self) -> Option<&SchemaRef> {
        self.schema.as_ref()
    }

    /// Destinations.
    pub fn partitions(&self) -> u32 {
        self.manifest.partitions
    }

    /// The output's file `name`.
    fn file(&self, name: &str) -> Result<OutputFile> {
        let path = self.dir.join(name);
        let unreadable =
            |e: io::Error| ExchangeError::corrupt_because(path.display().to_string(), e);
        match &self.store {
            None => {
                let len = std::fs::metadata(&path).map_err(unreadable)?.len();
                Ok((path, None, len))
            }
            Some(prefix) => {
                let object = prefix.open_object(name).map_err(unreadable)?;
                let len = object.size;
                Ok((path, Some(object), len))
            }
        }
    }

    /// Destination `p`'s streams.
    fn segments(&self, p: u32) -> Result<Vec<Segment>> {
        let corrupt = ExchangeError::corrupt;
        match self.manifest.layout {
            Layout::Files => {
                let entry =
                    self.manifest.destinations.get(p as usize).ok_or_else(|| {
                        corrupt(format!("no destination {p} in the manifest's list"))
                    })?;
                let files = entry.files.as_ref().ok_or_else(|| {
                    corrupt(format!("the manifest lists no files of destination {p}"))
                })?;
                // A destination's files (several when they rolled over) in order, each a
                // stream of its own.
                files
                    .iter()
                    .map(|f| {
                        let (path, object, len) = self.file(&f.name)?;
                        Ok(Segment {
                            path,
                            object,
                            ranges: vec![(0, len)],
                        })
                    })
                    .collect()
            }
            Layout::Shuffle => {
                let mut segments = Vec::new();
                for files in self.manifest.shuffle_files.iter().flatten() {
                    let (data, object, len) = self.file(&files.data)?;
                    let (index, index_object, _) = self.file(&files.index)?;
                    let read = match index_object {
                        None => read_shuffle_index(&index, len),
                        Some(o) => o
                            .get(0..o.size)
                            .map_err(|e| {
                                partout_input::IoError::system(&index, "cannot be read", e)
                            })
                            .and_then(|bytes| parse_shuffle_index(&index, &bytes, len)),
                    };
                    let (destinations, ranges) =
                        read.map_err(|e| ExchangeError::corrupt_because("a shuffle index", e))?;
                    if p >= destinations {
                        return Err(corrupt(format!(
                            "{}: {destinations} destinations, the manifest says {}",
                            files.index,
                            self.partitions()
                        )));
                    }
                    let ranges: Vec<_> = ranges
                        .iter()
                        .filter(|r| r.destination == p && r.len > 0)
                        .map(|r| (r.offset, r.len))
                        .collect();
                    if !ranges.is_empty() {
                        segments.push(Segment {
                            path: data,
                            object,
                            ranges,
                        });
                    }
                }
                Ok(segments)
            }
        }
    }

    /// A reader of destination `p`'s messages, from the first.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range; [`ExchangeError::Corrupt`]
    /// when its files or index cannot be read.
    pub fn cursor(&self, p: u32) -> Result<FileCursor> {
        if p >= self.partitions() {
            return Err(ExchangeError::NotFound(format!(
                "no destination {p} of {} destinations",
                self.partitions()
            )));
        }
        Ok(FileCursor {
            format: self.manifest.format,
            segments: self.segments(p)?.into(),
            reader: None,
            dictionaries: BTreeMap::new(),
            schema: None,
        })
    }
}

/// Reads a segment's ranges in order as one byte stream.
struct RangeReader {
    file: BufReader<Opened>,
    path: PathBuf,
    ranges: std::collections::VecDeque<(u64, u64)>,
    /// Bytes left in the current range.
    left: u64,
    /// Bytes left in all ranges.
    remaining: u64,
}

impl RangeReader {
    fn open(segment: Segment) -> Result<Self> {
        let file = match &segment.object {
            Some(object) => object.reader(),
            None => File::open(&segment.path).map(Opened::Local).map_err(|e| {
                ExchangeError::corrupt_because(segment.path.display().to_string(), e)
            })?,
        };
        Ok(Self {
            file: BufReader::with_capacity(1 << 16, file),
            path: segment.path,
            remaining: segment.ranges.iter().map(|r| r.1).sum(),
            ranges: segment.ranges.into(),
            left: 0,
        })
    }

    /// Makes the current range one with bytes left; false at the end.
    fn next_range(&mut self) -> io::Result<bool> {
        while self.left == 0 {
            let Some((offset, len)) = self.ranges.pop_front() else {
                return Ok(false);
            };
            self.file.seek(SeekFrom::Start(offset))?;
            self.left = len;
        }
        Ok(true)
    }

    /// `n` bytes, checked against what the ranges hold before anything is allocated.
    fn take(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.remaining {
            return Err(self.corrupt(format!(
                "{what} of {n} bytes with {} bytes left",
                self.remaining
            )));
        }
        let mut out = vec![0; n as usize];
        self.read_exact(&mut out)
            .map_err(|e| self.corrupt_because(what.to_string(), e))?;
        Ok(out)
    }

    fn corrupt(&self, what: String) -> ExchangeError {
        ExchangeError::corrupt(format!("{}: {what}", self.path.display()))
    }

    fn corrupt_because(
        &self,
        what: String,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> ExchangeError {
        ExchangeError::corrupt_because(format!("{}: {what}", self.path.display()), cause)
    }
}

/// Seeks over what it skips.
impl Skip for RangeReader {
    fn skip(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            if !self.next_range()? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let step = n.min(self.left);
            self.file.seek_relative(step as i64)?;
            self.left -= step;
            self.remaining -= step;
            n -= step;
        }
        Ok(())
    }
}

impl Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || !self.next_range()? {
            return Ok(0);
        }
        let want = buf.len().min(self.left as usize);
        let got = self.file.read(&mut buf[..want])?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= got as u64;
        self.remaining -= got as u64;
        Ok(got)
    }
}

/// One IPC message as read from a stream.
enum IpcRead {
    Schema(SchemaRef),
    Dictionary {
        id: i64,
        delta: bool,
        data: IpcMessage,
    },
    Batch {
        data: IpcMessage,
        rows: u64,
    },
    End,
}

/// Reads one destination's messages in order, one at a time: IPC record batches (each with
/// the dictionaries in force) or Presto pages.
pub struct FileCursor {
    format: Format,
    segments: std::collections::VecDeque<Segment>,
    reader: Option<MessageReader<RangeReader>>,
    /// Dictionary messages in force: per id, the last replacement and its deltas.
    dictionaries: BTreeMap<i64, Vec<IpcMessage>>,
    schema: Option<SchemaRef>,
}

impl std::fmt::Debug for FileCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCursor")
            .field("format", &self.format)
            .field("segments_left", &self.segments.len())
            .field("reading", &self.reader.as_ref().map(|r| &r.get_ref().path))
            .finish_non_exhaustive()
    }
}

impl FileCursor {
    /// The messages of one stream file, an Arrow IPC stream or Presto pages (as `format`
    /// says), read as a destination's are.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a file that cannot be opened;
    /// [`ExchangeError::InvalidArgument`] for Parquet (a file, not a stream of messages).
    pub fn file(path: impl AsRef<Path>, format: Format) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if !format.is_stream() {
            return Err(ExchangeError::InvalidArgument(format!(
                "{}: {} files are not read as a stream of messages",
                path.display(),
                format.title()
            )));
        }
        let len = std::fs::metadata(&path)
            .map_err(|e| ExchangeError::NotFound(format!("{}: {e}", path.display())))?
            .len();
        Ok(Self {
            format,
            segments: [Segment {
                path,
                object: None,
                ranges: vec![(0, len)],
            }]
            .into(),
            reader: None,
            dictionaries: BTreeMap::new(),
            schema: None,
        })
    }

    /// The schema of the IPC stream being read, once its first message has been (Presto
    /// pages do not carry theirs).
    pub fn schema(&self) -> Option<&SchemaRef> {
        self.schema.as_ref()
    }

    /// The next message decoded: an IPC batch as its stream's schema says, a page as
    /// `pages_schema` (the schema the pages were written with) says; `None` after the last.
    ///
    /// # Errors
    /// As [`next_message`](Self::next_message), naming the file for a message that does not
    /// decode; [`ExchangeError::InvalidArgument`] for pages without `pages_schema`.
    pub fn next_batch(
        &mut self,
        pages_schema: Option<&SchemaRef>,
    ) -> Result<Option<arrow_array::RecordBatch>> {
        let Some(message) = self.next_message()? else {
            return Ok(None);
        };
        let schema = match self.format {
            Format::Presto => pages_schema.ok_or_else(|| {
                ExchangeError::InvalidArgument(
                    "Presto pages carry no schema: give the one they were written with".into(),
                )
            })?,
            _ => self.schema.as_ref().ok_or_else(|| {
                ExchangeError::corrupt("an IPC record batch before its stream's schema")
            })?,
        };
        message.to_batch(schema).map(Some).map_err(|e| {
            let file = self.reader.as_ref().map(|r| r.get_ref().path.display());
            match file {
                Some(file) => ExchangeError::corrupt_because(file.to_string(), e),
                None => e.into(),
            }
        })
    }

    /// The reader of the current segment, the next one opened when it is done; `None` at the
    /// end.
    fn reader(&mut self) -> Result<Option<&mut MessageReader<RangeReader>>> {
        loop {
            if self
                .reader
                .as_ref()
                .is_some_and(|r| r.get_ref().remaining > 0)
            {
                return Ok(self.reader.as_mut());
            }
            match self.segments.pop_front() {
                Some(segment) => {
                    let reader = RangeReader::open(segment)?;
                    let len = reader.remaining;
                    self.reader = Some(MessageReader::new(reader, len));
                    self.dictionaries.clear();
                }
                None => return Ok(None),
            }
        }
    }

    /// The schema of the first IPC stream, read from its first message.
    fn ipc_schema(&mut self) -> Result<Option<SchemaRef>> {
        let Some(reader) = self.reader()? else {
            return Ok(None);
        };
        match read_ipc(reader, false)? {
            IpcRead::Schema(schema) => Ok(Some(schema)),
            _ => Err(reader
                .get_ref()
                .corrupt("an IPC stream that does not begin with its schema".into())),
        }
    }

    /// The next message; `None` after the last.
    ///
    /// # Errors
    /// [`ExchangeError::Corrupt`] naming the file, for bytes that are not what they should be.
    pub fn next_message(&mut self) -> Result<Option<Message>> {
        self.advance(false)
    }

    /// Skips `n` messages (reading only IPC headers and dictionaries); false when there were
    /// fewer.
    ///
    /// # Errors
    /// As [`next_message`](Self::next_message).
    pub fn skip(&mut self, n: u64) -> Result<bool> {
        for _ in 0..n {
            if self.advance(true)?.is_none() && self.reader.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The next message, or with `skip` its place passed over (then `Some` is never given,
    /// and the end shows as `reader` being `None`).
    fn advance(&mut self, skip: bool) -> Result<Option<Message>> {
        loop {
            let format = self.format;
            let Some(reader) = self.reader()? else {
                self.reader = None;
                return Ok(None);
            };
            if format == Format::Presto {
                // Pages are framed by their headers: the reader's count of IPC bytes is not
                // used.
                let reader = reader.get_mut();
                let header = reader.take(HEADER_SIZE as u64, "a Presto page header")?;
                let size = body_size(header.as_slice().try_into().expect("a whole header"))
                    .map_err(|e| reader.corrupt_because("a Presto page header".into(), e))?
                    as u64;
                if skip {
                    reader
                        .skip(size)
                        .map_err(|e| reader.corrupt_because("a Presto page body".into(), e))?;
                    return Ok(None);
                }
                let mut page = header;
                page.extend(reader.take(size, "a Presto page body")?);
                let path = reader.path.clone();
                return Message::page(Bytes::from(page))
                    .map(Some)
                    .map_err(|e| ExchangeError::from(e).context(path.display()));
            }
            let read = read_ipc(reader, skip)?;
            match read {
                IpcRead::Schema(schema) => {
                    if let Some(known) = &self.schema
                        && known.fields() != schema.fields()
                    {
                        let reader = self.reader.as_ref().expect("a message was just read");
                        return Err(reader
                            .get_ref()
                            .corrupt("a stream of another schema".into()));
                    }
                    self.schema = Some(schema);
                }
                IpcRead::Dictionary { id, delta, data } => {
                    let list = self.dictionaries.entry(id).or_default();
                    if !delta {
                        list.clear();
                    }
                    list.push(data);
                }
                IpcRead::Batch { data, rows } => {
                    if skip {
                        return Ok(None);
                    }
                    return Ok(Some(Message::Ipc {
                        dictionaries: self.dictionaries.values().flatten().cloned().collect(),
                        batch: data,
                        rows,
                    }));
                }
                IpcRead::End => {
                    // The end-of-stream marker: what follows in this segment, if anything, is
                    // another stream.
                    self.dictionaries.clear();
                }
            }
        }
    }
}

/// Reads one IPC message (its body passed over for a record batch with `skip`).
fn read_ipc(reader: &mut MessageReader<RangeReader>, skip: bool) -> Result<IpcRead> {
    let framing = |reader: &MessageReader<RangeReader>, e| {
        reader.get_ref().corrupt_because("an IPC message".into(), e)
    };
    let header = match reader.next_frame() {
        Ok(Some(Next::Message(header))) => header,
        Ok(None | Some(Next::End)) => return Ok(IpcRead::End),
        Err(e) => return Err(framing(reader, e)),
    };
    let message = header.message().map_err(|e| framing(reader, e))?;
    let corrupt = |what: String| reader.get_ref().corrupt(what);
    // The message without its data, which is read (or passed over) next.
    let read = match message.header_type() {
        arrow_ipc::MessageHeader::Schema => {
            let schema = message
                .header_as_schema()
                .ok_or_else(|| corrupt("a schema message without a schema".into()))?;
            // Damaged schemas are refused, not converted (arrow-ipc's conversion panics).
            let schema = partout_format::ipc::convert_schema(schema).map_err(|e| {
                reader
                    .get_ref()
                    .corrupt_because("a schema message".into(), e)
            })?;
            IpcRead::Schema(Arc::new(schema))
        }
        arrow_ipc::MessageHeader::DictionaryBatch => {
            let dictionary = message
                .header_as_dictionary_batch()
                .ok_or_else(|| corrupt("an empty dictionary message".into()))?;
            IpcRead::Dictionary {
                id: dictionary.id(),
                delta: dictionary.isDelta(),
                data: IpcMessage::default(),
            }
        }
        arrow_ipc::MessageHeader::RecordBatch => {
            let rows = message
                .header_as_record_batch()
                .map(|b| b.length())
                .ok_or_else(|| corrupt("an empty record batch message".into()))?;
            let rows = u64::try_from(rows)
                .map_err(|_| corrupt(format!("a record batch of {rows} rows")))?;
            IpcRead::Batch {
                data: IpcMessage::default(),
                rows,
            }
        }
        other => return Err(corrupt(format!("an IPC message of kind {other:?}"))),
    };
    // A schema's body is empty; a batch's is passed over when skipped.
    let wanted = match read {
        IpcRead::Schema(_) => false,
        IpcRead::Batch { .. } => !skip,
        IpcRead::Dictionary { .. } | IpcRead::End => true,
    };
    if !wanted {
        reader.skip_body(&header).map_err(|e| framing(reader, e))?;
        return Ok(read);
    }
    let data = read_data(reader, header)?;
    Ok(match read {
        IpcRead::Dictionary { id, delta, .. } => IpcRead::Dictionary { id, delta, data },
        IpcRead::Batch { rows, .. } => IpcRead::Batch { data, rows },
        other => other,
    })
}

/// The message `header` heads, read whole.
fn read_data(reader: &mut MessageReader<RangeReader>, header: Header) -> Result<IpcMessage> {
    let mut body = Vec::new();
    reader
        .read_body(&header, &mut body)
        .map_err(|e| reader.get_ref().corrupt_because("an IPC message".into(), e))?;
    Ok(IpcMessage {
        header: header.into_bytes().into(),
        body: body.into(),
    })
}
