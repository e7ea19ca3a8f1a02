//! One input partition's producer of [`PartoutRepartitionExec`](crate::PartoutRepartitionExec).

use crate::exchange::{Queued, to_datafusion};
use crate::ids::DataFusionIds;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::Time;
use futures::StreamExt;
use partout_exchange::{
    BoundedExchange, PartitionedWriter, Ready, ReadyBatch, Spares, WriterError, WriterOptions,
};
use std::sync::Arc;

/// One input partition's producer: rows appended to partout's writer by DataFusion's ids, a
/// destination's rows handed to the exchange as a batch once they reach the session's batch
/// size or the destination's share of the writer's memory, the rest at the end. From an
/// unbounded input, every row is handed over with the input batch it came in, as
/// DataFusion's `RepartitionExec` does: the next batch may be long in coming, or never come.
pub(crate) struct Producer {
    pub(crate) input: Arc<dyn ExecutionPlan>,
    pub(crate) partition: usize,
    pub(crate) context: Arc<TaskContext>,
    pub(crate) ids: DataFusionIds,
    pub(crate) partitions: usize,
    /// The memory the writer's buffers may hold.
    pub(crate) writer_limit: usize,
    /// Whether the input is unbounded.
    pub(crate) unbounded: bool,
    pub(crate) exchange: Arc<BoundedExchange<Queued>>,
    pub(crate) spares: Arc<Spares>,
    pub(crate) operator: String,
    pub(crate) fetch_time: Time,
    pub(crate) repartition_time: Time,
    pub(crate) send_time: Time,
}

impl Producer {
    pub(crate) async fn run(mut self) -> Result<()> {
        let mut stream = self.input.execute(self.partition, self.context.clone())?;
        let n = u32::try_from(self.partitions)
            .map_err(|_| DataFusionError::Internal("too many partitions".into()))?;
        let batch_size = self.context.session_config().batch_size().max(1);
        // Each destination flushes at `batch_size` rows or its even share of the writer's
        // memory, whichever comes first: with room for whole batches, they pass the outputs'
        // gathering by, uncopied (a fixed 256 KiB target before cut every flush to ~1,300
        // lineitem rows, each copied again at the output).
        let options = WriterOptions::default()
            .with_target_bytes((self.writer_limit / self.partitions.max(1)).max(1))
            .with_memory_limit(self.writer_limit)
            .with_target_rows(batch_size);
        // The ids are DataFusion's (append_with_ids).
        let mut writer = PartitionedWriter::with_given_ids(
            self.input.schema(),
            n,
            options,
            Ready::new(batch_size).with_spares(self.spares.clone()),
        )
        .map_err(external)?;
        // The writer's buffers and the batches it flushed, reserved as they change.
        let reservation =
            MemoryConsumer::new(format!("{} producer {}", self.operator, self.partition))
                .register(self.context.memory_pool());
        let mut ids = Vec::new();
        let mut ready = Vec::new();
        loop {
            let fetched = {
                let _timer = self.fetch_time.timer();
                stream.next().await
            };
            {
                // Stopped around every send: the time spent handing batches over (waiting for
                // room included) is send_time's alone, as in DataFusion's RepartitionExec,
                // never counted twice.
                let mut timer = self.repartition_time.timer();
                match fetched {
                    Some(batch) => {
                        let batch = batch?;
                        self.ids.compute(&batch, &mut ids)?;
                        // In pieces of an eighth of the writer's memory, each handed over
                        // before the next is appended: what the writer flushed and what it
                        // holds stay within its share, whatever the input's batch size; and
                        // one piece brings a destination a small part of its flush target,
                        // so fills stay within the buffers their last fill left (a larger
                        // fill would grow them, copying).
                        let rows = batch.num_rows();
                        let row_bytes = batch.get_array_memory_size() / rows.max(1);
                        let piece =
                            (self.writer_limit / 8 / row_bytes.max(1)).clamp(1, rows.max(1));
                        for start in (0..rows).step_by(piece) {
                            let len = piece.min(rows - start);
                            writer
                                .append_with_ids(&batch.slice(start, len), &ids[start..start + len])
                                .map_err(external)?;
                            reservation
                                .try_resize(writer.held_bytes() + writer.output().held_bytes())?;
                            ready.extend(writer.drain_ready());
                            if start + len < rows {
                                timer.stop();
                                let send = self.send_time.timer();
                                for ready in ready.drain(..) {
                                    self.push(ready, batch_size).await?;
                                }
                                send.done();
                                timer.restart();
                            }
                        }
                        if self.unbounded {
                            writer.flush().map_err(external)?;
                            ready.extend(writer.drain_ready());
                        }
                    }
                    None => {
                        let (mut rest, _) = writer.finish_output().map_err(external)?;
                        ready.extend(rest.drain());
                        timer.done();
                        let _send = self.send_time.timer();
                        for piece in ready.drain(..) {
                            self.push(piece, batch_size).await?;
                        }
                        return Ok(());
                    }
                }
            }
            let _timer = self.send_time.timer();
            for piece in ready.drain(..) {
                self.push(piece, batch_size).await?;
            }
            reservation.try_resize(writer.held_bytes())?;
            if self.exchange.all_closed() {
                return Ok(());
            }
        }
    }

    /// Queues `piece` for its output: whole when it is a full batch, or comes from an
    /// unbounded input (passed on as it is, never held back to gather more).
    async fn push(&self, piece: ReadyBatch, batch_size: usize) -> Result<()> {
        let queued = Queued {
            whole: self.unbounded || piece.batch.num_rows() == batch_size,
            rows: piece.batch,
            bytes: piece.bytes,
        };
        self.exchange
            .push_async(piece.destination, queued)
            .await
            .map_err(|e| to_datafusion(e, &self.operator))
    }
}

fn external(e: WriterError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
