//! How much memory the buffer may take before the kernel refuses it or kills accel.
//!
//! `-m` is a ceiling, not a reservation: memory is mapped only as the backlog grows. But a
//! ceiling above what the process may really have is a promise accel cannot keep. A memory
//! cgroup's limit is the worst case: past it the kernel does not refuse memory, it kills the
//! process (OOM), losing everything buffered. So the buffer is kept under each limit that
//! applies, with room to spare for the rest of accel (threads, pipes, page cache).

use rustix::process::{Resource, getrlimit};

use super::MemoryLimit;
use crate::size::Bytes;

/// Room left for the rest of accel under an address-space or data limit: the binary, thread
/// stacks, allocator arenas.
const PROCESS_HEADROOM: u64 = 64 << 20;

/// The tightest of the limits that apply to this process, if any can be read.
pub fn memory_limit() -> Option<MemoryLimit> {
    let mut limits = Vec::new();
    if let Some(total) = physical_memory() {
        // The whole machine is never free: leave an eighth to everything else.
        limits.push(MemoryLimit {
            bytes: total - total / 8,
            what: format!("this machine's memory ({})", Bytes(total)),
        });
    }
    for (resource, name, usage) in [
        (Resource::As, "the address-space limit (ulimit -v)", super::imp::address_space_used()),
        (Resource::Data, "the data limit (ulimit -d)", super::imp::data_used()),
    ] {
        if let Some(limit) = getrlimit(resource).current {
            let used = usage.unwrap_or(0) + PROCESS_HEADROOM;
            limits.push(MemoryLimit {
                bytes: limit.saturating_sub(used),
                what: format!("{name} of {}", Bytes(limit)),
            });
        }
    }
    limits.extend(super::imp::cgroup_memory_limit());
    limits.into_iter().min_by_key(|limit| limit.bytes)
}

/// Under an address-space or data limit, threads share one allocator arena: glibc would
/// otherwise reserve 64 MiB of address space for each thread's own (twice that while it
/// aligns it), more than the headroom left beside a buffer sized to the limit, and a thread's
/// next allocation would fail and abort the process. accel's threads allocate little, and
/// not on the data path. Call before the threads start.
pub fn fit_allocator_to_limits() {
    if getrlimit(Resource::As).current.is_some() || getrlimit(Resource::Data).current.is_some() {
        super::imp::one_allocator_arena();
    }
}

/// The machine's physical memory, if it can be read.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}
