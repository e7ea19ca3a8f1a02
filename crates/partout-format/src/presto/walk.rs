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

use super::block::{Block, Nesting, Walk};
use super::cursor::Cursor;
use super::{array, corrupt, dictionary, fixed, map, rle, row, variable};
use crate::Result;

/// Reads a column's block, of at most `limit` rows, and everything nested in it.
pub(super) fn read<'a>(c: &mut Cursor<'a>, nesting: &Nesting, limit: usize) -> Result<Block<'a>> {
    read_at(c, nesting, 1, limit)
}

/// Reads a block `depth` blocks deep in its column (see [`ReadAt`](super::block::ReadAt)).
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
    let walk = Walk {
        nesting,
        depth,
        read: read_at,
    };
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
