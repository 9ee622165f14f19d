//! `zenoh_min`: the thinnest Python binding of Zenoh for one event loop per process, a
//! baseline of bench/scale.py (used by baselines/zenoh_native_echo.py).
//!
//! zenoh-python hands samples to Python through a channel that a Python thread reads, and
//! that thread then wakes the loop: two hand-overs per sample. Here Zenoh's own callback
//! queues the sample in Rust and writes an eventfd that the loop watches (`add_reader`), so
//! the loop is the first Python to see it. There is no runtime code in it at all: what a
//! pair of these costs is what Zenoh plus one Python event loop per hop cost.
//!
//!     session = Session([("mode", '"peer"'), ...])   # JSON5 settings, as zenoh.Config
//!     out = session.publisher("bench/ping", express=True)   # congestion control BLOCK
//!     inbox = session.inbox("bench/pong", capacity=1024)    # remote samples only
//!     loop.add_reader(inbox.fileno(), lambda: [handle(p) for p in inbox.take(256)])
//!     out.put(b"payload")
//!     session.close()

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use zenoh::bytes::ZBytes;
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, Sample};
use zenoh::Wait;

fn error(what: &str, e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("zenoh_min: {what}: {e}"))
}

/// Samples waiting for the loop, and the eventfd that says there are some.
struct Queue {
    state: Mutex<State>,
    room: Condvar,
    capacity: usize,
    eventfd: i32,
}

struct State {
    samples: VecDeque<Sample>,
    closed: bool,
}

impl Queue {
    fn wake(&self) {
        let one: u64 = 1;
        // A full counter (2^64 - 2 wakes not read) is the only failure: the loop is awake.
        unsafe { libc::write(self.eventfd, (&one as *const u64).cast(), 8) };
    }

    /// On Zenoh's network thread. A full queue blocks it, which is back-pressure on the
    /// publisher (as a full FIFO channel does in zenoh-python).
    fn push(&self, sample: Sample) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.samples.len() >= self.capacity && !state.closed {
            let wait = self.room.wait_timeout(state, Duration::from_millis(100));
            state = wait.unwrap_or_else(|e| e.into_inner()).0;
        }
        if state.closed {
            return;
        }
        state.samples.push_back(sample);
        // Only the first sample of an empty queue wakes the loop: `take` empties it or wakes
        // the loop again itself, so no sample is left without a wake pending.
        let first = state.samples.len() == 1;
        drop(state);
        if first {
            self.wake();
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        unsafe { libc::close(self.eventfd) };
    }
}

/// A Python bytes object lent to Zenoh without a copy: its buffer never moves or changes
/// while the object lives, and reading it needs no GIL. pyo3 defers the decref of a
/// `Py` dropped without the GIL to the next time a thread holds it.
struct Lent {
    _owner: Py<PyBytes>,
    ptr: *const u8,
    len: usize,
}

// The buffer is immutable and owned by `_owner`, which pyo3 lets any thread hold.
unsafe impl Send for Lent {}
unsafe impl Sync for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

fn lend(object: Bound<'_, PyBytes>) -> bytes::Bytes {
    let view = object.as_bytes();
    let (ptr, len) = (view.as_ptr(), view.len());
    bytes::Bytes::from_owner(Lent { _owner: object.unbind(), ptr, len })
}

#[pyclass(module = "zenoh_min")]
struct Session {
    session: Option<zenoh::Session>,
}

#[pyclass(module = "zenoh_min")]
struct Publisher {
    publisher: zenoh::pubsub::Publisher<'static>,
}

#[pyclass(module = "zenoh_min")]
struct Inbox {
    queue: Arc<Queue>,
    _subscriber: zenoh::pubsub::Subscriber<()>,
}

#[pymethods]
impl Session {
    #[new]
    fn new(py: Python<'_>, settings: Vec<(String, String)>) -> PyResult<Self> {
        let mut config = zenoh::Config::default();
        for (key, value) in settings {
            config.insert_json5(&key, &value).map_err(|e| error(&key, e))?;
        }
        let session = py.allow_threads(|| zenoh::open(config).wait());
        Ok(Session { session: Some(session.map_err(|e| error("open", e))?) })
    }

    #[pyo3(signature = (key, express=true))]
    fn publisher(&self, key: String, express: bool) -> PyResult<Publisher> {
        let session = self.open()?;
        let publisher = session
            .declare_publisher(key)
            .congestion_control(CongestionControl::Block)
            .express(express)
            .wait()
            .map_err(|e| error("declare_publisher", e))?;
        Ok(Publisher { publisher })
    }

    #[pyo3(signature = (key, capacity=1024))]
    fn inbox(&self, key: String, capacity: usize) -> PyResult<Inbox> {
        let session = self.open()?;
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(error("eventfd", std::io::Error::last_os_error()));
        }
        let queue = Arc::new(Queue {
            state: Mutex::new(State { samples: VecDeque::new(), closed: false }),
            room: Condvar::new(),
            capacity: capacity.max(1),
            eventfd,
        });
        let pushed = queue.clone();
        let subscriber = session
            .declare_subscriber(key)
            .callback(move |sample| pushed.push(sample))
            .allowed_origin(Locality::Remote)
            .wait()
            .map_err(|e| error("declare_subscriber", e))?;
        Ok(Inbox { queue, _subscriber: subscriber })
    }

    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.session.take() {
            Some(session) => py.allow_threads(|| session.close().wait()).map_err(|e| error("close", e)),
            None => Ok(()),
        }
    }
}

impl Session {
    fn open(&self) -> PyResult<&zenoh::Session> {
        self.session.as_ref().ok_or_else(|| error("session", "closed"))
    }
}

#[pymethods]
impl Publisher {
    /// Put one payload (and attachment), lent without a copy (a 300 KB copy per put
    /// costs page faults); the GIL is released, since BLOCK may wait for the link.
    #[pyo3(signature = (payload, attachment=None))]
    fn put(
        &self,
        py: Python<'_>,
        payload: Bound<'_, PyBytes>,
        attachment: Option<Bound<'_, PyBytes>>,
    ) -> PyResult<()> {
        let put = self.publisher.put(lend(payload)).attachment(attachment.map(lend));
        py.allow_threads(|| put.wait()).map_err(|e| error("put", e))
    }
}

#[pymethods]
impl Inbox {
    /// The eventfd to watch: readable while samples wait.
    fn fileno(&self) -> i32 {
        self.queue.eventfd
    }

    /// Up to `max` waiting payloads, oldest first; an empty list if none wait.
    fn take<'py>(&self, py: Python<'py>, max: usize) -> Vec<Bound<'py, PyBytes>> {
        let bytes = |b: &ZBytes| PyBytes::new(py, &b.to_bytes());
        self.pop(max).iter().map(|s| bytes(s.payload())).collect()
    }

    /// Up to `max` waiting samples as (key without its first `strip` characters, payload,
    /// attachment or b"").
    fn take_samples<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        strip: usize,
    ) -> Vec<(String, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let bytes = |b: &ZBytes| PyBytes::new(py, &b.to_bytes());
        let empty = PyBytes::new(py, b"");
        let row = |s: &Sample| {
            let key = s.key_expr().as_str().get(strip..).unwrap_or("").to_string();
            (key, bytes(s.payload()), s.attachment().map_or(empty.clone(), bytes))
        };
        self.pop(max).iter().map(row).collect()
    }

    /// Stop queueing and release a network thread blocked on a full queue.
    fn close(&self) {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.queue.room.notify_all();
    }
}

impl Inbox {
    fn pop(&self, max: usize) -> Vec<Sample> {
        let mut counter: u64 = 0;
        unsafe { libc::read(self.queue.eventfd, (&mut counter as *mut u64).cast(), 8) };
        let taken: Vec<Sample> = {
            let mut state = self.queue.state.lock().unwrap_or_else(|e| e.into_inner());
            let n = state.samples.len().min(max);
            let taken = state.samples.drain(..n).collect();
            if !state.samples.is_empty() {
                self.queue.wake(); // more than `max` waited: the loop comes back for them
            }
            taken
        };
        self.queue.room.notify_all();
        taken
    }
}

#[pymodule]
fn zenoh_min(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Session>()?;
    m.add_class::<Publisher>()?;
    m.add_class::<Inbox>()
}
