//! Results as the benchmarks print them, for the tests of the figures and of their drawing.

use serde_json::Value;

/// A line of `partout bench writer --json`: `contender` writing lineitem SF 0.1 (600,000
/// rows) with `codec` into `n` destinations in `seconds` on `cpu`.
pub(crate) fn writer_line(contender: &str, codec: &str, n: u32, seconds: f64, cpu: &str) -> String {
    serde_json::json!({
        "suite": "writer", "contender": contender, "codec": codec, "sf": 0.1,
        "partitions": n, "rows": 600_000, "seconds": seconds, "cpu": cpu,
    })
    .to_string()
}

/// A contender of a case: its name and (seconds, MiB, runs), `None` when recorded as null.
type Contender<'a> = (&'a str, Option<(f64, f64, u64)>);

/// A `bench/partition_by.py --json` result: per case, its name, distinct values and
/// contenders.
pub(crate) fn partition_by_result(cases: &[(&str, u64, &[Contender])]) -> Value {
    let results: Vec<Value> = cases
        .iter()
        .map(|(case, values, contenders)| {
            let contenders: serde_json::Map<String, Value> = contenders
                .iter()
                .map(|(name, measured)| {
                    let summary = measured.map_or(Value::Null, |(s, mib, runs)| {
                        serde_json::json!({
                            "median_s": s, "peak_rss_mib": mib, "runs": runs,
                            "same": true, "values": values, "files": values,
                            "directories": values, "bytes": 1000,
                        })
                    });
                    (name.to_string(), summary)
                })
                .collect();
            serde_json::json!({"case": case, "columns": ["l_key"], "contenders": contenders})
        })
        .collect();
    serde_json::json!({
        "machine": {"cpu": "CPU X", "cpus": 2}, "input": "lineitem-sf1.parquet",
        "threads": 2, "rounds": 3, "results": results,
    })
}

pub(crate) fn partition_by_sample() -> Value {
    partition_by_result(&[
        (
            "4 values",
            4,
            &[
                ("partout", Some((3.3, 112.0, 3))),
                ("duckdb", Some((2.1, 1900.0, 3))),
                ("pyarrow", Some((3.2, 1200.0, 1))),
                ("spark", Some((9.0, 9.0, 3))),
            ],
        ),
        (
            "~2,500 values",
            2526,
            &[
                ("partout", Some((6.1, 106.0, 3))),
                ("duckdb", None),
                ("pyarrow", Some((104.0, 9200.0, 1))),
            ],
        ),
        (
            "10,000 values",
            10_000,
            &[
                ("partout", Some((7.9, 108.0, 3))),
                ("duckdb", Some((10.6, 3200.0, 3))),
            ],
        ),
    ])
}
