//! The block walk that decoding and inspection share: it reads one block and everything nested
//! in it into a tree of [`Block`]s, checking every count, offset, id and length against the
//! bytes and against each other, and how deep blocks nest.
//!
//! ```text
//!  page body ─ walk ─► Block tree (checked, values still in the body) ─┬─ decode: Arrow arrays
//!                                                                      └─ inspect: BlockInfo
//! ```
//!
//! Both consumers see the same tree, so a page that decodes also inspects, and a check cannot
//! be in one and missing from the other.

use super::cursor::Cursor;
use super::{array, corrupt, dictionary, fixed, map, rle, row, variable};
use crate::Result;
use arrow_schema::{DataType, Field};

/// Most rows a block may hold: an RLE block claims its row count in four bytes, and a
/// corrupt one must not become a huge allocation.
pub(super) const MAX_ROWS: usize = 1 << 22;

/// How deep blocks may nest when there is no schema to say (`inspect_pages`).
pub(super) const MAX_INSPECT_DEPTH: usize = 64;

/// Blocks that may wrap one schema level's block: an RLE block and a DICTIONARY block, in
/// either order. Presto's Java blocks make both orders (an RLE value may be a one-row region of
/// a dictionary block; a dictionary compacted from an RLE block is an RLE block), but never an
/// RLE directly in an RLE (its constructor unwraps one). partout writes a DICTIONARY around an
/// RLE of nulls (a dictionary of all-null values).
const WRAPPERS_PER_LEVEL: usize = 2;

/// One block, read and checked; its values are still the body's bytes.
pub(super) struct Block<'a> {
    /// Where the block starts in the input (the length of its name).
    pub at: usize,
    /// Bytes of the block, name included.
    pub bytes: usize,
    /// Rows (positions).
    pub rows: usize,
    /// The encoding and what it holds.
    pub kind: Kind<'a>,
}

/// A block's encoding and payload.
pub(super) enum Kind<'a> {
    Fixed(fixed::Fixed<'a>),
    Variable(variable::Variable<'a>),
    Rle(rle::Rle<'a>),
    Dictionary(dictionary::Dictionary<'a>),
    Array(array::List<'a>),
    Map(map::Map<'a>),
    Row(row::Row<'a>),
}

impl<'a> Block<'a> {
    /// The encoding name, as on the wire.
    pub(super) fn encoding(&self) -> &'static str {
        match &self.kind {
            Kind::Fixed(f) => f.encoding(),
            Kind::Variable(_) => "VARIABLE_WIDTH",
            Kind::Rle(_) => "RLE",
            Kind::Dictionary(_) => "DICTIONARY",
            Kind::Array(_) => "ARRAY",
            Kind::Map(_) => "MAP",
            Kind::Row(_) => "ROW",
        }
    }

    /// The nested blocks, in the order the page holds them.
    pub(super) fn into_children(self) -> Vec<Block<'a>> {
        match self.kind {
            Kind::Fixed(_) | Kind::Variable(_) => Vec::new(),
            Kind::Rle(r) => vec![*r.value],
            Kind::Dictionary(d) => vec![*d.dictionary],
            Kind::Array(a) => vec![*a.elements],
            Kind::Map(m) => vec![*m.keys, *m.values],
            Kind::Row(r) => r.fields,
        }
    }
}

/// How deep one column's blocks may nest, and what says so (for messages).
pub(super) struct Nesting {
    max: usize,
    limit: String,
}

impl Nesting {
    /// As deep as column `index` of a schema allows: each level of its type (a list, map,
    /// struct, dictionary or anything else) one block and [`WRAPPERS_PER_LEVEL`] wrappers.
    pub(super) fn of_column(index: usize, field: &Field) -> Self {
        let levels = levels(field.data_type());
        let max = levels * (1 + WRAPPERS_PER_LEVEL);
        let plural = if levels == 1 { "" } else { "s" };
        Self {
            max,
            limit: format!(
                "column {index} ({}, {levels} level{plural}) allows {max}",
                field.data_type()
            ),
        }
    }

    /// [`MAX_INSPECT_DEPTH`], for a walk without a schema.
    pub(super) fn without_schema() -> Self {
        Self {
            max: MAX_INSPECT_DEPTH,
            limit: format!("without a schema, {MAX_INSPECT_DEPTH} are allowed"),
        }
    }
}

/// The levels of `data_type` on its deepest path; a map's entries are one level with their
/// map, as Presto's MAP block holds the keys and values directly.
fn levels(data_type: &DataType) -> usize {
    let below = match data_type {
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::ListView(item)
        | DataType::LargeListView(item) => levels(item.data_type()),
        DataType::RunEndEncoded(_, values) => levels(values.data_type()),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) => kv.iter().map(|f| levels(f.data_type())).max().unwrap_or(0),
            other => levels(other),
        },
        DataType::Struct(fields) => fields
            .iter()
            .map(|f| levels(f.data_type()))
            .max()
            .unwrap_or(0),
        DataType::Dictionary(_, value) => levels(value),
        _ => 0,
    };
    1 + below
}

/// Where a block sits in the walk, for reading the blocks nested in it.
#[derive(Clone, Copy)]
pub(super) struct Walk<'n> {
    nesting: &'n Nesting,
    /// Blocks from the column's top down to this one (1 at the top).
    depth: usize,
}

impl Walk<'_> {
    /// Reads a block nested in this one, of at most `limit` rows.
    pub(super) fn child<'a>(self, c: &mut Cursor<'a>, limit: usize) -> Result<Block<'a>> {
        read_at(c, self.nesting, self.depth + 1, limit)
    }
}

/// Reads a column's block, of at most `limit` rows, and everything nested in it.
pub(super) fn read<'a>(c: &mut Cursor<'a>, nesting: &Nesting, limit: usize) -> Result<Block<'a>> {
    read_at(c, nesting, 1, limit)
}

fn read_at<'a>(
    c: &mut Cursor<'a>,
    nesting: &Nesting,
    depth: usize,
    limit: usize,
) -> Result<Block<'a>> {
    let at = c.at();
    let name = c.name()?;
    // Checked before reading anything nested: the walk recurses once per level, so this
    // bounds its stack whatever the page says.
    if depth > nesting.max {
        return Err(corrupt(format!(
            "the {name} block at byte {at} is nested {depth} blocks deep; {}",
            nesting.limit
        )));
    }
    let walk = Walk { nesting, depth };
    let (rows, kind) = match name {
        "RLE" => rle::read(c, at, limit, walk)?,
        "DICTIONARY" => dictionary::read(c, at, limit, walk)?,
        "BYTE_ARRAY" | "SHORT_ARRAY" | "INT_ARRAY" | "LONG_ARRAY" | "INT128_ARRAY" => {
            fixed::read(c, name, limit)?
        }
        "VARIABLE_WIDTH" => variable::read(c, at, limit)?,
        "ARRAY" => array::read(c, limit, walk)?,
        "MAP" => map::read(c, at, limit, walk)?,
        "ROW" => row::read(c, at, limit, walk)?,
        other => return Err(corrupt(format!("unknown encoding {other:?} at byte {at}"))),
    };
    Ok(Block {
        at,
        bytes: c.at() - at,
        rows,
        kind,
    })
}
