//! Per-destination streams: what each destination of a partitioned output receives, and the
//! encoder that makes its bytes.
//!
//! ```text
//!  Encoding (format + compression, checked once) ─► StreamEncoders: one StreamEncoder per destination
//!    Arrow IPC: [schema][batch][batch]…[end of stream]      Presto: [page][page]…
//! ```
//!
//! An [`Encoding`] is a stream [`Format`] (Arrow IPC or Presto pages) and a [`Compression`],
//! by the workspace's one vocabulary ([`crate::spec`]; [`Encoding::parse`] reads the names),
//! checked when it is made (Presto pages take no ZSTD, streams no Snappy) and against a
//! schema before anything is written ([`Encoding::check_schema`]: every column must be of a
//! type the format can carry), so a writer finds out before its first flush, not during it.

use crate::ipc::{IpcStreamEncoder, SharedIpcStreams};
use crate::presto::{PageOptions, encode_page};
use crate::spec::{Compression, Format, ZstdLevel};
use crate::{FormatError, Result};
use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::{Schema, SchemaRef};

/// A stream format and its compression, checked to go together: the bytes each destination
/// receives as it is flushed.
///
/// ```
/// use partout_format::{Compression, Encoding, Format};
///
/// let presto = Encoding::try_new(Format::Presto, Compression::Lz4).unwrap();
/// assert_eq!(presto.format(), Format::Presto);
/// let err = Encoding::try_new(Format::Presto, Compression::ZSTD).unwrap_err();
/// assert!(err.to_string().contains("ZSTD"));
/// let err = Encoding::try_new(Format::Parquet, Compression::Snappy).unwrap_err();
/// assert!(err.to_string().contains("not a stream"), "{err}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Encoding {
    format: Format,
    compression: Compression,
}

impl Encoding {
    /// `format` with `compression`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for Parquet (files written whole, not a stream: see
    /// partout-output), Snappy streams (neither Arrow IPC nor Presto takes it) and ZSTD Presto
    /// pages (Presto compresses pages with LZ4 or not at all).
    pub fn try_new(format: Format, compression: Compression) -> Result<Self> {
        match refusal(format, compression) {
            None => Ok(Self {
                format,
                compression,
            }),
            Some(why) => Err(not_taken(
                &format.to_string(),
                &compression.to_string(),
                format,
                why,
            )),
        }
    }

    /// The encoding named by `format` and `compression`: the one reading of these names
    /// (a job's options, the Python package, the Flight service's `create` action, Ballista's
    /// shuffle codec). Formats: `ipc` (or `arrow`), `presto`. Compressions: `none` (also
    /// when `compression` is `None`), `lz4` (Arrow IPC: LZ4_FRAME buffers; Presto: raw LZ4
    /// page bodies), `zstd` and `zstd:LEVEL` (Arrow IPC only; [`ZstdLevel::from_name`]).
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] naming the format or the compression that is not
    /// taken, and those that are.
    ///
    /// ```
    /// use partout_format::{Compression, Encoding, Format};
    ///
    /// let ipc = Encoding::parse("ipc", Some("zstd")).unwrap();
    /// assert_eq!((ipc.format(), ipc.compression()), (Format::Ipc, Compression::ZSTD));
    /// let fast = Encoding::parse("ipc", Some("zstd:1")).unwrap();
    /// assert_eq!(fast.compression().to_string(), "zstd:1");
    /// let err = Encoding::parse("ipc", Some("zstd:23")).unwrap_err().to_string();
    /// assert!(err.contains("ZSTD level 23 is outside zstd's levels"), "{err}");
    /// assert_eq!(Encoding::parse("arrow", None).unwrap(), Encoding::ipc(Compression::None));
    /// assert_eq!(Encoding::parse("presto", Some("lz4")).unwrap(), Encoding::presto(true));
    /// let err = Encoding::parse("presto", Some("zstd")).unwrap_err().to_string();
    /// assert!(err.contains("presto output takes no zstd compression: expected \"none\" or \"lz4\""), "{err}");
    /// let err = Encoding::parse("csv", None).unwrap_err().to_string();
    /// assert!(err.contains("unknown format \"csv\": expected \"ipc\" or \"presto\""), "{err}");
    /// ```
    pub fn parse(format: &str, compression: Option<&str>) -> Result<Self> {
        let output = match format.parse::<Format>() {
            Ok(output) => output,
            Err(_) => {
                return Err(FormatError::InvalidArgument(format!(
                    "unknown format {format:?}: expected \"ipc\" or \"presto\" (\"arrow\" is ipc too)"
                )));
            }
        };
        let name = compression.unwrap_or("none");
        let compression = match name.parse::<Compression>() {
            Ok(compression) => compression,
            // A ZSTD name with a wrong level: the level is the problem, not the codec.
            Err(e) if ZstdLevel::from_name(name).is_some() => return Err(e),
            Err(_) => return Err(not_taken(format, name, output, "")),
        };
        match refusal(output, compression) {
            None => Self::try_new(output, compression),
            Some(why) => Err(not_taken(format, name, output, why)),
        }
    }

    /// Arrow IPC streams with `compression`.
    pub fn ipc(compression: Compression) -> Self {
        Self {
            format: Format::Ipc,
            compression,
        }
    }

    /// Presto pages, with LZ4 bodies or none.
    pub fn presto(lz4: bool) -> Self {
        Self {
            format: Format::Presto,
            compression: if lz4 {
                Compression::Lz4
            } else {
                Compression::None
            },
        }
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The compression.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// How Presto pages of this encoding are written: checksummed, with LZ4 bodies when the
    /// compression is LZ4.
    pub fn page_options(&self) -> PageOptions {
        PageOptions {
            checksum: true,
            lz4: self.compression == Compression::Lz4,
        }
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
                "{} output cannot carry column {:?} of type {}",
                self.format.title(),
                field.name(),
                field.data_type()
            ))),
        }
    }
}

/// Why a stream of `format` cannot be compressed with `compression`; `None` when it can.
fn refusal(format: Format, compression: Compression) -> Option<&'static str> {
    match (format, compression) {
        (Format::Parquet, _) => Some("Parquet files are written whole, not as a stream"),
        (_, Compression::Snappy) => Some("streams are compressed with LZ4 or ZSTD, not Snappy"),
        (Format::Presto, Compression::Zstd(_)) => {
            Some("Presto pages are compressed with LZ4 or not at all, not ZSTD")
        }
        _ => None,
    }
}

/// The error for a compression named `name` that the stream format named `format_name`
/// (`format`) does not take, naming those it does, and why (when there is more to say).
fn not_taken(format_name: &str, name: &str, format: Format, why: &str) -> FormatError {
    if format == Format::Parquet {
        return FormatError::InvalidArgument(format!(
            "{format_name} is not a stream format: expected \"ipc\" or \"presto\" ({why})"
        ));
    }
    let expected = match format {
        Format::Presto => "\"none\" or \"lz4\"",
        _ => "\"none\", \"lz4\", \"zstd\" or \"zstd:LEVEL\"",
    };
    let why = match why {
        "" => String::new(),
        why => format!(" ({why})"),
    };
    FormatError::InvalidArgument(format!(
        "{format_name} output takes no {name} compression: expected {expected}{why}"
    ))
}

/// One destination's encoder: the next record batches of an Arrow IPC stream (its schema
/// first, its end-of-stream marker last), or Presto pages (checksummed; LZ4 bodies with
/// [`Compression::Lz4`]), which need no start or end.
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
            // Arrow IPC (an encoding is never Parquet).
            Format::Ipc | Format::Parquet => Stream::Ipc(Box::new(IpcStreamEncoder::try_new(
                schema,
                encoding.compression,
            )?)),
            Format::Presto => Stream::Presto(encoding.page_options()),
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

/// The streams of every destination: one [`StreamEncoder`] per destination, made at its
/// destination's first use, or, for Arrow IPC streams of a schema without dictionaries, one
/// encoder for all of them (a destination's stream then costs a flag: see
/// `ipc::SharedIpcStreams`).
#[derive(Debug)]
pub struct StreamEncoders {
    schema: SchemaRef,
    encoding: Encoding,
    streams: Streams,
}

#[derive(Debug)]
enum Streams {
    Shared(Box<SharedIpcStreams>),
    Each(Vec<Option<StreamEncoder>>),
}

impl StreamEncoders {
    /// Encoders of batches of `schema` for `destinations` destinations.
    ///
    /// # Errors
    /// As [`Encoding::check_schema`]; [`FormatError::Arrow`] when arrow-rs cannot write the
    /// schema.
    pub fn try_new(schema: SchemaRef, destinations: usize, encoding: Encoding) -> Result<Self> {
        encoding.check_schema(&schema)?;
        let shared = match encoding.format {
            Format::Presto => None,
            // Arrow IPC (an encoding is never Parquet).
            Format::Ipc | Format::Parquet => {
                SharedIpcStreams::try_new(schema.clone(), encoding.compression, destinations)?
            }
        };
        let streams = match shared {
            Some(shared) => Streams::Shared(Box::new(shared)),
            None => Streams::Each((0..destinations).map(|_| None).collect()),
        };
        Ok(Self {
            schema,
            encoding,
            streams,
        })
    }

    /// Destinations.
    pub fn len(&self) -> usize {
        match &self.streams {
            Streams::Shared(shared) => shared.len(),
            Streams::Each(encoders) => encoders.len(),
        }
    }

    /// Whether there are no destinations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An error unless there is a destination `p`.
    fn check(&self, p: usize) -> Result<()> {
        let count = self.len();
        if p < count {
            Ok(())
        } else {
            Err(FormatError::InvalidArgument(format!(
                "destination {p} of {count} destinations"
            )))
        }
    }

    /// Destination `p`'s own encoder, made now if it has none.
    fn each<'a>(
        encoders: &'a mut [Option<StreamEncoder>],
        p: usize,
        schema: &SchemaRef,
        encoding: Encoding,
    ) -> Result<&'a mut StreamEncoder> {
        Ok(match &mut encoders[p] {
            Some(encoder) => encoder,
            slot => slot.insert(StreamEncoder::try_new(schema.clone(), encoding)?),
        })
    }

    /// Appends destination `p`'s next batch, encoded (after what begins its stream, if this
    /// is its first), to `out`.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a destination out of range; as
    /// [`StreamEncoder::encode`].
    pub fn encode(&mut self, p: usize, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        self.check(p)?;
        match &mut self.streams {
            Streams::Shared(shared) => shared.encode(p, batch, out),
            Streams::Each(encoders) => {
                Self::each(encoders, p, &self.schema, self.encoding)?.encode(batch, out)
            }
        }
    }

    /// Adds destination `p`'s next batch, encoded (after what begins its stream, if this is
    /// its first), to `parts`: the bytes, in order, that its output receives next. Arrow IPC
    /// streams of a schema without dictionaries come as the message's header and the batch's
    /// own buffers, shared and not copied (compressed copies with a codec), so that a sink
    /// writing the parts copies each byte once; other encodings come as one part.
    ///
    /// # Errors
    /// As [`encode`](Self::encode); `parts` is then as it was.
    pub fn encode_parts(
        &mut self,
        p: usize,
        batch: &RecordBatch,
        parts: &mut Vec<Buffer>,
    ) -> Result<()> {
        self.encode_parts_with(p, batch, parts, false)
    }

    /// [`encode_parts`](Self::encode_parts) for a batch whose view columns hold only the bytes
    /// their rows reference (as the writer's destination buffers build them): they are not
    /// read again to check. A batch that is not so is still written right, only larger.
    ///
    /// # Errors
    /// As [`encode_parts`](Self::encode_parts).
    pub fn encode_compact_parts(
        &mut self,
        p: usize,
        batch: &RecordBatch,
        parts: &mut Vec<Buffer>,
    ) -> Result<()> {
        self.encode_parts_with(p, batch, parts, true)
    }

    fn encode_parts_with(
        &mut self,
        p: usize,
        batch: &RecordBatch,
        parts: &mut Vec<Buffer>,
        views_compact: bool,
    ) -> Result<()> {
        self.check(p)?;
        match &mut self.streams {
            Streams::Shared(shared) => shared.encode_parts(p, batch, parts, views_compact),
            Streams::Each(encoders) => {
                let mut out = Vec::new();
                Self::each(encoders, p, &self.schema, self.encoding)?.encode(batch, &mut out)?;
                parts.push(Buffer::from_vec(out));
                Ok(())
            }
        }
    }

    /// Whether [`encode_slices`](Self::encode_slices) takes this schema and encoding: Arrow IPC
    /// streams of columns of flat types ([`SlicesEncoder::takes`](crate::ipc::slices::SlicesEncoder::takes)).
    pub fn takes_slices(&self) -> bool {
        match &self.streams {
            Streams::Shared(shared) => shared.takes_slices(),
            Streams::Each(_) => false,
        }
    }

    /// Adds destination `p`'s next rows, `slices` of held batches in order, encoded as one
    /// message (after what begins its stream, if this is its first), to `parts`: the message's
    /// header and buffers, the slices' own bytes shared where they are many
    /// ([`SlicesEncoder`](crate::ipc::slices::SlicesEncoder)).
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a destination out of range, when the encoders do
    /// not [take slices](Self::takes_slices), or for slices that do not fit the schema; `parts` is
    /// then as it was.
    pub fn encode_slices(
        &mut self,
        p: usize,
        slices: &[crate::ipc::slices::Slice<'_>],
        parts: &mut Vec<Buffer>,
    ) -> Result<()> {
        self.check(p)?;
        match &mut self.streams {
            Streams::Shared(shared) => shared.encode_slices_parts(p, slices, parts),
            Streams::Each(_) => Err(FormatError::InvalidArgument(
                "these streams take no slices of rows".into(),
            )),
        }
    }

    /// Ends destination `p`'s output into `out`: an IPC stream's end-of-stream marker (a
    /// destination without rows still gets a stream of the schema alone); nothing for Presto
    /// pages. A batch encoded for `p` afterwards begins a new stream (its schema first).
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for a destination out of range; as
    /// [`StreamEncoder::finish`].
    pub fn finish(&mut self, p: usize, out: &mut Vec<u8>) -> Result<()> {
        self.end(p, out, false).map(drop)
    }

    /// Ends destination `p`'s output into `out`, as [`finish`](Self::finish), if anything was
    /// encoded for it; whether it was.
    ///
    /// # Errors
    /// As [`finish`](Self::finish).
    pub fn finish_begun(&mut self, p: usize, out: &mut Vec<u8>) -> Result<bool> {
        self.end(p, out, true)
    }

    fn end(&mut self, p: usize, out: &mut Vec<u8>, only_begun: bool) -> Result<bool> {
        self.check(p)?;
        match &mut self.streams {
            Streams::Shared(shared) => Ok(shared.finish(p, out, only_begun)),
            Streams::Each(encoders) => {
                let encoder = match encoders[p].take() {
                    Some(encoder) => encoder,
                    None if only_begun => return Ok(false),
                    None => StreamEncoder::try_new(self.schema.clone(), self.encoding)?,
                };
                encoder.finish(out).map(|()| true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_name_parses() {
        let ipc = |c| Encoding::ipc(c);
        let level = |n| ZstdLevel::try_new(n).unwrap();
        let accepted = [
            ("ipc", None, ipc(Compression::None)),
            ("ipc", Some("none"), ipc(Compression::None)),
            ("ipc", Some("lz4"), ipc(Compression::Lz4)),
            ("ipc", Some("zstd"), ipc(Compression::ZSTD)),
            ("ipc", Some("zstd:1"), ipc(Compression::Zstd(level(1)))),
            ("ipc", Some("zstd:-7"), ipc(Compression::Zstd(level(-7)))),
            ("ipc", Some("zstd:22"), ipc(Compression::Zstd(level(22)))),
            ("arrow", None, ipc(Compression::None)),
            ("arrow", Some("none"), ipc(Compression::None)),
            ("arrow", Some("lz4"), ipc(Compression::Lz4)),
            ("arrow", Some("zstd"), ipc(Compression::ZSTD)),
            ("presto", None, Encoding::presto(false)),
            ("presto", Some("none"), Encoding::presto(false)),
            ("presto", Some("lz4"), Encoding::presto(true)),
        ];
        for (format, compression, want) in accepted {
            let got = Encoding::parse(format, compression);
            assert_eq!(got.unwrap(), want, "{format} {compression:?}");
        }
    }

    #[test]
    fn a_name_not_taken_is_named_with_those_that_are() {
        let refused = [
            (
                "csv",
                None,
                "unknown format \"csv\": expected \"ipc\" or \"presto\"",
            ),
            (
                "parquet",
                Some("lz4"),
                "parquet is not a stream format: expected \"ipc\" or \"presto\"",
            ),
            ("IPC", None, "unknown format \"IPC\""),
            ("", None, "unknown format \"\""),
            (
                "ipc",
                Some("snappy"),
                "ipc output takes no snappy compression: expected \"none\", \"lz4\", \"zstd\" or \"zstd:LEVEL\"",
            ),
            (
                "ipc",
                Some("zstd1"),
                "ipc output takes no zstd1 compression",
            ),
            (
                "ipc",
                Some("zstd:"),
                "ZSTD level \"\" is not a whole number",
            ),
            (
                "ipc",
                Some("zstd:1.5"),
                "ZSTD level \"1.5\" is not a whole number",
            ),
            (
                "ipc",
                Some("zstd:23"),
                "ZSTD level 23 is outside zstd's levels",
            ),
            (
                "presto",
                Some("zstd:1"),
                "presto output takes no zstd:1 compression",
            ),
            (
                "arrow",
                Some("gzip"),
                "arrow output takes no gzip compression",
            ),
            ("ipc", Some("LZ4"), "ipc output takes no LZ4 compression"),
            (
                "presto",
                Some("zstd"),
                "presto output takes no zstd compression: expected \"none\" or \"lz4\" (Presto pages are compressed with LZ4 or not at all, not ZSTD)",
            ),
            (
                "presto",
                Some("snappy"),
                "presto output takes no snappy compression",
            ),
        ];
        for (format, compression, want) in refused {
            let err = Encoding::parse(format, compression).unwrap_err();
            assert!(
                matches!(&err, FormatError::InvalidArgument(m) if m.contains(want)),
                "{format} {compression:?}: {err}"
            );
        }
    }
}
