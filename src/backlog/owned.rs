//! Bytes read elsewhere into buffers of their own and moved into the backlog as they are
//! ([`Owned`], [`Producer::adopt`](super::Producer::adopt)): a network connection's frames,
//! each opened over several connections by the thread of the connection it came on, where
//! it came, then put in order. A segment each, no copy; the buffer goes back to its
//! [`Pool`] once every reader has passed it and nothing else holds it (a
//! [`Lent`](super::Lent)).

use std::fmt;
use std::ops::{Deref, DerefMut, Range};
use std::sync::{Arc, Mutex, PoisonError};

/// Buffers of one size let go, for the next to be taken: no allocation, nor a page faulted
/// in and zeroed, per buffer (measured on the receiving side of several connections: a
/// tenth of its CPU when most frames found none).
pub struct Pool {
    spare: Mutex<Vec<Vec<u8>>>,
    /// Each buffer's size, and the most kept.
    size: usize,
    most: usize,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("size", &self.size).field("most", &self.most).finish()
    }
}

impl Pool {
    /// A pool of buffers of `size` bytes, keeping at most `most` of them.
    pub fn new(size: usize, most: usize) -> Arc<Pool> {
        Arc::new(Pool { spare: Mutex::default(), size, most })
    }

    /// A buffer of the pool's size: a spare, or new.
    pub fn take(self: &Arc<Pool>) -> Buffer {
        let spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let bytes = match spare {
            // What was in it is garbage now: only its tail, where it was cut shorter, is
            // zeroed again.
            Some(mut bytes) => {
                bytes.resize(self.size, 0);
                bytes
            }
            // Zeroed by the allocator: pages from the system are not zeroed again, but
            // memory the heap had is (a memset of the buffer).
            None => vec![0; self.size],
        };
        Buffer { bytes, pool: Some(Arc::clone(self)) }
    }
}

/// A buffer of its own: from a [`Pool`], which it goes back to when dropped (while the pool
/// keeps fewer than its most), or holding a copy, which goes back to none.
pub struct Buffer {
    bytes: Vec<u8>,
    pool: Option<Arc<Pool>>,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer").field("len", &self.bytes.len()).finish()
    }
}

impl Buffer {
    /// A buffer holding a copy of `bytes`, of no pool.
    pub fn copied(bytes: &[u8]) -> Buffer {
        Buffer { bytes: bytes.to_vec(), pool: None }
    }
}

impl Deref for Buffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        let mut spare = pool.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < pool.most {
            // Its length kept: as a spare, it is not zeroed again to the pool's size.
            spare.push(std::mem::take(&mut self.bytes));
        }
    }
}

/// `range` of a buffer's bytes, moved around whole: into a reorder map, then into the
/// backlog ([`Producer::adopt`](super::Producer::adopt)), where readers find them where
/// they were written.
#[derive(Debug, Clone)]
pub struct Owned {
    pub(super) buffer: Arc<Buffer>,
    pub(super) from: usize,
    to: usize,
}

impl Owned {
    /// `range` of `buffer`'s bytes.
    ///
    /// # Panics
    /// If `range` reaches past the buffer.
    pub fn new(buffer: Buffer, range: Range<usize>) -> Owned {
        assert!(range.start <= range.end && range.end <= buffer.len(), "past the buffer");
        Owned { buffer: Arc::new(buffer), from: range.start, to: range.end }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buffer[self.from..self.to]
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.to - self.from
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.from == self.to
    }

    /// Goes past the first `n` bytes (taken elsewhere).
    ///
    /// # Panics
    /// If there are fewer.
    pub fn advance(&mut self, n: usize) {
        assert!(n <= self.len(), "advanced past the bytes");
        self.from += n;
    }
}

#[cfg(test)]
impl Pool {
    /// How many buffers are kept now.
    pub(super) fn spares(&self) -> usize {
        self.spare.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_goes_back_to_its_pool_and_comes_out_whole() {
        let pool = Pool::new(8, 1);
        let mut buffer = pool.take();
        buffer[..3].copy_from_slice(b"abc");
        let owned = Owned::new(buffer, 1..3);
        assert_eq!(owned.as_slice(), b"bc");
        let again = owned.clone();
        drop(owned);
        // Still held: not a spare yet, so a new buffer is made.
        assert_eq!(pool.spares(), 0);
        drop(again);
        assert_eq!(pool.spares(), 1);
        assert_eq!(pool.take().len(), 8);
        // No more than the most.
        let (a, b) = (pool.take(), pool.take());
        drop((a, b));
        assert_eq!(pool.spares(), 1);
        // A copy goes back to no pool.
        drop(Buffer::copied(b"xyz"));
        assert_eq!(pool.spares(), 1);
    }
}
