//! `--compress auto`: the level follows the bottleneck. A pure decision ([`Adapt::decide`])
//! over what the sending thread observed in a period ([`Observation`]), so that it can be
//! fed synthetic periods in tests.
//!
//! The sending thread does three things: it compresses (and seals), it writes, and it waits
//! for the input between writes. Each period says which took its time, how much of the
//! stream moved, and the ratio the level got; each rung remembers its ratio and its rate
//! (the stream moved per second, while the input was not the bottleneck) for [`FRESH`]
//! periods. Then, in order:
//!
//! - a level that gets nothing from this data (under 3 % saved) goes down to the lowest
//!   level, whose rare trials ([`super::TRY_ONE_IN`]) cost almost nothing and notice when
//!   the data changes; a level that gets no more ratio than the one below goes down to it
//!   (a level that saves nothing is not chosen however slow the link);
//! - while the input is the bottleneck (the output waited for it), nothing moves: the rate
//!   says nothing of the level;
//! - a neighbour that moved 5 % more of the stream is moved to;
//! - the writes waited for the socket (the link refuses bytes) while the CPU had room: up,
//!   to a level not tried lately (from storing, straight to level 1);
//! - otherwise the level below, if not tried lately: that is how the CPU as the
//!   bottleneck (the socket takes everything at once) leads down, to storing frames as they
//!   are at the bottom, and how a shared CPU (both ends on one machine, whose receiver makes
//!   the socket refuse bytes) is found out: by the stream each level actually moved.
//!
//! A move needs [`HOLD`] periods in a row that agree: hysteresis against one noisy period.
//! zstd's own `--adapt` moves by which side waits but never looks at the ratio, and moves
//! only after 32 MB jobs (zstd#2200); ACE (Krintz & Sucu, 2006) predicts from the ratio and
//! the rates, per block; here the prediction is the rate each level was seen to move, kept
//! fresh by trying the neighbours now and then.

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

/// Where `auto` starts: frames as they are, which costs nothing where the link is fast; a
/// link that refuses bytes leads to level 1 within half a second, and on from there.
pub const START: Rung = Rung::Stored;

/// Where a link that refuses raw bytes leads first: zstd's level 1.
const FIRST_CLIMB: usize = 3;

/// The lowest rung that still compresses (and tries frames).
const LOWEST_LEVEL: usize = 1;

/// Periods in a row that must agree before the level moves.
pub const HOLD: u32 = 2;

/// Periods a ratio or a throughput seen at a level is trusted: the data changes (a tar of
/// sources then of media), and so does the link. A neighbour not seen for that long is tried
/// again, for [`HOLD`] periods: at most 2 periods in 80, 2.5 % of the time, at a worse level.
pub const FRESH: u64 = 80;

/// The writes waited this share of the period for the socket: the link is the bottleneck.
const LINK_BOUND: f64 = 0.20;

/// Below this share of waiting for the socket, with the input ready: the CPU is.
const LINK_FREE: f64 = 0.05;

/// The output waited for the input this share of the period: the input is the bottleneck,
/// and what moved says nothing of the level.
const INPUT_BOUND: f64 = 0.30;

/// A level that saves less than this (stream bytes per byte sent) saves nothing.
const MIN_RATIO: f64 = 1.03;

/// A level above must get this much more ratio to be worth its time.
const BETTER: f64 = 1.02;

/// A neighbour must have moved this much more of the stream to be moved to: below it, the
/// difference is noise.
const FASTER: f64 = 1.05;

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

    /// Stream bytes per second.
    fn rate(&self) -> f64 {
        self.stream as f64 / self.span.as_secs_f64().max(1e-9)
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

/// Where a period leans: to this rung.
type Lean = usize;

/// What was seen at a rung, and in which period.
#[derive(Debug, Clone, Copy)]
struct Seen {
    value: f64,
    period: u64,
}

/// `auto`'s state: the rung, and what each rung got: its ratio, and the stream it moved per
/// second while the input was not the bottleneck.
#[derive(Debug, Clone)]
pub struct Adapt {
    rung: usize,
    periods: u64,
    ratios: [Option<Seen>; RUNGS],
    rates: [Option<Seen>; RUNGS],
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
            rates: [None; RUNGS],
            leaning: None,
        }
    }

    /// The rung now.
    pub fn rung(&self) -> Rung {
        LADDER[self.rung]
    }

    fn fresh(&self, seen: Option<Seen>) -> Option<f64> {
        let seen = seen?;
        (self.periods.saturating_sub(seen.period) <= FRESH).then_some(seen.value)
    }

    /// The ratio last seen at `rung`, if recent.
    fn ratio_at(&self, rung: usize) -> Option<f64> {
        self.fresh(*self.ratios.get(rung)?)
    }

    /// The stream moved per second at `rung`, if seen recently.
    fn rate_at(&self, rung: usize) -> Option<f64> {
        self.fresh(*self.rates.get(rung)?)
    }

    /// Takes one period's observation; a change of rung when one is due.
    pub fn decide(&mut self, seen: &Observation) -> Option<Change> {
        self.periods += 1;
        if seen.stream == 0 || seen.span.is_zero() {
            // Nothing sent: nothing learnt.
            self.leaning = None;
            return None;
        }
        let (ratio, rate) = (seen.ratio(), seen.rate());
        let (waited, idle) = (seen.share(seen.writing), seen.share(seen.idle));
        let input_bound = idle >= INPUT_BOUND;
        if self.rung > 0 {
            self.ratios[self.rung] = Some(Seen { value: ratio, period: self.periods });
        }
        if !input_bound {
            self.rates[self.rung] = Some(Seen { value: rate, period: self.periods });
        }
        let (lean, why) = self.lean(ratio, rate, waited, input_bound);
        let Some(lean) = lean.filter(|&to| to != self.rung) else {
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
        self.rung = lean;
        Some(Change { from, to: self.rung(), why })
    }

    /// Where this period leans, and why in words.
    fn lean(
        &self,
        ratio: f64,
        rate: f64,
        waited: f64,
        input_bound: bool,
    ) -> (Option<Lean>, String) {
        let here = self.rung();
        let mib = |rate: f64| rate / f64::from(1 << 20);
        let (below, above) = (self.rung.checked_sub(1), Some(self.rung + 1).filter(|&r| r < RUNGS));
        if self.rung > LOWEST_LEVEL && ratio < MIN_RATIO {
            return (
                Some(LOWEST_LEVEL),
                format!("{here} saves nothing on this data (x{ratio:.2})"),
            );
        }
        if let Some(low) = below.filter(|_| self.rung > LOWEST_LEVEL) {
            if let Some(was) = self.ratio_at(low).filter(|was| ratio <= was * BETTER) {
                let why = format!(
                    "{here} gets no more than {} on this data (x{ratio:.2} against x{was:.2})",
                    LADDER[low]
                );
                return (Some(low), why);
            }
        }
        if input_bound {
            return (None, String::new());
        }
        let moved = |to: usize, was: f64| {
            format!(
                "{} moved {:.0} MiB/s of the stream, {here} {:.0} MiB/s (x{ratio:.2})",
                LADDER[to],
                mib(was),
                mib(rate)
            )
        };
        if let Some((low, was)) = below.and_then(|b| self.rate_at(b).map(|r| (b, r))) {
            if was > rate * FASTER {
                return (Some(low), moved(low, was));
            }
        }
        let climbable = above.filter(|_| self.rung < LOWEST_LEVEL || ratio >= MIN_RATIO);
        let climbable =
            climbable.filter(|&up| self.ratio_at(up).is_none_or(|r| r > ratio * BETTER));
        if let Some((up, was)) = climbable.and_then(|u| self.rate_at(u).map(|r| (u, r))) {
            if was > rate * FASTER {
                return (Some(up), moved(up, was));
            }
        }
        if waited >= LINK_BOUND {
            // From storing, straight to level 1 where it was not tried lately: a link that
            // refuses raw bytes is worth zstd's first level on anything that compresses,
            // and a stream of a few seconds has no time to climb rung by rung.
            let up = match climbable {
                Some(0 | 1) if self.rung == 0 && self.rate_at(FIRST_CLIMB).is_none() => {
                    Some(FIRST_CLIMB)
                }
                up => up,
            };
            if let Some(up) = up.filter(|&up| self.rate_at(up).is_none()) {
                let why = format!(
                    "the link refused bytes {:.0} % of the time at {:.0} MiB/s of the stream, the \
                     CPU had room (x{ratio:.2})",
                    waited * 100.0,
                    mib(rate)
                );
                return (Some(up), why);
            }
        }
        if let Some(low) = below.filter(|&b| self.rate_at(b).is_none()) {
            let why = if waited < LINK_FREE {
                format!(
                    "compressing held the stream to {:.0} MiB/s, the socket had room",
                    mib(rate)
                )
            } else {
                format!("{} not tried for a while (here {:.0} MiB/s)", LADDER[low], mib(rate))
            };
            return (Some(low), why);
        }
        (None, String::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: Duration = Duration::from_millis(250);
    const MIB: f64 = (1 << 20) as f64;

    /// A synthetic world: what each rung compresses per second (MiB/s of the stream, sealing
    /// included) and the ratio it gets, and the link's capacity (MiB/s on the wire). The
    /// stream moves at the slower of the two; the thread's time is compressing, then
    /// waiting for the socket; the input always has more.
    struct World {
        speed: [f64; RUNGS],
        ratio: [f64; RUNGS],
        link: f64,
    }

    /// zstd's speeds on one core of this class of machine, and ratios on prose.
    const SPEED: [f64; RUNGS] = [3000.0, 700.0, 500.0, 350.0, 250.0, 120.0, 70.0, 30.0];
    const PROSE: [f64; RUNGS] = [1.0, 2.2, 2.6, 3.0, 3.3, 3.5, 3.6, 3.7];

    impl World {
        fn period(&self, rung: Rung) -> Observation {
            let at = index(rung);
            let (speed, ratio) = (self.speed[at], self.ratio[at]);
            let rate = speed.min(self.link * ratio);
            let stream = rate * MIB * SPAN.as_secs_f64();
            let packing = SPAN.mul_f64(rate / speed);
            Observation {
                span: SPAN,
                packing,
                writing: SPAN - packing,
                idle: Duration::ZERO,
                stream: stream as u64,
                packed: (stream / ratio) as u64,
            }
        }

        /// The rung that moves the stream fastest.
        fn best(&self) -> Rung {
            let rate = |at: usize| self.speed[at].min(self.link * self.ratio[at]);
            LADDER[(0..RUNGS).max_by(|&a, &b| rate(a).total_cmp(&rate(b))).unwrap()]
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

    /// The stream moved in `periods` more, against what the best rung would have moved: how
    /// close to the best it stays, probes of its neighbours included.
    fn settled(adapt: &mut Adapt, periods: usize, world: &World) -> f64 {
        let moved: u64 = (0..periods)
            .map(|_| {
                let seen = world.period(adapt.rung());
                adapt.decide(&seen);
                seen.stream
            })
            .sum();
        moved as f64 / (world.period(world.best()).stream * periods as u64) as f64
    }

    #[test]
    fn a_slow_link_with_compressible_data_climbs() {
        // 50 Mbit/s: the socket refuses bytes at every level; the ratio grows with it.
        let world = World { speed: SPEED, ratio: PROSE, link: 6.0 };
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |rung| world.period(rung));
        assert_eq!(world.best(), LADDER[RUNGS - 1]);
        assert_eq!(adapt.rung(), world.best(), "visited {visited:?}");
        let share = settled(&mut adapt, 800, &world);
        assert!(share > 0.95, "{share}");
    }

    #[test]
    fn a_gigabit_link_settles_where_the_stream_moves_fastest() {
        let world = World { speed: SPEED, ratio: PROSE, link: 117.0 };
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |rung| world.period(rung));
        let best = world.best();
        assert_eq!(best, Rung::Level(1), "the world as written");
        assert_eq!(adapt.rung(), best, "visited {visited:?}");
        let share = settled(&mut adapt, 800, &world);
        assert!(share > 0.95, "{share}");
    }

    #[test]
    fn the_cpu_as_the_bottleneck_brings_it_down_to_storing() {
        // An unlimited link (loopback): the socket takes everything at once.
        let world = World { speed: SPEED, ratio: PROSE, link: 5000.0 };
        let mut adapt = Adapt::new(Rung::Level(9));
        let visited = run(&mut adapt, 40, |rung| world.period(rung));
        assert_eq!(adapt.rung(), Rung::Stored, "visited {visited:?}");
        let share = settled(&mut adapt, 800, &world);
        assert!(share > 0.95, "{share}");
    }

    #[test]
    fn one_period_does_not_move_it() {
        let world = World { speed: SPEED, ratio: PROSE, link: 6.0 };
        let mut adapt = Adapt::new(START);
        assert_eq!(adapt.decide(&world.period(START)), None);
        let input_bound = Observation { idle: SPAN / 2, ..world.period(START) };
        assert_eq!(adapt.decide(&input_bound), None, "the input was the bottleneck");
        assert_eq!(adapt.decide(&world.period(START)), None);
        assert!(adapt.decide(&world.period(START)).is_some(), "two in a row move it");
    }

    #[test]
    fn incompressible_data_stays_low_however_slow_the_link() {
        // A link that refuses raw bytes leads to level 1, which saves nothing: down to the
        // lowest level, and up again only once in a long while, for a period or two.
        let world = World { speed: SPEED, ratio: [1.0; RUNGS], link: 6.0 };
        let mut adapt = Adapt::new(START);
        let (mut periods, mut high) = (0, 0);
        for _ in 0..800 {
            periods += 1;
            high += usize::from(index(adapt.rung()) > LOWEST_LEVEL);
            adapt.decide(&world.period(adapt.rung()));
        }
        assert!(high * 20 <= periods, "{high} of {periods} periods above the lowest level");
        // From higher up, it comes down.
        let mut adapt = Adapt::new(Rung::Level(9));
        run(&mut adapt, 10, |rung| world.period(rung));
        assert!(index(adapt.rung()) <= LOWEST_LEVEL);
    }

    #[test]
    fn a_level_that_gets_no_better_ratio_is_not_climbed_to() {
        // Every level gets what level 1 gets: however slow the link, nothing above 3 (tried
        // once, and left) is worth it.
        let mut ratio = PROSE;
        ratio[index(START)..].fill(3.0);
        let world = World { speed: SPEED, ratio, link: 6.0 };
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 200, |rung| world.period(rung));
        let above = visited.iter().filter(|r| index(**r) > index(Rung::Level(3))).count();
        assert_eq!(above, 0, "{visited:?}");
        assert!(index(adapt.rung()) <= index(Rung::Level(3)), "{visited:?}");
    }

    #[test]
    fn the_input_as_the_bottleneck_changes_nothing() {
        let world = World { speed: SPEED, ratio: PROSE, link: 6.0 };
        let mut adapt = Adapt::new(START);
        let visited = run(&mut adapt, 40, |rung| Observation {
            idle: SPAN * 3 / 4,
            writing: SPAN / 100,
            ..world.period(rung)
        });
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
