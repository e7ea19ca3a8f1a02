//! Arrow IPC streams per destination, sans-IO.
//!
//! ```text
//!  IpcStreamEncoder::try_new(schema) ─ encode(batch) ─► [schema][dictionaries][batch]
//!                                     ─ encode(batch) ─► [dictionaries][batch]
//!                                     ─ finish()      ─► [end of stream]
//! ```
//!
//! Each call appends the bytes it produced to a caller's buffer: the encoder does no IO and
//! holds nothing between calls but the stream's state (schema sent, dictionaries sent). Body
//! compression is the IPC format's own (LZ4_FRAME or ZSTD, per buffer), so any Arrow reader
//! decodes it.
//!
//! Modules: `encode` (the stream encoders, and the compaction of view columns), `check`
//! (decoding an untrusted stream after checking everything arrow-ipc's reader trusts),
//! [`frame`] (the messages' length prefixes, and the bounds of compressed buffers).
//!
//! View columns (Utf8View, BinaryView) of a destination's slice still point into the whole
//! input batch's data buffers; encoding them as they are would write those buffers whole into
//! every destination's stream. The encoder compacts a view column whose buffers hold more than
//! the bytes its rows reference, keeping the type.

use crate::Result;
use arrow_ipc::CompressionType;
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::DataType;

mod check;
mod encode;
pub mod frame;
mod lz4;
pub mod slices;

pub use check::{MessageCheck, convert_schema, decode_stream};
pub use encode::IpcStreamEncoder;
pub(crate) use encode::SharedIpcStreams;
pub use lz4::Lz4Frames;

/// The body compression of IPC streams, and its ZSTD level: the workspace's one vocabulary
/// ([`crate::spec`]); IPC takes every compression but Snappy.
pub use crate::spec::{Compression, ZstdLevel};

/// The IPC writing options of every stream partout writes: arrow-ipc's defaults, with
/// `compression` (and its ZSTD level).
///
/// # Errors
/// [`FormatError::InvalidArgument`](crate::FormatError::InvalidArgument) for Snappy, which
/// Arrow IPC does not take; when arrow-ipc was built without the codec.
pub fn ipc_options(compression: Compression) -> Result<IpcWriteOptions> {
    let options = IpcWriteOptions::default();
    Ok(match compression {
        Compression::None => options,
        Compression::Lz4 => options.try_with_compression(Some(CompressionType::LZ4_FRAME))?,
        Compression::Snappy => {
            return Err(crate::FormatError::InvalidArgument(
                "Arrow IPC buffers are compressed with LZ4 or ZSTD, not Snappy".into(),
            ));
        }
        Compression::Zstd(level) => options
            .try_with_compression(Some(CompressionType::ZSTD))?
            .try_with_compression_level(Some(level.get()))?,
    })
}

/// Whether `data_type` or a type nested in it at any depth (list items, map entries, struct
/// and union fields, dictionary values, run ends and run values) is one `is` picks.
///
/// ```
/// use arrow_schema::{DataType, Field};
/// use partout_format::ipc::holds;
/// use std::sync::Arc;
///
/// let list = DataType::List(Arc::new(Field::new("item", DataType::Float16, true)));
/// assert!(holds(&list, &|t| *t == DataType::Float16));
/// assert!(!holds(&list, &|t| *t == DataType::Utf8));
/// ```
pub fn holds(data_type: &DataType, is: &dyn Fn(&DataType) -> bool) -> bool {
    is(data_type)
        || match data_type {
            DataType::Dictionary(_, values) => holds(values, is),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => holds(f.data_type(), is),
            DataType::Struct(fields) => fields.iter().any(|f| holds(f.data_type(), is)),
            DataType::Union(fields, _) => fields.iter().any(|(_, f)| holds(f.data_type(), is)),
            DataType::RunEndEncoded(runs, values) => {
                holds(runs.data_type(), is) || holds(values.data_type(), is)
            }
            _ => false,
        }
}

/// Whether values of `data_type` hold a dictionary, at any depth.
fn holds_dictionary(data_type: &DataType) -> bool {
    holds(data_type, &|t| matches!(t, DataType::Dictionary(..)))
}
