//! Where an input file's bytes are: the local file system, or an object of an object store
//! (S3, GCS, Azure) read by ranged GETs, in bounded memory, behind the same readers.
//!
//! ```text
//!  s3://bucket/data/, s3://bucket/data/*.parquet, s3://bucket/data/part-0.parquet
//!    ─► discover: HEAD (an object?) or LIST (a prefix, a glob), hidden names passed over,
//!       each object's first 64 bytes GOT for its format
//!    ─► Opened (Read + Seek over windows of WINDOW_BYTES: footers, IPC files, CSV)
//!    ─► StoreChunks (a Parquet reader's bytes: each column chunk of the row group being
//!       read through a window of its own, the group's first windows got together — in
//!       one request where they follow one another, REQUESTS_IN_FLIGHT at most — and the
//!       next group's got while this one is read; READ_BYTES per reader in all, pages past
//!       a window got whole; the `chunks` module)
//! ```
//!
//! Every range is checked against the object's size before it is asked for, and a response
//! of another length than asked is an error naming the object: never bytes short or past
//! the end handed to a format crate.

use crate::store;
use crate::{InputFormat, Result, file_error, file_io_error};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::file::reader::{ChunkReader, Length};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// One input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Where it is: its path, or its URL in an object store.
    pub path: PathBuf,
    /// How to read it.
    pub format: InputFormat,
    /// Where its bytes are read from.
    pub(crate) source: Source,
}

impl InputFile {
    /// The local file `path`, to be read as `format`.
    pub fn local(path: impl Into<PathBuf>, format: InputFormat) -> Self {
        Self {
            path: path.into(),
            format,
            source: Source::Local,
        }
    }

    /// Whether it is an object of an object store.
    pub fn in_store(&self) -> bool {
        matches!(self.source, Source::Store(_))
    }
}

/// Bytes a reader of a store's Parquet object holds in windows, about: half for the row
/// group being read, each of its column chunks a share (at least 64 KiB), half for the next
/// group's, got ahead; a page larger than its window is got whole. What the job charges each
/// worker reading from a store.
pub const READ_BYTES: u64 = 16 << 20;

/// The window of a reader reading on from where it is (footers, IPC files, CSV).
const WINDOW_BYTES: u64 = 4 << 20;

/// Requests one reader has in flight at once, at most.
const REQUESTS_IN_FLIGHT: usize = 8;

/// The bytes read of an object to tell its format.
pub(crate) const HEAD_BYTES: u64 = 64;

/// Where an input file's bytes are.
#[derive(Clone, Default)]
pub(crate) enum Source {
    /// The local file system, at the file's path.
    #[default]
    Local,
    /// An object of a store.
    Store(Arc<StoreObject>),
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("Local"),
            Self::Store(object) => write!(f, "Store({object:?})"),
        }
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Local, Self::Local) => true,
            (Self::Store(a), Self::Store(b)) => a.url == b.url && a.size == b.size,
            _ => false,
        }
    }
}

impl Eq for Source {}

/// An object of a store, its size as listed.
pub struct StoreObject {
    /// The store's client.
    pub store: Arc<dyn ObjectStore>,
    /// Its path in the store.
    pub path: ObjectPath,
    /// Its URL, as shown.
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
}

impl fmt::Debug for StoreObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreObject({}, {} bytes)", self.url, self.size)
    }
}

impl StoreObject {
    /// The object `path` of `store`, shown as `url`, its size asked with a HEAD.
    ///
    /// # Errors
    /// The store's error (not found among them), naming `url`.
    pub fn head(
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
        url: String,
    ) -> io::Result<Arc<Self>> {
        let (client, at) = (store.clone(), path.clone());
        let meta = store::run(async move { client.head(&at).await })
            .map_err(io::Error::other)?
            .map_err(|e| {
                let kind = match e {
                    object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
                    _ => io::ErrorKind::Other,
                };
                io::Error::new(kind, format!("{url}: {e}"))
            })?;
        Ok(Arc::new(Self {
            store,
            path,
            url,
            size: meta.size,
        }))
    }

    /// A reader of the object from where it is asked, a window at a time.
    pub fn reader(self: &Arc<Self>) -> Opened {
        Opened::Store(RangedReader::new(self.clone(), WINDOW_BYTES))
    }

    fn error(&self, doing: &str, e: impl fmt::Display) -> io::Error {
        io::Error::other(format!("{}: {doing}: {e}", self.url))
    }

    /// Bytes `range` of the object, checked to lie in it and to come back whole.
    pub fn get(self: &Arc<Self>, range: Range<u64>) -> io::Result<Bytes> {
        Ok(self.get_all(vec![range])?.remove(0))
    }

    /// Each of `ranges`, in order: ranges that follow one another got in one request,
    /// [`REQUESTS_IN_FLIGHT`] requests at once.
    fn get_all(self: &Arc<Self>, ranges: Vec<Range<u64>>) -> io::Result<Vec<Bytes>> {
        store::run(self.fetch(ranges)).map_err(io::Error::other)?
    }

    /// [`get_all`](Self::get_all) begun on the stores' runtime, to be waited for later.
    pub(crate) fn get_later(
        self: &Arc<Self>,
        ranges: Vec<Range<u64>>,
    ) -> io::Result<tokio::task::JoinHandle<io::Result<Vec<Bytes>>>> {
        store::spawn(self.fetch(ranges)).map_err(io::Error::other)
    }

    /// The requests of [`get_all`](Self::get_all), every range checked first.
    fn fetch(
        self: &Arc<Self>,
        ranges: Vec<Range<u64>>,
    ) -> impl std::future::Future<Output = io::Result<Vec<Bytes>>> + Send + 'static {
        let object = self.clone();
        async move {
            for range in &ranges {
                if range.start > range.end || range.end > object.size {
                    return Err(object.error(
                        &format!("bytes {}..{} asked", range.start, range.end),
                        format_args!("the object holds {}", object.size),
                    ));
                }
            }
            // Ranges that follow one another, as the column chunks of a row group do.
            let mut joined: Vec<Range<u64>> = Vec::new();
            for range in &ranges {
                match joined.last_mut() {
                    Some(last) if last.end == range.start => last.end = range.end,
                    _ => joined.push(range.clone()),
                }
            }
            let got: Vec<Bytes> = futures::stream::iter(joined.clone())
                .map(|range| {
                    let object = object.clone();
                    async move {
                        match range.is_empty() {
                            true => Ok(Bytes::new()),
                            false => object.store.get_range(&object.path, range).await,
                        }
                    }
                })
                .buffered(REQUESTS_IN_FLIGHT)
                .try_collect()
                .await
                .map_err(|e| object.error("reading", e))?;
            for (range, bytes) in joined.iter().zip(&got) {
                if bytes.len() as u64 != range.end - range.start {
                    return Err(object.error(
                        &format!("bytes {}..{} asked", range.start, range.end),
                        format_args!("{} came back", bytes.len()),
                    ));
                }
            }
            // Each range, a slice of the request that got it.
            let mut pieces = joined.iter().zip(got).peekable();
            let mut out = Vec::with_capacity(ranges.len());
            for range in ranges {
                // (Each range is in the request its run was joined into, in order.)
                while let Some((whole, _)) = pieces.peek()
                    && !(whole.start <= range.start && range.end <= whole.end)
                {
                    pieces.next();
                }
                let (whole, bytes) = pieces.peek().expect("a request holding every range");
                let from = (range.start - whole.start) as usize;
                out.push(bytes.slice(from..from + (range.end - range.start) as usize));
            }
            Ok(out)
        }
    }
}

/// A file opened for reading from where it is.
pub enum Opened {
    /// A local file.
    Local(File),
    /// An object of a store, read a window at a time.
    Store(RangedReader),
}

impl Read for Opened {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Local(file) => file.read(buf),
            Self::Store(reader) => reader.read(buf),
        }
    }
}

impl Seek for Opened {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self {
            Self::Local(file) => file.seek(pos),
            Self::Store(reader) => reader.seek(pos),
        }
    }
}

/// Opens `file`, and gives its length.
pub(crate) fn open(file: &InputFile) -> Result<(Opened, u64)> {
    match &file.source {
        Source::Local => {
            let handle = File::open(&file.path)
                .map_err(|e| file_io_error(&file.path, "cannot be opened", e))?;
            let len = handle
                .metadata()
                .map_err(|e| file_error(&file.path, e))?
                .len();
            Ok((Opened::Local(handle), len))
        }
        Source::Store(object) => Ok((
            Opened::Store(RangedReader::new(object.clone(), WINDOW_BYTES)),
            object.size,
        )),
    }
}

/// An object read from where it is, a window of it at a time; reads larger than the
/// window go to the store as asked.
pub struct RangedReader {
    object: Arc<StoreObject>,
    window_bytes: u64,
    position: u64,
    window_start: u64,
    window: Bytes,
}

impl RangedReader {
    fn new(object: Arc<StoreObject>, window_bytes: u64) -> Self {
        Self {
            object,
            window_bytes,
            position: 0,
            window_start: 0,
            window: Bytes::new(),
        }
    }
}

impl Read for RangedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = self.object.size;
        if self.position >= size || buf.is_empty() {
            return Ok(0);
        }
        let in_window = self.position >= self.window_start
            && self.position < self.window_start + self.window.len() as u64;
        if !in_window {
            let want = (buf.len() as u64).min(size - self.position);
            if want >= self.window_bytes {
                let bytes = self.object.get(self.position..self.position + want)?;
                buf[..bytes.len()].copy_from_slice(&bytes);
                self.position += want;
                return Ok(bytes.len());
            }
            let end = (self.position + self.window_bytes).min(size);
            self.window = self.object.get(self.position..end)?;
            self.window_start = self.position;
        }
        let from = (self.position - self.window_start) as usize;
        let n = (self.window.len() - from).min(buf.len());
        buf[..n].copy_from_slice(&self.window[from..from + n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for RangedReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(by) => self.object.size.checked_add_signed(by),
            SeekFrom::Current(by) => self.position.checked_add_signed(by),
        };
        self.position = target.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: a seek before its start", self.object.url),
            )
        })?;
        Ok(self.position)
    }
}

/// A Parquet file's bytes, for its reader: a local file, or an object's column chunks read
/// through windows.
pub(crate) enum ParquetBytes {
    Local(File),
    Store(StoreChunks),
}

/// The bytes of a Parquet file `file` whose metadata is `metadata`, of which row groups
/// `groups` are to be read, in that order.
pub(crate) fn parquet_bytes(
    file: &InputFile,
    metadata: &parquet::file::metadata::ParquetMetaData,
    groups: &[usize],
) -> Result<ParquetBytes> {
    match &file.source {
        Source::Local => File::open(&file.path)
            .map(ParquetBytes::Local)
            .map_err(|e| file_io_error(&file.path, "cannot be opened", e)),
        Source::Store(object) => Ok(ParquetBytes::Store(StoreChunks::new(
            object.clone(),
            metadata,
            groups,
        ))),
    }
}

impl Length for ParquetBytes {
    fn len(&self) -> u64 {
        match self {
            Self::Local(file) => file.len(),
            Self::Store(chunks) => chunks.inner.object.size,
        }
    }
}

impl ChunkReader for ParquetBytes {
    type T = ChunkRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<ChunkRead> {
        match self {
            Self::Local(file) => file.get_read(start).map(ChunkRead::Local),
            Self::Store(chunks) => Ok(ChunkRead::Store {
                chunks: chunks.inner.clone(),
                position: start,
                bytes: Bytes::new(),
            }),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            Self::Local(file) => file.get_bytes(start, length),
            Self::Store(chunks) => chunks
                .inner
                .bytes(start, length as u64)
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e))),
        }
    }
}

/// A reader of a Parquet file's bytes from an offset (a page's header).
pub(crate) enum ChunkRead {
    Local(BufReader<File>),
    Store {
        chunks: Arc<Chunks>,
        position: u64,
        bytes: Bytes,
    },
}

impl Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Local(reader) => reader.read(buf),
            Self::Store {
                chunks,
                position,
                bytes,
            } => {
                if bytes.is_empty() {
                    if *position >= chunks.object.size || buf.is_empty() {
                        return Ok(0);
                    }
                    *bytes = chunks.bytes_from(*position)?;
                }
                let n = bytes.len().min(buf.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                *bytes = bytes.slice(n..);
                *position += n as u64;
                Ok(n)
            }
        }
    }
}

mod chunks;
#[cfg(test)]
mod tests;

pub(crate) use chunks::{Chunks, StoreChunks};
