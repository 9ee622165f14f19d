//! A put composed straight into the session's shared memory pool.
//!
//! A frame made of parts (the lab's `header + body`) is otherwise concatenated into a
//! bytes, then copied again by Zenoh's transport into its pool. Here the parts are
//! written once each into a buffer of that same pool (`Session::get_shm_provider`, the
//! provider the transport's own optimization allocates from), and the buffer is put as
//! it is: a single-slice shared memory payload, which the transport forwards as a
//! descriptor (or copies for a peer without shared memory). A multi-part ZBytes is not an
//! option: Zenoh 1.10 sends those over TCP.
//!
//! Lifetimes: Zenoh's shared memory chunks are reference counted in the segment itself;
//! the pool reuses a chunk only once the count is zero (the safe garbage collecting
//! policy below), so no chunk is rewritten while Zenoh or a receiver holds it.
//!
//! Never blocks, never drops: a payload below the threshold, a session without shared
//! memory (off, blocked, or its pool not ready yet) or a pool found full gets one
//! contiguous copy on the heap, put as today (the transport then tries its pool itself,
//! else sends over TCP).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use zenoh::bytes::ZBytes;
use zenoh::shm::{Defragment, GarbageCollect, PosixShmProviderBackend, ShmProvider, ShmProviderState};
use zenoh::Wait;

/// runtime/zenoh_config.py's SHM_THRESHOLD (a test holds the two equal): from this size
/// on the transport would copy a payload into its pool, so it is composed there directly.
pub const SHM_THRESHOLD: usize = 3072;

type Provider = Arc<ShmProvider<PosixShmProviderBackend>>;

/// The session's pool, asked for until its state is final (ready, disabled, failed).
pub struct Pool {
    session: zenoh::Session,
    known: Mutex<Option<Option<Provider>>>,
    pub composed: AtomicU64, // puts written into the pool
    pub copied: AtomicU64,   // puts of a heap copy (below the threshold, no pool, pool full)
}

impl Pool {
    pub fn new(session: zenoh::Session) -> Self {
        Pool { session, known: Mutex::new(None), composed: AtomicU64::new(0), copied: AtomicU64::new(0) }
    }

    /// The provider if the session has one ready; never waits for one.
    fn provider(&self) -> Option<Provider> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(final_state) = known.as_ref() {
            return final_state.clone();
        }
        match self.session.get_shm_provider() {
            ShmProviderState::Ready(provider) => {
                *known = Some(Some(provider.clone()));
                Some(provider)
            }
            ShmProviderState::Disabled | ShmProviderState::Error => {
                *known = Some(None);
                None
            }
            ShmProviderState::Initializing(_) => None, // asked again at the next put
        }
    }

    /// One payload of `parts` (pointer, length), each copied once: into the pool when it
    /// can, else into one heap buffer. The parts must stay valid during the call.
    pub fn compose(&self, parts: &[(usize, usize)]) -> ZBytes {
        let total: usize = parts.iter().map(|&(_, len)| len).sum();
        if total >= SHM_THRESHOLD {
            if let Some(provider) = self.provider() {
                // Safe policy: only chunks whose count fell to zero are reclaimed; a full
                // pool is an error here, never a wait.
                let allocated = provider.alloc(total).with_policy::<Defragment<GarbageCollect>>().wait();
                if let Ok(mut buffer) = allocated {
                    fill(buffer.as_mut(), parts);
                    self.composed.fetch_add(1, Ordering::Relaxed);
                    return buffer.into();
                }
            }
        }
        let mut heap = Vec::with_capacity(total);
        for part in parts {
            heap.extend_from_slice(slice(part));
        }
        self.copied.fetch_add(1, Ordering::Relaxed);
        heap.into()
    }
}

fn fill(out: &mut [u8], parts: &[(usize, usize)]) {
    let mut at = 0;
    for part in parts {
        let part = slice(part);
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
}

fn slice(&(ptr, len): &(usize, usize)) -> &'static [u8] {
    // The caller keeps each part's buffer exported (valid, not resized) during the call,
    // and no slice is kept past it.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
}
