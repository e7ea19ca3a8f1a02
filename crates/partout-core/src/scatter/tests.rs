//! The scatter dispatch's unit tests, which also run under Miri: nested and dictionary
//! columns moved by a plan and compared with arrow's `take`, planning and moving in one
//! pass, and the nested fixture the buffers' tests share.

use super::*;
use arrow_array::types::{Int8Type, Int32Type, UInt16Type};
use arrow_array::{
    DictionaryArray, FixedSizeListArray, Int8Array, Int16Array, Int32Array, Int64Array,
    LargeListArray, ListArray, MapArray, StringArray, StringViewArray, StructArray, UInt16Array,
    UnionArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{Field, Fields, UnionFields};

/// Rows of the columns [`nested_columns`] builds.
pub(crate) const NESTED_ROWS: usize = 13;

/// Dictionary and nested columns of [`NESTED_ROWS`] rows, small enough for Miri: every one
/// a slice at a non-zero offset, with nulls at every level (rows, children, dictionary keys
/// and values), short and long strings.
pub(crate) fn nested_columns() -> Vec<ArrayRef> {
    const SKIP: usize = 2;
    let n = SKIP + NESTED_ROWS + 1;
    let nullable = |name: &str, data_type: DataType| Field::new(name, data_type, true);
    let every = |k: usize, r: usize| NullBuffer::from_iter((0..n).map(move |i| i % k != r));
    let text = |i: usize| match i % 4 {
        0 => String::new(),
        1 => "ab".repeat(i % 3),
        _ => format!("a value longer than twelve bytes, {i}"),
    };
    let strings = |len: usize| -> ArrayRef {
        Arc::new(StringArray::from_iter(
            (0..len).map(|i| (i % 5 != 3).then(|| text(i))),
        ))
    };
    let ints = |len: usize| -> ArrayRef {
        Arc::new(Int32Array::from_iter(
            (0..len).map(|i| (i % 4 != 2).then_some(i as i32 * 7 - 20)),
        ))
    };
    // Lengths 0 to 3, so some lists are empty.
    let lengths = |len: usize| (0..len).map(|i| (i * 5 + 1) % 4);
    let total = |len: usize| lengths(len).sum::<usize>();

    let dictionary: ArrayRef = Arc::new(
        DictionaryArray::<Int8Type>::try_new(
            Int8Array::from_iter((0..n).map(|i| (i % 6 != 4).then_some((i % 4) as i8))),
            Arc::new(StringArray::from(vec![
                Some("a"),
                None,
                Some("ccc"),
                Some("a dictionary value past twelve bytes"),
            ])),
        )
        .unwrap(),
    );
    let struct_fields = Fields::from(vec![
        nullable("a", DataType::Int32),
        nullable("b", DataType::Utf8),
    ]);
    let structs: ArrayRef = Arc::new(
        StructArray::try_new(struct_fields, vec![ints(n), strings(n)], Some(every(5, 1))).unwrap(),
    );
    let list: ArrayRef = Arc::new(
        ListArray::try_new(
            Arc::new(nullable("item", DataType::Int32)),
            OffsetBuffer::from_lengths(lengths(n)),
            ints(total(n)),
            Some(every(4, 3)),
        )
        .unwrap(),
    );
    let views: ArrayRef = Arc::new(StringViewArray::from_iter(
        (0..total(n)).map(|i| (i % 3 != 1).then(|| text(i))),
    ));
    let large_list: ArrayRef = Arc::new(
        LargeListArray::try_new(
            Arc::new(nullable("item", DataType::Utf8View)),
            OffsetBuffer::from_lengths(lengths(n)),
            views,
            Some(every(3, 0)),
        )
        .unwrap(),
    );
    let fixed_size_list: ArrayRef = Arc::new(
        FixedSizeListArray::try_new(
            Arc::new(nullable("item", DataType::Int16)),
            3,
            Arc::new(Int16Array::from_iter(
                (0..3 * n).map(|i| (i % 7 != 5).then_some(i as i16)),
            )),
            Some(every(4, 0)),
        )
        .unwrap(),
    );
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        nullable("value", DataType::Int64),
    ]);
    let map: ArrayRef = Arc::new(
        MapArray::try_new(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(entries.clone()),
                false,
            )),
            OffsetBuffer::from_lengths(lengths(n)),
            StructArray::try_new(
                entries,
                vec![
                    Arc::new(StringArray::from_iter_values((0..total(n)).map(text))),
                    Arc::new(Int64Array::from_iter(
                        (0..total(n)).map(|i| (i % 3 != 2).then_some(i as i64)),
                    )),
                ],
                None,
            )
            .unwrap(),
            Some(every(6, 2)),
            false,
        )
        .unwrap(),
    );
    let list_of_dictionaries: ArrayRef = Arc::new(
        ListArray::try_new(
            Arc::new(nullable(
                "item",
                DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8)),
            )),
            OffsetBuffer::from_lengths(lengths(n)),
            Arc::new(
                DictionaryArray::<UInt16Type>::try_new(
                    UInt16Array::from_iter(
                        (0..total(n)).map(|i| (i % 5 != 0).then_some((i % 3) as u16)),
                    ),
                    strings(3),
                )
                .unwrap(),
            ),
            None,
        )
        .unwrap(),
    );
    let union_fields = UnionFields::try_new(
        vec![0, 5],
        vec![
            nullable("i", DataType::Int32),
            nullable("s", DataType::Utf8),
        ],
    )
    .unwrap();
    let union: ArrayRef = Arc::new(
        UnionArray::try_new(
            union_fields,
            (0..n).map(|i| if i % 3 == 1 { 5 } else { 0 }).collect(),
            None,
            vec![ints(n), strings(n)],
        )
        .unwrap(),
    );
    let dictionary_of_ints: ArrayRef = Arc::new(
        DictionaryArray::<Int32Type>::try_new(
            Int32Array::from_iter((0..n).map(|i| (i % 5 != 1).then_some((i % 2) as i32))),
            Arc::new(Int64Array::from(vec![Some(-1), None])),
        )
        .unwrap(),
    );
    // Views of overlapping, out-of-order ranges of one child, some empty, one past the
    // rows' own values.
    let list_view: ArrayRef = Arc::new(
        arrow_array::ListViewArray::try_new(
            Arc::new(nullable("item", DataType::Utf8)),
            (0..n).map(|i| ((i * 7) % 11) as i32).collect(),
            (0..n).map(|i| (i % 4) as i32).collect(),
            strings(14),
            Some(every(5, 2)),
        )
        .unwrap(),
    );
    let large_list_view: ArrayRef = Arc::new(
        arrow_array::LargeListViewArray::try_new(
            Arc::new(nullable("item", DataType::Int32)),
            (0..n).map(|i| (n - 1 - i) as i64).collect(),
            (0..n).map(|i| (i % 2) as i64).collect(),
            ints(n),
            None,
        )
        .unwrap(),
    );
    // Each row points at its own value of its child, in a scrambled order.
    let dense_ids: Vec<i8> = (0..n).map(|i| if i % 3 == 1 { 5 } else { 0 }).collect();
    let counts = [
        dense_ids.iter().filter(|&&t| t == 0).count(),
        dense_ids.iter().filter(|&&t| t == 5).count(),
    ];
    let mut seen = [0usize; 2];
    let dense_offsets: Vec<i32> = dense_ids
        .iter()
        .map(|&t| {
            let c = usize::from(t == 5);
            seen[c] += 1;
            (counts[c] - seen[c]) as i32
        })
        .collect();
    let dense_union: ArrayRef = Arc::new(
        UnionArray::try_new(
            UnionFields::try_new(
                vec![0, 5],
                vec![
                    nullable("i", DataType::Int32),
                    nullable("s", DataType::Utf8),
                ],
            )
            .unwrap(),
            dense_ids.into(),
            Some(dense_offsets.into()),
            vec![ints(counts[0]), strings(counts[1])],
        )
        .unwrap(),
    );
    let run_ends: Vec<i32> = (1..=n as i32)
        .filter(|i| i % 3 != 1 || *i == n as i32)
        .collect();
    let runs: ArrayRef = Arc::new(
        arrow_array::RunArray::try_new(
            &Int32Array::from(run_ends.clone()),
            strings(run_ends.len()).as_ref(),
        )
        .unwrap(),
    );
    [
        list_view,
        large_list_view,
        dense_union,
        runs,
        dictionary,
        dictionary_of_ints,
        structs,
        list,
        large_list,
        fixed_size_list,
        map,
        list_of_dictionaries,
        union,
    ]
    .into_iter()
    .map(|column| column.slice(SKIP, NESTED_ROWS))
    .collect()
}

/// Partition ids for [`NESTED_ROWS`] rows over 4 destinations, none of them 2: one
/// destination stays empty.
pub(crate) fn ids_leaving_one_empty() -> Vec<u32> {
    (0..NESTED_ROWS as u32)
        .map(|i| [3, 0, 1, 0, 3, 3, 1][i as usize % 7])
        .collect()
}

/// The dictionary and nested kernels (the unsafe dictionary build, the derived child
/// orders) on sliced columns with nulls at every level, an empty destination and an empty
/// batch, against arrow's `take` by the plan's order.
#[test]
fn nested_and_dictionary_columns_move_like_take() {
    let ids = ids_leaving_one_empty();
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 4).unwrap();
    assert!(plan.range(2).is_empty());
    let mut empty = ScatterPlan::new();
    empty.build(&[], 4).unwrap();
    let mut scratch = ScatterScratch::new();
    for column in nested_columns() {
        let got = scatter_column(column.as_ref(), &plan, &mut scratch).unwrap();
        got.to_data().validate_full().unwrap();
        let indices = arrow_array::UInt32Array::from(plan.order().to_vec());
        let want = arrow_select::take::take(column.as_ref(), &indices, None).unwrap();
        assert_eq!(got.as_ref(), want.as_ref(), "{}", column.data_type());
        let none = scatter_column(column.slice(4, 0).as_ref(), &empty, &mut scratch).unwrap();
        assert_eq!(none.len(), 0, "{}", column.data_type());
        none.to_data().validate_full().unwrap();
    }
}

/// The fused paths (values moved while planning, with and without an order), small
/// enough for Miri.
#[test]
fn planning_and_moving_in_one_pass_matches_moving_by_the_order() {
    let ids: Vec<u32> = (0..50u32).map(|i| (i * 7 + i / 3) % 5).collect();
    let ints: ArrayRef = Arc::new(
        Int64Array::from_iter((0..60i64).map(|i| (i % 9 != 0).then_some(i * 3))).slice(10, 50),
    );
    let dense: ArrayRef = Arc::new(Int16Array::from_iter_values((0..50).map(|i| i as i16 - 20)));
    let text: ArrayRef = Arc::new(StringArray::from_iter(
        (0..50).map(|i| (i % 4 != 1).then(|| "x".repeat(i % 19))),
    ));
    for columns in [
        vec![dense.clone()],
        vec![ints.clone()],
        vec![text, ints, dense],
    ] {
        for fanout in [1, 4] {
            let mut plan = ScatterPlan::new();
            let mut scratch = ScatterScratch::new();
            let fused =
                plan_and_scatter(&mut plan, &ids, 5, fanout, &columns, &mut scratch).unwrap();
            let mut reference = ScatterPlan::new();
            reference.build_with_fanout(&ids, 5, fanout).unwrap();
            assert_eq!(plan.offsets(), reference.offsets());
            for (got, column) in fused.iter().zip(&columns) {
                let want = scatter_column(column.as_ref(), &reference, &mut scratch).unwrap();
                assert_eq!(got.as_ref(), want.as_ref());
            }
        }
    }
}

/// `compact_views` (what `Partitioner::with_compact_views` applies): a view column, sliced at
/// a non-zero offset, with nulls, inline and out-of-line values and data in several buffers,
/// keeps every value and null, and comes out with one data buffer holding exactly its
/// out-of-line values, in row order; other columns, an empty column and one of only inline
/// values pass through. Small enough for Miri.
#[test]
fn compacted_views_keep_their_values_back_to_back() {
    let text = |i: usize| match i % 3 {
        0 => "short".to_string(),
        _ => format!("an out-of-line value number {i}"),
    };
    let mut builder = arrow_array::builder::StringViewBuilder::new().with_fixed_block_size(64);
    for i in 0..40 {
        if i % 7 == 5 {
            builder.append_null();
        } else {
            builder.append_value(text(i));
        }
    }
    let whole = builder.finish();
    assert!(whole.data_buffers().len() > 2);
    let sliced: ArrayRef = Arc::new(whole.slice(3, 30));
    let compacted = append::compact_views(&sliced);
    assert_eq!(compacted.as_ref(), sliced.as_ref());
    let views = compacted.as_string_view();
    assert_eq!(views.data_buffers().len(), 1);
    let long: Vec<u8> = (0..views.len())
        .filter(|&i| views.is_valid(i) && views.value(i).len() > 12)
        .flat_map(|i| views.value(i).as_bytes().to_vec())
        .collect();
    assert_eq!(views.data_buffers()[0].as_slice(), long.as_slice());

    let inline: ArrayRef = Arc::new(StringViewArray::from(vec![Some("a"), None, Some("bc")]));
    assert_eq!(append::compact_views(&inline).as_ref(), inline.as_ref());
    let empty: ArrayRef = Arc::new(StringViewArray::from(Vec::<&str>::new()));
    assert_eq!(append::compact_views(&empty).len(), 0);
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
    assert!(Arc::ptr_eq(&append::compact_views(&ints), &ints));
}
