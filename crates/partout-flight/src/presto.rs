//! The exchanges over Presto's worker exchange protocol (HTTP), as Presto's and Prestissimo's
//! exchange clients pull another worker's output buffers.
//!
//! ```text
//!  GET    /v1/task/{exchange}/results/{destination}/{token}              pages from token on (acknowledges those before)
//!  GET    /v1/task/{exchange}/results/{destination}/{token}/acknowledge  frees the pages before token
//!  HEAD   /v1/task/{exchange}/results/{destination}/{token}              bytes ready (X-Presto-Buffer-Remaining-Bytes)
//!  DELETE /v1/task/{exchange}/results/{destination}                      the consumer is done with it
//! ```
//!
//! Replies carry `X-Presto-Task-Instance-Id` (fixed for the server's life),
//! `X-Presto-Page-Sequence-Id` (the token asked for), `X-Presto-Page-End-Sequence-Id` (the
//! next token) and `X-Presto-Buffer-Complete`; 200 with `application/X-presto-pages` and at
//! least one page (up to `X-Presto-Max-Size`, more than it if one page is larger), or 204 when
//! no page came within `X-Presto-Max-Wait` (default 1 s). The same token asked again gets the
//! same pages. An exchange not (yet) served answers 204, not complete, as a task not yet
//! started does; a destination out of range, a freed token, or an exchange that failed or was
//! cancelled answers an error status with the reason, which Presto's client reports at once.

use crate::error::{ExchangeError, ProtocolError, Result};
use crate::exchanges::{Charge, Exchange, Exchanges, RemoveHook};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use partout_format::message::{Message, MessageEncoder};
use partout_output::manifest::Compression;
use partout_output::{FileCursor, FinishedOutput};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The response headers of the protocol.
pub mod headers {
    /// The server's task instance: fixed while it runs.
    pub const TASK_INSTANCE_ID: &str = "x-presto-task-instance-id";
    /// The token asked for.
    pub const PAGE_SEQUENCE_ID: &str = "x-presto-page-sequence-id";
    /// The token after the pages given.
    pub const PAGE_END_SEQUENCE_ID: &str = "x-presto-page-end-sequence-id";
    /// Whether no page follows.
    pub const BUFFER_COMPLETE: &str = "x-presto-buffer-complete";
    /// Bytes ready from the token on (HEAD).
    pub const BUFFER_REMAINING_BYTES: &str = "x-presto-buffer-remaining-bytes";
    /// The most bytes a reply should hold (a request header: an airlift data size).
    pub const MAX_SIZE: &str = "x-presto-max-size";
    /// The longest a request waits for a page (a request header: an airlift duration).
    pub const MAX_WAIT: &str = "x-presto-max-wait";
    /// Pages' content type.
    pub const PAGES_CONTENT_TYPE: &str = "application/X-presto-pages";
}

/// Bytes a reply holds when the client does not say.
const DEFAULT_MAX_SIZE: usize = 16 << 20;
/// The most bytes a reply holds, whatever the client asks (one page more when a single page
/// is larger): Presto's exchange client asks for 16 MB.
pub const MAX_REPLY_BYTES: usize = 32 << 20;
/// How long a request waits for a page when the client does not say.
const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);
/// The longest a request waits, whatever the client asks.
const LONGEST_WAIT: Duration = Duration::from_secs(30);

/// A finished output's destination as one consumer reads it: the pages sent and not yet
/// acknowledged, and where the files' reading stands.
struct FileBuffer {
    cursor: Option<FileCursor>,
    /// Pages from token `first` on.
    pages: VecDeque<Bytes>,
    first: u64,
    /// Every page has been read from the files.
    read_all: bool,
    /// The error reading the files ended in, for every later request.
    failed: Option<ExchangeError>,
    /// The pages held, charged against the server's memory limit.
    charge: Charge,
}

impl FileBuffer {
    /// Pages from `token` on, up to `max_bytes` (at least one when any is left), read from the
    /// files as needed; and whether they are the last.
    fn fetch(
        &mut self,
        output: &FinishedOutput,
        encoder: Option<&MessageEncoder>,
        p: u32,
        token: u64,
        max_bytes: usize,
    ) -> Result<(Vec<Bytes>, bool)> {
        if token < self.first {
            return Err(ExchangeError::Freed(format!(
                "token {token}: pages before {} were acknowledged",
                self.first
            )));
        }
        // Checked before anything is acknowledged: a refused token changes nothing.
        self.ack(token)?;
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut bytes: usize = self.pages.iter().map(Bytes::len).sum();
        while !self.read_all && (self.pages.is_empty() || bytes < max_bytes) {
            // Pages are read ahead of acknowledgements only while the server has memory: past
            // its limit a reply gives what is held, or asks the consumer to retry.
            if let Err(e) = self.charge.check_room() {
                if self.pages.is_empty() {
                    return Err(e);
                }
                break;
            }
            match self.read_page(output, encoder, p) {
                Ok(page) => bytes += page,
                Err(e) => {
                    // The files are damaged here: every later request gets the same error,
                    // rather than the pages after the damage.
                    self.failed = Some(e.clone());
                    self.cursor = None;
                    return Err(e);
                }
            }
        }
        let mut given = Vec::new();
        let mut size = 0;
        for page in &self.pages {
            if !given.is_empty() && size + page.len() > max_bytes {
                break;
            }
            size += page.len();
            given.push(page.clone());
        }
        let complete = self.read_all && given.len() == self.pages.len();
        Ok((given, complete))
    }

    /// Reads the next page from the files into the pages held; its bytes (0 at the end).
    fn read_page(
        &mut self,
        output: &FinishedOutput,
        encoder: Option<&MessageEncoder>,
        p: u32,
    ) -> Result<usize> {
        let cursor = match &mut self.cursor {
            Some(cursor) => cursor,
            slot => slot.insert(output.cursor(p)?),
        };
        let Some(message) = cursor.next_message()? else {
            self.read_all = true;
            self.cursor = None;
            return Ok(0);
        };
        let page = match (message, encoder) {
            (page @ Message::Page { .. }, _) => page,
            (message, Some(encoder)) => encoder.to_page(message)?,
            (Message::Ipc { .. }, None) => {
                unreachable!("an IPC output has a schema, and so an encoder")
            }
        };
        let Message::Page { page, .. } = page else {
            unreachable!("converted to a page")
        };
        let bytes = page.len();
        self.charge.grow(bytes);
        self.pages.push_back(page);
        Ok(bytes)
    }

    /// The token after the pages sent (read from the files and held).
    fn end(&self) -> u64 {
        self.first + self.pages.len() as u64
    }

    /// Frees the pages before `token`; nothing when it is past the pages sent.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a token past the pages sent.
    fn ack(&mut self, token: u64) -> Result<()> {
        check_sent(token, self.end())?;
        while self.first < token {
            let Some(page) = self.pages.pop_front() else {
                break;
            };
            self.charge.shrink(page.len());
            self.first += 1;
        }
        Ok(())
    }
}

/// An error for a token past `end`, the token after the pages sent.
fn check_sent(token: u64, end: u64) -> Result<()> {
    if token > end {
        return Err(ExchangeError::InvalidArgument(format!(
            "token {token} is past the {end} pages sent"
        )));
    }
    Ok(())
}

/// Finished outputs' destinations being read, by exchange and destination.
type FileBuffers = HashMap<(String, u32), Arc<Mutex<FileBuffer>>>;

/// The Presto protocol's server state.
struct Server {
    exchanges: Exchanges,
    instance: String,
    files: Mutex<FileBuffers>,
    /// Frees a removed exchange's buffers (registered, weakly, with `exchanges`).
    _forget: Arc<RemoveHook>,
}

impl Server {
    /// Destination `p` of finished output `name` as its consumer reads it, made on first
    /// use. Only for a served exchange's destination in range (checked before): the state
    /// kept is bounded by the destinations served.
    fn file_buffer(&self, name: &str, p: u32) -> Arc<Mutex<FileBuffer>> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files
            .entry((name.to_string(), p))
            .or_insert_with(|| {
                Arc::new(Mutex::new(FileBuffer {
                    cursor: None,
                    pages: VecDeque::new(),
                    first: 0,
                    read_all: false,
                    failed: None,
                    charge: self.exchanges.charge(),
                }))
            })
            .clone()
    }

    /// Frees every buffer of exchange `name` (it is no longer served).
    fn forget(&self, name: &str) {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.retain(|(served, _), _| served != name);
    }

    /// Destination `p` of finished output `name` if its consumer has read from it.
    fn existing_file_buffer(&self, name: &str, p: u32) -> Option<Arc<Mutex<FileBuffer>>> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.get(&(name.to_string(), p)).cloned()
    }
}

/// The protocol's routes over `exchanges` (shared: exchanges added later are served too).
pub fn router(exchanges: Exchanges) -> Router {
    let instance = format!(
        "partout-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let server = Arc::new_cyclic(|server: &Weak<Server>| {
        let server = server.clone();
        let forget: Arc<RemoveHook> = Arc::new(move |name: &str| {
            if let Some(server) = server.upgrade() {
                server.forget(name);
            }
        });
        exchanges.on_remove(&forget);
        Server {
            exchanges,
            instance,
            files: Mutex::new(HashMap::new()),
            _forget: forget,
        }
    });
    Router::new()
        .route(
            "/v1/task/{task}/results/{buffer}/{token}",
            get(get_results).head(head_results),
        )
        .route(
            "/v1/task/{task}/results/{buffer}/{token}/acknowledge",
            get(acknowledge),
        )
        .route(
            "/v1/task/{task}/results/{buffer}",
            axum::routing::delete(delete_buffer),
        )
        .with_state(server)
}

/// A reply with the protocol's headers.
fn reply(
    server: &Server,
    status: StatusCode,
    token: u64,
    next: u64,
    complete: bool,
    body: Body,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    let mut put = |name: &'static str, value: String| {
        headers.insert(
            name,
            HeaderValue::from_str(&value).expect("header values are ASCII"),
        );
    };
    put(headers::TASK_INSTANCE_ID, server.instance.clone());
    put(headers::PAGE_SEQUENCE_ID, token.to_string());
    put(headers::PAGE_END_SEQUENCE_ID, next.to_string());
    put(headers::BUFFER_COMPLETE, complete.to_string());
    if status == StatusCode::OK {
        put("content-type", headers::PAGES_CONTENT_TYPE.to_string());
    }
    response
}

/// An error as a status and its reason.
fn error_reply(e: &ExchangeError) -> Response {
    (e.http_status(), format!("{}\n", e.report())).into_response()
}

/// The most characters of a client's text an error message repeats.
const QUOTED_CHARS: usize = 100;

/// `text` quoted for an error message, as `{:?}` does, cut to [`QUOTED_CHARS`] characters
/// (quotes and the `…` marking a cut included): a client's input is not echoed unbounded.
fn quoted(text: &str) -> String {
    let escaped: String = text.escape_debug().collect();
    if escaped.chars().count() + 2 <= QUOTED_CHARS {
        format!("\"{escaped}\"")
    } else {
        let kept: String = escaped.chars().take(QUOTED_CHARS - 3).collect();
        format!("\"{kept}…\"")
    }
}

fn parse_path(buffer: &str, token: &str) -> Result<(u32, u64)> {
    let buffer = buffer.parse().map_err(|_| {
        ExchangeError::InvalidArgument(format!(
            "buffer {} is not a destination number",
            quoted(buffer)
        ))
    })?;
    let token = token.parse().map_err(|_| {
        ExchangeError::InvalidArgument(format!("token {} is not a number", quoted(token)))
    })?;
    Ok((buffer, token))
}

/// The served exchange `name`, and an error (its name cut) unless it has destination `p`.
fn served(server: &Server, name: &str, p: u32) -> Result<Exchange> {
    let exchange = server.exchanges.get(name).map_err(|_| not_served(name))?;
    check_destination(&exchange, name, p)?;
    Ok(exchange)
}

/// The error for an exchange not served, its name cut.
fn not_served(name: &str) -> ExchangeError {
    ExchangeError::NotFound(format!("no exchange {} is served", quoted(name)))
}

/// An error naming how many destinations there are unless `exchange` has destination `p`.
fn check_destination(exchange: &Exchange, name: &str, p: u32) -> Result<()> {
    let partitions = exchange.partitions();
    if p < partitions {
        return Ok(());
    }
    Err(ExchangeError::NotFound(format!(
        "no destination {p} in exchange {} of {partitions} destinations",
        quoted(name)
    )))
}

/// An airlift data size (`1MB`, `1048576B`, `1.5kB`) in bytes.
///
/// ```
/// use partout_flight::presto::parse_data_size;
/// assert_eq!(parse_data_size("1MB"), Some(1 << 20));
/// assert_eq!(parse_data_size("1048576B"), Some(1 << 20));
/// assert_eq!(parse_data_size("1.5kB"), Some(1536));
/// assert_eq!(parse_data_size("MB"), None);
/// ```
pub fn parse_data_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = (text[..split].trim(), &text[split..]);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "B" => 1u64,
        "kB" | "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        "PB" => 1 << 50,
        _ => return None,
    };
    (number.is_finite() && number >= 0.0).then_some((number * scale as f64) as usize)
}

/// An airlift duration (`1.00s`, `200ms`, `1m`).
///
/// ```
/// use partout_flight::presto::parse_duration;
/// use std::time::Duration;
/// assert_eq!(parse_duration("200ms"), Some(Duration::from_millis(200)));
/// assert_eq!(parse_duration("1.00s"), Some(Duration::from_secs(1)));
/// assert_eq!(parse_duration("soon"), None);
/// ```
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let number: f64 = text[..split].trim().parse().ok()?;
    let seconds = match &text[split..] {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(number * seconds).ok()
}

fn header<T>(headers: &HeaderMap, name: &str, parse: fn(&str) -> Option<T>) -> Option<T> {
    headers.get(name)?.to_str().ok().and_then(parse)
}

async fn get_results(
    State(server): State<Arc<Server>>,
    Path((task, buffer, token)): Path<(String, String, String)>,
    request_headers: HeaderMap,
) -> Response {
    let (p, token) = match parse_path(&buffer, &token) {
        Ok(parsed) => parsed,
        Err(e) => return error_reply(&e),
    };
    let max_bytes = header(&request_headers, headers::MAX_SIZE, parse_data_size)
        .unwrap_or(DEFAULT_MAX_SIZE)
        .min(MAX_REPLY_BYTES);
    let wait = header(&request_headers, headers::MAX_WAIT, parse_duration)
        .unwrap_or(DEFAULT_MAX_WAIT)
        .min(LONGEST_WAIT);
    let exchange = match server.exchanges.get(&task) {
        Ok(exchange) => exchange,
        Err(_) => {
            // Not served (yet): as a task that has not started, after the wait.
            tokio::time::sleep(wait).await;
            return reply(
                &server,
                StatusCode::NO_CONTENT,
                token,
                token,
                false,
                Body::empty(),
            );
        }
    };
    if let Err(e) = check_destination(&exchange, &task, p) {
        return error_reply(&e);
    }
    let fetched = match exchange {
        Exchange::Live(live) => fetch_live(&live, p, token, max_bytes, wait).await,
        Exchange::Finished(output) => {
            let buffer = server.file_buffer(&task, p);
            tokio::task::spawn_blocking(move || {
                let encoder = output
                    .schema()
                    .map(|schema| {
                        let lz4 = output.manifest().compression == Compression::Lz4;
                        MessageEncoder::try_new(
                            schema.clone(),
                            partout_format::Encoding::presto(lz4),
                        )
                    })
                    .transpose()?;
                let mut buffer = buffer.lock().unwrap_or_else(|e| e.into_inner());
                buffer.fetch(&output, encoder.as_ref(), p, token, max_bytes)
            })
            .await
            .unwrap_or_else(|e| Err(ExchangeError::corrupt_because("reading the output", e)))
        }
    };
    match fetched {
        Err(e) => error_reply(&e.context(format!("exchange {} destination {p}", quoted(&task)))),
        Ok((pages, complete)) => {
            let next = token + pages.len() as u64;
            if pages.is_empty() {
                reply(
                    &server,
                    StatusCode::NO_CONTENT,
                    token,
                    next,
                    complete,
                    Body::empty(),
                )
            } else {
                // The pages as they are held (shared, not copied into one body), with their
                // length said up front as for any whole body.
                let length: usize = pages.iter().map(Bytes::len).sum();
                let body = futures::stream::iter(pages.into_iter().map(Ok::<_, Infallible>));
                let mut response = reply(
                    &server,
                    StatusCode::OK,
                    token,
                    next,
                    complete,
                    Body::from_stream(body),
                );
                response.headers_mut().insert(
                    axum::http::header::CONTENT_LENGTH,
                    HeaderValue::from(length),
                );
                response
            }
        }
    }
}

/// Pages of live destination `p` from `token` (acknowledging those before).
async fn fetch_live(
    live: &crate::live::LiveExchange,
    p: u32,
    token: u64,
    max_bytes: usize,
    wait: Duration,
) -> Result<(Vec<Bytes>, bool)> {
    live.ack(p, token)?;
    let fetched = live.fetch(p, token, max_bytes, Some(wait)).await?;
    let encoder = match fetched.messages.is_empty() {
        true => None,
        false => live.encoder(),
    };
    let mut pages = Vec::with_capacity(fetched.messages.len());
    for message in fetched.messages {
        let page = match (message, &encoder) {
            (page @ Message::Page { .. }, _) => page,
            (message, Some(encoder)) => encoder.to_page(message)?,
            (Message::Ipc { .. }, None) => unreachable!("a message was encoded with the schema"),
        };
        if let Message::Page { page, .. } = page {
            pages.push(page);
        }
    }
    Ok((pages, fetched.complete))
}

async fn head_results(
    State(server): State<Arc<Server>>,
    Path((task, buffer, token)): Path<(String, String, String)>,
) -> Response {
    let (p, token) = match parse_path(&buffer, &token) {
        Ok(parsed) => parsed,
        Err(e) => return error_reply(&e),
    };
    let (remaining, complete) = match server.exchanges.get(&task) {
        Ok(Exchange::Live(live)) => match (live.remaining_bytes(p, token), live.status(p)) {
            (Ok(bytes), Ok(status)) => (bytes, status.complete && bytes == 0),
            (Err(e), _) | (_, Err(e)) => return error_reply(&e),
        },
        Ok(Exchange::Finished(output)) => {
            if let Err(e) = check_destination(&Exchange::Finished(output.clone()), &task, p) {
                return error_reply(&e);
            }
            // A HEAD makes no state: a destination not read yet holds nothing so far.
            let (held, read_all) = match server.existing_file_buffer(&task, p) {
                None => (0, false),
                Some(buffer) => {
                    let buffer = buffer.lock().unwrap_or_else(|e| e.into_inner());
                    let skip = token.saturating_sub(buffer.first);
                    let skip = usize::try_from(skip).unwrap_or(usize::MAX);
                    let held: u64 = buffer.pages.iter().skip(skip).map(|b| b.len() as u64).sum();
                    (held, buffer.read_all)
                }
            };
            if read_all {
                (held, held == 0)
            } else {
                // Not all read yet: what the manifest says the destination holds, at most.
                (
                    held.max(output.manifest().destinations[p as usize].bytes),
                    false,
                )
            }
        }
        Err(_) => (0, false),
    };
    let mut response = reply(
        &server,
        StatusCode::OK,
        token,
        token,
        complete,
        Body::empty(),
    );
    response.headers_mut().insert(
        headers::BUFFER_REMAINING_BYTES,
        HeaderValue::from(remaining),
    );
    response
}

async fn acknowledge(
    State(server): State<Arc<Server>>,
    Path((task, buffer, token)): Path<(String, String, String)>,
) -> Response {
    let (p, token) = match parse_path(&buffer, &token) {
        Ok(parsed) => parsed,
        Err(e) => return error_reply(&e),
    };
    // A destination out of range is refused before any state is made for it.
    let exchange = match served(&server, &task, p) {
        Ok(exchange) => exchange,
        Err(e) => return error_reply(&e),
    };
    // A token past the pages sent is refused before anything is freed.
    let acked = match exchange {
        Exchange::Live(live) => live.ack(p, token),
        Exchange::Finished(_) => match server.existing_file_buffer(&task, p) {
            // Nothing read yet: no page sent to acknowledge, and no state to make.
            None => check_sent(token, 0),
            Some(buffer) => buffer.lock().unwrap_or_else(|e| e.into_inner()).ack(token),
        },
    };
    match acked.map_err(|e| e.context(format!("exchange {} destination {p}", quoted(&task)))) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error_reply(&e),
    }
}

async fn delete_buffer(
    State(server): State<Arc<Server>>,
    Path((task, buffer)): Path<(String, String)>,
) -> Response {
    let p = match parse_path(&buffer, "0") {
        Ok((p, _)) => p,
        Err(e) => return error_reply(&e),
    };
    let closed = match served(&server, &task, p) {
        Ok(Exchange::Live(live)) => live.close(p),
        Ok(Exchange::Finished(_)) => {
            let mut files = server.files.lock().unwrap_or_else(|e| e.into_inner());
            files.remove(&(task.clone(), p));
            Ok(())
        }
        Err(e) => Err(e),
    };
    match closed {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error_reply(&e),
    }
}
