//! Outputs: where a [`PartitionedWriter`](crate::PartitionedWriter)'s flushed batches go.
//!
//! A writer hands each flushed destination batch to a [`BatchSink`]. [`Encoded`] is the
//! usual one: it encodes each batch as the next Arrow IPC record batch or Presto page of its
//! destination and passes the bytes to a byte [`Sink`]. Other sinks (a Parquet writer per
//! destination, outputs shared by several writers) implement [`BatchSink`] themselves.

use crate::error::{Result, WriterError};
use crate::sink::Sink;
use crate::writer::OutputFormat;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_format::ipc::{Compression, IpcStreamEncoder};
use partout_format::presto::{PageOptions, encode_page};
use std::time::{Duration, Instant};

/// Receives flushed batches, destination by destination.
pub trait BatchSink {
    /// Writes `batch` as the next piece of destination `destination`'s output and returns the
    /// bytes it added there.
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination.
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64>;

    /// No more batches come: end every destination's output, adding the bytes that ends each
    /// to `destination_bytes` (one entry per destination).
    ///
    /// # Errors
    /// Encoding or IO errors.
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()>;

    /// Time spent handing bytes on (in [`write_batch`](Self::write_batch) and
    /// [`finish`](Self::finish)), where the sink can tell it from encoding; zero otherwise.
    fn sink_time(&self) -> Duration {
        Duration::ZERO
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
    /// Checks that batches of `schema` can be encoded as `format` with `compression`.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for ZSTD Presto pages; [`WriterError::Encode`] for a
    /// schema Presto pages cannot carry (found now, not at the first flush).
    pub fn check(schema: &SchemaRef, format: OutputFormat, compression: Compression) -> Result<()> {
        if format == OutputFormat::Presto {
            if compression == Compression::Zstd {
                return Err(WriterError::InvalidOption(
                    "Presto pages are compressed with LZ4 or not at all, not ZSTD".into(),
                ));
            }
            let empty = RecordBatch::new_empty(schema.clone());
            encode_page(&empty, PageOptions::default(), &mut Vec::new())?;
        }
        Ok(())
    }

    /// An encoder of batches of `schema` (checked by [`check`](Self::check) beforehand).
    ///
    /// # Errors
    /// [`WriterError::Encode`] when arrow-rs cannot write the schema.
    pub fn try_new(
        schema: SchemaRef,
        format: OutputFormat,
        compression: Compression,
    ) -> Result<Self> {
        Ok(Self(match format {
            OutputFormat::ArrowIpc => {
                Stream::Ipc(Box::new(IpcStreamEncoder::try_new(schema, compression)?))
            }
            OutputFormat::Presto => Stream::Presto(PageOptions {
                checksum: true,
                lz4: compression == Compression::Lz4Frame,
            }),
        }))
    }

    /// Appends `batch`, encoded, to `out`.
    ///
    /// # Errors
    /// [`WriterError::Encode`].
    pub fn encode(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        match &mut self.0 {
            Stream::Ipc(encoder) => encoder.encode(batch, out)?,
            Stream::Presto(options) => encode_page(batch, *options, out)?,
        }
        Ok(())
    }

    /// Appends what ends the output to `out`: an IPC stream's end-of-stream marker (and its
    /// schema, if no batch was encoded); nothing for Presto pages.
    ///
    /// # Errors
    /// [`WriterError::Encode`].
    pub fn finish(self, out: &mut Vec<u8>) -> Result<()> {
        if let Stream::Ipc(encoder) = self.0 {
            encoder.finish(out)?;
        }
        Ok(())
    }
}

/// One [`StreamEncoder`] per destination, each made at its destination's first use.
#[derive(Debug)]
pub struct StreamEncoders {
    schema: SchemaRef,
    format: OutputFormat,
    compression: Compression,
    encoders: Vec<Option<StreamEncoder>>,
}

impl StreamEncoders {
    /// Encoders of batches of `schema` for `destinations` destinations.
    ///
    /// # Errors
    /// As [`StreamEncoder::check`].
    pub fn try_new(
        schema: SchemaRef,
        destinations: usize,
        format: OutputFormat,
        compression: Compression,
    ) -> Result<Self> {
        StreamEncoder::check(&schema, format, compression)?;
        Ok(Self {
            schema,
            format,
            compression,
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
    /// [`WriterError::Sink`] for a destination out of range; [`WriterError::Encode`].
    pub fn get(&mut self, p: usize) -> Result<&mut StreamEncoder> {
        let count = self.encoders.len();
        let slot = self.encoders.get_mut(p).ok_or_else(|| WriterError::Sink {
            destination: Some(p),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("destination {p} of {count}"),
            ),
        })?;
        Ok(match slot {
            Some(encoder) => encoder,
            slot => slot.insert(StreamEncoder::try_new(
                self.schema.clone(),
                self.format,
                self.compression,
            )?),
        })
    }

    /// Destination `p`'s encoder, taken out (to be finished); `None` if it never had one.
    pub fn take(&mut self, p: usize) -> Option<StreamEncoder> {
        self.encoders.get_mut(p).and_then(Option::take)
    }
}

/// Encodes each destination's batches as one Arrow IPC stream or as Presto pages (by
/// [`OutputFormat`]) and hands the bytes to a [`Sink`].
#[derive(Debug)]
pub struct Encoded<S: Sink> {
    fields: usize,
    encoders: StreamEncoders,
    out: Vec<u8>,
    sink: S,
    sink_time: Duration,
}

impl<S: Sink> Encoded<S> {
    /// Encodes batches of `schema` for `destinations` destinations into `sink`.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for ZSTD Presto pages; [`WriterError::Encode`] for a
    /// schema Presto pages cannot carry.
    pub fn try_new(
        schema: SchemaRef,
        destinations: usize,
        format: OutputFormat,
        compression: Compression,
        sink: S,
    ) -> Result<Self> {
        Ok(Self {
            fields: schema.fields().len(),
            encoders: StreamEncoders::try_new(schema, destinations, format, compression)?,
            out: Vec::new(),
            sink,
            sink_time: Duration::ZERO,
        })
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, given back.
    pub fn into_sink(self) -> S {
        self.sink
    }

    fn write(&mut self, p: usize) -> Result<u64> {
        let started = Instant::now();
        let bytes = self.out.len() as u64;
        self.sink
            .write_buffer(p, &mut self.out)
            .map_err(|source| WriterError::Sink {
                destination: Some(p),
                source,
            })?;
        self.sink_time += started.elapsed();
        Ok(bytes)
    }
}

impl<S: Sink> BatchSink for Encoded<S> {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64> {
        // Room for the whole message at once (its buffers, padding and metadata): the encoder
        // then never grows the buffer, copying what it holds, on the way.
        // (The buffers' capacity bounds the data; no allocation to ask.)
        let room = batch.get_array_memory_size() + 64 * (self.fields + 16);
        self.out.clear();
        self.out.reserve(room);
        let mut out = std::mem::take(&mut self.out);
        let encoded = self.encoders.get(p).and_then(|e| e.encode(batch, &mut out));
        self.out = out;
        encoded?;
        self.write(p)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()> {
        for (p, bytes) in destination_bytes.iter_mut().enumerate() {
            // A destination without rows gets an IPC stream of the schema alone; Presto pages
            // need no end, and such a destination gets no bytes.
            self.encoders.get(p)?;
            let encoder = self.encoders.take(p).expect("made above");
            self.out.clear();
            encoder.finish(&mut self.out)?;
            if !self.out.is_empty() {
                *bytes += self.write(p)?;
            }
        }
        let started = Instant::now();
        self.sink.finish().map_err(|source| WriterError::Sink {
            destination: None,
            source,
        })?;
        self.sink_time += started.elapsed();
        Ok(())
    }

    fn sink_time(&self) -> Duration {
        self.sink_time
    }
}
