//! The parts of the environment record that come from this process: the date and the command.

use std::time::{SystemTime, UNIX_EPOCH};

/// The cudarc version this crate is built against (pinned in the workspace's `Cargo.toml`).
pub const CUDARC: &str = "0.19.10";

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn today() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (y, m, d) = civil_date((seconds / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (the days-to-civil algorithm:
/// count in 400-year eras of 146,097 days, with years starting in March so that the leap day
/// is the last day of a year).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_since_the_epoch_become_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(11_017), (2000, 3, 1));
        assert_eq!(civil_date(19_782), (2024, 2, 29));
        assert_eq!(civil_date(20_818), (2026, 12, 31));
        assert_eq!(civil_date(-1), (1969, 12, 31));
    }

    #[test]
    fn today_is_a_date() {
        let t = today();
        assert_eq!(t.len(), 10, "{t}");
        assert!(t.starts_with("20"), "{t}");
        assert_eq!(&t[4..5], "-");
    }

    /// The recorded cudarc version is the one the workspace pins.
    #[test]
    fn the_recorded_cudarc_version_is_the_pinned_one() {
        let manifest =
            std::fs::read_to_string(crate::repository_root().join("Cargo.toml")).unwrap();
        let pin = manifest
            .lines()
            .find(|l| l.starts_with("cudarc"))
            .expect("the workspace pins cudarc");
        assert!(pin.contains(&format!("\"={CUDARC}\"")), "{pin}");
    }
}
