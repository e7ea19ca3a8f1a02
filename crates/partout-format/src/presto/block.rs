//! The tree of [`Block`]s the walk reads a page's columns into: its types only, each
//! encoding's payload among them, and how deep blocks may nest ([`Nesting`], [`Walk`]).
//!
//! ```text
//!  block  (types)  ◄─ each encoding's module: read (its payload, from the walk),
//!                                             to_array (its payload, as Arrow)
//!                  ◄─ walk (reads a block: dispatch to the encodings' reads)
//!                  ◄─ decode (a block as an array: dispatch to the encodings' to_array)
//! ```
//!
//! The encodings depend on this module alone; they reach the blocks nested in theirs through
//! the [`Walk`] and the [`Decode`] they are given, so nothing here or in them depends on the
//! dispatch.

use super::budget::Budget;
use super::corrupt;
use super::cursor::{Cursor, le_i32s};
use crate::{FormatError, Result};
use arrow_array::ArrayRef;
use arrow_buffer::NullBuffer;
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
    Fixed(Fixed<'a>),
    Variable(Variable<'a>),
    Rle(Rle<'a>),
    Dictionary(Dictionary<'a>),
    Array(List<'a>),
    Map(Map<'a>),
    Row(Row<'a>),
}

/// A fixed-width block.
pub(super) struct Fixed<'a> {
    /// Bytes per value: 1, 2, 4, 8 or 16.
    pub(super) width: usize,
    pub(super) nulls: Option<NullBuffer>,
    /// The non-null rows' values, packed.
    pub(super) values: &'a [u8],
}

impl Fixed<'_> {
    pub(super) fn encoding(&self) -> &'static str {
        super::FIXED[self.width.trailing_zeros() as usize]
    }
}

/// A VARIABLE_WIDTH block.
pub(super) struct Variable<'a> {
    /// `rows + 1` offsets into `data`, from 0 up to its length.
    pub(super) offsets: Vec<i32>,
    pub(super) nulls: Option<NullBuffer>,
    pub(super) data: &'a [u8],
}

/// An RLE block.
pub(super) struct Rle<'a> {
    /// The one row repeated.
    pub(super) value: Box<Block<'a>>,
}

/// A DICTIONARY block.
pub(super) struct Dictionary<'a> {
    pub(super) dictionary: Box<Block<'a>>,
    /// One little-endian `i32` per row, each an entry of the dictionary.
    pub(super) ids: &'a [u8],
}

impl Dictionary<'_> {
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        // Checked non-negative when read.
        le_i32s(self.ids).map(|id| id as u32)
    }
}

/// An ARRAY block.
pub(super) struct List<'a> {
    pub(super) elements: Box<Block<'a>>,
    /// `rows + 1` offsets into the elements, from 0 up to their count.
    pub(super) offsets: Vec<i32>,
    pub(super) nulls: Option<NullBuffer>,
}

/// A MAP block.
pub(super) struct Map<'a> {
    pub(super) keys: Box<Block<'a>>,
    pub(super) values: Box<Block<'a>>,
    /// `rows + 1` offsets into the entries, from 0 up to their count.
    pub(super) offsets: Vec<i32>,
    pub(super) nulls: Option<NullBuffer>,
}

/// A ROW block.
pub(super) struct Row<'a> {
    /// Each field's values for the non-null rows.
    pub(super) fields: Vec<Block<'a>>,
    pub(super) nulls: Option<NullBuffer>,
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
    pub(super) max: usize,
    pub(super) limit: String,
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

/// Reads a block at `depth` (1 at a column's top), of at most `limit` rows, and everything
/// nested in it: the walk's dispatch (`walk::read_at`).
pub(super) type ReadAt = for<'a> fn(&mut Cursor<'a>, &Nesting, usize, usize) -> Result<Block<'a>>;

/// A block, read by the walk, as an array of the type given, its copies paid from the budget:
/// the decoder's dispatch (`decode::array`), through which an encoding decodes the blocks
/// nested in its own.
pub(super) type Decode = fn(Block<'_>, &DataType, &mut Budget) -> Result<ArrayRef>;

/// Where a block sits in the walk, for reading the blocks nested in it.
#[derive(Clone, Copy)]
pub(super) struct Walk<'n> {
    pub(super) nesting: &'n Nesting,
    /// Blocks from the column's top down to this one (1 at the top).
    pub(super) depth: usize,
    /// The walk itself.
    pub(super) read: ReadAt,
}

impl Walk<'_> {
    /// Reads a block nested in this one, of at most `limit` rows.
    pub(super) fn child<'a>(self, c: &mut Cursor<'a>, limit: usize) -> Result<Block<'a>> {
        (self.read)(c, self.nesting, self.depth + 1, limit)
    }
}

/// A block of encoding `name` at byte `at` for a column of a type it cannot hold.
pub(super) fn mismatch(name: &str, data_type: &DataType, at: usize) -> FormatError {
    corrupt(format!(
        "a {name} block at byte {at} cannot hold {data_type}"
    ))
}
