//! The input files a job is given: local files and directories, `file://` URLs, and objects
//! of object stores by URL, prefix or pattern (listed here, read by the `source` module).

use crate::source::{HEAD_BYTES, Source, StoreObject};
use crate::store::StorageOptions;
use crate::store::{self, Client, is_store_url};
use crate::{InputFile, InputFormat, IoError, Result, file_error, file_io_error};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The input files `paths` name: files as given, and the files of directories, in name
/// order, recursively, skipping hidden files (`.` or `_` first) and files of no format partout
/// reads. A file's first bytes say its format ([`InputFormat::detect`]), its name only for CSV.
///
/// # Errors
/// [`IoError::File`] for a path that does not exist, a file given by name that
/// [`InputFormat::detect`] refuses, or a file in a directory whose name promises a format its bytes
/// do not hold; [`IoError::Inputs`] when no input file is found.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<InputFile>> {
    discover_in(paths, &StorageOptions::default())
}

/// As [`discover`], and URLs of object stores among `paths` (`s3://bucket/data/`,
/// `gs://…/*.parquet`, `az://…`, `abfss://…`; a `file://` URL is a local path), their clients
/// configured from the environment and then `options`: the object a URL names, else the
/// objects under it as a prefix, or those its pattern matches (`*` and `?` within one part of
/// the name, `**` across parts), hidden names passed over as in a directory.
///
/// # Errors
/// As [`discover`]; for a URL, [`IoError::File`] naming it when its store cannot be reached,
/// refuses the credentials or holds nothing there; [`IoError::Inputs`] for storage options
/// given with no URL of a store to use them.
pub fn discover_in(paths: &[PathBuf], options: &StorageOptions) -> Result<Vec<InputFile>> {
    let mut files = Vec::new();
    let mut stores = false;
    for path in paths {
        let text = path.to_str().unwrap_or_default();
        if is_store_url(text) {
            stores = true;
            files.extend(discover_store(text, options.pairs())?);
            continue;
        }
        let local;
        let path = match url::Url::parse(text).ok().filter(|u| u.scheme() == "file") {
            Some(url) => {
                local = url
                    .to_file_path()
                    .map_err(|()| file_error(path, "names no local path"))?;
                &local
            }
            None => path,
        };
        let meta = std::fs::metadata(path).map_err(|e| file_io_error(path, "cannot be read", e))?;
        if meta.is_dir() {
            walk(path, &mut files)?;
        } else {
            let format = InputFormat::detect(path)?;
            files.push(InputFile::local(path.clone(), format));
        }
    }
    if !stores && !options.is_empty() {
        return Err(IoError::Inputs(
            "storage options are for inputs in object stores; every input is a local path".into(),
        ));
    }
    if files.is_empty() {
        return Err(IoError::Inputs(
            "no input files (Parquet, Arrow files or streams, or CSV named .csv, .csv.gz or .csv.zst) found".into(),
        ));
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<InputFile>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| file_io_error(dir, "cannot be listed", e))?
        .map(|entry| {
            entry
                .map(|e| e.path())
                .map_err(|e| file_io_error(dir, "cannot be listed", e))
        })
        .collect::<Result<_>>()?;
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.') || n.starts_with('_'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            match InputFormat::detect(&path) {
                Ok(format) => files.push(InputFile::local(path, format)),
                // A file whose name promises data it does not hold is an error, never rows
                // silently left out.
                Err(e) if InputFormat::from_extension(&path).is_some() => return Err(e),
                // Files of no format partout reads (notes, checksums) are passed over.
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// The input files the store URL `text` names, with `options` for its client: the object it
/// names, else every object under it as a prefix (hidden names — a part beginning with `.`
/// or `_` — passed over); with `*`, `?` or `[` in its path, the objects its pattern matches
/// (`*` within one part of the path, `**` across parts). In name order; each object's first
/// bytes tell its format.
///
/// # Errors
/// [`IoError::File`] naming the URL when the store cannot be reached or read, nothing is
/// there, or an object given by name is of no format partout reads.
pub(crate) fn discover_store(text: &str, options: &[(String, String)]) -> Result<Vec<InputFile>> {
    let failed = |what: String| file_error(&PathBuf::from(text), what);
    let url = url::Url::parse(text).map_err(|e| failed(format!("not a URL: {e}")))?;
    let client = Client::try_new(&url, options).map_err(failed)?;
    let path = client.path.as_ref().to_string();
    let pattern_at = path.find(['*', '?', '[']);
    let listed: Vec<(ObjectPath, u64, bool)> = match pattern_at {
        Some(at) => {
            let prefix = ObjectPath::from(path[..at].rsplit_once('/').map_or("", |(p, _)| p));
            let pattern =
                glob::Pattern::new(&path).map_err(|e| failed(format!("not a pattern: {e}")))?;
            let matching = glob::MatchOptions {
                require_literal_separator: true,
                ..glob::MatchOptions::new()
            };
            list(&client, &prefix)
                .map_err(failed)?
                .into_iter()
                .filter(|(object, _)| pattern.matches_with(object.as_ref(), matching))
                .filter(|(object, _)| !hidden(object, &prefix))
                .map(|(object, size)| (object, size, false))
                .collect()
        }
        None => {
            // A prefix first (a HEAD of a prefix is not an answer every store gives), then
            // the object of that name.
            let under: Vec<(ObjectPath, u64, bool)> = list(&client, &client.path)
                .map_err(failed)?
                .into_iter()
                .filter(|(object, _)| !hidden(object, &client.path))
                .map(|(object, size)| (object, size, false))
                .collect();
            if under.is_empty() && !path.is_empty() && !text.ends_with('/') {
                let (store, object) = (client.store.clone(), client.path.clone());
                match store::run(async move { store.head(&object).await }).map_err(failed)? {
                    Ok(meta) => vec![(meta.location, meta.size, true)],
                    Err(object_store::Error::NotFound { .. }) => Vec::new(),
                    Err(e) => return Err(failed(format!("cannot be read: {e}"))),
                }
            } else {
                under
            }
        }
    };
    if listed.is_empty() {
        return Err(failed(
            "no object is there (nor under it as a prefix)".into(),
        ));
    }
    let objects: Vec<(Arc<StoreObject>, bool)> = listed
        .into_iter()
        .map(|(path, size, named)| {
            let url = client.url_of(&path);
            let object = StoreObject {
                store: client.store.clone(),
                path,
                url,
                size,
            };
            (Arc::new(object), named)
        })
        .collect();
    let mut files = Vec::with_capacity(objects.len());
    for (object, named) in objects {
        let path = PathBuf::from(&object.url);
        let head = object
            .get(0..object.size.min(HEAD_BYTES))
            .map_err(|e| file_io_error(&path, "cannot be read", e))?;
        match InputFormat::from_head(&path, &head) {
            Ok(format) => files.push(InputFile {
                path,
                format,
                source: Source::Store(object),
            }),
            // As in a local directory: a name that promises a format is held to it; other
            // objects under a prefix (notes, checksums, markers) are passed over.
            Err(e) if named || InputFormat::from_extension(&path).is_some() => return Err(e),
            Err(_) => {}
        }
    }
    if files.is_empty() {
        return Err(IoError::Inputs(format!(
            "no input files (Parquet, Arrow files or streams, or CSV named .csv, .csv.gz or \
             .csv.zst) under {text}"
        )));
    }
    Ok(files)
}

/// Every object under `prefix` (not objects of zero bytes whose name ends a directory), by
/// name, with its size.
fn list(
    client: &Client,
    prefix: &ObjectPath,
) -> std::result::Result<Vec<(ObjectPath, u64)>, String> {
    let store = client.store.clone();
    let prefix = prefix.clone();
    let mut listed = store::run(async move {
        store
            .list(Some(&prefix))
            .map_ok(|meta| (meta.location, meta.size))
            .try_collect::<Vec<_>>()
            .await
    })?
    .map_err(|e| format!("cannot be listed: {e}"))?;
    listed.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    Ok(listed)
}

/// Whether a part of `object`'s name past `prefix` begins with `.` or `_`.
fn hidden(object: &ObjectPath, prefix: &ObjectPath) -> bool {
    let name = object.as_ref();
    let rest = name
        .strip_prefix(prefix.as_ref())
        .unwrap_or(name)
        .trim_start_matches('/');
    rest.split('/')
        .any(|part| part.starts_with('.') || part.starts_with('_'))
}
