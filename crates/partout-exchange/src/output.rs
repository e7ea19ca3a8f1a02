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

/// Encodes each destination's batches as one Arrow IPC stream or as Presto pages (by
/// [`OutputFormat`]) and hands the bytes to a [`Sink`].
#[derive(Debug)]
pub struct Encoded<S: Sink> {
    schema: SchemaRef,
    format: OutputFormat,
    compression: Compression,
    encoders: Vec<Option<IpcStreamEncoder>>,
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
        if format == OutputFormat::Presto {
            if compression == Compression::Zstd {
                return Err(WriterError::InvalidOption(
                    "Presto pages are compressed with LZ4 or not at all, not ZSTD".into(),
                ));
            }
            // What Presto cannot carry is refused now, not at the first flush.
            let empty = RecordBatch::new_empty(schema.clone());
            encode_page(&empty, PageOptions::default(), &mut Vec::new())?;
        }
        Ok(Self {
            schema,
            format,
            compression,
            encoders: (0..destinations).map(|_| None).collect(),
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

    fn encoder(&mut self, p: usize) -> Result<&mut IpcStreamEncoder> {
        Ok(match &mut self.encoders[p] {
            Some(encoder) => encoder,
            slot => slot.insert(IpcStreamEncoder::try_new(
                self.schema.clone(),
                self.compression,
            )?),
        })
    }
}

impl<S: Sink> BatchSink for Encoded<S> {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64> {
        if p >= self.encoders.len() {
            return Err(WriterError::Sink {
                destination: Some(p),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("destination {p} of {}", self.encoders.len()),
                ),
            });
        }
        // Room for the whole message at once (its buffers, padding and metadata): the encoder
        // then never grows the buffer, copying what it holds, on the way.
        // (The buffers' capacity bounds the data; no allocation to ask.)
        let room = batch.get_array_memory_size() + 64 * (self.schema.fields().len() + 16);
        self.out.clear();
        self.out.reserve(room);
        match self.format {
            OutputFormat::ArrowIpc => {
                let mut out = std::mem::take(&mut self.out);
                let encoded = self.encoder(p).and_then(|e| Ok(e.encode(batch, &mut out)?));
                self.out = out;
                encoded?;
            }
            OutputFormat::Presto => {
                let options = PageOptions {
                    checksum: true,
                    lz4: self.compression == Compression::Lz4Frame,
                };
                encode_page(batch, options, &mut self.out)?;
            }
        }
        self.write(p)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()> {
        if self.format == OutputFormat::ArrowIpc {
            for (p, bytes) in destination_bytes.iter_mut().enumerate() {
                // A destination without rows gets a stream of the schema alone.
                self.encoder(p)?;
                let encoder = self.encoders[p].take().expect("made above");
                self.out.clear();
                encoder.finish(&mut self.out)?;
                *bytes += self.write(p)?;
            }
        }
        // Presto pages need no end: a destination's output is its pages, back to back.
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
