//! `roboscale.runtime._zbridge`: the per-message path of the runtime's Zenoh bridge.
//!
//! With zenoh-python a sample crosses two Python threads before the node sees it: Zenoh's
//! channel is read by the bridge's drain thread, which then wakes the event loop. Here
//! Zenoh's own callback checks the sample (imported topic, wire header) and queues it in
//! Rust, and an eventfd that the loop watches (`add_reader`) wakes the loop: the loop
//! thread is the first Python to see a sample, and it gets it already checked. Sending
//! packs the header and puts in Rust, with the GIL released.
//!
//! The wire checks are those of runtime/wire.py (`unpack_header`), message for message;
//! tests/runtime/test_zlink.py fuzzes both against each other.
//!
//! Large received payloads reach Python without a copy, as a read-only buffer over the
//! sample's bytes, and a publish lends a read-only view of an immutable owner (payload.rs).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LockResult, Mutex, MutexGuard, RwLock, WaitTimeoutResult};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use zenoh::bytes::ZBytes;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::sample::{Locality, Sample, SampleKind};
use zenoh::Wait;

mod compose;
mod payload;
use compose::{Pool, SHM_THRESHOLD};
use payload::{Contiguous, Payload, LEND_FROM, SHM_HELD_ROWS};

const HEADER_SIZE: usize = 22; // <BBIQQ: version, codec, tag, publisher id, seq
const VERSION: u8 = 2;

fn error(what: &str, e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("_zbridge: {what}: {e}"))
}

/// One reply of a backlog query: (payload, attachment, the Zenoh id of the replier).
type Reply = (Vec<u8>, Vec<u8>, String);

/// One checked header: (codec, type tag, publisher id, seq).
type Header = (u8, u32, u64, u64);

/// runtime/wire.py's `unpack_header`, with the same messages.
fn check_header(raw: &[u8]) -> Result<Header, String> {
    if raw.len() != HEADER_SIZE {
        return Err(format!("attachment of {} bytes, expected {HEADER_SIZE}", raw.len()));
    }
    let version = raw[0];
    if version != VERSION {
        return Err(format!("header version {version}, expected {VERSION}"));
    }
    let codec = raw[1];
    let tag = u32::from_le_bytes(raw[2..6].try_into().expect("4 bytes"));
    let publisher = u64::from_le_bytes(raw[6..14].try_into().expect("8 bytes"));
    let seq = u64::from_le_bytes(raw[14..22].try_into().expect("8 bytes"));
    if seq < 1 {
        return Err(format!("sequence number {seq}"));
    }
    if publisher < 1 {
        return Err("publisher id 0".to_string());
    }
    Ok((codec, tag, publisher, seq))
}

fn pack_header(codec: u8, tag: u32, publisher: u64, seq: u64) -> [u8; HEADER_SIZE] {
    let mut out = [0u8; HEADER_SIZE];
    out[0] = VERSION;
    out[1] = codec;
    out[2..6].copy_from_slice(&tag.to_le_bytes());
    out[6..14].copy_from_slice(&publisher.to_le_bytes());
    out[14..22].copy_from_slice(&seq.to_le_bytes());
    out
}

/// A row's payload: a small one as Zenoh gave it (copied into a bytes by `take`), a
/// large one already contiguous, lent to Python as a `Payload` (payload.rs).
enum RowPayload {
    Small(ZBytes),
    Large(Contiguous),
}

impl RowPayload {
    /// On Zenoh's thread, without the GIL: a large payload is made contiguous here, and
    /// copied out of the sender's shared memory when `depth` rows already wait (payload.rs:
    /// a backlog must not hold the sender's pool, or its next payloads go over TCP).
    fn of(bytes: &ZBytes, depth: usize) -> Self {
        if bytes.len() >= LEND_FROM {
            let release = depth >= SHM_HELD_ROWS && bytes.as_shm().is_some();
            RowPayload::Large(if release {
                Contiguous::copied(bytes)
            } else {
                Contiguous::new(bytes.clone())
            })
        } else {
            RowPayload::Small(bytes.clone())
        }
    }

    fn into_py(self, py: Python<'_>) -> PyResult<PyObject> {
        match self {
            RowPayload::Small(bytes) => Ok(PyBytes::new(py, &bytes.to_bytes()).into_any().unbind()),
            RowPayload::Large(bytes) => Ok(Py::new(py, Payload::new(bytes))?.into_any()),
        }
    }
}

/// A checked sample of an imported topic, waiting for the loop.
struct Row {
    topic: u32,
    header: Header,
    payload: RowPayload,
    received: u64, // CLOCK_MONOTONIC ns when Zenoh's thread handed the sample over
}

/// CLOCK_MONOTONIC in ns: Python's `time.perf_counter_ns` on Linux, so one host's
/// processes can match their stamps (bench/native_hops.py).
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

struct State {
    rows: VecDeque<Row>,
    closed: bool,
    malformed: u64, // samples whose header failed a check: counted and dropped here
    ignored: u64,   // samples of topics this process does not import
    shm: u64,       // samples queued whose payload is a shared memory buffer of the sender
    last_error: String,
}

/// Samples waiting for the loop, the eventfd that says there are some, and the topics
/// imported (key without the prefix -> the index the loop knows the topic by).
struct Queue {
    state: Mutex<State>,
    room: Room,
    capacity: usize,
    eventfd: i32,
    strip: usize,
    topics: RwLock<HashMap<String, u32>>,
    last_received: AtomicU64, // `received` of the last row taken (diagnosis)
    depth: AtomicUsize,       // rows waiting, as of the last push or take (no lock to read)
}

impl Queue {
    fn wake(&self) {
        let one: u64 = 1;
        // A full counter (2^64 - 2 wakes not read) is the only failure: the loop is awake.
        unsafe { libc::write(self.eventfd, (&one as *const u64).cast(), 8) };
    }

    /// On Zenoh's network thread: check one sample and queue it. A full queue blocks this
    /// thread, which is back-pressure on the publisher (as a full FIFO channel is).
    fn push(&self, sample: Sample) {
        let received = monotonic_ns();
        let key = sample.key_expr().as_str().get(self.strip..).unwrap_or("");
        let topic = self.topics.read().unwrap_or_else(|e| e.into_inner()).get(key).copied();
        // Outside the lock: a large payload that came in pieces is copied together here.
        let payload = match topic {
            Some(_) => RowPayload::of(sample.payload(), self.depth.load(Ordering::Relaxed)),
            None => RowPayload::Small(ZBytes::new()),
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(topic) = topic else {
            state.ignored += 1;
            return;
        };
        let header = match sample.attachment() {
            Some(att) => check_header(&att.to_bytes()),
            None => check_header(b""),
        };
        let header = match header {
            Ok(header) => header,
            Err(e) => {
                state.malformed += 1;
                state.last_error = e;
                let first = state.rows.is_empty();
                drop(state);
                if first {
                    self.wake(); // the loop reports the count (and is then up to date)
                }
                return;
            }
        };
        while state.rows.len() >= self.capacity && !state.closed {
            let wait = self.room.wait_timeout(state, Duration::from_millis(100));
            state = wait.unwrap_or_else(|e| e.into_inner()).0;
        }
        if state.closed {
            return;
        }
        if sample.payload().as_shm().is_some() {
            state.shm += 1;
        }
        state.rows.push_back(Row { topic, header, payload, received });
        self.depth.store(state.rows.len(), Ordering::Relaxed);
        // Only the first row of an empty queue wakes the loop: `take` empties it or wakes
        // the loop again itself, so no row is left without a wake pending.
        let first = state.rows.len() == 1;
        drop(state);
        if first {
            self.wake();
        }
    }
}

/// The condition "the queue has room again", told only to a network thread that waits for
/// it: std's `Condvar::notify_all` makes a futex system call even when no thread waits,
/// and `take` tells it on every wake-up of the loop (one system call per message).
#[derive(Default)]
struct Room {
    condvar: Condvar,
    waiting: AtomicUsize, // threads in `wait_timeout`; changed with the state's lock held
}

impl Room {
    fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let woken = self.condvar.wait_timeout(guard, timeout);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        woken
    }

    /// After the lock was released: a waiter counted itself with the lock held, before
    /// waiting, so one that could miss this call had not seen a full queue.
    fn notify_all(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.condvar.notify_all();
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        unsafe { libc::close(self.eventfd) };
    }
}

/// A Python bytes object lent to Zenoh without a copy (payload::lend_slice): its buffer
/// never moves or changes while the object lives.
fn lend(object: Bound<'_, PyBytes>) -> bytes::Bytes {
    let owner = object.clone().into_any();
    payload::lend_slice(owner, object.as_bytes())
}

/// One Zenoh session of a bridge. Behind a lock, and every call works on a clone of it
/// (a zenoh::Session is a handle): `close` takes `&self`, so a close from one thread goes
/// through while another thread's query still waits for replies (a `&mut self` close
/// failed there with pyo3's "Already borrowed" and left the session open).
#[pyclass(module = "roboscale.runtime._zbridge")]
struct Session {
    session: Mutex<Option<zenoh::Session>>,
}

/// One exported topic: packs the header (its own sequence numbers) and puts.
#[pyclass(module = "roboscale.runtime._zbridge")]
struct Publisher {
    publisher: Option<zenoh::pubsub::Publisher<'static>>,
    id: u64,
    seq: AtomicU64,
    pool: Pool, // where `send_parts` composes (compose.rs)
}

/// The one data subscriber of a session (`<prefix>/**`, remote origin) and its queue.
#[pyclass(module = "roboscale.runtime._zbridge")]
struct Inbox {
    queue: Arc<Queue>,
    subscriber: Option<zenoh::pubsub::Subscriber<()>>,
}

/// The transport events listener: Zenoh's thread tells Python of peers (rare).
#[pyclass(module = "roboscale.runtime._zbridge")]
struct Peers {
    listener: Option<zenoh::session::TransportEventsListener<()>>,
}

#[pymethods]
impl Peers {
    fn undeclare(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.listener.take() {
            Some(l) => py.allow_threads(|| l.undeclare().wait()).map_err(|e| error("undeclare", e)),
            None => Ok(()),
        }
    }
}

/// The retention queryable: Zenoh's thread asks Python (rare: a subscriber's backlog).
#[pyclass(module = "roboscale.runtime._zbridge")]
struct Queryable {
    queryable: Option<zenoh::query::Queryable<()>>,
}

#[pymethods]
impl Session {
    /// Open a session of (key, JSON5 value) settings, as runtime/zenoh_config.py makes.
    #[new]
    fn new(py: Python<'_>, settings: Vec<(String, String)>) -> PyResult<Self> {
        let mut config = zenoh::Config::default();
        for (key, value) in settings {
            config.insert_json5(&key, &value).map_err(|e| error(&key, e))?;
        }
        let session = py.allow_threads(|| zenoh::open(config).wait());
        Ok(Session { session: Mutex::new(Some(session.map_err(|e| error("open", e))?)) })
    }

    /// This session's Zenoh id, as zenoh-python prints it.
    fn zid(&self) -> PyResult<String> {
        Ok(self.open()?.zid().to_string())
    }

    /// `on_event(opened, peer zid)` on Zenoh's thread, with the GIL, for each transport
    /// opened (a peer admitted) or closed.
    fn peers(&self, py: Python<'_>, on_event: PyObject) -> PyResult<Peers> {
        let session = self.open()?;
        let declared = py.allow_threads(|| {
            session
                .info()
                .transport_events_listener()
                .callback(move |event| {
                    let opened = event.kind() == SampleKind::Put;
                    let zid = event.transport().zid().to_string();
                    Python::with_gil(|py| {
                        if let Err(e) = on_event.call1(py, (opened, zid)) {
                            e.write_unraisable(py, None);
                        }
                    });
                })
                .wait()
        });
        let listener = declared.map_err(|e| error("transport_events_listener", e))?;
        Ok(Peers { listener: Some(listener) })
    }

    /// A publisher with congestion control BLOCK; `id`: the bridge's publisher id.
    #[pyo3(signature = (key, id, express=true))]
    fn publisher(&self, py: Python<'_>, key: String, id: u64, express: bool) -> PyResult<Publisher> {
        let session = self.open()?;
        let declared = py.allow_threads(|| {
            session
                .declare_publisher(key)
                .congestion_control(CongestionControl::Block)
                .express(express)
                .wait()
        });
        let publisher = declared.map_err(|e| error("declare_publisher", e))?;
        let pool = Pool::new(session.clone());
        Ok(Publisher { publisher: Some(publisher), id, seq: AtomicU64::new(0), pool })
    }

    /// The data subscriber on `<prefix>/**` (remote origin only); `capacity` rows wait
    /// for the loop at most.
    #[pyo3(signature = (prefix, capacity))]
    fn inbox(&self, py: Python<'_>, prefix: String, capacity: usize) -> PyResult<Inbox> {
        let session = self.open()?;
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(error("eventfd", std::io::Error::last_os_error()));
        }
        let state = State {
            rows: VecDeque::new(),
            closed: false,
            malformed: 0,
            ignored: 0,
            shm: 0,
            last_error: String::new(),
        };
        let queue = Arc::new(Queue {
            state: Mutex::new(state),
            room: Room::default(),
            capacity: capacity.max(1),
            eventfd,
            strip: prefix.len(),
            topics: RwLock::new(HashMap::new()),
            last_received: AtomicU64::new(0),
            depth: AtomicUsize::new(0),
        });
        let pushed = queue.clone();
        let declared = py.allow_threads(|| {
            session
                .declare_subscriber(format!("{prefix}/**"))
                .callback(move |sample| pushed.push(sample))
                .allowed_origin(Locality::Remote)
                .wait()
        });
        let subscriber = declared.map_err(|e| error("declare_subscriber", e))?;
        Ok(Inbox { queue, subscriber: Some(subscriber) })
    }

    /// The queryable on `key`: `answer(key, after parameter or None, payload)` returns the
    /// replies as [(payload, attachment)]; it runs on Zenoh's thread with the GIL.
    fn queryable(&self, py: Python<'_>, key: String, answer: PyObject) -> PyResult<Queryable> {
        let session = self.open()?;
        let declared = py.allow_threads(|| {
            session
                .declare_queryable(key)
                .callback(move |query| {
                    let key = query.key_expr().as_str().to_string();
                    let after = query.parameters().get("after").map(str::to_string);
                    let payload = query.payload().map(|p| p.to_bytes().into_owned());
                    let replies = Python::with_gil(|py| {
                        let payload = PyBytes::new(py, payload.as_deref().unwrap_or(b""));
                        let called = answer.call1(py, (key.as_str(), after, payload));
                        match called.and_then(|r| r.extract::<Vec<(Vec<u8>, Vec<u8>)>>(py)) {
                            Ok(replies) => replies,
                            Err(e) => {
                                e.write_unraisable(py, None); // the answer guards itself
                                Vec::new()
                            }
                        }
                    });
                    for (payload, attachment) in replies {
                        // A peer gone meanwhile: nothing left to answer.
                        let _ = query.reply(&key, payload).attachment(attachment).wait();
                    }
                })
                .wait()
        });
        let queryable = declared.map_err(|e| error("declare_queryable", e))?;
        Ok(Queryable { queryable: Some(queryable) })
    }

    /// Query every matching queryable; the replies as [(payload, attachment, the Zenoh id
    /// of the session that answered, "" if unknown)].
    fn get(
        &self,
        py: Python<'_>,
        selector: String,
        payload: Vec<u8>,
        timeout_s: f64,
    ) -> PyResult<Vec<Reply>> {
        let session = self.open()?;
        py.allow_threads(|| {
            let replies = session
                .get(selector)
                .payload(payload)
                .target(QueryTarget::All)
                .consolidation(ConsolidationMode::None)
                .timeout(Duration::from_secs_f64(timeout_s.max(0.0)))
                .wait()
                .map_err(|e| error("get", e))?;
            let mut out = Vec::new();
            while let Ok(reply) = replies.recv() {
                let replier = reply.replier_id().map(|id| id.zid().to_string()).unwrap_or_default();
                if let Ok(sample) = reply.result() {
                    let attachment = sample.attachment().map(|a| a.to_bytes().into_owned());
                    let payload = sample.payload().to_bytes().into_owned();
                    out.push((payload, attachment.unwrap_or_default(), replier));
                }
            }
            Ok(out)
        })
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.session.lock().unwrap_or_else(|e| e.into_inner()).take();
        match taken {
            Some(session) => py.allow_threads(|| session.close().wait()).map_err(|e| error("close", e)),
            None => Ok(()),
        }
    }
}

impl Session {
    fn open(&self) -> PyResult<zenoh::Session> {
        let session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        session.clone().ok_or_else(|| error("session", "closed"))
    }
}

#[pymethods]
impl Publisher {
    /// Put one payload with the next header of this publisher; returns its seq. The payload
    /// (a bytes, or a read-only memoryview of an immutable owner: payload::lend_any) is lent
    /// without a copy and the GIL released (BLOCK may wait for the link).
    fn send(&self, py: Python<'_>, payload: Bound<'_, PyAny>, codec: u8, tag: u32) -> PyResult<u64> {
        let publisher = self.publisher.as_ref().ok_or_else(|| error("put", "undeclared"))?;
        let payload = payload::lend_any(&payload)?;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let header = pack_header(codec, tag, self.id, seq);
        let put = publisher.put(payload).attachment(&header[..]);
        py.allow_threads(|| put.wait()).map_err(|e| error("put", e))?;
        Ok(seq)
    }

    /// Put the concatenation of `parts` (bytes-like objects) with the next header; returns
    /// its seq. Each part is copied once, from SHM_THRESHOLD bytes on straight into the
    /// session's shared memory pool, else (below it, no pool, pool full) into one heap
    /// buffer (compose.rs). The GIL is released while copying and putting.
    fn send_parts(&self, py: Python<'_>, parts: Vec<Bound<'_, PyAny>>, codec: u8, tag: u32) -> PyResult<u64> {
        let publisher = self.publisher.as_ref().ok_or_else(|| error("put", "undeclared"))?;
        // Each export stays held until the copy is done (a bytearray cannot resize meanwhile).
        let buffers = parts.iter().map(pyo3::buffer::PyBuffer::<u8>::get).collect::<PyResult<Vec<_>>>()?;
        let mut spans = Vec::with_capacity(buffers.len());
        for buffer in &buffers {
            if !buffer.is_c_contiguous() {
                return Err(pyo3::exceptions::PyBufferError::new_err("_zbridge: a part is not contiguous"));
            }
            spans.push((buffer.buf_ptr() as usize, buffer.len_bytes()));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let header = pack_header(codec, tag, self.id, seq);
        let pool = &self.pool;
        py.allow_threads(|| publisher.put(pool.compose(&spans)).attachment(&header[..]).wait())
            .map_err(|e| error("put", e))?;
        drop(buffers);
        Ok(seq)
    }

    /// (puts composed in the shared memory pool, puts of a heap copy) by `send_parts`.
    fn composed(&self) -> (u64, u64) {
        (self.pool.composed.load(Ordering::Relaxed), self.pool.copied.load(Ordering::Relaxed))
    }

    /// Put one payload with a header made by the caller (durable topics: retained first).
    fn put(
        &self,
        py: Python<'_>,
        payload: Bound<'_, PyBytes>,
        attachment: Bound<'_, PyBytes>,
    ) -> PyResult<()> {
        let publisher = self.publisher.as_ref().ok_or_else(|| error("put", "undeclared"))?;
        let put = publisher.put(lend(payload)).attachment(lend(attachment));
        py.allow_threads(|| put.wait()).map_err(|e| error("put", e))
    }

    fn undeclare(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.publisher.take() {
            Some(p) => py.allow_threads(|| p.undeclare().wait()).map_err(|e| error("undeclare", e)),
            None => Ok(()),
        }
    }
}

/// A row as the loop takes it: (topic index, codec, tag, publisher id, seq, payload), the
/// payload a bytes, or from LEND_FROM bytes on a `Payload` (a buffer over the sample's).
type PyRow = (u32, u8, u32, u64, u64, PyObject);

#[pymethods]
impl Inbox {
    /// The eventfd to watch: readable while rows (or a new malformed count) wait.
    fn fileno(&self) -> i32 {
        self.queue.eventfd
    }

    /// Import one more topic (key without the prefix) under `index`.
    fn import_topic(&self, key: String, index: u32) {
        self.queue.topics.write().unwrap_or_else(|e| e.into_inner()).insert(key, index);
    }

    /// Up to `max` waiting rows, oldest first.
    fn take(&self, py: Python<'_>, max: usize) -> PyResult<Vec<PyRow>> {
        let mut counter: u64 = 0;
        unsafe { libc::read(self.queue.eventfd, (&mut counter as *mut u64).cast(), 8) };
        let taken: Vec<Row> = {
            let mut state = self.queue.state.lock().unwrap_or_else(|e| e.into_inner());
            let n = state.rows.len().min(max);
            let taken = state.rows.drain(..n).collect();
            self.queue.depth.store(state.rows.len(), Ordering::Relaxed);
            if !state.rows.is_empty() {
                self.queue.wake(); // more than `max` waited: the loop comes back for them
            }
            taken
        };
        if let Some(last) = taken.last() {
            self.queue.last_received.store(last.received, Ordering::Relaxed);
        }
        self.queue.room.notify_all();
        let row = |r: Row| {
            let (codec, tag, publisher, seq) = r.header;
            Ok((r.topic, codec, tag, publisher, seq, r.payload.into_py(py)?))
        };
        taken.into_iter().map(row).collect()
    }

    /// When Zenoh's thread handed over the last row taken (CLOCK_MONOTONIC ns, 0 before
    /// any): where a round trip's time goes, matched across processes.
    fn received_ns(&self) -> u64 {
        self.queue.last_received.load(Ordering::Relaxed)
    }

    /// (malformed, ignored, the last malformed sample's error).
    fn counters(&self) -> (u64, u64, String) {
        let state = self.queue.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.malformed, state.ignored, state.last_error.clone())
    }

    /// How many samples queued came as a shared memory buffer (Zenoh on one host: the
    /// payload was read in place from the sender's pool, not from the socket).
    fn shm_received(&self) -> u64 {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner()).shm
    }

    /// Stop queueing, release a network thread blocked on a full queue, undeclare.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.queue.room.notify_all();
        match self.subscriber.take() {
            Some(s) => py.allow_threads(|| s.undeclare().wait()).map_err(|e| error("undeclare", e)),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl Queryable {
    fn undeclare(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.queryable.take() {
            Some(q) => py.allow_threads(|| q.undeclare().wait()).map_err(|e| error("undeclare", e)),
            None => Ok(()),
        }
    }
}

/// The wire check alone, for the tests that hold it against runtime/wire.py's: the
/// (codec, tag, publisher id, seq) of a header, or ValueError with wire.py's message.
#[pyfunction]
fn unpack_header(raw: &[u8]) -> PyResult<Header> {
    check_header(raw).map_err(pyo3::exceptions::PyValueError::new_err)
}

#[pymodule]
fn _zbridge(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Session>()?;
    m.add_class::<Publisher>()?;
    m.add_class::<Inbox>()?;
    m.add_class::<Queryable>()?;
    m.add_class::<Peers>()?;
    m.add_class::<Payload>()?;
    m.add("LEND_FROM", LEND_FROM)?;
    m.add("SHM_THRESHOLD", SHM_THRESHOLD)?;
    m.add_function(wrap_pyfunction!(unpack_header, m)?)?;
    m.add("ZENOH", "1.10.2")
}
