//! TPC-H q1..q22 at SF 0.1 with and without partout: the same answers, and every hash
//! `RepartitionExec` of DataFusion's plan replaced by a `PartoutRepartitionExec`.
//!
//! The data is generated in process once (`partout_datafusion::tpch`), held in `MemTable`s
//! whose batches are dealt round-robin over `target_partitions` partitions. Each query runs for
//! `target_partitions` 2, 4 and 8 in a plain DataFusion session and in a session built with
//! `with_partout()`. All failures are gathered and reported together; each names the query and
//! `target_partitions`.

use std::cmp::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type, SchemaRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::SessionContext;
use partout_datafusion::tpch;

/// Scale factor of the generated data.
const SCALE_FACTOR: f64 = 0.1;
/// Rows per generated batch.
const BATCH_SIZE: usize = 8192;
/// The `target_partitions` every query runs with.
const TARGET_PARTITIONS: [usize; 3] = [2, 4, 8];
/// Bound on the whole run, so that a hang fails instead of blocking CI.
const TIMEOUT: Duration = Duration::from_secs(600);
/// Largest relative difference allowed between two floats (sums taken in another order).
const FLOAT_TOLERANCE: f64 = 1e-9;

/// How the rows of a query's two answers are compared.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// The ORDER BY is a total order of the answer (or there is at most one row): the rows
    /// must be equal in order.
    InOrder,
    /// The ORDER BY can tie on rows that differ elsewhere, so rows may legitimately come in
    /// another order within a tie. The rows are compared as sorted multisets, and the ORDER BY
    /// key columns (these indices) must be equal row by row in order.
    TiesOnKeys(&'static [usize]),
}

/// Per query (index `n - 1` for qn): how to compare its answers.
///
/// A LIMIT that cut inside a group of rows tied on the ORDER BY keys could legitimately keep
/// different rows. At SF 0.1 none does (checked by running the queries without their LIMIT):
/// q3's 10th and 11th rows differ in revenue (309728.9306, 309151.2029), so do q10's 20th and
/// 21st (395513.1358, 394418.1162), and q2 (44 rows), q18 (5) and q21 (47) stay under their
/// LIMIT. So every query's full rows are compared; should a future data or query change put a
/// cut inside a tie, the sorted-row comparison fails and names the query.
const CHECKS: [Check; 22] = [
    Check::InOrder,             // q1: group keys
    Check::InOrder,             // q2: (s_name, p_partkey) is unique
    Check::TiesOnKeys(&[1, 2]), // q3: revenue desc, o_orderdate
    Check::InOrder,             // q4: group key
    Check::TiesOnKeys(&[1]),    // q5: revenue desc
    Check::InOrder,             // q6: one row
    Check::InOrder,             // q7: group keys
    Check::InOrder,             // q8: group key
    Check::InOrder,             // q9: group keys
    Check::TiesOnKeys(&[2]),    // q10: revenue desc
    Check::TiesOnKeys(&[1]),    // q11: value desc
    Check::InOrder,             // q12: group key
    Check::InOrder,             // q13: custdist desc, c_count desc (group key)
    Check::InOrder,             // q14: one row
    Check::InOrder,             // q15: s_suppkey
    Check::InOrder,             // q16: supplier_cnt desc and all group keys
    Check::InOrder,             // q17: one row
    Check::TiesOnKeys(&[4, 3]), // q18: o_totalprice desc, o_orderdate
    Check::InOrder,             // q19: one row
    Check::InOrder,             // q20: s_name (one row per supplier)
    Check::InOrder,             // q21: numwait desc, s_name (group key)
    Check::InOrder,             // q22: group key
];

/// The eight TPC-H tables at [`SCALE_FACTOR`], generated once.
fn tables() -> &'static [tpch::Table] {
    static TABLES: OnceLock<Vec<tpch::Table>> = OnceLock::new();
    TABLES.get_or_init(|| tpch::tables(SCALE_FACTOR, BATCH_SIZE).expect("TPC-H generated"))
}

/// A session of `target_partitions` partitions with the tables, with partout or without.
fn context(target_partitions: usize, partout: bool) -> SessionContext {
    let ctx = tpch::session(target_partitions, partout);
    tpch::register(&ctx, tables(), target_partitions).expect("tables registered");
    ctx
}

/// A DataFusion session without partout.
fn plain_context(target_partitions: usize) -> SessionContext {
    context(target_partitions, false)
}

/// A DataFusion session with partout.
fn partout_context(target_partitions: usize) -> SessionContext {
    context(target_partitions, true)
}

/// The text of query `n`.
fn query(n: usize) -> String {
    tpch::QUERIES[n - 1].to_string()
}

/// The physical plan of `sql` as indented text, and its answer (from that very plan).
async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<(String, Answer)> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    let schema = plan.schema();
    let batches = collect(plan, ctx.task_ctx()).await?;
    Ok((text, Answer::new(&schema, &batches)?))
}

/// One value of an answer, comparable across the two sessions.
#[derive(Clone, Debug)]
enum Cell {
    Null,
    /// A float, compared with [`FLOAT_TOLERANCE`].
    Float(f64),
    /// Any other value, by its display (exact for integers, strings, dates and decimals).
    Text(String),
}

impl Cell {
    /// Order used to sort rows: nulls first, floats by value, texts by string.
    fn sort_cmp(&self, other: &Cell) -> Ordering {
        match (self, other) {
            (Cell::Null, Cell::Null) => Ordering::Equal,
            (Cell::Null, _) => Ordering::Less,
            (_, Cell::Null) => Ordering::Greater,
            (Cell::Float(a), Cell::Float(b)) => a.total_cmp(b),
            (Cell::Float(_), Cell::Text(_)) => Ordering::Less,
            (Cell::Text(_), Cell::Float(_)) => Ordering::Greater,
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
        }
    }

    /// Equality of answers: exact, but floats within [`FLOAT_TOLERANCE`] relative difference.
    fn matches(&self, other: &Cell) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Float(a), Cell::Float(b)) => {
                a == b
                    || (a.is_nan() && b.is_nan())
                    || (a - b).abs() <= FLOAT_TOLERANCE * a.abs().max(b.abs())
            }
            (Cell::Text(a), Cell::Text(b)) => a == b,
            _ => false,
        }
    }
}

type Row = Vec<Cell>;

fn rows_cmp(a: &Row, b: &Row) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.sort_cmp(y))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

fn rows_match(a: &Row, b: &Row) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
}

/// A query's answer: its columns (name and type) and its rows in the order returned.
struct Answer {
    columns: Vec<(String, DataType)>,
    rows: Vec<Row>,
}

impl Answer {
    fn new(schema: &SchemaRef, batches: &[RecordBatch]) -> datafusion::error::Result<Self> {
        let columns = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in batches {
            let mut batch_rows: Vec<Row> = vec![Vec::new(); batch.num_rows()];
            for column in batch.columns() {
                match column.data_type() {
                    DataType::Float64 | DataType::Float32 => {
                        let value = |i: usize| match column.data_type() {
                            DataType::Float64 => column.as_primitive::<Float64Type>().value(i),
                            _ => column.as_primitive::<Float32Type>().value(i) as f64,
                        };
                        for (i, row) in batch_rows.iter_mut().enumerate() {
                            row.push(if column.is_null(i) {
                                Cell::Null
                            } else {
                                Cell::Float(value(i))
                            });
                        }
                    }
                    _ => {
                        let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
                        for (i, row) in batch_rows.iter_mut().enumerate() {
                            row.push(if column.is_null(i) {
                                Cell::Null
                            } else {
                                Cell::Text(formatter.value(i).to_string())
                            });
                        }
                    }
                }
            }
            rows.extend(batch_rows);
        }
        Ok(Self { columns, rows })
    }
}

/// Compares the answers of the plain session (`expected`) and of partout (`actual`); returns
/// what differs.
fn compare_answers(check: Check, expected: &Answer, actual: &Answer) -> Result<(), String> {
    if expected.columns != actual.columns {
        return Err(format!(
            "columns differ: plain {:?}, partout {:?}",
            expected.columns, actual.columns
        ));
    }
    if expected.rows.len() != actual.rows.len() {
        return Err(format!(
            "row counts differ: plain {}, partout {}",
            expected.rows.len(),
            actual.rows.len()
        ));
    }
    if let Check::TiesOnKeys(keys) = check {
        let project = |row: &Row| -> Row { keys.iter().map(|&k| row[k].clone()).collect() };
        for (i, (e, a)) in expected.rows.iter().zip(&actual.rows).enumerate() {
            let (e, a) = (project(e), project(a));
            if !rows_match(&e, &a) {
                return Err(format!(
                    "ORDER BY keys (columns {keys:?}) differ at row {i}: plain {e:?}, partout {a:?}"
                ));
            }
        }
    }
    let sorted = |rows: &[Row]| {
        let mut rows = rows.to_vec();
        rows.sort_by(rows_cmp);
        rows
    };
    let (expected_rows, actual_rows) = match check {
        Check::InOrder => (expected.rows.clone(), actual.rows.clone()),
        Check::TiesOnKeys(_) => (sorted(&expected.rows), sorted(&actual.rows)),
    };
    for (i, (e, a)) in expected_rows.iter().zip(&actual_rows).enumerate() {
        if !rows_match(e, a) {
            let what = match check {
                Check::InOrder => "row",
                Check::TiesOnKeys(_) => "sorted row",
            };
            return Err(format!("{what} {i} differs: plain {e:?}, partout {a:?}"));
        }
    }
    Ok(())
}

/// Whether a line of an indented plan is DataFusion's hash `RepartitionExec`.
fn is_hash_repartition(line: &str) -> bool {
    line.trim_start()
        .starts_with("RepartitionExec: partitioning=Hash")
}

/// Whether a line of an indented plan is partout's repartition.
fn is_partout_repartition(line: &str) -> bool {
    line.trim_start().starts_with("PartoutRepartitionExec")
}

/// The operator names of an indented plan, partout's repartition read as DataFusion's.
fn plan_shape(plan: &str) -> Vec<String> {
    plan.lines()
        .map(|line| {
            let line = line.trim_start();
            let name = line.split(':').next().unwrap_or(line);
            if name == "PartoutRepartitionExec" {
                "RepartitionExec".to_owned()
            } else {
                name.to_owned()
            }
        })
        .collect()
}

/// Checks partout's plan against the plain one; returns what is wrong.
fn compare_plans(plain: &str, partout: &str) -> Result<(), String> {
    let plain_hash = plain.lines().filter(|l| is_hash_repartition(l)).count();
    let partout_hash = partout.lines().filter(|l| is_hash_repartition(l)).count();
    let partout_ours = partout
        .lines()
        .filter(|l| is_partout_repartition(l))
        .count();
    let mut problems = Vec::new();
    if partout_hash != 0 {
        problems.push(format!(
            "the partout plan still has {partout_hash} hash RepartitionExec"
        ));
    }
    if plain_hash > 0 && partout_ours == 0 {
        problems.push(format!(
            "the plain plan has {plain_hash} hash RepartitionExec but the partout plan no \
             PartoutRepartitionExec"
        ));
    } else if partout_ours != plain_hash {
        problems.push(format!(
            "the plain plan has {plain_hash} hash RepartitionExec, the partout plan \
             {partout_ours} PartoutRepartitionExec"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let shape = if plan_shape(plain) == plan_shape(partout) {
        "the plans have the same shape"
    } else {
        "the plans differ in shape"
    };
    Err(format!(
        "{}; {shape}\n--- plain plan:\n{plain}--- partout plan:\n{partout}",
        problems.join("; ")
    ))
}

/// Runs every query in both sessions for `target_partitions`; appends failures to `failures`.
/// `current` names the query being run, for the timeout's message.
async fn check_target_partitions(
    target_partitions: usize,
    failures: &mut Vec<String>,
    current: &mut String,
) {
    let plain = plain_context(target_partitions);
    let partout = partout_context(target_partitions);
    for (n, check) in (1..=22).zip(CHECKS) {
        let what = format!("q{n} with target_partitions={target_partitions}");
        current.clone_from(&what);
        let sql = query(n);
        let started = Instant::now();
        let expected = match run(&plain, &sql).await {
            Ok(result) => result,
            Err(e) => {
                failures.push(format!("{what}: the plain session failed: {e}"));
                continue;
            }
        };
        let plain_time = started.elapsed();
        let started = Instant::now();
        let actual = match run(&partout, &sql).await {
            Ok(result) => result,
            Err(e) => {
                failures.push(format!("{what}: the partout session failed: {e}"));
                continue;
            }
        };
        let partout_time = started.elapsed();
        println!(
            "{what}: {} rows, plain {plain_time:.2?}, partout {partout_time:.2?}",
            expected.1.rows.len()
        );
        if let Err(problem) = compare_answers(check, &expected.1, &actual.1) {
            failures.push(format!("{what}: answers differ: {problem}"));
        }
        if let Err(problem) = compare_plans(&expected.0, &actual.0) {
            failures.push(format!("{what}: plans: {problem}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_answers_and_plans_match_datafusion() {
    let started = Instant::now();
    let rows: usize = tables()
        .iter()
        .map(|t| t.batches.iter().map(RecordBatch::num_rows).sum::<usize>())
        .sum();
    println!(
        "generated TPC-H SF {SCALE_FACTOR}: {rows} rows in {:.2?}",
        started.elapsed()
    );
    let mut failures = Vec::new();
    let mut current = String::new();
    let run = async {
        for target_partitions in TARGET_PARTITIONS {
            check_target_partitions(target_partitions, &mut failures, &mut current).await;
        }
    };
    if tokio::time::timeout(TIMEOUT, run).await.is_err() {
        failures.push(format!(
            "{current}: timed out: the whole run took more than {TIMEOUT:?}"
        ));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
