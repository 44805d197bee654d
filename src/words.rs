//! Things put in words for people: an OS error as `strerror` says it, what a panic said, a
//! span of time, a count of bytes, a name made safe to draw on a terminal. Used in every
//! room; uses only `size`.

use std::io;
use std::time::Duration;

use crate::size::Bytes;

/// The text of an OS error without Rust's " (os error N)" tail: what `strerror` says, as other
/// Unix tools print it.
pub fn describe(error: &io::Error) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => text.trim_end_matches(&format!(" (os error {code})")).to_owned(),
        None => text,
    }
}

/// What a panic said: its message, when it has one.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_owned(),
        (_, Some(text)) => text.clone(),
        _ => "it panicked".to_owned(),
    }
}

/// A span of time as `h:mm:ss`, or `Nd h:mm:ss` from a day on; fractions of a second are cut.
pub fn duration(d: Duration) -> String {
    let total = d.as_secs();
    let (days, hours) = (total / 86_400, total / 3_600 % 24);
    let (minutes, seconds) = (total / 60 % 60, total % 60);
    if days > 0 {
        format!("{days}d {hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{hours}:{minutes:02}:{seconds:02}")
    }
}

/// A span of time as a report or a message says it: tenths of a second under a minute, where
/// waits and outages are usually short and `0:00:00` would hide them (`0.8 s`, `12.0 s`);
/// [`duration`] beyond (`0:03:20`).
pub fn span(d: Duration) -> String {
    if d < Duration::from_secs(60) { format!("{:.1} s", d.as_secs_f64()) } else { duration(d) }
}

/// A count of bytes as a message states it: exact, and from 1 KiB on led by the size people
/// read at a glance, as [`Bytes`] shows it: `700 bytes`, `406 MiB (425197568 bytes)`.
///
/// The exact figure always stays, for a script or a person checking what a file holds. The
/// size comes first from the point where [`Bytes`] changes unit: below 1 KiB the figure is
/// three digits at most and the size would only say it again (`700 B`); from 1 KiB on it
/// tells the magnitude that a run of digits hides.
pub fn byte_count(count: u64) -> String {
    if count < 1024 {
        format!("{count} bytes")
    } else {
        format!("{} ({count} bytes)", Bytes(count))
    }
}

/// `text` with control characters shown as `?`: a name is drawn on a terminal, where an
/// escape sequence or a newline in it would break the line.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_error_without_rusts_tail() {
        let error = io::Error::from_raw_os_error(libc::EPIPE);
        assert_eq!(describe(&error), "Broken pipe");
    }

    #[test]
    fn a_count_of_bytes_is_exact_and_led_by_its_size_from_a_kib() {
        let said: Vec<String> =
            [0, 700, 1023, 1024, 3_355_443, 425_197_568].into_iter().map(byte_count).collect();
        assert_eq!(
            said,
            [
                "0 bytes",
                "700 bytes",
                "1023 bytes",
                "1 KiB (1024 bytes)",
                "3.2 MiB (3355443 bytes)",
                "406 MiB (425197568 bytes)",
            ]
        );
    }

    #[test]
    fn control_characters_are_not_drawn() {
        assert_eq!(printable("a\nb\x1b[2J"), "a?b?[2J");
    }
}
