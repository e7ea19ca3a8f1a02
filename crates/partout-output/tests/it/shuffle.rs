//! A worker's shuffle file read back through its index, and damage to the index named.

use arrow_array::{Int64Array, RecordBatch};

/// Rows `start..start + len` of the test kit's sample table (`id = i`, and columns of other
/// types).
fn rows(start: usize, len: usize) -> RecordBatch {
    partout_testkit::sample_batch(start, len)
}

#[test]
fn shuffle_files_read_back_through_their_index_and_damage_is_named() {
    use partout_exchange::BatchSink;
    use partout_format::ipc::{Compression, decode_stream};
    use partout_output::{ShuffleFile, read_shuffle_index};
    let dir = tempfile::tempdir().unwrap();
    let schema = rows(0, 1).schema();
    let mut shuffle = ShuffleFile::try_new(
        dir.path(),
        "w0",
        schema,
        3,
        partout_format::Encoding::ipc(Compression::None),
    )
    .unwrap();
    // Destination 2 twice, 0 once, 1 never.
    shuffle.write_batch(2, &rows(0, 10)).unwrap();
    shuffle.write_batch(0, &rows(10, 5)).unwrap();
    shuffle.write_batch(2, &rows(15, 7)).unwrap();
    assert!(
        matches!(
            shuffle.write_batch(3, &rows(0, 1)),
            Err(partout_exchange::WriterError::NoSuchDestination {
                destination: 3,
                destinations: 3
            })
        ),
        "no destination 3"
    );
    let mut ends = vec![0u64; 3];
    shuffle.finish(&mut ends).unwrap();
    let data = std::fs::read(dir.path().join("w0.data")).unwrap();
    let index = dir.path().join("w0.index");
    let (destinations, ranges) = read_shuffle_index(&index, data.len() as u64).unwrap();
    assert_eq!(destinations, 3);
    let mut streams = vec![Vec::new(); 3];
    for r in &ranges {
        streams[r.destination as usize]
            .extend_from_slice(&data[r.offset as usize..(r.offset + r.len) as usize]);
    }
    let ids = |stream: &[u8]| -> Vec<i64> {
        decode_stream(stream)
            .unwrap()
            .1
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                c.values().to_vec()
            })
            .collect()
    };
    assert_eq!(ids(&streams[2]), (0..10).chain(15..22).collect::<Vec<_>>());
    assert_eq!(ids(&streams[0]), (10..15).collect::<Vec<_>>());
    assert!(streams[1].is_empty());
    assert!(ends[0] > 0 && ends[1] == 0 && ends[2] > 0, "{ends:?}");
    let rows_listed: u64 = ranges.iter().map(|r| r.rows).sum();
    assert_eq!(rows_listed, 22);

    // Damage: each named.
    let good = std::fs::read(&index).unwrap();
    let damaged = dir.path().join("damaged.index");
    let check = |bytes: &[u8], data_len: u64, want: &str| {
        std::fs::write(&damaged, bytes).unwrap();
        let err = read_shuffle_index(&damaged, data_len)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(want) && err.contains("damaged.index"),
            "{want}: {err}"
        );
    };
    let mut magic = good.clone();
    magic[0] = b'X';
    check(&magic, data.len() as u64, "no PTSHUF01 header");
    check(&good[..good.len() - 1], data.len() as u64, "ranges need");
    let mut destination = good.clone();
    destination[20] = 9;
    check(&destination, data.len() as u64, "of destination 9 of 3");
    check(&good, data.len() as u64 - 1, "passes the data");
    let mut overlap = good.clone();
    overlap[20 + 28 + 4..20 + 28 + 12].copy_from_slice(&0u64.to_le_bytes());
    check(&overlap, data.len() as u64, "overlaps");
}
