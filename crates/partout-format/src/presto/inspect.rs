//! The structure of Presto pages, for `partout inspect`: the decoder's own walk, without a
//! schema and without building arrays.

use super::block::{Block, Nesting};
use super::page::Page;
use super::{CHECKSUMMED, COMPRESSED};
use crate::Result;

/// One page, as `partout inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageInfo {
    /// Where the page starts in the input.
    pub offset: usize,
    /// Rows.
    pub rows: usize,
    /// Whether the body is LZ4-compressed.
    pub compressed: bool,
    /// Whether the header carries a checksum.
    pub checksummed: bool,
    /// Body bytes before compression.
    pub uncompressed_size: usize,
    /// Body bytes as sent.
    pub size: usize,
    /// The top-level blocks.
    pub columns: Vec<BlockInfo>,
}

/// One block, as `partout inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockInfo {
    /// The encoding name.
    pub encoding: String,
    /// Rows (positions).
    pub rows: usize,
    /// Bytes of the block, name included.
    pub bytes: usize,
    /// Nested blocks.
    pub children: Vec<BlockInfo>,
}

impl From<Block<'_>> for BlockInfo {
    fn from(block: Block<'_>) -> Self {
        Self {
            encoding: block.encoding().to_string(),
            rows: block.rows,
            bytes: block.bytes,
            children: block.into_children().into_iter().map(Self::from).collect(),
        }
    }
}

/// Walks every page of `bytes` and every block in them, checking them as [`decode_page`]
/// does, without a schema and without building arrays. Blocks may nest at most 64 deep.
///
/// # Errors
/// [`FormatError::Corrupt`] for anything [`decode_page`] refuses whatever the schema: the
/// framing, sizes, checksums, counts, offsets and ids, and blocks nested more than 64 deep.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch};
/// use partout_format::presto::{PageOptions, encode_page, inspect_pages};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![1, 2])) as _)])
///     .unwrap();
/// let mut pages = Vec::new();
/// encode_page(&batch, PageOptions::default(), &mut pages).unwrap();
/// let info = inspect_pages(&pages).unwrap();
/// assert_eq!(info[0].rows, 2);
/// assert!(info[0].checksummed);
/// assert_eq!(info[0].columns[0].encoding, "LONG_ARRAY");
/// ```
///
/// [`decode_page`]: super::decode_page
/// [`FormatError::Corrupt`]: crate::FormatError::Corrupt
pub fn inspect_pages(bytes: &[u8]) -> Result<Vec<PageInfo>> {
    let mut at = 0;
    let mut pages = Vec::new();
    while at < bytes.len() {
        let page = Page::open(bytes, at)?;
        let columns = page
            .blocks(None, |_| Nesting::without_schema())?
            .into_iter()
            .map(BlockInfo::from)
            .collect();
        pages.push(PageInfo {
            offset: at,
            rows: page.rows,
            compressed: page.markers & COMPRESSED != 0,
            checksummed: page.markers & CHECKSUMMED != 0,
            uncompressed_size: page.uncompressed,
            size: page.size,
            columns,
        });
        at += page.len();
    }
    Ok(pages)
}
