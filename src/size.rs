//! Byte sizes as users type them: `512K`, `32M`, `1.5G`, `2GiB`.
//!
//! Suffixes are binary, as in mbuffer and pv: `32M` is 32 MiB, and so is `32MB`. A bad size is
//! answered with the format, so that `-m 3Q` teaches what to type instead.

use std::fmt;

/// What a size argument may look like; shown whenever one is rejected.
pub const SIZE_FORMAT: &str = "a number of bytes with an optional binary suffix K, M, G, T, P \
     or E (also KiB, MB, ...; 1K = 1024), e.g. 512K, 32M, 1.5G";

/// Why a size argument was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a number with a known suffix.
    #[error("not a size: expected {SIZE_FORMAT}")]
    Malformed,
    /// A share of memory that is not one (`0%`, `150%`, `x%`), or the machine's memory is
    /// not known.
    #[error("not a share of memory: expected more than 0% and at most 100%, e.g. 2%, or a size")]
    BadShare,
    /// A valid size, but more than this machine can address.
    #[error("too large for this machine")]
    TooLarge,
    /// A valid size below the minimum the option accepts.
    #[error("too small: at least {} is needed", Bytes(*.0))]
    TooSmall(u64),
}

/// Parses a size such as `32M` into bytes, requiring at least `min` bytes.
pub fn parse_size(text: &str, min: u64) -> Result<u64, SizeError> {
    let bytes =
        parse_size::Config::new().with_binary().parse_size(text.trim()).map_err(|e| match e {
            parse_size::Error::PosOverflow => SizeError::TooLarge,
            _ => SizeError::Malformed,
        })?;
    if usize::try_from(bytes).is_err() {
        return Err(SizeError::TooLarge);
    }
    if bytes < min {
        return Err(SizeError::TooSmall(min));
    }
    Ok(bytes)
}

/// Parses a buffer size (`-m`): a size as [`parse_size`] takes it, or a share of the
/// machine's physical memory (`2%`, as mbuffer's `-m`), which `memory` says when asked (the
/// platform's answer: sizes know none).
pub fn parse_buffer_size(
    text: &str,
    memory: impl FnOnce() -> Option<u64>,
) -> Result<u64, SizeError> {
    let Some(percent) = text.trim().strip_suffix('%') else { return parse_size(text, 1) };
    let percent = percent
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .ok_or(SizeError::BadShare)?;
    Ok(share_of_memory(memory().ok_or(SizeError::BadShare)?, percent))
}

/// `percent` of `memory` bytes, at least a byte: `-m N%`, in accel's syntax and mbuffer's.
pub fn share_of_memory(memory: u64, percent: f64) -> u64 {
    ((memory as f64 * percent / 100.0) as u64).max(1)
}

/// A byte count shown the way people read it: `512 B`, `1.5 MiB`, `3.25 GiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut value = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        // Three significant digits, without trailing zeros: 1 MiB, 1.5 MiB, 12.3 MiB, 123 MiB.
        let text = if value >= 100.0 {
            format!("{value:.0}")
        } else if value >= 10.0 {
            format!("{value:.1}")
        } else {
            format!("{value:.2}")
        };
        let text = if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.')
        } else {
            &text
        };
        write!(f, "{text} {}", UNITS[unit])
    }
}

/// `part` as a whole percentage of `whole`, rounded; but never `0%` for something nor `100%`
/// for less than everything, since those would read as "never" and "always".
pub fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".to_string();
    }
    let percent = (u128::from(part) * 100 + u128::from(whole) / 2) / u128::from(whole);
    if part > 0 && percent == 0 {
        "<1%".to_string()
    } else if part < whole && percent >= 100 {
        ">99%".to_string()
    } else {
        format!("{percent}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_may_be_a_share_of_memory() {
        let memory = || Some(16 << 30);
        assert_eq!(parse_buffer_size("50%", memory), Ok(8 << 30));
        assert_eq!(parse_buffer_size("32M", memory), Ok(32 << 20));
        assert_eq!(parse_buffer_size("32M", || None), Ok(32 << 20), "memory asked only for N%");
        assert_eq!(parse_buffer_size("1%", || None), Err(SizeError::BadShare), "memory unknown");
        for bad in ["0%", "101%", "x%", "-2%"] {
            assert_eq!(parse_buffer_size(bad, memory), Err(SizeError::BadShare), "{bad}");
        }
    }

    #[test]
    fn suffixes_are_binary() {
        assert_eq!(parse_size("512K", 1), Ok(512 * 1024));
        assert_eq!(parse_size("32M", 1), Ok(32 << 20));
        assert_eq!(parse_size("32MB", 1), Ok(32 << 20));
        assert_eq!(parse_size("32MiB", 1), Ok(32 << 20));
        assert_eq!(parse_size("2GiB", 1), Ok(2 << 30));
        assert_eq!(parse_size("1.5G", 1), Ok(3 << 29));
        assert_eq!(parse_size("4096", 1), Ok(4096));
        assert_eq!(parse_size("1k", 1), Ok(1024));
        assert_eq!(parse_size(" 8M ", 1), Ok(8 << 20));
        // Every suffix the message lists is taken, and none it does not list.
        for (suffix, shift) in [("K", 10), ("M", 20), ("G", 30), ("T", 40), ("P", 50), ("E", 60)] {
            assert!(
                SIZE_FORMAT.contains(&format!(" {suffix},"))
                    || SIZE_FORMAT.contains(&format!(" {suffix} ")),
                "{suffix}"
            );
            assert_eq!(parse_size(&format!("1{suffix}"), 1), Ok(1 << shift), "{suffix}");
        }
        assert_eq!(parse_size("1Z", 1), Err(SizeError::Malformed));
    }

    #[test]
    fn bad_sizes_say_what_is_accepted() {
        for bad in ["3Q", "", "M", "-1M", "1..5G", "twelve", "1M2"] {
            let err = parse_size(bad, 1).unwrap_err();
            assert_eq!(err, SizeError::Malformed, "{bad:?}");
            assert!(err.to_string().contains("32M"), "{err}");
        }
    }

    #[test]
    fn limits() {
        assert_eq!(parse_size("99999999999E", 1), Err(SizeError::TooLarge));
        assert_eq!(parse_size("0", 1), Err(SizeError::TooSmall(1)));
        assert_eq!(parse_size("1K", 4096), Err(SizeError::TooSmall(4096)));
        assert_eq!(SizeError::TooSmall(4096).to_string(), "too small: at least 4 KiB is needed");
    }

    #[test]
    fn bytes_display() {
        let shown: Vec<String> = [0, 1023, 1024, 1536, 10 << 20, 12_900_000, 150 << 20, 3 << 40]
            .iter()
            .map(|&n| Bytes(n).to_string())
            .collect();
        assert_eq!(
            shown,
            ["0 B", "1023 B", "1 KiB", "1.5 KiB", "10 MiB", "12.3 MiB", "150 MiB", "3 TiB"]
        );
    }

    #[test]
    fn shares_never_say_never_or_always_wrongly() {
        assert_eq!(share(0, 100), "0%");
        assert_eq!(share(1, 1000), "<1%");
        assert_eq!(share(50, 100), "50%");
        assert_eq!(share(999, 1000), ">99%");
        assert_eq!(share(100, 100), "100%");
        assert_eq!(share(5, 0), "0%");
        assert_eq!(share(u64::MAX, u64::MAX), "100%");
    }
}
