//! `partout bench plan`: the scatter plan alone (validate, count, place) for every fan-out,
//! with uniform ids and ids in runs, to choose the automatic fan-out by measurement.

use crate::harness::{Budget, compare};
use crate::report::{out, outln};
use anyhow::Result;
use partout_core::ScatterPlan;
use partout_testkit::{IdPattern, random_ids, rng};

/// Options of `partout bench plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanOptions {
    /// Fewer, shorter samples.
    #[arg(long)]
    pub quick: bool,
    /// Fan-outs to compare.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 4, 8, 16, 32, 64])]
    pub fanouts: Vec<u32>,
    /// Partition counts to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [4u32, 16, 64, 256, 1024],
        value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)),
    )]
    pub partitions: Vec<u32>,
}

/// `partout bench plan`: ns per row of the plan at each fan-out, one line per id pattern and
/// partition count.
///
/// # Errors
/// A fan-out the plan refuses (before anything is timed), or a closed stdout.
pub fn run(options: &PlanOptions) -> Result<()> {
    const ROWS: usize = 10_000;
    let fanouts = &options.fanouts;
    let budget = Budget::new(options.quick);
    let mut rng = rng(7);
    outln!(
        "plan: {ROWS} rows; ns per row for each fan-out (median of {} samples)",
        budget.samples
    );
    out!("{:<22}", "ids / partitions");
    for f in fanouts {
        out!(" {:>7}", format!("f={f}"));
    }
    outln!();
    for pattern in [IdPattern::Uniform, IdPattern::Runs(4)] {
        for &n in &options.partitions {
            let ids = random_ids(ROWS, n, pattern, &mut rng);
            let mut plans: Vec<ScatterPlan> = fanouts.iter().map(|_| Default::default()).collect();
            // Bad options fail here, before anything is timed; and every plan is checked.
            for (plan, &f) in plans.iter_mut().zip(fanouts) {
                plan.build_with_fanout(&ids, n, f)?;
                check(plan, &ids, n)
                    .map_err(|e| anyhow::anyhow!("fan-out {f}, {n} partitions: {e}"))?;
            }
            let mut contenders: Vec<Box<dyn FnMut()>> = plans
                .iter_mut()
                .zip(fanouts)
                .map(|(plan, &f)| {
                    let ids = &ids;
                    Box::new(move || plan.build_with_fanout(ids, n, f).expect("plan"))
                        as Box<dyn FnMut()>
                })
                .collect();
            let mut contenders: Vec<&mut dyn FnMut()> = contenders
                .iter_mut()
                .map(|c| c.as_mut() as &mut dyn FnMut())
                .collect();
            let times = compare(budget, &mut contenders);
            out!("{:<22}", format!("{pattern:?} / {n}"));
            for t in times {
                out!(" {:>7.3}", t / ROWS as f64);
            }
            outln!();
        }
    }
    Ok(())
}

/// Whether `plan` places exactly the rows of `ids`: its order a permutation of the rows, and
/// each destination's slots the rows whose id is that destination.
fn check(plan: &ScatterPlan, ids: &[u32], n: u32) -> Result<(), String> {
    let mut seen = vec![false; ids.len()];
    for &row in plan.order() {
        match seen.get_mut(row as usize) {
            Some(s) if !*s => *s = true,
            _ => return Err(format!("row {row} placed twice or out of range")),
        }
    }
    if plan.order().len() != ids.len() {
        return Err(format!(
            "{} of {} rows placed",
            plan.order().len(),
            ids.len()
        ));
    }
    for p in 0..n as usize {
        if let Some(&row) = plan.order()[plan.range(p)]
            .iter()
            .find(|&&r| ids[r as usize] as usize != p)
        {
            return Err(format!(
                "row {row} (id {}) in destination {p}",
                ids[row as usize]
            ));
        }
    }
    Ok(())
}
