//! A run of accel, from the parsed command line to the exit status: everything opened and
//! checked before a byte is read ([`start`]), the transfer handed to the [`engine`], and its
//! end turned into a status by the policy in [`exit`]. [`signals`] and [`stdio`] are the
//! process's side of it.
//!
//! [`engine`]: crate::engine
//! [`exit`]: crate::exit

pub mod config;
pub mod signals;
pub mod stdio;

use std::fs::File;
use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, mpsc};
use std::time::Instant;

use crate::backlog::spill::SpillFile;
use crate::buffer;
use crate::buffer::Planned;
use crate::endpoint::Endpoint;
use crate::endpoint::open;
use crate::engine::Block;
use crate::engine::Outcomes;
use crate::engine::digest::Digest;
use crate::exit::{self, Exit};
use crate::log::Log;
use crate::meter::{Meter, Snapshot, Wakeups};
use crate::net;
use crate::net::link::Link;
use crate::net::{Network, SetupError};
use crate::run::config::{Config, Target};
use crate::size::Bytes;
use crate::stop::Stop;
use crate::sys;
use crate::watch;
use crate::watch::control;
use crate::watch::{JsonTarget, Names, Watch};
use crate::words::describe;

/// Runs accel as configured, printing any error, and says how to end.
pub fn run(config: &Config, closed: stdio::Closed) -> Exit {
    run_with(config, closed, Arc::new(Log::new(config.quiet, config.debug)))
}

/// [`run`], saying what happens along the way through `log`, which the caller shares: a run
/// started through ssh passes the remote's lines on through it, so that they do not garble
/// the progress line.
pub fn run_with(config: &Config, closed: stdio::Closed, log: Arc<Log>) -> Exit {
    if let Some(pid) = config.remote {
        return remote(pid, config);
    }
    let exit = match start(config, closed, log) {
        Ok(exit) => exit,
        Err(NotStarted::Closed(exit, why)) => {
            eprintln!("accel: {why}");
            exit
        }
        Err(NotStarted::Usage(why)) => {
            eprintln!("accel: {why}");
            Exit::Usage
        }
        Err(NotStarted::Setup { what, error }) => {
            eprintln!("accel: cannot start: {what}: {}; nothing was read", describe(&error));
            Exit::Setup
        }
        Err(NotStarted::Network(why)) => {
            eprintln!("accel: {why}");
            Exit::Network
        }
        Err(NotStarted::Stalled(why)) => {
            eprintln!("accel: {why}");
            Exit::Stalled
        }
    };
    // The control socket goes with the run, however it ended (a signal that ends accel
    // removes it in the signal thread).
    control::remove_socket();
    exit
}

/// `-R PID`: changes the limits of the accel running as `pid`, or prints its report so far.
fn remote(pid: u32, config: &Config) -> Exit {
    let mut requests = Vec::new();
    requests.extend(config.flow.rate.map(control::Request::Rate));
    requests.extend(config.flow.input_rate.map(control::Request::InputRate));
    if requests.is_empty() {
        requests.push(control::Request::Report);
    }
    match control::ask(pid, &requests) {
        Ok(text) => {
            eprint!("{text}");
            Exit::Success
        }
        Err(error) => {
            eprintln!("accel: {error}");
            Exit::InputFailed
        }
    }
}

/// Why a run did not start; nothing was read.
enum NotStarted {
    /// A standard descriptor accel needs is closed: there is nothing to read, or nowhere to
    /// write (status 1 or 3, as a read or write error would give).
    Closed(Exit, &'static str),
    /// What was asked makes no sense, or names what cannot be opened (status 2).
    Usage(String),
    /// The machine refused something accel needs (a thread, memory, a descriptor).
    Setup {
        /// What accel was doing: `start the signal thread`.
        what: &'static str,
        /// Why it could not.
        error: std::io::Error,
    },
    /// The network peer could not be reached, or did not authenticate (status 6).
    Network(String),
    /// Nothing came within `--stall-timeout` to open an output: a FIFO's reader (status 4).
    Stalled(String),
}

impl From<SetupError> for NotStarted {
    fn from(error: SetupError) -> NotStarted {
        match error {
            SetupError::Usage(why) => NotStarted::Usage(why),
            SetupError::Unreached(why) => NotStarted::Network(why),
        }
    }
}

/// A usage refusal saying `why`.
fn usage(why: impl ToString) -> NotStarted {
    NotStarted::Usage(why.to_string())
}

/// Turns an error of starting up into a [`NotStarted::Setup`] saying what was being done.
fn setup(what: &'static str) -> impl FnOnce(std::io::Error) -> NotStarted {
    move |error| NotStarted::Setup { what, error }
}

/// Opens and checks everything before a byte is read, then runs the transfer and has the exit
/// policy decide: the phases of a run, in order.
fn start(config: &Config, closed: stdio::Closed, log: Arc<Log>) -> Result<Exit, NotStarted> {
    check_progress_fd(config).map_err(usage)?;
    // Before any thread starts: under ulimit -v or -d, one allocator arena for all of them.
    sys::fit_allocator_to_limits();
    let run = Run { config, stop: Arc::new(Stop::default()), log };
    let Opened { input, outputs, spill, mut network, hash_file, lines } = run.open(closed)?;
    let names = Names {
        name: config.name.clone(),
        input: input.name.clone(),
        outputs: outputs.iter().map(|o| o.name.clone()).collect(),
        hashes: config.hashes.clone(),
    };
    // What a file holds is bytes: no size expected where lines are counted, unless given.
    let expected = config.expect.or_else(|| input.remaining().filter(|_| config.lines.is_none()));
    let planned = run.plan(input, outputs, spill)?;
    let watch = run.watch(&planned, names, expected, lines)?;
    let pipe_ignored = run.handle_signals(&watch)?;
    if let Some(network) = &mut network {
        run.connect(network, &planned.meter)?;
    }
    let ran = run.transfer(planned, &watch)?;
    Ok(run.end(ran, &watch, pipe_ignored, network, hash_file))
}

/// A run of accel through its phases ([`start`]): what each of them needs.
struct Run<'a> {
    config: &'a Config,
    /// Stops every thread of the run.
    stop: Arc<Stop>,
    /// Warnings and `--debug` notes.
    log: Arc<Log>,
}

/// What the run opened before a byte is read.
struct Opened {
    input: Endpoint,
    outputs: Vec<Endpoint>,
    /// The spill file, made at once: a `--spill` DIR where spilling is not safe is refused.
    spill: Option<Arc<SpillFile>>,
    /// The network side (`--to`, `--from`), not yet connected.
    network: Option<Network>,
    /// `--hash-file`, created.
    hash_file: Option<File>,
    /// Where the lines taken in are counted (accel as `pv -l`).
    lines: Option<Arc<AtomicU64>>,
}

/// What the transfer came to, with what the last phase needs of its plan.
struct Ran {
    outcomes: Outcomes,
    /// The counters at the end.
    snapshot: Snapshot,
    input: String,
    outputs: Vec<String>,
    /// A `--from` receiver's link, which confirms the end to its sender.
    input_link: Option<Arc<Link>>,
    /// Each `--to` output's link, told why its stream stops when it does not end.
    output_links: Vec<Option<Arc<Link>>>,
}

impl Run<'_> {
    /// Opens every endpoint, the network side (not connected), the spill file and the
    /// `--hash-file`, and checks that no two of them are the same file.
    fn open(&self, closed: stdio::Closed) -> Result<Opened, NotStarted> {
        let (config, stop) = (self.config, &self.stop);
        let network = open_network(config, &self.log)?;
        let input = open_input(config, closed, stop, network.as_ref())?;
        let input = match config.stop_after {
            Some(bytes) => input.stopping_after(bytes),
            None => input,
        };
        let input = match &config.producer {
            Some(producer) => input.produced_by(producer.clone()),
            None => input,
        };
        let lines = config.lines.map(|end| (end, Arc::new(AtomicU64::new(0))));
        let input = match &lines {
            Some((end, count)) => input.counting_lines(*end, Arc::clone(count)),
            None => input,
        };
        let outputs = open_outputs(config, closed, stop, network.as_ref())?;
        for output in &outputs {
            if let Some(name) = input.feeds(output) {
                return Err(usage(format!(
                    "{name} and {} are the same file: input file is output file",
                    output.name
                )));
            }
        }
        for (at, output) in outputs.iter().enumerate() {
            if let Some(twin) = outputs[..at].iter().find(|other| other.same_file(output)) {
                return Err(usage(format!(
                    "{} and {} are the same file: each output gets every byte once",
                    twin.name, output.name
                )));
            }
        }
        // Made before anything is read: a DIR where spilling is not safe is refused now.
        let spill = match &config.spill {
            Some(dir) => Some(Arc::new(
                SpillFile::create(dir, config.spill_size)
                    .map_err(|why| usage(format!("--spill {}: {why}", dir.display())))?,
            )),
            None => None,
        };
        let hash_file = match &config.hash_file {
            Some(path) => Some(File::create(path).map_err(|error| {
                usage(format!("--hash-file {}: {}", path.display(), describe(&error)))
            })?),
            None => None,
        };
        let lines = lines.map(|(_, count)| count);
        Ok(Opened { input, outputs, spill, network, hash_file, lines })
    }

    /// Plans the run as the library plans any (`buffer::Blueprint`), within the memory this
    /// process may have; the network links report to its meter.
    fn plan(
        &self,
        input: Endpoint,
        outputs: Vec<Endpoint>,
        spill: Option<Arc<SpillFile>>,
    ) -> Result<Planned, NotStarted> {
        let (config, log) = (self.config, &self.log);
        let (start_at, resume_at) = (config.flow.start_at, config.flow.resume_at);
        let blueprint = buffer::Blueprint {
            size: within_memory(config, log)?,
            rate: config.flow.rate,
            input_rate: config.flow.input_rate,
            block: config.flow.block_size.map(|size| Block { size, pad: config.flow.pad }),
            input_block_size: config.flow.input_block_size,
            start_at: start_at.map(|level| Box::new(move |c| level.of(c)) as Box<_>),
            resume_at: resume_at.map(|level| Box::new(move |c| level.of(c)) as Box<_>),
            hashes: config.hashes.clone(),
            sync: config.sync,
            output_errors: config.output_errors,
            engine: config.engine,
        };
        let planned = blueprint.plan(input, outputs, spill, Arc::clone(log));
        let (plan, meter) = (&planned.plan, &planned.meter);
        for (index, output) in plan.outputs.iter().enumerate() {
            if let Some(link) = output.link() {
                link.report_to(meter, index);
            }
        }
        if let Some(link) = plan.input.link() {
            link.report_input_to(meter);
        }
        Ok(planned)
    }

    /// The watcher of the planned run (not started), through which the log prints from now
    /// on; opens the `--json` file.
    fn watch(
        &self,
        planned: &Planned,
        names: Names,
        expected: Option<u64>,
        lines: Option<Arc<AtomicU64>>,
    ) -> Result<Arc<Watch>, NotStarted> {
        let config = self.config;
        let engine = planned.route.engine.to_string();
        let limits = Arc::clone(&planned.limits);
        let watched = watch::Watched { names, engine, limits, lines };
        let meter = Arc::clone(&planned.meter);
        let watch = Watch::new(watching(config), meter, watched, expected).map_err(|error| {
            let Some(JsonTarget::File(path)) = &config.json else { unreachable!("a file") };
            usage(format!("--json={}: {}", path.display(), describe(&error)))
        })?;
        let said = Arc::clone(&watch);
        self.log.print_through(Box::new(move |text| said.say(text)));
        Ok(watch)
    }

    /// Installs the interrupt handler and the signal handlers, then listens on the control
    /// socket; says whether SIGPIPE was ignored on entry.
    fn handle_signals(&self, watch: &Arc<Watch>) -> Result<bool, NotStarted> {
        Stop::install().map_err(setup("install the interrupt handler"))?;
        let signals =
            signals::install(Arc::clone(watch)).map_err(setup("install signal handlers"))?;
        // Only now, so that a signal sent as soon as the socket is seen ends the run as any
        // other, which removes the socket.
        match control::Control::listen() {
            Ok(control) => watch.serve(control),
            Err(error) => {
                self.log.warn(format_args!("no control socket (-R): {}", describe(&error)))
            }
        }
        Ok(signals.pipe_ignored)
    }

    /// Connects the network side, or waits for its sender; not part of the transfer's time.
    fn connect(&self, network: &mut Network, meter: &Meter) -> Result<(), NotStarted> {
        let began = Instant::now();
        let patience = self.config.stall_timeout.unwrap_or(net::CONNECT_PATIENCE);
        network.establish(patience, &self.log, &self.stop)?;
        meter.pause(began.elapsed());
        Ok(())
    }

    /// The transfer, from the watcher's start to the display closed, the final line left
    /// standing before the last words.
    fn transfer(&self, planned: Planned, watch: &Arc<Watch>) -> Result<Ran, NotStarted> {
        let (route, meter) = (Arc::clone(&planned.route), Arc::clone(&planned.meter));
        let plan = &planned.plan;
        let (events, inbox) = mpsc::channel();
        watch.start(events.clone()).map_err(setup("start the watcher"))?;
        let input = plan.input.name.clone();
        let outputs: Vec<String> = plan.outputs.iter().map(|o| o.name.clone()).collect();
        let output_links: Vec<_> = plan.outputs.iter().map(|o| o.link().cloned()).collect();
        let input_link = plan.input.link().cloned();
        let confirming = match &input_link {
            Some(link) => Some(
                net::Confirming::start(link, &meter, plan.outputs.len())
                    .map_err(setup("start the thread that confirms deliveries"))?,
            ),
            None => None,
        };
        let outcomes = buffer::transfer(planned, Arc::clone(&self.stop), events, inbox)
            .map_err(setup("start the transfer"))?;
        if let Some(confirming) = confirming {
            confirming.join();
        }
        // The final line is left standing before the last words, which go under it.
        watch.close();
        let snapshot = meter.snapshot();
        route.note(format_args!("{route}; bytes went {}", snapshot.tiers));
        if let Some(wakeups) = Wakeups::of(&snapshot) {
            route.note(format_args!("wakeups: {wakeups}"));
        }
        Ok(Ran { outcomes, snapshot, input, outputs, input_link, output_links })
    }

    /// After the transfer: each stream that did not end is told why, the exit policy's
    /// decision is said, a sender told how its stream arrived, the network closed, the
    /// digests written; then the report. Returns how accel ends.
    fn end(
        &self,
        ran: Ran,
        watch: &Watch,
        pipe_ignored: bool,
        network: Option<Network>,
        mut hash_file: Option<File>,
    ) -> Exit {
        let (config, outcomes) = (self.config, &ran.outcomes);
        // The receiver of each stream that did not end is told why it stops.
        for (end, link) in outcomes.outputs.iter().zip(&ran.output_links) {
            if let (Some(link), Some(why)) = (link, exit::why_stream_stops(&outcomes.input, end)) {
                link.abort(&why);
            }
        }
        let decision = exit::decide(
            outcomes,
            &ran.snapshot,
            &ran.input,
            &ran.outputs,
            config.output_errors,
            pipe_ignored,
            config.quiet,
        );
        for line in &decision.lines {
            eprintln!("accel: {line}");
        }
        let mut exit = decision.exit;
        match (&ran.input_link, exit) {
            (Some(link), Exit::Success) => {
                // Every byte is where the outputs put it: the sender may now say it was
                // delivered. Said, since the sender's run may fail for want of it; not ours,
                // which is whole.
                if let Err(error) = link.acknowledge_end(&self.stop) {
                    self.log.warn(format_args!(
                        "{}: the stream arrived whole, but its sender may not know: {}",
                        link.name(),
                        describe(&error)
                    ));
                }
            }
            // The sender must not wait for a receiver that is gone, nor try to come back to it.
            (Some(link), _) => link.abort(&format!("it ends with status {}", exit.code())),
            (None, _) => {}
        }
        let mut network = network;
        if let Some(network) = &mut network {
            network.close();
        }
        let digests: Vec<Digest> = outcomes.digests.iter().flatten().cloned().collect();
        let lines = digest_lines(&digests, config, &ran.input);
        // To a file, before the summary, which must say if that failed; to stderr, after the
        // report, where they are easy to copy.
        if let (Some(file), Some(path)) = (hash_file.as_mut(), &config.hash_file) {
            if let Err(error) = file.write_all(lines.as_bytes()) {
                eprintln!("accel: --hash-file {}: {}", path.display(), describe(&error));
                exit = exit.or(Exit::OutputFailed);
            }
        }
        watch.report(exit, &digests);
        if config.hash_file.is_none() {
            eprint!("{lines}");
        }
        exit
    }
}

/// The input: a `--from` receiver, FILE operands read in turn, stdin, or `-i FILE`.
fn open_input(
    config: &Config,
    closed: stdio::Closed,
    stop: &Arc<Stop>,
    network: Option<&Network>,
) -> Result<Endpoint, NotStarted> {
    let closed_stdin =
        || NotStarted::Closed(Exit::InputFailed, "stdin is closed: there is nothing to read");
    match (&config.input, network.and_then(Network::input)) {
        (_, Some(link)) => {
            let name = config.net.from.as_ref().expect("--from").to_string();
            Ok(Endpoint::network(link, &name, stop))
        }
        (None, None) if !config.files.is_empty() => {
            if closed.stdin && config.files.iter().any(|path| path.as_os_str() == "-") {
                return Err(closed_stdin());
            }
            open::files(&config.files, stop).map_err(usage)
        }
        (None, None) if closed.stdin => Err(closed_stdin()),
        (None, None) => Endpoint::stdin(stop).map_err(setup("inspect stdin")),
        (Some(path), None) => open::input(path, stop).map_err(usage),
    }
}

/// Checks, before any file is opened, that `--progress-fd` names an open descriptor that does
/// not carry the data: one opened later (by `-o`) would otherwise take its number.
fn check_progress_fd(config: &Config) -> Result<(), String> {
    let Some(fd) = config.progress_fd else { return Ok(()) };
    let stdin_read = match config.files.as_slice() {
        [] => config.input.is_none(),
        files => files.iter().any(|path| path.as_os_str() == "-"),
    };
    let why = if fd == libc::STDIN_FILENO && stdin_read {
        Some("stdin carries the data".to_owned())
    } else if fd == libc::STDOUT_FILENO && config.outputs.contains(&Target::Stdout) {
        Some("stdout carries the data; with -o FILE it may carry the progress".to_owned())
    } else {
        sys::check_open(fd).err().map(|error| {
            format!("{}; open it in the shell, e.g. 3>progress.log", describe(&error.into()))
        })
    };
    why.map_or(Ok(()), |why| Err(format!("--progress-fd {fd}: {why}")))
}

/// What the watcher needs of `config`.
fn watching(config: &Config) -> watch::Watching {
    watch::Watching {
        progress: config.progress,
        numeric: config.numeric,
        progress_fd: config.progress_fd,
        interval: config.interval,
        json: config.json.clone(),
        stats: config.stats,
        quiet: config.quiet,
        stall_timeout: config.stall_timeout,
        look: config.look,
    }
}

/// The network side, when `--to` or `--from` was given: the key read, names resolved, the
/// receiver's port bound; nothing connected yet.
fn open_network(config: &Config, log: &Arc<Log>) -> Result<Option<Network>, NotStarted> {
    let to: Vec<_> = config
        .outputs
        .iter()
        .filter_map(|target| match target {
            Target::Network(address) => Some(address),
            _ => None,
        })
        .collect();
    if to.is_empty() && config.net.from.is_none() {
        return Ok(None);
    }
    Ok(Some(Network::open(&config.net, &to, log)?))
}

/// The outputs in the order given: stdout where `-` (or nothing) was given, the files opened,
/// the network peers (`--to`) not yet connected.
fn open_outputs(
    config: &Config,
    closed: stdio::Closed,
    stop: &Arc<Stop>,
    network: Option<&Network>,
) -> Result<Vec<Endpoint>, NotStarted> {
    let paths: Vec<_> = config
        .outputs
        .iter()
        .filter_map(|target| match target {
            Target::Path(path) => Some(path.clone()),
            Target::Stdout | Target::Network(_) => None,
        })
        .collect();
    let files = open::outputs(&paths, config.existing, stop, config.stall_timeout);
    let mut files = files
        .map_err(|error| {
            if error.stalled() { NotStarted::Stalled(error.to_string()) } else { usage(error) }
        })?
        .into_iter();
    let mut links = network.into_iter().flat_map(Network::outputs);
    config
        .outputs
        .iter()
        .map(|target| match target {
            Target::Path(_) => Ok(files.next().expect("one endpoint per path")),
            Target::Network(address) => {
                let link = links.next().expect("one link per --to");
                Ok(Endpoint::network(link, &address.to_string(), stop))
            }
            Target::Stdout if closed.stdout => Err(NotStarted::Closed(
                Exit::OutputFailed,
                "stdout is closed: there is nowhere to write",
            )),
            Target::Stdout => Endpoint::stdout(stop).map_err(setup("inspect stdout")),
        })
        .collect()
}

/// Each digest as `sha256sum` prints it: `<hex>  <name>`, the input's name: `-` for stdin, a
/// `--from` receiver's address as given, several FILE operands as the input is called
/// (`input`), since the hash is of them all.
fn digest_lines(digests: &[Digest], config: &Config, input: &str) -> String {
    let name = match (&config.input, config.files.as_slice(), &config.net.from) {
        (Some(path), _, _) | (None, [path], _) => path.to_string_lossy().into_owned(),
        (None, [_, _, ..], _) => input.to_owned(),
        (None, [], Some(from)) => from.to_string(),
        (None, [], None) => "-".to_owned(),
    };
    digests.iter().map(|d| format!("{}  {name}\n", d.hex)).collect()
}

/// The buffer size to use for `-m`: under the memory this process may really have, saying so
/// when that is less; refused when the blocks (`--block-size`, `--input-block-size`) need
/// more than that (an output would wait for ever for a block the buffer cannot hold).
fn within_memory(config: &Config, log: &Log) -> Result<usize, NotStarted> {
    let size = config.size;
    match sys::memory_limit() {
        Some(limit) if size as u64 > limit.bytes => {
            let held = limit.bytes as usize;
            let why = format!("-m {} is more than {limit} allows", Bytes(size as u64));
            if let Some((option, need)) = config.flow.blocks_need().filter(|&(_, n)| n > held) {
                let value = match option {
                    "--block-size" => config.flow.block_size,
                    _ => config.flow.input_block_size,
                };
                return Err(usage(format!(
                    "{option} {}: the blocks need a buffer of {}, larger than the {} accel may \
                     hold: {why}",
                    Bytes(value.unwrap_or(need) as u64),
                    Bytes(need as u64),
                    Bytes(held as u64)
                )));
            }
            log.warn(format_args!("{why}; at most {} will be held", Bytes(limit.bytes)));
            Ok(held)
        }
        _ => Ok(size),
    }
}
