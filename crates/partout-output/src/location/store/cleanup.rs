//! How a failed commit takes back what it wrote to a store ([`Cleanup`]), and how its error
//! says what it could not ([`left_behind`]).

use crate::OutputError;
use std::time::{Duration, Instant};

/// What a failed run could not take back from the store within its patience: objects it
/// wrote, uploads it began.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Left {
    pub(super) objects: Vec<String>,
    pub(super) uploads: Vec<String>,
}

/// `error`, saying what of the run is left in the store, if anything is.
pub(super) fn left_behind(error: OutputError, left: Left) -> OutputError {
    if left == Left::default() {
        return error;
    }
    // The first of them by name, and how many more.
    let named = |all: &[String]| match all {
        [first] => first.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
        [] => String::new(),
    };
    let mut said = Vec::new();
    if !left.objects.is_empty() {
        said.push(format!(
            "{} object(s) of this run could not be deleted ({}), named by no manifest",
            left.objects.len(),
            named(&left.objects)
        ));
    }
    if !left.uploads.is_empty() {
        said.push(format!(
            "{} multipart upload(s) could not be aborted ({}): the store keeps their parts \
             until they are aborted or a lifecycle rule expires them",
            left.uploads.len(),
            named(&left.uploads)
        ));
    }
    // After the cause: `uploading OBJECT: CAUSE; what is left`.
    let said = said.join("; ");
    match error {
        OutputError::Io { context, source } => OutputError::Io {
            context,
            source: std::io::Error::new(source.kind(), format!("{source}; {said}")),
        },
        other => OutputError::Io {
            context: other.to_string(),
            source: std::io::Error::other(said),
        },
    }
}

/// How a failed run takes back what it wrote: each request tried again until it succeeds,
/// finds nothing to remove, or `patience` has passed since the failure, so a store that went
/// away for a while (a server restarted) is cleaned once it is back. Each try is itself
/// retried by the client's `RetryConfig`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cleanup {
    until: Instant,
    pause: Duration,
}

impl Cleanup {
    pub(super) fn new(patience: Duration) -> Self {
        Self {
            until: Instant::now() + patience,
            pause: Duration::from_millis(100),
        }
    }

    /// Whether a try that ended in `result` is the last: it succeeded, found nothing to
    /// remove, or the time is up (false). Otherwise waits before the next try (true).
    pub(super) async fn again(&mut self, result: object_store::Result<()>) -> Option<bool> {
        match result {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Some(true),
            Err(_) if Instant::now() + self.pause > self.until => Some(false),
            Err(_) => {
                tokio::time::sleep(self.pause).await;
                self.pause = (self.pause * 2).min(Duration::from_secs(2));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cleanup_tries_again_until_done_nothing_is_left_or_its_time_is_up() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let failed = || {
            Err(object_store::Error::Generic {
                store: "S3",
                source: "connection refused".into(),
            })
        };
        let gone = || {
            Err(object_store::Error::NotFound {
                path: "k".into(),
                source: "no such key".into(),
            })
        };
        runtime.block_on(async {
            let mut patient = Cleanup::new(Duration::from_secs(60));
            assert_eq!(patient.again(Ok(())).await, Some(true));
            assert_eq!(patient.again(gone()).await, Some(true));
            // A failure within the patience: another try, after a longer pause.
            assert_eq!(patient.again(failed()).await, None);
            assert_eq!(patient.pause, Duration::from_millis(200));
            let mut out_of_time = Cleanup::new(Duration::ZERO);
            assert_eq!(out_of_time.again(failed()).await, Some(false));
        });
    }

    #[test]
    fn what_a_failed_run_leaves_is_said_after_its_cause() {
        let cause = || OutputError::Io {
            context: "uploading lake/out/part-00000-r1.arrow".into(),
            source: std::io::Error::other("connection refused"),
        };
        let nothing = left_behind(cause(), Left::default());
        let chain = |e: &OutputError| format!("{e}: {}", std::error::Error::source(e).unwrap());
        assert_eq!(
            chain(&nothing),
            "uploading lake/out/part-00000-r1.arrow: connection refused"
        );
        let left = Left {
            objects: vec!["lake/out/part-00001-r1.arrow".into(), "x".into()],
            uploads: vec!["lake/out/part-00000-r1.arrow".into()],
        };
        let said = chain(&left_behind(cause(), left.clone()));
        assert!(
            said.starts_with(
                "uploading lake/out/part-00000-r1.arrow: connection refused; 2 object"
            ) && said.contains("(lake/out/part-00001-r1.arrow and 1 more)")
                && said.contains(
                    "1 multipart upload(s) could not be aborted (lake/out/part-00000-r1.arrow)"
                ),
            "{said}"
        );
        let cancelled = left_behind(OutputError::Cancelled, left).to_string();
        assert!(cancelled.starts_with("cancelled"), "{cancelled}");
    }
}
