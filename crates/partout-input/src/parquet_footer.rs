//! A Parquet file's footer, checked before and after the parquet crate parses it.
//!
//! The parquet crate builds the schema tree by recursion, one call per level, and sizes some
//! vectors by the counts the footer claims: a footer of a few kilobytes could overflow the
//! stack or ask for hundreds of gigabytes. So the footer's Thrift is scanned first, up to the
//! row groups, reading every field as the parquet crate (59) reads it, and without recursion
//! into the schema: the schema's depth is bounded, no group claims more children than there
//! are schema elements after it, and no list claims more elements than there are bytes left.
//! The scan takes the fields in the order every writer writes them (version, schema, rows,
//! row groups). Once parsed, the metadata is checked against the file: row counts are not
//! negative and sum within `i64`, and every column chunk lies inside the file (a page is read
//! into a buffer of its claimed size, which is bounded by its chunk's).
//!
//! A new version of the parquet crate may read the footer otherwise: the scan is to be
//! reviewed with it.
//!
//! ```text
//! file:  [ "PAR1" | column chunks ... | footer (Thrift compact FileMetaData) | len u32 | "PAR1" ]
//! FileMetaData: 1 version, 2 schema: list<SchemaElement>, 3 num_rows, 4 row_groups, ...
//! SchemaElement: 4 name, 5 num_children, ... (the tree in pre-order)
//! ```

use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

/// The deepest schema read: groups within groups, the root included. arrow-ipc's readers
/// refuse IPC schemas nested deeper than about 60 levels in the same way.
const MAX_SCHEMA_DEPTH: usize = 64;

/// Reads and checks the metadata of the Parquet file `file`, `len` bytes long.
///
/// # Errors
/// What is wrong, for a file that is not Parquet, a footer that claims more than it holds
/// or is nested too deep, or metadata that does not fit the file.
pub(crate) fn read_metadata(
    file: &mut (impl Read + Seek),
    len: u64,
) -> Result<ArrowReaderMetadata, String> {
    if len < 12 {
        return Err(format!("{len} bytes are too few for a Parquet file"));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::Start(len - 8))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| e.to_string())?;
    if &tail[4..] != b"PAR1" {
        return Err("no PAR1 magic at its end (or an encrypted footer, not supported)".into());
    }
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer_len > len - 12 {
        return Err(format!(
            "a footer of {footer_len} bytes in a file of {len} bytes"
        ));
    }
    let mut footer = vec![0u8; footer_len as usize];
    file.seek(SeekFrom::Start(len - 8 - footer_len))
        .and_then(|_| file.read_exact(&mut footer))
        .map_err(|e| e.to_string())?;
    scan_footer(&footer).map_err(|what| format!("its footer {what}"))?;
    let metadata = ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| e.to_string())?;
    check_metadata(&metadata, len)?;
    ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new())
        .map_err(|e| e.to_string())
}

/// Checks parsed metadata against a file of `len` bytes.
fn check_metadata(metadata: &ParquetMetaData, len: u64) -> Result<(), String> {
    let mut rows: i64 = 0;
    for (g, group) in metadata.row_groups().iter().enumerate() {
        let group_rows = group.num_rows();
        rows = (group_rows >= 0)
            .then(|| rows.checked_add(group_rows))
            .flatten()
            .ok_or_else(|| format!("row group {g} claims {group_rows} rows"))?;
        for (c, column) in group.columns().iter().enumerate() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let size = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(size).ok())
                .and_then(|(start, size)| start.checked_add(size));
            if end.is_none_or(|end| end > len) {
                return Err(format!(
                    "row group {g} column {c}: a chunk of {size} bytes at {start} does not lie \
                     within the file's {len} bytes"
                ));
            }
        }
    }
    Ok(())
}

// Thrift compact protocol types.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const I8: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// How deep the parquet crate skips unknown values.
const SKIP_DEPTH: usize = 64;

/// A cursor over a footer's Thrift compact bytes that reads them exactly as the parquet crate
/// (59) does: a known field by its declared type whatever type its header says, an unknown
/// one by its header's type. Reading the same bytes the same way, the scan sees the schema
/// the parquet crate will build. What the parquet crate would refuse may be refused here
/// first, with another message.
struct Thrift<'a> {
    bytes: &'a [u8],
}

/// What a known field holds, to be read as such.
#[derive(Clone, Copy)]
enum Declared {
    /// i32, i64 or an enum: a varint.
    Int,
    /// One raw byte.
    Byte,
    /// In the field header's type.
    Bool,
    /// A length and bytes.
    Binary,
    /// A union of empty structs (TimeUnit).
    TimeUnit,
}

impl Thrift<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let (&first, rest) = self.bytes.split_first().ok_or("ends early")?;
        self.bytes = rest;
        Ok(first)
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), String> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or("ends early")?;
        self.bytes = &self.bytes[n..];
        Ok(())
    }

    /// A varint (longer than 10 bytes, which no writer makes, refused).
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("has a varint of more than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn binary(&mut self) -> Result<(), String> {
        let len = self.varint()?;
        self.skip_bytes(len)
    }

    /// A struct's next field, its id and type; `None` at the struct's end (a type of 0).
    fn field(&mut self, last_id: i16) -> Result<Option<(i16, u8)>, String> {
        let header = self.byte()?;
        let kind = header & 0x0f;
        if kind == 0 {
            return Ok(None);
        }
        if kind > UUID {
            return Err(format!("has a field of unknown type {kind}"));
        }
        let id = match header >> 4 {
            0 => self.zigzag()? as i16,
            delta => last_id
                .checked_add(i16::from(delta))
                .ok_or("has field ids past 32767")?,
        };
        Ok(Some((id, kind)))
    }

    /// A list's (or set's) length and element type; lists longer than the bytes left (every
    /// element takes one at least) refused.
    fn list(&mut self) -> Result<(u64, u8), String> {
        let header = self.byte()?;
        if header == 0 {
            return Ok((0, I8));
        }
        let kind = header & 0x0f;
        if !(BOOL_TRUE..=UUID).contains(&kind) {
            return Err(format!("has a list of unknown type {kind}"));
        }
        let len = match header >> 4 {
            15 => self.varint()?,
            len => u64::from(len),
        };
        if len > self.bytes.len() as u64 {
            return Err(format!(
                "has a list of {len} elements in {} bytes",
                self.bytes.len()
            ));
        }
        Ok((len, kind))
    }

    /// Skips a value of type `kind` as the parquet crate skips it, `depth` levels more at most.
    fn skip(&mut self, kind: u8, depth: usize) -> Result<(), String> {
        let depth = depth
            .checked_sub(1)
            .ok_or_else(|| format!("nests values more than {SKIP_DEPTH} deep"))?;
        match kind {
            // A boolean's value is in its field header (in a list too, for the parquet crate).
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            I8 => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => self.binary(),
            UUID => self.skip_bytes(16),
            STRUCT => {
                while let Some((_, kind)) = self.field(0)? {
                    self.skip(kind, depth)?;
                }
                Ok(())
            }
            LIST | SET => {
                let (len, kind) = self.list()?;
                (0..len).try_for_each(|_| self.skip(kind, depth))
            }
            MAP => {
                let len = self.varint()?;
                if len == 0 {
                    return Ok(());
                }
                if len > self.bytes.len() as u64 {
                    return Err(format!(
                        "has a map of {len} entries in {} bytes",
                        self.bytes.len()
                    ));
                }
                let kinds = self.byte()?;
                let (key, value) = (kinds >> 4, kinds & 0x0f);
                if !(BOOL_TRUE..=UUID).contains(&key) || !(BOOL_TRUE..=UUID).contains(&value) {
                    return Err(format!("has a map of unknown types {kinds:#x}"));
                }
                (0..len).try_for_each(|_| {
                    self.skip(key, depth)?;
                    self.skip(value, depth)
                })
            }
            other => Err(format!("has a value of unknown type {other}")),
        }
    }

    /// An empty struct: its end, at once.
    fn empty_struct(&mut self) -> Result<(), String> {
        match self.byte()? {
            0 => Ok(()),
            _ => Err("has fields in an empty struct".into()),
        }
    }

    /// A struct of known fields `declared` (id and type); others are skipped.
    fn declared_struct(&mut self, declared: &[(i16, Declared)]) -> Result<(), String> {
        let mut last_id = 0;
        while let Some((id, kind)) = self.field(last_id)? {
            match declared.iter().find(|(known, _)| *known == id) {
                Some((_, what)) => self.declared(*what, kind)?,
                None => self.skip(kind, SKIP_DEPTH)?,
            }
            last_id = id;
        }
        Ok(())
    }

    /// A known field's value, of a header of type `kind`.
    fn declared(&mut self, what: Declared, kind: u8) -> Result<(), String> {
        match what {
            Declared::Int => self.varint().map(drop),
            Declared::Byte => self.skip_bytes(1),
            Declared::Binary => self.binary(),
            Declared::Bool if matches!(kind, BOOL_TRUE | BOOL_FALSE) => Ok(()),
            Declared::Bool => Err(format!("has a boolean of type {kind}")),
            Declared::TimeUnit => {
                match self.field(0)? {
                    Some((1..=3, _)) => self.empty_struct()?,
                    _ => return Err("has a time unit that is none of the three".into()),
                }
                self.union_end()
            }
        }
    }

    /// A union's end: no second field.
    fn union_end(&mut self) -> Result<(), String> {
        match self.field(0)? {
            None => Ok(()),
            Some(_) => Err("has a union of two fields".into()),
        }
    }

    /// A LogicalType union.
    fn logical_type(&mut self) -> Result<(), String> {
        use Declared::{Binary, Bool, Byte, Int, TimeUnit};
        let (id, kind) = self.field(0)?.ok_or("has an empty logical type")?;
        match id {
            1..=4 | 6 | 11..=15 => self.empty_struct()?,
            5 => self.declared_struct(&[(1, Int), (2, Int)])?,
            7 | 8 => self.declared_struct(&[(1, Bool), (2, TimeUnit)])?,
            10 => self.declared_struct(&[(1, Byte), (2, Bool)])?,
            16 => self.declared_struct(&[(1, Byte)])?,
            17 => self.declared_struct(&[(1, Binary)])?,
            18 => self.declared_struct(&[(1, Binary), (2, Int)])?,
            _ => self.skip(kind, SKIP_DEPTH)?,
        }
        self.union_end()
    }

    /// A SchemaElement: its `num_children`, if given.
    fn schema_element(&mut self) -> Result<Option<i32>, String> {
        let mut children = None;
        let mut last_id = 0;
        while let Some((id, kind)) = self.field(last_id)? {
            match id {
                1..=3 | 6..=9 => drop(self.varint()?),
                4 => self.binary()?,
                5 => children = Some(self.zigzag()? as i32),
                10 => self.logical_type()?,
                _ => self.skip(kind, SKIP_DEPTH)?,
            }
            last_id = id;
        }
        Ok(children)
    }
}

/// Scans a footer (FileMetaData) up to its row groups: the schema's depth and child counts,
/// and the number of row groups, against the bytes there are. Its fields must come in the
/// order every writer writes them: version, schema, rows, row groups.
fn scan_footer(footer: &[u8]) -> Result<(), String> {
    let mut thrift = Thrift { bytes: footer };
    let mut schema = false;
    let mut last_id = 0;
    while let Some((id, kind)) = thrift.field(last_id)? {
        match id {
            // version, num_rows
            1 | 3 => drop(thrift.varint()?),
            // Only the first schema is parsed.
            2 if schema => thrift.skip(kind, SKIP_DEPTH)?,
            2 => {
                scan_schema(&mut thrift)?;
                schema = true;
            }
            // row_groups: the list's length is checked by `list`.
            4 => {
                thrift.list()?;
                return Ok(());
            }
            other => return Err(format!("has its field {other} before its row groups")),
        }
        last_id = id;
    }
    Ok(())
}

/// Scans the schema, a list of SchemaElements: the tree in pre-order, each group followed
/// by its `num_children` children.
fn scan_schema(thrift: &mut Thrift<'_>) -> Result<(), String> {
    let (len, kind) = thrift.list()?;
    if kind != STRUCT {
        return Err("has a schema that is not a list of elements".into());
    }
    // The children still to come of each group open around the next element.
    let mut open: Vec<u64> = Vec::new();
    for i in 0..len {
        let children = thrift.schema_element()?;
        if let Some(siblings) = open.last_mut() {
            *siblings -= 1;
        }
        if let Some(n) = children.filter(|&n| n > 0) {
            let after = len - i - 1;
            if n as u64 > after {
                return Err(format!(
                    "has a schema element of {n} children with {after} elements after it"
                ));
            }
            open.push(n as u64);
            if open.len() > MAX_SCHEMA_DEPTH {
                return Err(format!(
                    "has a schema nested more than {MAX_SCHEMA_DEPTH} levels deep"
                ));
            }
        }
        while open.last() == Some(&0) {
            open.pop();
        }
    }
    Ok(())
}
