//! A chunk of buffer memory mapped straight from the kernel.
//!
//! Chunks are `mmap`ed rather than taken from the allocator for two reasons. A fresh anonymous
//! mapping is zeroed by the kernel and faulted in lazily, so `-m 1G` costs nothing until
//! bytes arrive (no memset, unlike `calloc` of reused heap memory). And `munmap` gives the
//! memory back the moment a chunk is dropped, whereas glibc's adaptive mmap threshold would move
//! 2 MiB blocks onto the heap after the first free, where they are never returned.

use std::ffi::c_void;
use std::io;
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

use crate::sys;

/// The largest chunk: one huge page on x86-64 and arm64, so that a chunk can be faulted in with a
/// single 2 MiB page where transparent huge pages are available (6x cheaper than 4 KiB faults).
pub const MAX_CHUNK: usize = 2 << 20;

/// Which pages a chunk is faulted in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// 4 KiB pages, each resident once touched: a stream that never backs up touches a few
    /// of them, where a huge page would make it resident 2 MiB for its first byte.
    Small,
    /// Transparent huge pages where the chunk holds one (at least [`MAX_CHUNK`]): for a
    /// backlog that stands, whose chunks fill whole.
    Huge,
}

/// A private anonymous mapping of `len` bytes, unmapped on drop.
#[derive(Debug)]
pub struct Chunk {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Chunk is plain memory owned by its value; the backlog decides who touches which
// bytes (the producer's `MemorySpace` past what is committed, readers' `Filled` before it: see
// the `backlog` module), so moving or sharing the handle between threads is sound.
unsafe impl Send for Chunk {}
// SAFETY: as above; `&Chunk` only hands out raw pointers, never references.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Maps a chunk of `len` bytes, to be faulted in with `pages`; its pages are zero and not
    /// yet resident.
    pub fn new(len: usize, pages: Pages) -> io::Result<Chunk> {
        assert!(len > 0);
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing aliases nothing.
        let addr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )?
        };
        if pages == Pages::Huge && len >= MAX_CHUNK {
            // SAFETY: the range is the mapping just made.
            unsafe { sys::advise_huge_pages(addr, len) };
        }
        let addr = NonNull::new(addr.cast::<u8>()).expect("mmap returned a null mapping");
        Ok(Chunk { addr, len })
    }

    /// How many bytes the chunk holds.
    pub fn size(&self) -> usize {
        self.len
    }

    /// A raw pointer to byte `offset` of the chunk.
    ///
    /// # Panics
    /// If `offset` lies beyond the chunk.
    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len);
        // SAFETY: in bounds of the mapping, checked above.
        unsafe { self.addr.as_ptr().add(offset) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` and nothing refers to it once the chunk is dropped
        // (segments, `MemorySpace`s and `Filled`s hold an `Arc<Chunk>`).
        let _ = unsafe { rustix::mm::munmap(self.addr.as_ptr().cast::<c_void>(), self.len) };
    }
}
