//! The committed results (`bench/results`) still draw: every figure the README and
//! BENCHMARKS.md show, each an SVG of its own.

use std::path::Path;
use std::process::Command;

#[test]
fn the_committed_results_draw_every_figure() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_partout-plots"))
        .arg(&results)
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for figure in ["writer", "scatter", "files", "cluster", "partition_by"] {
        let path = out.path().join(format!("{figure}.svg"));
        let svg = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{figure}: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.contains("</svg>"),
            "{figure}"
        );
    }
}
