//! The one test hook of the data path, in debug builds only: `ACCEL_TEST_PANIC=output:N` (or
//! `hash:N`) makes every output (or hash) thread panic once it has taken more than N bytes, so
//! that the tests can show that a thread which panics is heard like any other. A no-op in
//! release builds.

/// Panics if `ACCEL_TEST_PANIC` asks a thread of this `side` (`output`, `hash`) to, having
/// taken `taken` bytes.
pub(crate) fn test_panic(side: &str, taken: u64) {
    #[cfg(debug_assertions)]
    {
        static ASKED: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
        let asked = ASKED.get_or_init(|| {
            let text = std::env::var("ACCEL_TEST_PANIC").ok()?;
            let (side, after) = text.split_once(':')?;
            Some((side.to_owned(), after.parse().ok()?))
        });
        if let Some((asked, after)) = asked.as_ref().filter(|(asked, _)| asked == side) {
            if taken > *after {
                panic!("ACCEL_TEST_PANIC={asked}:{after}");
            }
        }
    }
    let _ = (side, taken);
}
