//! [`DataFusionIds`]: the partition DataFusion's hash repartitioning gives each row.

use arrow_array::{ArrayRef, RecordBatch};
use datafusion::common::Result;
use datafusion::common::hash_utils::create_hashes;
use datafusion::physical_expr_common::utils::evaluate_expressions_to_arrays;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;
use partout_core::ids::Modulo64;
use std::sync::Arc;

/// Partition ids exactly as DataFusion 55's `BatchPartitioner::new_hash_partitioner` assigns
/// them: the key expressions evaluated, hashed by DataFusion's own `create_hashes` with
/// `REPARTITION_RANDOM_STATE`, and reduced `hash % n` (partout's exact reducer).
#[derive(Debug)]
pub struct DataFusionIds {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    modulo: Modulo64,
    hashes: Vec<u64>,
}

impl DataFusionIds {
    /// Ids over `n` partitions by the keys `exprs`.
    ///
    /// # Panics
    /// If `n` is 0 or passes `u32::MAX`.
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, n: usize) -> Self {
        let n = u32::try_from(n).expect("a partition count that fits 32 bits");
        Self {
            exprs,
            modulo: Modulo64::new(n),
            hashes: Vec::new(),
        }
    }

    /// Each row's partition, into `ids` (cleared first).
    ///
    /// # Errors
    /// When a key expression fails, or DataFusion cannot hash a key's type.
    pub fn compute(&mut self, batch: &RecordBatch, ids: &mut Vec<u32>) -> Result<()> {
        let arrays = evaluate_expressions_to_arrays(&self.exprs, batch)?;
        self.compute_arrays(&arrays, batch.num_rows(), ids)
    }

    /// Each row's partition for key columns already evaluated (`rows` rows).
    ///
    /// # Errors
    /// When DataFusion cannot hash a key's type.
    pub fn compute_arrays(
        &mut self,
        keys: &[ArrayRef],
        rows: usize,
        ids: &mut Vec<u32>,
    ) -> Result<()> {
        self.hashes.clear();
        self.hashes.resize(rows, 0);
        create_hashes(
            keys,
            REPARTITION_RANDOM_STATE.random_state(),
            &mut self.hashes,
        )?;
        ids.clear();
        self.modulo.reduce_all(&self.hashes, ids);
        Ok(())
    }
}
