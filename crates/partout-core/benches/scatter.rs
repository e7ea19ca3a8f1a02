//! Criterion benches of the scatter kernels on a slice of Velox's PartitionedVectorBenchmark
//! matrix (the full matrix runs in `partout bench scatter`), and of the plan alone.
//!
//! * `scatter/<KIND>_<columns>Cols` (`INTEGER`, `VARCHAR` or `Mixed`; 1 or 10 columns): one
//!   seeded batch of 10,000 rows and uniform ids, as `partout/<partitions>` (partout's
//!   partitioner) and, the baseline, `grouped_take/<partitions>` (DataFusion's grouped take on
//!   the same batch and ids), for 4, 64, 256 and 1,024 partitions.
//! * `plan/<pattern>/<partitions>` (`Uniform` or `Runs(4)` ids; 4 to 1,024 partitions):
//!   building a `ScatterPlan` alone, with the automatic fan-out.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use partout_core::{Partitioner, ScatterPlan};
use partout_testkit::baseline::GroupedTake;
use partout_testkit::workload::{ColumnKind, matrix_batch};
use partout_testkit::{IdPattern, random_ids, rng};
use std::hint::black_box;

const ROWS: usize = 10_000;

// The same allocator as the `partout` binary: glibc's returns freed output buffers to the
// kernel and page-faults them back in on the next batch, which swamps both contenders.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn scatter(c: &mut Criterion) {
    let mut rng = rng(42);
    for kind in [ColumnKind::Integer, ColumnKind::Varchar, ColumnKind::Mixed] {
        for columns in [1usize, 10] {
            let batch = matrix_batch(kind, columns, ROWS, 0.0, &mut rng);
            let mut group = c.benchmark_group(format!("scatter/{kind}_{columns}Cols"));
            group.throughput(Throughput::Elements(ROWS as u64));
            for n in [4u32, 64, 256, 1024] {
                let ids = random_ids(ROWS, n, IdPattern::Uniform, &mut rng);
                let mut ours = Partitioner::try_new(n).expect("valid partition count");
                group.bench_function(BenchmarkId::new("partout", n), |b| {
                    b.iter(|| black_box(ours.partition(&batch, &ids).expect("partition")))
                });
                let mut baseline = GroupedTake::new();
                group.bench_function(BenchmarkId::new("grouped_take", n), |b| {
                    b.iter(|| {
                        black_box(baseline.partition(&batch, &ids, n as usize).expect("take"))
                    })
                });
            }
            group.finish();
        }
    }
}

fn plan(c: &mut Criterion) {
    let mut rng = rng(7);
    let mut group = c.benchmark_group("plan");
    group.throughput(Throughput::Elements(ROWS as u64));
    for pattern in [IdPattern::Uniform, IdPattern::Runs(4)] {
        for n in [4u32, 16, 64, 256, 1024] {
            let ids = random_ids(ROWS, n, pattern, &mut rng);
            let mut plan = ScatterPlan::new();
            group.bench_function(BenchmarkId::new(format!("{pattern:?}"), n), |b| {
                b.iter(|| plan.build(black_box(&ids), n).expect("plan"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scatter, plan);
criterion_main!(benches);
