//! Sizes as users write them: [`parse_bytes`].

/// `1000`, `64k`, `64KiB`, `256M`, `256MiB`, `1G`, `1GiB` (units of 1024) as bytes.
///
/// # Errors
/// A message naming the text: not a number, an unknown unit, or too large.
///
/// ```
/// assert_eq!(partout_input::parse_bytes("256MiB"), Ok(256 << 20));
/// assert!(partout_input::parse_bytes("12 parsecs").is_err());
/// ```
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (K, M or G)")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert!(parse_bytes("12 parsecs").unwrap_err().contains("unit"));
        assert!(parse_bytes("lots").is_err());
        assert!(
            parse_bytes("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
    }
}
