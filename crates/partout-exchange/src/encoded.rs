//! [`Encoded`]: the batch sink that encodes each destination's batches (Arrow IPC streams or
//! Presto pages, by [`Encoding`]) and hands the bytes to a byte [`Sink`].

use crate::error::{Result, WriterError};
use crate::metrics::WriterMetrics;
use crate::options::WriterOptions;
use crate::sink::Sink;
use crate::writer::{BatchSink, Flushed, PartitionedWriter, SinkCapabilities, SinkClock};
use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::SchemaRef;
use partout_core::ids::Partitioning;
use partout_format::{Encoding, StreamEncoders};
use std::time::{Duration, Instant};

/// Encodes each destination's batches as one Arrow IPC stream or as Presto pages (by
/// [`Encoding`]) and hands the bytes to a [`Sink`].
#[derive(Debug)]
pub struct Encoded<S: Sink> {
    encoders: StreamEncoders,
    out: Vec<u8>,
    /// A flushed batch's message: its header and the batch's own buffers.
    parts: Vec<Buffer>,
    sink: S,
    clock: SinkClock,
}

impl<S: Sink> Encoded<S> {
    /// Encodes batches of `schema` for `destinations` destinations into `sink`.
    ///
    /// # Errors
    /// [`WriterError::Encode`] for a schema the format cannot carry.
    pub fn try_new(
        schema: SchemaRef,
        destinations: usize,
        encoding: Encoding,
        sink: S,
    ) -> Result<Self> {
        Ok(Self {
            encoders: StreamEncoders::try_new(schema, destinations, encoding)?,
            out: Vec::new(),
            parts: Vec::new(),
            sink,
            clock: SinkClock::default(),
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

    /// Time spent handing bytes to the sink.
    pub fn sink_time(&self) -> Duration {
        self.clock.elapsed()
    }

    /// Encodes `batch` for destination `p` (`compact`: its view columns are known compact)
    /// and hands it to the sink; the bytes. The message comes as parts that share the batch's
    /// buffers: the sink copies each byte once, from the destination's buffers to where it
    /// keeps or writes them.
    fn encode_batch(&mut self, p: usize, batch: &RecordBatch, compact: bool) -> Result<u64> {
        if p >= self.encoders.len() {
            return Err(WriterError::NoSuchDestination {
                destination: p,
                destinations: self.encoders.len(),
            });
        }
        self.parts.clear();
        if compact {
            self.encoders
                .encode_compact_parts(p, batch, &mut self.parts)?;
        } else {
            self.encoders.encode_parts(p, batch, &mut self.parts)?;
        }
        self.write_parts(p)
    }

    /// Hands the encoded message's parts to the sink; the bytes. The parts are let go, and
    /// with them the batch's (or the held batches') buffers, back to the writer.
    fn write_parts(&mut self, p: usize) -> Result<u64> {
        let started = Instant::now();
        let bytes = self.parts.iter().map(|part| part.len() as u64).sum();
        let written = self.sink.write_parts(p, &self.parts);
        self.parts.clear();
        written.map_err(|e| WriterError::sink(Some(p), e))?;
        self.clock.add(started.elapsed());
        Ok(bytes)
    }

    fn write(&mut self, p: usize) -> Result<u64> {
        let started = Instant::now();
        let bytes = self.out.len() as u64;
        self.sink
            .write_buffer(p, &mut self.out)
            .map_err(|e| WriterError::sink(Some(p), e))?;
        self.clock.add(started.elapsed());
        Ok(bytes)
    }
}

impl<S: Sink> BatchSink for Encoded<S> {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64> {
        self.encode_batch(p, batch, false)
    }

    /// Compact batches are encoded without reading their views to check; slices are encoded
    /// straight from the held batches.
    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64> {
        match flushed {
            Flushed::Compact { destination, batch } => self.encode_batch(destination, batch, true),
            Flushed::Slices {
                destination,
                slices,
            } => {
                self.parts.clear();
                self.encoders
                    .encode_slices(destination, slices, &mut self.parts)?;
                self.write_parts(destination)
            }
            other => other.write_as_batches(self),
        }
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()> {
        for (p, bytes) in destination_bytes.iter_mut().enumerate() {
            // A destination without rows gets an IPC stream of the schema alone; Presto pages
            // need no end, and such a destination gets no bytes.
            self.out.clear();
            self.encoders.finish(p, &mut self.out)?;
            if !self.out.is_empty() {
                *bytes += self.write(p)?;
            }
        }
        let started = Instant::now();
        self.sink.finish().map_err(|e| WriterError::sink(None, e))?;
        self.clock.add(started.elapsed());
        Ok(())
    }

    /// Slices where the encoders take them (Arrow IPC streams of flat columns), and the time
    /// spent in the sink.
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities {
            slices: self.encoders.takes_slices(),
            spares: None,
            clock: Some(self.clock.clone()),
        }
    }
}

impl<S: Sink> PartitionedWriter<Encoded<S>> {
    /// A writer of batches of `schema`, partitioned by `partitioning`, each destination's
    /// batches encoded as `encoding` says into `sink`.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for options that cannot work;
    /// [`WriterError::Partition`] when the partitioning does not fit the schema (a missing key
    /// column, a key type the scheme cannot hash) or a column type cannot be buffered;
    /// [`WriterError::Encode`] for a schema the format cannot carry.
    pub fn try_new(
        schema: SchemaRef,
        partitioning: Partitioning,
        options: WriterOptions,
        encoding: Encoding,
        sink: S,
    ) -> Result<Self> {
        options.validate()?;
        let output = Encoded::try_new(
            schema.clone(),
            partitioning.num_partitions() as usize,
            encoding,
            sink,
        )?;
        Self::with_output(schema, partitioning, options, output)
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        self.output().sink()
    }

    /// Flushes every destination, ends every destination's IPC stream (a destination that
    /// received no rows gets a stream of the schema alone; Presto pages need no end, and such
    /// a destination gets no bytes), finishes the sink, and returns it with the metrics.
    ///
    /// # Errors
    /// [`WriterError::Encode`] and [`WriterError::Sink`] from the last flushes, and
    /// [`WriterError::Failed`] after an earlier failure.
    pub fn finish(self) -> Result<(S, WriterMetrics)> {
        let (output, metrics) = self.finish_output()?;
        Ok((output.into_sink(), metrics))
    }
}
