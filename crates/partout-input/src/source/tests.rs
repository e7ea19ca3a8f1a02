//! The readers of a store's objects against the bytes they hold (object_store's in-memory
//! store: no HTTP here; the jobs' tests read from a real S3 server).

use super::chunks::Chunk;
use super::*;
use object_store::memory::InMemory;
use object_store::{ObjectStoreExt, PutPayload};
use proptest::prelude::*;
use std::io::Cursor;

/// An object holding `bytes`, listed as `size` bytes (its length when `None`).
fn object(bytes: &[u8], size: Option<u64>) -> Arc<StoreObject> {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let path = ObjectPath::from("in/data.bin");
    let (put, payload) = (store.clone(), PutPayload::from(bytes.to_vec()));
    let at = path.clone();
    store::run(async move { put.put(&at, payload).await })
        .unwrap()
        .unwrap();
    Arc::new(StoreObject {
        store,
        path,
        url: "memory://in/data.bin".into(),
        size: size.unwrap_or(bytes.len() as u64),
    })
}

#[derive(Debug, Clone)]
enum Step {
    Read(usize),
    Seek(SeekFrom),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..1500).prop_map(Step::Read),
        (0u64..5000).prop_map(|at| Step::Seek(SeekFrom::Start(at))),
        (-3000i64..3000).prop_map(|by| Step::Seek(SeekFrom::Current(by))),
        (-5000i64..10).prop_map(|by| Step::Seek(SeekFrom::End(by))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever seeks and reads, a ranged reader gives what a cursor over the bytes gives.
    #[test]
    fn a_ranged_reader_reads_what_the_object_holds(
        bytes in prop::collection::vec(any::<u8>(), 0..4000),
        window in 1u64..700,
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let mut reader = RangedReader::new(object(&bytes, None), window);
        let mut oracle = Cursor::new(bytes.as_slice());
        for step in steps {
            match step {
                Step::Read(n) => {
                    let (mut got, mut want) = (vec![0u8; n], vec![0u8; n]);
                    let got_n = read_fully(&mut reader, &mut got).unwrap();
                    let want_n = read_fully(&mut oracle, &mut want).unwrap();
                    prop_assert_eq!(&got[..got_n], &want[..want_n]);
                }
                Step::Seek(to) => {
                    let got = reader.seek(to).ok();
                    let want = oracle.seek(to).ok();
                    prop_assert_eq!(got, want);
                }
            }
        }
    }

    /// Column chunks read as a Parquet reader reads them (a header from an offset on, then
    /// a page's bytes) give the object's bytes, and hold at most one window a chunk of the
    /// row group being read: the group's share in all, each window at least the least one or
    /// the page asked when it is larger.
    #[test]
    fn column_chunks_give_the_bytes_asked_within_their_windows(
        bytes in prop::collection::vec(any::<u8>(), 64..6000),
        cuts in prop::collection::vec(1usize..6000, 1..12),
        window in 8u64..400,
        reads in prop::collection::vec((any::<prop::sample::Index>(), 0usize..300, any::<bool>()), 1..60),
    ) {
        let len = bytes.len();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % len).filter(|&c| c > 0).collect();
        cuts.extend([0, len]);
        cuts.sort_unstable();
        cuts.dedup();
        // Chunks between the cuts, three to a row group.
        let chunks: Vec<Chunk> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| Chunk { range: w[0] as u64..w[1] as u64, group: i / 3 })
            .collect();
        let groups = chunks.last().map_or(0, |c| c.group + 1);
        let ranges: Vec<Range<u64>> = chunks.iter().map(|c| c.range.clone()).collect();
        let reader = ParquetBytes::Store(StoreChunks::of(
            object(&bytes, None),
            chunks,
            3 * window,
            8,
            (0..groups).collect(),
        ));
        let mut largest = 0u64;
        for (at, n, as_read) in reads {
            let chunk = &ranges[at.index(ranges.len())];
            let start = chunk.start + (n as u64 % (chunk.end - chunk.start));
            let want_len = (n as u64).min(chunk.end - start) as usize;
            let want = &bytes[start as usize..start as usize + want_len];
            if as_read {
                let mut read = reader.get_read(start).unwrap();
                let mut got = vec![0u8; want_len];
                read.read_exact(&mut got).unwrap();
                prop_assert_eq!(&got[..], want);
            } else {
                let got = reader.get_bytes(start, want_len).unwrap();
                prop_assert_eq!(&got[..], want);
            }
            largest = largest.max(want_len as u64);
            let ParquetBytes::Store(store) = &reader else { unreachable!() };
            let held = store.inner.held.lock().unwrap();
            let total: u64 = held.windows.iter().map(|(_, _, b)| b.len() as u64).sum();
            prop_assert!(held.windows.len() <= 3);
            prop_assert!(total <= 3 * window + 3 * (8 + largest), "{} bytes held", total);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Ranges got together — those that follow one another in one request — are each the
    /// bytes asked, in the order asked.
    #[test]
    fn ranges_got_together_are_each_the_bytes_asked(
        bytes in prop::collection::vec(any::<u8>(), 1..3000),
        cuts in prop::collection::vec((0usize..3000, 0usize..400, any::<bool>()), 0..20),
    ) {
        let len = bytes.len() as u64;
        // Some ranges follow the one before them, others start anywhere.
        let mut ranges: Vec<Range<u64>> = Vec::new();
        for (at, n, follow) in cuts {
            let start = match (follow, ranges.last()) {
                (true, Some(last)) => last.end,
                _ => at as u64 % len,
            };
            ranges.push(start..(start + n as u64).min(len));
        }
        let got = object(&bytes, None).get_all(ranges.clone()).unwrap();
        prop_assert_eq!(got.len(), ranges.len());
        for (range, got) in ranges.iter().zip(got) {
            prop_assert_eq!(&got[..], &bytes[range.start as usize..range.end as usize]);
        }
    }
}

/// Reads until `buf` is full or the reader ends.
fn read_fully(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[test]
fn an_object_shorter_than_listed_is_an_error_naming_it() {
    let short = object(b"0123456789", Some(20));
    let e = short.get(5..20).unwrap_err().to_string();
    assert!(e.contains("memory://in/data.bin"), "{e}");
    let mut reader = RangedReader::new(short, 4);
    reader.seek(SeekFrom::Start(8)).unwrap();
    let mut buf = [0u8; 8];
    assert!(read_fully(&mut reader, &mut buf).is_err());
}

#[test]
fn a_range_past_the_object_is_refused_before_it_is_asked() {
    let object = object(b"0123456789", None);
    let e = object.get(4..11).unwrap_err().to_string();
    assert!(e.contains("bytes 4..11") && e.contains("holds 10"), "{e}");
    let chunks = ParquetBytes::Store(StoreChunks::of(
        object,
        vec![Chunk {
            range: 0..10,
            group: 0,
        }],
        4,
        4,
        vec![0],
    ));
    assert!(chunks.get_bytes(8, 5).is_err());
}

#[test]
fn entering_a_row_group_gets_the_next_one_to_be_read_ahead() {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
    // Row groups 0, 1 and 2, two chunks each; read in the order 2, 0 (1 is another frame's).
    let chunks: Vec<Chunk> = (0..6u64)
        .map(|c| Chunk {
            range: c * 600..(c + 1) * 600,
            group: c as usize / 2,
        })
        .collect();
    let reader = StoreChunks::of(object(&bytes, None), chunks, 10_000, 8, vec![2, 0]);
    let chunks = &reader.inner;
    let ahead = |chunks: &Chunks| chunks.held.lock().unwrap().ahead_group();
    assert_eq!(&chunks.bytes(2450, 100).unwrap()[..], &bytes[2450..2550]);
    assert_eq!(
        ahead(chunks),
        Some(0),
        "entering group 2, group 0 is got ahead"
    );
    assert_eq!(&chunks.bytes(700, 300).unwrap()[..], &bytes[700..1000]);
    assert_eq!(ahead(chunks), None, "group 0 is the last to be read");
}
