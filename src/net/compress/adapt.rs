//! `--compress auto`: the level follows the bottleneck. A pure decision ([`Adapt::decide`])
//! over what the sending thread observed in a period ([`Observation`]), so that it can be
//! fed synthetic periods in tests.
//!
//! The sending thread does three things: it compresses (and seals), it writes, and it waits
//! for the input between writes. Which one takes its time says where the bottleneck is:
//!
//! - its writes wait for the socket (the link refuses bytes) while it has room: a higher
//!   level sends fewer bytes over the same link, so go up, unless the level above is known
//!   to get no better ratio on this data (a level that saves nothing is not chosen however
//!   slow the link), or it was tried and could not keep up (for a while, doubling);
//! - it is busy compressing, the socket takes everything at once, and the input is waiting
//!   for it (each write comes straight after the last): the CPU is the bottleneck, so go
//!   down, to storing frames as they are at the bottom;
//! - the level gets nothing from this data (under 3 % saved): go down to the lowest level,
//!   whose rare trials ([`super::TRY_ONE_IN`]) cost almost nothing and notice when the data
//!   changes;
//! - otherwise (the input is the bottleneck) stay.
//!
//! A move needs [`HOLD`] periods in a row that agree: hysteresis against one noisy period.
//! zstd's own `--adapt` moves by which side waits but never looks at the ratio, and moves
//! only after 32 MB jobs (zstd#2200); here a frame is 64 KiB and the ratio each level
//! actually got on this data is remembered for [`FRESH`] periods.

use std::fmt;
use std::time::Duration;

/// A place on the ladder: frames stored as they are, or a zstd level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// No compression: frames go as they are.
    Stored,
    /// zstd at this level.
    Level(i32),
}

impl Rung {
    /// The zstd level, if frames are compressed.
    pub fn level(self) -> Option<i32> {
        match self {
            Rung::Stored => None,
            Rung::Level(level) => Some(level),
        }
    }
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rung::Stored => f.write_str("stored"),
            Rung::Level(level) => write!(f, "level {level}"),
        }
    }
}

/// The rungs `auto` moves between, cheapest first: zstd's negative levels reach lz4's
/// speeds; above 12, zstd's speed falls by half again for a few percent of ratio.
pub const LADDER: [Rung; RUNGS] = [
    Rung::Stored,
    Rung::Level(-7),
    Rung::Level(-3),
    Rung::Level(1),
    Rung::Level(3),
    Rung::Level(6),
    Rung::Level(9),
    Rung::Level(12),
];

/// Rungs on the [`LADDER`].
pub const RUNGS: usize = 8;

/// Where `auto` starts: zstd's level 1, fast enough for a gigabit link on one core.
pub const START: Rung = Rung::Level(1);

/// The lowest rung that still compresses (and tries frames).
const LOWEST_LEVEL: usize = 1;

/// Periods in a row that must agree before the level moves.
pub const HOLD: u32 = 2;

/// Periods a ratio seen at a level is remembered: the data changes (a tar of sources then
/// of media).
pub const FRESH: u64 = 40;

/// The writes waited this share of the period for the socket: the link is the bottleneck.
const LINK_BOUND: f64 = 0.20;

/// Below this share of waiting for the socket, and of waiting for the input, and with at
/// least [`BUSY_COMPRESSING`] spent compressing: the CPU is the bottleneck.
const LINK_FREE: f64 = 0.05;
const INPUT_READY: f64 = 0.10;
const BUSY_COMPRESSING: f64 = 0.25;

/// A level that saves less than this (stream bytes per byte sent) saves nothing.
const MIN_RATIO: f64 = 1.03;

/// A level above must get this much more ratio to be worth its time.
const BETTER: f64 = 1.02;

/// Periods a rung that could not keep up is left alone, at first; doubled each time, up to
/// [`MOST_BACKOFF`].
const FIRST_BACKOFF: u64 = 8;
const MOST_BACKOFF: u64 = 128;

/// The rung's place on the ladder (a fixed level off it: the nearest below).
pub fn index(rung: Rung) -> usize {
    match rung {
        Rung::Stored => 0,
        Rung::Level(level) => {
            LADDER.iter().rposition(|r| r.level().is_some_and(|l| l <= level)).unwrap_or(1)
        }
    }
}

/// What the sending thread did in one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    /// The period's length.
    pub span: Duration,
    /// Time spent compressing and sealing frames.
    pub packing: Duration,
    /// Time spent writing them: mostly waiting for the socket to take bytes.
    pub writing: Duration,
    /// Time between writes: waiting for the input.
    pub idle: Duration,
    /// Stream bytes sent, and the payload bytes they took.
    pub stream: u64,
    /// See `stream`.
    pub packed: u64,
}

impl Observation {
    fn share(&self, part: Duration) -> f64 {
        part.as_secs_f64() / self.span.as_secs_f64().max(1e-9)
    }

    fn ratio(&self) -> f64 {
        self.stream as f64 / self.packed.max(1) as f64
    }
}

/// A level change, and why (for `--debug`).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The rung before.
    pub from: Rung,
    /// The rung now.
    pub to: Rung,
    /// Why, in words.
    pub why: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}: {}", self.from, self.to, self.why)
    }
}

/// Which way a period leans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lean {
    Up,
    Down { to: usize, slow: bool },
}

/// `auto`'s state: the rung, the ratio each rung got, the rungs that could not keep up.
#[derive(Debug, Clone)]
pub struct Adapt {
    rung: usize,
    periods: u64,
    /// The ratio seen at each rung, and the period it was last seen in.
    ratios: [Option<(f64, u64)>; RUNGS],
    /// A rung is not climbed to again before this period (it could not keep up), and the
    /// wait the next time.
    slow_until: [u64; RUNGS],
    backoff: [u64; RUNGS],
    /// The way the last periods leaned, and how many in a row.
    leaning: Option<(Lean, u32)>,
}

impl Adapt {
    /// Starting at `rung`.
    pub fn new(rung: Rung) -> Adapt {
        Adapt {
            rung: index(rung),
            periods: 0,
            ratios: [None; RUNGS],
            slow_until: [0; RUNGS],
            backoff: [FIRST_BACKOFF; RUNGS],
            leaning: None,
        }
    }

    /// The rung now.
    pub fn rung(&self) -> Rung {
        LADDER[self.rung]
    }

    /// The ratio last seen at `rung`, if recent.
    fn ratio_at(&self, rung: usize) -> Option<f64> {
        let (ratio, seen) = self.ratios[rung]?;
        (self.periods.saturating_sub(seen) <= FRESH).then_some(ratio)
    }

    /// Takes one period's observation; a change of rung when one is due.
    pub fn decide(&mut self, seen: &Observation) -> Option<Change> {
        self.periods += 1;
        if seen.stream == 0 || seen.span.is_zero() {
            // Nothing sent: nothing learnt.
            self.leaning = None;
            return None;
        }
        let ratio = seen.ratio();
        if self.rung > 0 {
            self.ratios[self.rung] = Some((ratio, self.periods));
        }
        let (waited, idle) = (seen.share(seen.writing), seen.share(seen.idle));
        let busy = seen.share(seen.packing);
        let (lean, why) = if self.rung > LOWEST_LEVEL && ratio < MIN_RATIO {
            let why = format!("{} saves nothing on this data (x{ratio:.2})", self.rung());
            (Some(Lean::Down { to: LOWEST_LEVEL, slow: false }), why)
        } else if let Some(below) = self.gains_nothing_over_below(ratio) {
            let why = format!(
                "{} gets no more than {} on this data (x{ratio:.2} against x{below:.2})",
                self.rung(),
                LADDER[self.rung - 1]
            );
            (Some(Lean::Down { to: self.rung - 1, slow: false }), why)
        } else if waited >= LINK_BOUND {
            let why = format!(
                "the link refused bytes {:.0} % of the time, the CPU had room (x{ratio:.2})",
                waited * 100.0
            );
            (self.climbable(ratio).then_some(Lean::Up), why)
        } else if waited < LINK_FREE && idle < INPUT_READY && busy >= BUSY_COMPRESSING {
            let why = format!(
                "compressing took {:.0} % of the time, the input waited and the socket had room",
                busy * 100.0
            );
            let down = self.rung.checked_sub(1).map(|to| Lean::Down { to, slow: true });
            (down, why)
        } else {
            (None, String::new())
        };
        let Some(lean) = lean else {
            self.leaning = None;
            return None;
        };
        let count = match self.leaning {
            Some((was, count)) if was == lean => count + 1,
            _ => 1,
        };
        self.leaning = Some((lean, count));
        if count < HOLD {
            return None;
        }
        self.leaning = None;
        let from = self.rung();
        match lean {
            Lean::Up => self.rung += 1,
            Lean::Down { to, slow } => {
                if slow {
                    self.slow_until[self.rung] = self.periods + self.backoff[self.rung];
                    self.backoff[self.rung] = (self.backoff[self.rung] * 2).min(MOST_BACKOFF);
                }
                self.rung = to;
            }
        }
        Some(Change { from, to: self.rung(), why })
    }

    /// The ratio the rung below got, when this one gets no more than it.
    fn gains_nothing_over_below(&self, ratio: f64) -> Option<f64> {
        if self.rung <= LOWEST_LEVEL {
            return None;
        }
        self.ratio_at(self.rung - 1).filter(|below| ratio <= below * BETTER)
    }

    /// Whether the rung above is worth climbing to, with `ratio` got here.
    fn climbable(&self, ratio: f64) -> bool {
        let above = self.rung + 1;
        if above >= RUNGS || self.slow_until[above] > self.periods {
            return false;
        }
        if self.rung >= LOWEST_LEVEL && ratio < MIN_RATIO {
            // This data does not compress: no level will save anything.
            return false;
        }
        self.ratio_at(above).is_none_or(|up| up > ratio * BETTER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: Duration = Duration::from_millis(250);

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// A period where the writes waited `writing` ms of 250, compressing took `packing`,
    /// and the input `idle`; `ratio` as got.
    fn period(packing: u64, writing: u64, idle: u64, ratio: f64) -> Observation {
        let stream = 10 << 20;
        Observation {
            span: SPAN,
            packing: ms(packing),
            writing: ms(writing),
            idle: ms(idle),
            stream,
            packed: (stream as f64 / ratio) as u64,
        }
    }

    /// Feeds `periods` of what `world` says at each rung; the rungs visited.
    fn run(adapt: &mut Adapt, periods: usize, world: impl Fn(Rung) -> Observation) -> Vec<Rung> {
        let mut visited = vec![adapt.rung()];
        for _ in 0..periods {
            if let Some(change) = adapt.decide(&world(adapt.rung())) {
                assert_eq!(change.from, *visited.last().unwrap());
                assert!(!change.why.is_empty());
                visited.push(change.to);
            }
        }
        visited
    }

    #[test]
    fn a_slow_link_with_compressible_data_climbs() {
        // 50 Mbit/s: the socket refuses bytes most of the time at every level; the ratio
        // grows with the level.
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |rung| {
            let level = rung.level().unwrap_or(0);
            period(20 + level as u64 * 5, 200, 2, 2.5 + level as f64 / 10.0)
        });
        assert_eq!(adapt.rung(), LADDER[RUNGS - 1], "visited {visited:?}");
        assert!(visited.windows(2).all(|w| index(w[0]) < index(w[1])), "{visited:?}");
    }

    #[test]
    fn one_period_does_not_move_it() {
        let mut adapt = Adapt::new(START);
        assert_eq!(adapt.decide(&period(20, 200, 2, 3.0)), None);
        assert_eq!(adapt.decide(&period(60, 20, 170, 3.0)), None, "the input was the bottleneck");
        assert_eq!(adapt.decide(&period(20, 200, 2, 3.0)), None);
        assert!(adapt.decide(&period(20, 200, 2, 3.0)).is_some(), "two in a row move it");
    }

    #[test]
    fn the_cpu_as_the_bottleneck_brings_it_down_to_storing() {
        // An unlimited link: the socket takes everything, the input always has more, the
        // thread spends its time compressing.
        let mut adapt = Adapt::new(Rung::Level(9));
        let visited = run(&mut adapt, 30, |rung| match rung {
            Rung::Stored => period(20, 5, 3, 1.0),
            Rung::Level(_) => period(230, 3, 5, 3.0),
        });
        assert_eq!(adapt.rung(), Rung::Stored, "visited {visited:?}");
    }

    #[test]
    fn a_level_too_slow_for_the_link_is_left_and_tried_again_later_and_later() {
        // At level 3 and above the CPU cannot keep up; at level 1 the link is the
        // bottleneck. It must settle at 1, trying 3 ever more rarely.
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 400, |rung| match rung.level() {
            Some(level) if level >= 3 => period(240, 2, 2, 3.5),
            _ => period(120, 100, 2, 3.0),
        });
        let tries = visited.iter().filter(|&&r| r == Rung::Level(3)).count();
        assert!((2..=8).contains(&tries), "level 3 tried {tries} times: {visited:?}");
        assert_eq!(adapt.rung(), Rung::Level(1));
    }

    #[test]
    fn incompressible_data_stays_low_however_slow_the_link() {
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |_| period(5, 240, 1, 1.0));
        assert!(visited.iter().all(|r| index(*r) <= index(START)), "climbed: {visited:?}");
        assert_eq!(adapt.rung(), LADDER[LOWEST_LEVEL], "visited {visited:?}");
        // From higher up, it comes down.
        let mut adapt = Adapt::new(Rung::Level(9));
        run(&mut adapt, 10, |_| period(5, 240, 1, 1.01));
        assert_eq!(adapt.rung(), LADDER[LOWEST_LEVEL]);
    }

    #[test]
    fn a_level_that_gets_no_better_ratio_is_not_climbed_to() {
        // Level 3 gets what level 1 gets: however slow the link, stay at 1 once seen.
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 60, |rung| match rung.level() {
            Some(level) if level >= 3 => period(60, 180, 2, 2.0),
            _ => period(30, 200, 2, 2.0),
        });
        let above = visited.iter().filter(|r| index(**r) > index(Rung::Level(3))).count();
        assert_eq!(above, 0, "{visited:?}");
    }

    #[test]
    fn the_input_as_the_bottleneck_changes_nothing() {
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |_| period(40, 5, 200, 3.0));
        assert_eq!(visited, vec![START]);
    }

    #[test]
    fn fixed_levels_off_the_ladder_find_their_place() {
        assert_eq!(index(Rung::Stored), 0);
        assert_eq!(index(Rung::Level(-7)), 1);
        assert_eq!(index(Rung::Level(2)), index(Rung::Level(1)));
        assert_eq!(index(Rung::Level(22)), RUNGS - 1);
        assert_eq!(index(Rung::Level(-100)), 1);
    }
}
