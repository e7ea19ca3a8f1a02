//! `Gather` against arrow's `concat_batches` of the same pieces: the same rows in the same
//! order, cut into batches of exactly the batch size (the last one shorter), for every type,
//! sliced and not; a gathered batch's view columns hold no more bytes than their strings;
//! every piece is given back for reuse.

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::DataType;
use partout_exchange::{Gather, Spares};
use proptest::prelude::*;
use std::sync::Arc;

/// Pieces of one random batch of every type, cut at `cuts` (each piece sliced from it, so
/// their view buffers hold other pieces' strings too: slack for the gather to drop).
fn pieces(rows: usize, cuts: &[usize], sliced: bool, seed: u64) -> (RecordBatch, Vec<RecordBatch>) {
    let types = partout_testkit::every_type();
    let mut rng = partout_testkit::rng(seed);
    let whole = partout_testkit::random_batch(&types, rows, 0.2, sliced, &mut rng);
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (rows + 1)).collect();
    bounds.extend([0, rows]);
    bounds.sort_unstable();
    let pieces = bounds
        .windows(2)
        .map(|w| whole.slice(w[0], w[1] - w[0]))
        .collect();
    (whole, pieces)
}

/// Runs `pieces` through a gather of `batch_size`, pushing each piece and taking what is ready
/// after every push; the gathered batches.
fn gathered(gather: &mut Gather, pieces: &[RecordBatch]) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for piece in pieces {
        gather.push(piece.clone()).unwrap();
        out.extend(std::iter::from_fn(|| gather.next_batch()));
    }
    gather.finish().unwrap();
    out.extend(std::iter::from_fn(|| gather.next_batch()));
    assert_eq!(gather.buffered_rows(), 0);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn gathered_batches_are_the_pieces_rows_in_batches_of_the_size(
        rows in 0usize..600,
        cuts in prop::collection::vec(0usize..600, 0..12),
        batch_size in 1usize..300,
        sliced in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let (whole, pieces) = pieces(rows, &cuts, sliced, seed);
        let mut gather = Gather::new(whole.schema(), batch_size);
        let out = gathered(&mut gather, &pieces);
        // The oracle: arrow's concatenation of the pieces, cut at multiples of the size.
        let want = arrow_select::concat::concat_batches(&whole.schema(), &pieces).unwrap();
        let mut at = 0;
        for (k, batch) in out.iter().enumerate() {
            let last = k + 1 == out.len();
            if !last {
                prop_assert_eq!(batch.num_rows(), batch_size, "batch {} of {}", k, out.len());
            }
            prop_assert!(batch.num_rows() > 0 && batch.num_rows() <= batch_size);
            let expected = want.slice(at, batch.num_rows());
            for (c, (got, exp)) in batch.columns().iter().zip(expected.columns()).enumerate() {
                prop_assert_eq!(got.as_ref(), exp.as_ref(), "column {} ({}) of batch {}", c, got.data_type(), k);
            }
            at += batch.num_rows();
        }
        prop_assert_eq!(at, rows, "every row once");
    }
}

/// Pieces of 20 rows sliced from one batch (so each one's view buffers hold every piece's
/// strings) gather into batches of 1000 rows whose view columns hold exactly their strings'
/// bytes, not blocks with room to spare; every piece goes back to the spares.
#[test]
fn gathered_views_hold_their_strings_and_every_piece_is_given_back() {
    let cuts: Vec<usize> = (20..4000).step_by(20).collect();
    let (whole, pieces) = pieces(4000, &cuts, true, 3);
    let spares = Arc::new(Spares::new(usize::MAX));
    let mut gather = Gather::new(whole.schema(), 1000).with_spares(spares.clone());
    let out = gathered(&mut gather, &pieces);
    assert_eq!(
        out.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(),
        [1000; 4]
    );
    let mut views = 0;
    for batch in &out {
        for column in batch.columns() {
            let (used, buffers) = match column.data_type() {
                DataType::Utf8View => {
                    let c = column.as_string_view();
                    (c.total_buffer_bytes_used(), c.data_buffers().to_vec())
                }
                DataType::BinaryView => {
                    let c = column.as_binary_view();
                    (c.total_buffer_bytes_used(), c.data_buffers().to_vec())
                }
                _ => continue,
            };
            views += 1;
            // Distinct buffers only: several views may point into one.
            let mut held: Vec<(usize, usize)> = buffers
                .iter()
                .map(|b| (b.as_ptr() as usize, b.capacity()))
                .collect();
            held.sort_unstable();
            held.dedup();
            let held: usize = held.iter().map(|&(_, capacity)| capacity).sum();
            assert_eq!(
                held,
                used,
                "{}: bytes held for the strings",
                column.data_type()
            );
        }
    }
    assert!(views >= 6, "the types include view columns ({views} seen)");
    let mut given = 0;
    while spares.take().is_some() {
        given += 1;
    }
    assert_eq!(given, pieces.len(), "every piece given back once");
}
