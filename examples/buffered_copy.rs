//! `producer | buffered_copy [MiB] | consumer`: buffers its stdin into its stdout through the
//! library, as `accel -m MiB` would, and says on stderr how it went and which side was slow.
//!
//! Both ends are descriptors, so pipes and files get the zero-copy tiers (splice).

use std::process::ExitCode;

use accel_buffer::{Buffer, Input, Output};

fn main() -> ExitCode {
    let mib: usize = match std::env::args().nth(1).map(|arg| arg.parse()) {
        None => 32,
        Some(Ok(mib)) => mib,
        Some(Err(_)) => {
            eprintln!("usage: buffered_copy [MiB]");
            return ExitCode::from(2);
        }
    };
    let (input, output) = match (Input::stdin(), Output::stdout()) {
        (Ok(input), Ok(output)) => (input, output),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("buffered_copy: {error}");
            return ExitCode::FAILURE;
        }
    };
    match Buffer::new().size(mib << 20).run(input, vec![output]) {
        Ok(report) => {
            let progress = &report.progress;
            eprintln!(
                "buffered_copy: {} bytes in {:.2?}, up to {} held; bottleneck: {}",
                report.bytes_in,
                progress.elapsed,
                progress.peak,
                report.bottleneck.as_str()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("buffered_copy: {error}");
            ExitCode::FAILURE
        }
    }
}
