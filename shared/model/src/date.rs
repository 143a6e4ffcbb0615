//! Dates as the registry shows them (`2026-11-23`, UTC), from unix seconds.

use time::{Date, OffsetDateTime};

/// `YYYY-MM-DD` (UTC) of `secs` since the epoch; a time past what a date
/// holds prints as `9999-12-31`.
pub fn ymd(secs: u64) -> String {
    let date = i64::try_from(secs)
        .ok()
        .and_then(|secs| OffsetDateTime::from_unix_timestamp(secs).ok())
        .map_or(Date::MAX, OffsetDateTime::date);
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

#[cfg(test)]
mod tests {
    use super::ymd;

    #[test]
    fn dates_of_unix_seconds() {
        assert_eq!(ymd(0), "1970-01-01");
        assert_eq!(ymd(1_795_616_859), "2026-11-25");
        assert_eq!(ymd(951_782_400), "2000-02-29");
        assert_eq!(ymd(u64::MAX), "9999-12-31");
    }
}
