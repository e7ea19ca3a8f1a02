//! Sinks: where each destination's encoded bytes go.

use arrow_buffer::Buffer;
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::path::{Path, PathBuf};

/// Receives each destination's bytes, piece by piece, in order.
pub trait Sink {
    /// Appends `bytes` to destination `destination`'s output.
    ///
    /// # Errors
    /// The sink's IO errors, or `InvalidInput` for a destination it does not have.
    fn write(&mut self, destination: usize, bytes: &[u8]) -> io::Result<()>;

    /// Appends the bytes in `bytes` and leaves `bytes` empty. A sink that keeps what it is
    /// given takes the buffer instead of copying it; by default this is [`write`](Self::write)
    /// and a clear.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    fn write_buffer(&mut self, destination: usize, bytes: &mut Vec<u8>) -> io::Result<()> {
        self.write(destination, bytes)?;
        bytes.clear();
        Ok(())
    }

    /// Appends `parts`, one after the other, to destination `destination`'s output (an
    /// encoded message whose buffers are the batch's own: see
    /// [`StreamEncoders::encode_parts`](partout_format::StreamEncoders::encode_parts)). By
    /// default each part is [`write`](Self::write)n in turn; [`FileSink`] writes them in
    /// vectored calls, [`MemorySink`] joins them into one piece.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    fn write_parts(&mut self, destination: usize, parts: &[Buffer]) -> io::Result<()> {
        for part in parts {
            self.write(destination, part)?;
        }
        Ok(())
    }

    /// Everything has been written: make the outputs final.
    ///
    /// # Errors
    /// The sink's IO errors.
    fn finish(&mut self) -> io::Result<()>;
}

/// Writes every byte of `parts` to `file`, in order, in as few vectored calls as it takes.
fn write_all_parts(file: &mut File, parts: &[Buffer]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|part| !part.is_empty())
        .map(|part| IoSlice::new(part))
        .collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the file took no more bytes",
                ));
            }
            Ok(written) => IoSlice::advance_slices(&mut slices, written),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn no_such_destination(destination: usize, count: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("destination {destination} of {count}"),
    )
}

/// Keeps every destination's bytes in memory, as the pieces it was given (a buffer handed
/// over by [`Sink::write_buffer`] is kept, not copied).
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    pieces: Vec<Vec<Vec<u8>>>,
    finished: bool,
}

impl MemorySink {
    /// A sink for `destinations` destinations.
    pub fn new(destinations: usize) -> Self {
        Self {
            pieces: vec![Vec::new(); destinations],
            finished: false,
        }
    }

    /// The pieces destination `destination` received, in order.
    ///
    /// # Panics
    /// If there is no such destination.
    pub fn pieces(&self, destination: usize) -> &[Vec<u8>] {
        &self.pieces[destination]
    }

    /// The bytes destination `destination` received (its pieces, concatenated).
    ///
    /// # Panics
    /// If there is no such destination.
    pub fn output(&self, destination: usize) -> Vec<u8> {
        self.pieces[destination].concat()
    }

    /// Bytes received in all.
    pub fn len(&self) -> usize {
        self.pieces.iter().flatten().map(Vec::len).sum()
    }

    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`Sink::finish`] was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Every destination's bytes, each concatenated.
    pub fn into_outputs(self) -> Vec<Vec<u8>> {
        self.pieces.iter().map(|p| p.concat()).collect()
    }

    fn destination(&mut self, destination: usize) -> io::Result<&mut Vec<Vec<u8>>> {
        let count = self.pieces.len();
        self.pieces
            .get_mut(destination)
            .ok_or_else(|| no_such_destination(destination, count))
    }
}

impl Sink for MemorySink {
    fn write(&mut self, destination: usize, bytes: &[u8]) -> io::Result<()> {
        self.destination(destination)?.push(bytes.to_vec());
        Ok(())
    }

    fn write_buffer(&mut self, destination: usize, bytes: &mut Vec<u8>) -> io::Result<()> {
        self.destination(destination)?.push(std::mem::take(bytes));
        Ok(())
    }

    fn write_parts(&mut self, destination: usize, parts: &[Buffer]) -> io::Result<()> {
        let pieces = self.destination(destination)?;
        let mut joined = Vec::with_capacity(parts.iter().map(Buffer::len).sum());
        for part in parts {
            joined.extend_from_slice(part);
        }
        pieces.push(joined);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.finished = true;
        Ok(())
    }
}

/// Writes destination `p` to `DIR/part-{p:05}.EXT`, through `DIR/.part-{p:05}.EXT.partial`
/// until [`Sink::finish`] renames the finished files: the plain file sink of a
/// [`PartitionedWriter`](crate::PartitionedWriter) used on its own, as a library. partout's
/// outputs (formats, the manifest, a location's commit, rollover, naming) are partout-output's
/// `OutputSpec`; this sink knows none of them. Files are opened on a destination's first
/// write: a destination that receives nothing gets no file. Writes go straight to the file,
/// unbuffered: the writer hands over whole flushes, and thousands of destinations would
/// otherwise hold thousands of buffers.
#[derive(Debug)]
pub struct FileSink {
    dir: PathBuf,
    extension: String,
    files: Vec<Option<File>>,
}

impl FileSink {
    /// A sink writing `destinations` files with extension `extension` into `dir` (created if
    /// missing).
    ///
    /// # Errors
    /// When `dir` cannot be created.
    pub fn try_new(
        dir: impl AsRef<Path>,
        extension: &str,
        destinations: usize,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(dir.as_ref())?;
        Ok(Self {
            dir: dir.as_ref().to_path_buf(),
            extension: extension.to_string(),
            files: (0..destinations).map(|_| None).collect(),
        })
    }

    /// The final path of destination `destination`'s file.
    pub fn path(&self, destination: usize) -> PathBuf {
        self.dir
            .join(format!("part-{destination:05}.{}", self.extension))
    }

    fn partial_path(&self, destination: usize) -> PathBuf {
        self.dir
            .join(format!(".part-{destination:05}.{}.partial", self.extension))
    }
}

impl FileSink {
    /// Destination `destination`'s file, created at its first write.
    fn file(&mut self, destination: usize) -> io::Result<&mut File> {
        let count = self.files.len();
        if destination >= count {
            return Err(no_such_destination(destination, count));
        }
        if self.files[destination].is_none() {
            self.files[destination] = Some(File::create(self.partial_path(destination))?);
        }
        Ok(self.files[destination].as_mut().expect("opened above"))
    }
}

impl Sink for FileSink {
    fn write(&mut self, destination: usize, bytes: &[u8]) -> io::Result<()> {
        self.file(destination)?.write_all(bytes)
    }

    fn write_parts(&mut self, destination: usize, parts: &[Buffer]) -> io::Result<()> {
        write_all_parts(self.file(destination)?, parts)
    }

    fn finish(&mut self) -> io::Result<()> {
        for destination in 0..self.files.len() {
            if let Some(file) = self.files[destination].take() {
                let partial = self.partial_path(destination);
                let done = file
                    .sync_all()
                    .and_then(|()| std::fs::rename(&partial, self.path(destination)));
                if let Err(e) = done {
                    let _ = std::fs::remove_file(&partial);
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl Drop for FileSink {
    /// An unfinished sink removes its partial files: nothing half-written is left behind.
    fn drop(&mut self) {
        for destination in 0..self.files.len() {
            if self.files[destination].take().is_some() {
                let _ = std::fs::remove_file(self.partial_path(destination));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sink_keeps_pieces_in_order() {
        let mut sink = MemorySink::new(3);
        sink.write(2, b"ab").unwrap();
        sink.write(0, b"x").unwrap();
        sink.write_buffer(2, &mut b"cd".to_vec()).unwrap();
        assert!(sink.write(3, b"?").is_err());
        assert_eq!(sink.pieces(2), [b"ab".to_vec(), b"cd".to_vec()]);
        assert_eq!(sink.len(), 5);
        sink.finish().unwrap();
        assert!(sink.is_finished());
        assert_eq!(
            sink.into_outputs(),
            [b"x".to_vec(), Vec::new(), b"abcd".to_vec()]
        );
    }

    /// Parts reach every sink as the bytes they make, joined: kept as one piece in memory,
    /// written in order to a file (empty parts included), and counted by a sink that only
    /// writes.
    #[test]
    fn parts_arrive_joined_in_every_sink() {
        let parts = [
            Buffer::from_vec(b"head".to_vec()),
            Buffer::from_vec(Vec::<u8>::new()),
            Buffer::from_vec((0..200_000u32).map(|i| i as u8).collect::<Vec<u8>>()),
            Buffer::from_vec(b"tail".to_vec()),
        ];
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.as_slice().to_vec()).collect();
        let mut memory = MemorySink::new(2);
        memory.write_parts(1, &parts).unwrap();
        assert_eq!(memory.pieces(1), std::slice::from_ref(&joined));
        assert!(memory.write_parts(2, &parts).is_err());
        let dir = tempfile::tempdir().unwrap();
        let mut files = FileSink::try_new(dir.path(), "arrows", 2).unwrap();
        files.write_parts(0, &parts).unwrap();
        files.write_parts(0, &parts[..1]).unwrap();
        assert!(files.write_parts(5, &parts).is_err());
        files.finish().unwrap();
        let mut expected = joined.clone();
        expected.extend_from_slice(b"head");
        assert_eq!(std::fs::read(files.path(0)).unwrap(), expected);

        struct Written(Vec<u8>);
        impl Sink for Written {
            fn write(&mut self, _: usize, bytes: &[u8]) -> io::Result<()> {
                self.0.extend_from_slice(bytes);
                Ok(())
            }
            fn finish(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut written = Written(Vec::new());
        written.write_parts(0, &parts).unwrap();
        assert_eq!(written.0, joined);
    }

    #[test]
    fn file_sink_renames_on_finish_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FileSink::try_new(dir.path(), "arrows", 4).unwrap();
        sink.write(1, b"hello ").unwrap();
        sink.write(3, b"x").unwrap();
        sink.write(1, b"world").unwrap();
        assert!(
            !sink.path(1).exists(),
            "a file looks complete before finish"
        );
        sink.finish().unwrap();
        assert_eq!(std::fs::read(sink.path(1)).unwrap(), b"hello world");
        assert_eq!(std::fs::read(sink.path(3)).unwrap(), b"x");
        assert!(!sink.path(0).exists() && !sink.path(2).exists());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn an_unfinished_file_sink_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut sink = FileSink::try_new(dir.path(), "arrows", 2).unwrap();
            sink.write(0, b"partial").unwrap();
            assert!(sink.write(2, b"?").is_err());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
