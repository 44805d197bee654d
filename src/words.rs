//! Things put in words for people: an OS error as `strerror` says it, a span of time, a name
//! made safe to draw on a terminal. Used in every room; uses none.

use std::io;
use std::time::Duration;

/// The text of an OS error without Rust's " (os error N)" tail: what `strerror` says, as other
/// Unix tools print it.
pub fn describe(error: &io::Error) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => text.trim_end_matches(&format!(" (os error {code})")).to_owned(),
        None => text,
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
    fn control_characters_are_not_drawn() {
        assert_eq!(printable("a\nb\x1b[2J"), "a?b?[2J");
    }
}
