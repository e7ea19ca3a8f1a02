//! One input partition's producer of [`PartoutRepartitionExec`](crate::PartoutRepartitionExec).

use crate::builders::{Finished, OutputBuilders, Pass};
use crate::exchange::{Queued, to_datafusion};
use crate::ids::DataFusionIds;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::Time;
use futures::StreamExt;
use partout_core::GatheredBatch;
use partout_exchange::BoundedExchange;
use std::sync::Arc;

/// One input partition's producer: each input batch hashed by DataFusion's ids, gathered into
/// destination order in the producer's scratch, and each output's rows appended to the
/// output's shared builder; the batches that fill are queued in the exchange. From an
/// unbounded input, every row is handed over with the input batch it came in, as DataFusion's
/// `RepartitionExec` does: the next batch may be long in coming, or never come.
pub(crate) struct Producer {
    pub(crate) input: Arc<dyn ExecutionPlan>,
    pub(crate) partition: usize,
    pub(crate) context: Arc<TaskContext>,
    pub(crate) ids: DataFusionIds,
    pub(crate) partitions: usize,
    /// The bytes of input gathered at once (and so at most finished into output batches
    /// waiting to be queued): larger input batches are gathered in pieces.
    pub(crate) scratch_limit: usize,
    /// Whether the input is unbounded.
    pub(crate) unbounded: bool,
    /// The builders this producer fills (shared with the other producers, unless order is
    /// preserved).
    pub(crate) builders: Arc<OutputBuilders>,
    /// Where this producer starts each pass over the outputs.
    pub(crate) first: usize,
    pub(crate) exchange: Arc<BoundedExchange<Queued>>,
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
        let mut gathered = GatheredBatch::try_new(self.input.schema(), n)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        // The gathered scratch, reserved as it grows.
        let reservation =
            MemoryConsumer::new(format!("{} producer {}", self.operator, self.partition))
                .register(self.context.memory_pool());
        let (mut ids, mut pass, mut ready) = (Vec::new(), Pass::default(), Vec::new());
        loop {
            let fetched = {
                let _timer = self.fetch_time.timer();
                stream.next().await
            };
            let Some(batch) = fetched else {
                break;
            };
            let batch = batch?;
            let mut timer = self.repartition_time.timer();
            self.ids.compute(&batch, &mut ids)?;
            // A batch whose scratch (or whose rows, once finished into output batches and
            // not yet queued) would pass the producer's share is gathered in even pieces
            // within it.
            let rows = batch.num_rows();
            let bytes = batch.get_array_memory_size();
            let pieces = match bytes > self.scratch_limit {
                true => bytes.div_ceil(self.scratch_limit).min(rows),
                false => 1,
            };
            let piece = rows.div_ceil(pieces.max(1)).max(1);
            for start in (0..rows).step_by(piece) {
                let len = piece.min(rows - start);
                let part = match pieces {
                    1 => batch.clone(),
                    _ => batch.slice(start, len),
                };
                gathered
                    .gather(&part, &ids[start..start + len])
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                reservation.try_resize(gathered.held_bytes())?;
                pass.begin(self.first);
                while let Some(finished) =
                    self.builders.next(&gathered, &mut pass, self.unbounded)?
                {
                    timer.stop();
                    let send = self.send_time.timer();
                    self.push(finished).await?;
                    send.done();
                    timer.restart();
                }
            }
            gathered.clear();
            timer.done();
            if self.exchange.all_closed() {
                return Ok(());
            }
        }
        drop(gathered);
        reservation.free();
        self.builders.producer_done(&mut ready)?;
        let _send = self.send_time.timer();
        for finished in ready {
            self.push(finished).await?;
        }
        Ok(())
    }

    /// Queues `finished` for its output.
    async fn push(&self, finished: Finished) -> Result<()> {
        let Finished {
            output,
            batch,
            bytes,
        } = finished;
        let queued = Queued { rows: batch, bytes };
        let pushed = self.exchange.push_async(output, queued).await;
        self.builders.queued(bytes);
        pushed.map_err(|e| to_datafusion(e, &self.operator))
    }
}
