//! Received payloads handed to Python without a copy into a Python bytes.
//!
//! A large sample's payload reaches the loop as a `Payload`: a read-only Python buffer
//! (`memoryview(p)`, `bytes(p)`, msgpack and `struct` read it in place) over the sample's
//! own bytes. The `Payload` owns the `ZBytes` (a reference count on Zenoh's receive buffer,
//! or on the sender's shared memory chunk, which Zenoh does not reuse while it is held), and
//! every view CPython makes of it holds a reference to the `Payload` (`Py_buffer.obj`), so
//! no view outlives the bytes it points to. Nothing is ever written through a view.
//!
//! A payload that Zenoh hands over in several pieces (reassembled fragments) is made
//! contiguous once, on Zenoh's thread, without the GIL. Small payloads are cheaper as a
//! plain bytes (one small copy against a Python object and a view): `take` copies those.

use std::os::raw::{c_char, c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use zenoh::bytes::ZBytes;

/// From this size on a payload is lent, not copied (below, a copy costs less than the
/// object that lends it; tests/runtime/test_zlink_payload.py holds both sides to the same
/// bytes).
pub const LEND_FROM: usize = 16 * 1024;

/// A shared memory payload is lent only while fewer rows than this wait for the loop;
/// behind that, each is copied out on Zenoh's thread and its chunk released at once. A
/// chunk held is a chunk of the sender's pool (16 MB: 54 frames of 307,200 B) that its
/// next payloads cannot use: they then go over TCP, at 4-7x the cost on both sides, just
/// when the receiver is behind (bench/out/zcopy/backlog-*.json).
pub const SHM_HELD_ROWS: usize = 8;

/// What keeps the bytes of a payload alive: the sample's own, or a contiguous copy.
enum Held {
    Sample(#[allow(dead_code)] ZBytes), // only held: `ptr` points into it
    Copied(#[allow(dead_code)] Box<[u8]>),
}

/// One contiguous, immutable payload; `ptr` points into `held`, whose heap buffer (or
/// shared memory mapping) does not move when `held` does.
pub struct Contiguous {
    held: Held,
    ptr: *const u8,
    len: usize,
}

// The bytes are immutable and owned by `held` (ZBytes and Box are Send and Sync).
unsafe impl Send for Contiguous {}
unsafe impl Sync for Contiguous {}

impl Contiguous {
    /// On Zenoh's thread: the payload as one slice, copied only if it came in pieces.
    pub fn new(bytes: ZBytes) -> Self {
        let (single, ptr, len) = {
            let mut slices = bytes.slices();
            match (slices.next(), slices.next()) {
                (Some(only), None) => (true, only.as_ptr(), only.len()),
                (None, _) => (true, std::ptr::NonNull::<u8>::dangling().as_ptr() as *const u8, 0),
                _ => (false, std::ptr::null(), 0),
            }
        };
        if single {
            return Contiguous { held: Held::Sample(bytes), ptr, len };
        }
        Contiguous::copied(&bytes)
    }

    /// A private contiguous copy (the sample's bytes are not held).
    pub fn copied(bytes: &ZBytes) -> Self {
        let copied: Box<[u8]> = bytes.to_bytes().into_owned().into_boxed_slice();
        let (ptr, len) = (copied.as_ptr(), copied.len());
        Contiguous { held: Held::Copied(copied), ptr, len }
    }

    pub fn as_slice(&self) -> &[u8] {
        // Valid for as long as `self.held` lives (see the struct).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the bytes are still the sample's (not a copy): the tests' probe.
    fn lent(&self) -> bool {
        matches!(self.held, Held::Sample(_))
    }
}

/// A received payload as Python sees it: a read-only buffer (PEP 3118).
#[pyclass(module = "roboscale.runtime._zbridge", frozen)]
pub struct Payload {
    bytes: Contiguous,
}

impl Payload {
    pub fn new(bytes: Contiguous) -> Self {
        Payload { bytes }
    }
}

#[pymethods]
impl Payload {
    /// A read-only view; the view holds this object (and through it the bytes) alive.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("_zbridge.Payload: no view to fill"));
        }
        if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("_zbridge.Payload: received bytes are read-only"));
        }
        let (ptr, len) = {
            let this = slf.get();
            (this.bytes.ptr, this.bytes.len)
        };
        (*view).obj = slf.into_any().into_ptr(); // a new reference, released with the view
        (*view).buf = ptr as *mut c_void;
        (*view).len = len as isize;
        (*view).readonly = 1;
        (*view).itemsize = 1;
        (*view).format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT {
            c"B".as_ptr() as *mut c_char // static: CPython never frees a view's format
        } else {
            std::ptr::null_mut()
        };
        (*view).ndim = 1;
        (*view).shape =
            if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND { &mut (*view).len } else { std::ptr::null_mut() };
        (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
            &mut (*view).itemsize
        } else {
            std::ptr::null_mut()
        };
        (*view).suboffsets = std::ptr::null_mut();
        (*view).internal = std::ptr::null_mut();
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// True while the bytes are the sample's own (lent), False for a contiguous copy.
    #[getter]
    fn lent(&self) -> bool {
        self.bytes.lent()
    }
}

/// Python bytes-like objects lent to Zenoh without a copy where their owner is immutable.
///
/// - a bytes: lent as is (its buffer never moves or changes while it lives);
/// - a read-only, contiguous memoryview whose base object (`.obj`) is a bytes or a
///   `Payload`: the view's bytes, lent with that base object as their owner (a view can be
///   released, its base cannot be freed while Zenoh holds it); a view of a whole `Payload`
///   that is still the sample's own bytes is forwarded as that sample's `ZBytes` (a shared
///   memory payload then goes on as the same shared memory, no copy at all);
/// - anything else (a mutable owner such as a bytearray): one copy, made here.
///
/// pyo3 defers the decref of an owner dropped without the GIL (by Zenoh's thread) to the
/// next time a thread holds it.
pub fn lend_any(object: &Bound<'_, PyAny>) -> PyResult<ZBytes> {
    if let Ok(bytes) = object.downcast::<pyo3::types::PyBytes>() {
        return Ok(lend_slice(bytes.clone().into_any(), bytes.as_bytes()).into());
    }
    if let Ok(view) = object.downcast::<pyo3::types::PyMemoryView>() {
        if let Some(lent) = lend_view(view)? {
            return Ok(lent);
        }
    }
    let copied = object.py().get_type::<pyo3::types::PyBytes>().call1((object,))?;
    let copied = copied.downcast_into::<pyo3::types::PyBytes>()?;
    Ok(lend_slice(copied.clone().into_any(), copied.as_bytes()).into())
}

fn lend_view(view: &Bound<'_, pyo3::types::PyMemoryView>) -> PyResult<Option<ZBytes>> {
    let Ok(buffer) = pyo3::buffer::PyBuffer::<u8>::get(view.as_any()) else {
        return Ok(None); // another item format: copied by the caller
    };
    if !buffer.readonly() || !buffer.is_c_contiguous() {
        return Ok(None);
    }
    let (ptr, len) = (buffer.buf_ptr() as *const u8, buffer.len_bytes());
    drop(buffer); // the view keeps its own export of the base object
    let base = view.getattr("obj")?;
    if let Ok(payload) = base.downcast::<Payload>() {
        let held = &payload.get().bytes;
        if let (Held::Sample(sample), true) = (&held.held, ptr == held.ptr && len == held.len) {
            return Ok(Some(sample.clone()));
        }
    } else if !base.is_exact_instance_of::<pyo3::types::PyBytes>() {
        return Ok(None);
    }
    // The view's bytes lie within its base's buffer, which lives as long as the base.
    let slice = unsafe { std::slice::from_raw_parts(ptr, len) };
    Ok(Some(lend_slice(base, slice).into()))
}

/// `slice`, owned by `owner` (an immutable Python object holding it), as a Zenoh buffer.
/// Reading it needs no GIL; pyo3 defers the decref of a `Py` dropped without the GIL to
/// the next time a thread holds it.
pub(crate) fn lend_slice(owner: Bound<'_, PyAny>, slice: &[u8]) -> bytes::Bytes {
    let (ptr, len) = (slice.as_ptr(), slice.len());
    bytes::Bytes::from_owner(Lent { _owner: owner.unbind(), ptr, len })
}

struct Lent {
    _owner: Py<PyAny>,
    ptr: *const u8,
    len: usize,
}

// The bytes are immutable and owned by `_owner`, which pyo3 lets any thread hold.
unsafe impl Send for Lent {}
unsafe impl Sync for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}
