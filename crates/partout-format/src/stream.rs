//! Per-destination streams: what each destination of a partitioned output receives, and the
//! encoder that makes its bytes.
//!
//! ```text
//!  Encoding (format + compression, checked once) ─► StreamEncoders: one StreamEncoder per destination
//!    Arrow IPC: [schema][batch][batch]…[end of stream]      Presto: [page][page]…
//! ```
//!
//! An [`Encoding`] is checked when it is made (Presto pages take no ZSTD) and against a schema
//! before anything is written ([`Encoding::check_schema`]: every column must be of a type the
//! format can carry), so a writer finds out before its first flush, not during it.

use crate::ipc::{Compression, IpcStreamEncoder};
use crate::presto::{PageOptions, encode_page};
use crate::{FormatError, Result};
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Schema, SchemaRef};

/// The bytes each destination receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// One Arrow IPC stream per destination: the schema, a record batch per flush, the
    /// end-of-stream marker.
    #[default]
    ArrowIpc,
    /// Presto SerializedPages, one per flush, concatenated (checksummed; with
    /// [`Compression::Lz4Frame`], bodies are raw LZ4 blocks as Presto's exchange sends them).
    Presto,
}

impl OutputFormat {
    /// Whether columns of `data_type` can be encoded in this format.
    ///
    /// ```
    /// use arrow_schema::DataType;
    /// use partout_format::OutputFormat;
    ///
    /// assert!(OutputFormat::Presto.can_encode(&DataType::Int64));
    /// assert!(!OutputFormat::Presto.can_encode(&DataType::UInt64));
    /// assert!(OutputFormat::ArrowIpc.can_encode(&DataType::UInt64));
    /// ```
    pub fn can_encode(self, data_type: &DataType) -> bool {
        match self {
            // arrow-rs writes every type it has.
            Self::ArrowIpc => true,
            Self::Presto => crate::presto::can_encode(data_type),
        }
    }
}

/// A format and its compression, checked to go together.
///
/// ```
/// use partout_format::ipc::Compression;
/// use partout_format::{Encoding, OutputFormat};
///
/// let presto = Encoding::try_new(OutputFormat::Presto, Compression::Lz4Frame).unwrap();
/// assert_eq!(presto.format(), OutputFormat::Presto);
/// let err = Encoding::try_new(OutputFormat::Presto, Compression::Zstd).unwrap_err();
/// assert!(err.to_string().contains("ZSTD"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Encoding {
    format: OutputFormat,
    compression: Compression,
}

impl Encoding {
    /// `format` with `compression`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for ZSTD Presto pages (Presto compresses pages with LZ4
    /// or not at all).
    pub fn try_new(format: OutputFormat, compression: Compression) -> Result<Self> {
        if format == OutputFormat::Presto && compression == Compression::Zstd {
            return Err(FormatError::InvalidArgument(
                "Presto pages are compressed with LZ4 or not at all, not ZSTD".into(),
            ));
        }
        Ok(Self {
            format,
            compression,
        })
    }

    /// Arrow IPC streams with `compression`.
    pub fn ipc(compression: Compression) -> Self {
        Self {
            format: OutputFormat::ArrowIpc,
            compression,
        }
    }

    /// Presto pages, with LZ4 bodies or none.
    pub fn presto(lz4: bool) -> Self {
        Self {
            format: OutputFormat::Presto,
            compression: if lz4 {
                Compression::Lz4Frame
            } else {
                Compression::None
            },
        }
    }

    /// The format.
    pub fn format(&self) -> OutputFormat {
        self.format
    }

    /// The compression.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Checks that every column of `schema` can be encoded.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] naming the first column whose type the format cannot
    /// carry.
    pub fn check_schema(&self, schema: &Schema) -> Result<()> {
        match schema
            .fields()
            .iter()
            .find(|f| !self.format.can_encode(f.data_type()))
        {
            None => Ok(()),
            Some(field) => Err(FormatError::InvalidArgument(format!(
                "{:?} output cannot carry column {:?} of type {}",
                self.format,
                field.name(),
                field.data_type()
            ))),
        }
    }
}

/// One destination's encoder: the next record batches of an Arrow IPC stream (its schema
/// first, its end-of-stream marker last), or Presto pages (checksummed; LZ4 bodies with
/// [`Compression::Lz4Frame`]), which need no start or end.
#[derive(Debug)]
pub struct StreamEncoder(Stream);

#[derive(Debug)]
enum Stream {
    /// Boxed: destinations without rows yet hold no encoder state.
    Ipc(Box<IpcStreamEncoder>),
    Presto(PageOptions),
}

impl StreamEncoder {
    /// An encoder of batches of `schema` (checked by [`Encoding::check_schema`] beforehand;
    /// otherwise a column the format cannot carry is an error of the first
    /// [`encode`](Self::encode)).
    ///
    /// # Errors
    /// [`FormatError::Arrow`] when arrow-rs cannot write the schema.
    pub fn try_new(schema: SchemaRef, encoding: Encoding) -> Result<Self> {
        Ok(Self(match encoding.format {
            OutputFormat::ArrowIpc => Stream::Ipc(Box::new(IpcStreamEncoder::try_new(
                schema,
                encoding.compression,
            )?)),
            OutputFormat::Presto => Stream::Presto(PageOptions {
                checksum: true,
                lz4: encoding.compression == Compression::Lz4Frame,
            }),
        }))
    }

    /// Appends `batch`, encoded, to `out`.
    ///
    /// # Errors
    /// As [`IpcStreamEncoder::encode`] and [`encode_page`].
    pub fn encode(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        match &mut self.0 {
            Stream::Ipc(encoder) => encoder.encode(batch, out),
            Stream::Presto(options) => encode_page(batch, *options, out),
        }
    }

    /// Appends what ends the output to `out`: an IPC stream's end-of-stream marker (and its
    /// schema, if no batch was encoded); nothing for Presto pages.
    ///
    /// # Errors
    /// As [`IpcStreamEncoder::finish`].
    pub fn finish(self, out: &mut Vec<u8>) -> Result<()> {
        match self.0 {
            Stream::Ipc(encoder) => encoder.finish(out),
            Stream::Presto(_) => Ok(()),
        }
    }
}

/// One [`StreamEncoder`] per destination, each made at its destination's first use.
#[derive(Debug)]
pub struct StreamEncoders {
    schema: SchemaRef,
    encoding: Encoding,
    encoders: Vec<Option<StreamEncoder>>,
}

impl StreamEncoders {
    /// Encoders of batches of `schema` for `destinations` destinations.
    ///
    /// # Errors
    /// As [`Encoding::check_schema`].
    pub fn try_new(schema: SchemaRef, destinations: usize, encoding: Encoding) -> Result<Self> {
        encoding.check_schema(&schema)?;
        Ok(Self {
            schema,
            encoding,
            encoders: (0..destinations).map(|_| None).collect(),
        })
    }

    /// Destinations.
    pub fn len(&self) -> usize {
        self.encoders.len()
    }

    /// Whether there are no destinations.
    pub fn is_empty(&self) -> bool {
        self.encoders.is_empty()
    }

    /// Destination `p`'s encoder, made now if it has none.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a destination out of range; as
    /// [`StreamEncoder::try_new`].
    pub fn get(&mut self, p: usize) -> Result<&mut StreamEncoder> {
        let count = self.encoders.len();
        let slot = self.encoders.get_mut(p).ok_or_else(|| {
            FormatError::InvalidArgument(format!("destination {p} of {count} destinations"))
        })?;
        Ok(match slot {
            Some(encoder) => encoder,
            slot => slot.insert(StreamEncoder::try_new(self.schema.clone(), self.encoding)?),
        })
    }

    /// Destination `p`'s encoder, taken out (to be finished); `None` if it never had one.
    pub fn take(&mut self, p: usize) -> Option<StreamEncoder> {
        self.encoders.get_mut(p).and_then(Option::take)
    }

    /// Ends destination `p`'s output into `out` (its encoder is made first if it never had
    /// one, so a destination without rows still gets an IPC stream of the schema alone).
    ///
    /// # Errors
    /// As [`get`](Self::get) and [`StreamEncoder::finish`].
    pub fn finish(&mut self, p: usize, out: &mut Vec<u8>) -> Result<()> {
        self.get(p)?;
        match self.take(p) {
            Some(encoder) => encoder.finish(out),
            None => Ok(()),
        }
    }
}
