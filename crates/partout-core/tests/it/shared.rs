//! `OutputBuilder`s shared by several producers' `GatheredBatch`es, against the reference: the
//! batches each output finishes, one after another, equal the concatenation of every input
//! batch's reference partition in the order the batches were gathered, whatever the row
//! count each builder stops at, for every type.

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use partout_core::{GatheredBatch, OutputBuilder};
use partout_testkit::{IdPattern, every_type, random_batch, random_ids, reference_partition, rng};
use proptest::prelude::*;

/// Gathers `batches` in turn, alternating between `producers` gathered batches (as producers
/// sharing the builders would), appends every destination's rows to its output builder, which
/// is finished whenever it reaches `cap` rows (an append stopped there and resumed in the next
/// batch), and checks every output's batches against the reference.
fn run(
    types: &[DataType],
    n: u32,
    batches: &[(usize, IdPattern, f64)],
    cap: usize,
    producers: usize,
    seed: u64,
) {
    let mut rng = rng(seed);
    let schema = random_batch(types, 0, 0.0, false, &mut rng).schema();
    let mut gathered: Vec<GatheredBatch> = (0..producers)
        .map(|_| GatheredBatch::try_new(schema.clone(), n).unwrap())
        .collect();
    let mut outputs: Vec<OutputBuilder> = (0..n)
        .map(|_| OutputBuilder::try_new(schema.clone()).unwrap())
        .collect();
    let mut got: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
    let mut want: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
    for (k, &(rows, pattern, density)) in batches.iter().enumerate() {
        let batch = random_batch(types, rows, density, k % 3 == 1, &mut rng);
        let ids = random_ids(rows, n, pattern, &mut rng);
        let from = &mut gathered[k % producers];
        from.gather(&batch, &ids).unwrap();
        assert_eq!(from.num_rows(), rows);
        for (p, part) in reference_partition(&batch, &ids, n).into_iter().enumerate() {
            assert_eq!(from.rows(p), part.num_rows(), "destination {p}'s rows");
            want[p].push(part);
        }
        // Destinations visited from a rotating start, as producers do.
        for i in 0..n as usize {
            let p = (i + k) % n as usize;
            let (output, received) = (&mut outputs[p], from.rows(p));
            let mut at = 0;
            while at < received {
                let take = (cap - output.rows()).min(received - at);
                output.append(from, p, at..at + take).unwrap();
                at += take;
                assert!(output.held_bytes() >= output.bytes());
                if output.rows() == cap {
                    got[p].push(output.finish(true).unwrap());
                }
            }
        }
    }
    for (p, output) in outputs.iter_mut().enumerate() {
        if output.rows() > 0 {
            got[p].push(output.finish(false).unwrap());
        }
        output.release();
        assert_eq!(output.held_bytes(), 0);
        let got_rows: Vec<usize> = got[p].iter().map(RecordBatch::num_rows).collect();
        assert!(
            got_rows.iter().rev().skip(1).all(|&r| r == cap),
            "destination {p}: batches of {got_rows:?} rows, not {cap} but the last"
        );
        let got = arrow_select::concat::concat_batches(&schema, &got[p]).unwrap();
        let want = arrow_select::concat::concat_batches(&schema, &want[p]).unwrap();
        assert_eq!(
            got.num_rows(),
            want.num_rows(),
            "destination {p}'s row count"
        );
        for (c, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
            g.to_data().validate_full().unwrap();
            assert_eq!(
                g.as_ref(),
                w.as_ref(),
                "destination {p}, column {c} ({})",
                w.data_type()
            );
        }
    }
}

#[test]
fn every_type_through_shared_builders() {
    for (i, data_type) in every_type().into_iter().enumerate() {
        let batches = [
            (200, IdPattern::Uniform, 0.0),
            (1, IdPattern::Uniform, 1.0),
            (300, IdPattern::Runs(4), 0.5),
            (0, IdPattern::Uniform, 0.5),
            (150, IdPattern::AllTo(2), 0.5),
            (100, IdPattern::Uniform, 0.0),
        ];
        run(
            std::slice::from_ref(&data_type),
            5,
            &batches,
            37,
            2,
            i as u64,
        );
    }
}

#[test]
fn all_types_together_with_many_outputs() {
    for n in [1u32, 3, 64, 700] {
        let batches = [
            (1000, IdPattern::Uniform, 0.5),
            (700, IdPattern::Runs(4), 0.0),
            (1000, IdPattern::Uniform, 1.0),
        ];
        run(&every_type(), n, &batches, 100, 3, u64::from(n));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_producers_and_caps(
        type_picks in prop::collection::vec(0usize..64, 1..4),
        n in 1u32..300,
        batches in prop::collection::vec((0usize..400, 0u8..3, 0u8..3), 1..6),
        cap in 1usize..500,
        producers in 1usize..4,
        seed in any::<u64>(),
    ) {
        let all = every_type();
        let types: Vec<DataType> = type_picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        let batches: Vec<(usize, IdPattern, f64)> = batches
            .into_iter()
            .map(|(rows, pattern, density)| {
                let pattern = match pattern {
                    0 => IdPattern::Uniform,
                    1 => IdPattern::Runs(4),
                    _ => IdPattern::AllTo(n - 1),
                };
                (rows, pattern, [0.0, 0.5, 1.0][density as usize])
            })
            .collect();
        run(&types, n, &batches, cap, producers, seed);
    }
}
