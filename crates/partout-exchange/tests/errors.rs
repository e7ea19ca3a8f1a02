//! The writer's errors keep their causes, and a chain of them names each cause once.

use arrow_schema::ArrowError;
use partout_core::PartoutError;
use partout_exchange::WriterError;
use partout_format::FormatError;
use std::error::Error;
use std::fmt;

/// Every message of `error`'s chain, outermost first.
fn chain(error: &dyn Error) -> Vec<String> {
    let mut links = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(e) = cause {
        links.push(e.to_string());
        cause = e.source();
    }
    links
}

fn times(links: &[String], needle: &str) -> usize {
    links.iter().map(|l| l.matches(needle).count()).sum()
}

#[test]
fn an_arrow_error_is_named_once_in_every_chain() {
    let arrow = || ArrowError::ComputeError("offsets overflow i32".into());
    let errors: Vec<Box<dyn Error>> = vec![
        Box::new(PartoutError::Arrow(arrow())),
        Box::new(FormatError::Arrow(arrow())),
        Box::new(WriterError::Partition(PartoutError::Arrow(arrow()))),
        Box::new(WriterError::Encode(FormatError::Arrow(arrow()))),
        Box::new(WriterError::Arrow(arrow())),
    ];
    for error in &errors {
        let links = chain(error.as_ref());
        assert_eq!(times(&links, "offsets overflow i32"), 1, "{links:?}");
    }
}

#[test]
fn the_cause_of_an_arrow_error_stays_in_the_chain() {
    // An Arrow error with a cause of its own: the cause is the next link, once.
    let io = std::io::Error::other("the device is gone");
    let error = WriterError::Encode(FormatError::Arrow(ArrowError::IoError(
        "writing a message".into(),
        io,
    )));
    let links = chain(&error);
    assert_eq!(times(&links, "the device is gone"), 1, "{links:?}");
    assert!(links[0].contains("encoding failed"), "{links:?}");
}

#[derive(Debug)]
struct QuotaExceeded {
    bytes: u64,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quota exceeded by {} bytes", self.bytes)
    }
}

impl Error for QuotaExceeded {}

#[test]
fn a_sink_error_keeps_its_own_type() {
    let error = WriterError::sink(Some(3), QuotaExceeded { bytes: 17 });
    assert_eq!(error.to_string(), "writing destination 3 failed");
    let cause = error.source().expect("the sink's error is the cause");
    let quota = cause
        .downcast_ref::<QuotaExceeded>()
        .expect("the cause is the sink's own error, not a wrapper");
    assert_eq!(quota.bytes, 17);

    let finishing = WriterError::sink(None, std::io::Error::other("disk full"));
    assert_eq!(
        chain(&finishing),
        ["finishing the output failed", "disk full"]
    );
    assert!(
        finishing
            .source()
            .unwrap()
            .downcast_ref::<std::io::Error>()
            .is_some()
    );
}
