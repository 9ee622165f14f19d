/* The dds backend's per-message path in C: take, check, deliver, forward.
 *
 * What `dds_cdr`'s ctypes classes do (CdrReader, ReaderListener, SampleForwarder), with
 * no Python frame of their own: Cyclone's on_data_available calls `on_data_available`
 * here, which takes the reader's serialized samples (dds_takecdr), checks each one's
 * encapsulation header, reads its id and calls the workload's callback with
 * (id, Sample). Per message that spares the ctypes trampoline, the take's argument
 * conversions and a dozen Python lines, run cold on a thread that has just woken
 * (docs/dds.md measures it). The Sample itself stays dds_cdr's Python class.
 *
 * No Cyclone header is needed, and nothing is linked: the libddsc functions are the
 * ones the binding loaded, passed in as addresses (ctypes), and the only layout read
 * here, dds_sample_info_t's size and `valid_data` offset, is passed in from the
 * binding's own ctypes definition. A serdata's bytes come from
 * ddsi_serdata_to_ser_ref, as for any sertype.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define HEAD_BYTES 16 /* encapsulation header, id and stamp */
#define MAX_ERRORS 10

typedef int32_t (*takecdr_fn)(int32_t, void **, uint32_t, void *, uint32_t);
typedef void (*unref_fn)(void *);
typedef void *(*ref_fn)(void *);
typedef uint32_t (*size_fn)(void *);
typedef struct {
    void *base;
    size_t length;
} iovec_t;
typedef void *(*to_ser_ref_fn)(void *, size_t, size_t, iovec_t *);
typedef void (*to_ser_unref_fn)(void *, const iovec_t *);
typedef int32_t (*writecdr_fn)(int32_t, void *);

typedef struct {
    PyObject_HEAD
    takecdr_fn takecdr;
    unref_fn unref;
    size_fn size;
    to_ser_ref_fn to_ser_ref;
    to_ser_unref_fn to_ser_unref;
    int32_t reader;
    uint32_t mask, batch;
    Py_ssize_t info_size, valid_offset;
    void **refs;
    unsigned char *infos;
    PyObject *deliver;     /* callback(id, sample) */
    PyObject *sample_type; /* Sample(serdata, base, size), .release() */
    PyObject *errors;      /* the callback's first MAX_ERRORS exceptions */
    Py_ssize_t malformed;
} Taker;

static PyObject *release_name;
/* A Cyclone thread keeps the Python thread state it first got: without that, every
 * call would create and delete one (dds_cdr.hold_thread_state, for the same reason). */
static _Thread_local int thread_state_held = 0;

/* The callback's exception: the first one printed (as a dying thread would), the first
 * MAX_ERRORS kept; never raised into Cyclone. */
static void keep_error(Taker *t) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (PyList_GET_SIZE(t->errors) == 0) PyErr_Display(type, value, tb);
    if (value != NULL && PyList_GET_SIZE(t->errors) < MAX_ERRORS && PyList_Append(t->errors, value) < 0)
        PyErr_Clear();
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static void deliver_one(Taker *t, void *serdata) {
    iovec_t iov = {NULL, 0};
    size_t size = t->size(serdata);
    void *held = t->to_ser_ref(serdata, 0, size, &iov);
    const unsigned char *data = iov.base;
    if (iov.length < size) size = iov.length; /* never read past what Cyclone lent */
    /* Byte 1 of the encapsulation header: 1 is CDR little endian, what ROS 2 sends. */
    if (data == NULL || size < HEAD_BYTES || data[1] != 1) {
        t->malformed++;
    } else {
        /* the id: bytes 4-8, little endian, whatever this machine's order */
        int32_t id = (int32_t)((uint32_t)data[4] | (uint32_t)data[5] << 8 | (uint32_t)data[6] << 16 |
                               (uint32_t)data[7] << 24);
        PyObject *sample = PyObject_CallFunction(t->sample_type, "KKn", (unsigned long long)(uintptr_t)serdata,
                                                 (unsigned long long)(uintptr_t)data, (Py_ssize_t)size);
        if (sample == NULL) {
            keep_error(t);
        } else {
            PyObject *result = PyObject_CallFunction(t->deliver, "iO", id, sample);
            if (result == NULL) keep_error(t);
            Py_XDECREF(result);
            PyObject *released = PyObject_CallMethodNoArgs(sample, release_name);
            if (released == NULL) keep_error(t);
            Py_XDECREF(released);
            Py_DECREF(sample);
        }
    }
    t->to_ser_unref(held, &iov);
}

/* Takes what the reader holds and delivers each valid sample; the GIL is held on entry
 * and let go while Cyclone takes. The count taken, negative when the reader is gone. */
static int32_t take_all(Taker *t) {
    int32_t taken;
    Py_BEGIN_ALLOW_THREADS
    taken = t->takecdr(t->reader, t->refs, t->batch, t->infos, t->mask);
    Py_END_ALLOW_THREADS
    for (int32_t i = 0; i < taken; i++) {
        void *serdata = t->refs[i];
        if (serdata == NULL) continue;
        if (t->infos[i * t->info_size + t->valid_offset]) deliver_one(t, serdata);
        t->unref(serdata); /* the reference dds_takecdr gave */
    }
    return taken;
}

/* dds_on_data_available_fn, on the Cyclone thread that delivers the data. */
static void on_data_available(int32_t reader, void *arg) {
    (void)reader;
    PyGILState_STATE state = PyGILState_Ensure();
    if (!thread_state_held) {
        (void)PyGILState_Ensure(); /* never released: the thread keeps its state */
        thread_state_held = 1;
    }
    (void)take_all((Taker *)arg);
    PyGILState_Release(state);
}

static int Taker_init(Taker *t, PyObject *args, PyObject *kwargs) {
    /* Everything is parsed and checked into locals, and a second call refused, before
       the object is written: a second __init__ once rewrote the sizes of the buffers
       allocated by the first, and take_all then read past them. */
    unsigned long long takecdr, unref, size, to_ser_ref, to_ser_unref;
    int reader;
    unsigned int mask, batch;
    Py_ssize_t info_size, valid_offset;
    PyObject *deliver, *sample_type;
    static char *names[] = {"functions", "reader", "mask", "batch", "info_layout", "deliver", "sample_type", NULL};
    if (t->refs != NULL || t->infos != NULL || t->errors != NULL || t->deliver != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Taker is initialized once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(KKKKK)iII(nn)OO", names, &takecdr, &unref, &size, &to_ser_ref,
                                     &to_ser_unref, &reader, &mask, &batch, &info_size, &valid_offset, &deliver,
                                     &sample_type))
        return -1;
    if (!takecdr || !unref || !size || !to_ser_ref || !to_ser_unref || batch == 0 || info_size <= 0 ||
        valid_offset < 0 || valid_offset >= info_size) {
        PyErr_SetString(PyExc_ValueError, "a Taker needs five function addresses, a batch and a sample info layout");
        return -1;
    }
    void **refs = PyMem_RawCalloc(batch, sizeof(void *));
    unsigned char *infos = PyMem_RawCalloc(batch, (size_t)info_size);
    PyObject *errors = PyList_New(0);
    if (refs == NULL || infos == NULL || errors == NULL) {
        PyMem_RawFree(refs);
        PyMem_RawFree(infos);
        Py_XDECREF(errors);
        PyErr_NoMemory();
        return -1;
    }
    t->takecdr = (takecdr_fn)(uintptr_t)takecdr;
    t->unref = (unref_fn)(uintptr_t)unref;
    t->size = (size_fn)(uintptr_t)size;
    t->to_ser_ref = (to_ser_ref_fn)(uintptr_t)to_ser_ref;
    t->to_ser_unref = (to_ser_unref_fn)(uintptr_t)to_ser_unref;
    t->reader = reader;
    t->mask = mask;
    t->batch = batch;
    t->info_size = info_size;
    t->valid_offset = valid_offset;
    t->refs = refs;
    t->infos = infos;
    t->errors = errors;
    Py_INCREF(deliver);
    t->deliver = deliver;
    Py_INCREF(sample_type);
    t->sample_type = sample_type;
    return 0;
}

static void Taker_dealloc(Taker *t) {
    Py_XDECREF(t->deliver);
    Py_XDECREF(t->sample_type);
    Py_XDECREF(t->errors);
    PyMem_RawFree(t->refs);
    PyMem_RawFree(t->infos);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int ready(Taker *t) {
    if (t->refs == NULL) PyErr_SetString(PyExc_ValueError, "the Taker was not initialized");
    return t->refs != NULL;
}

static PyObject *Taker_take(Taker *t, PyObject *unused) {
    return ready(t) ? PyLong_FromLong(take_all(t)) : NULL;
}

static PyObject *Taker_function(Taker *t, PyObject *unused) {
    return PyLong_FromVoidPtr((void *)on_data_available);
}

static PyObject *Taker_argument(Taker *t, PyObject *unused) {
    return ready(t) ? PyLong_FromVoidPtr(t) : NULL;
}

static PyObject *Taker_malformed(Taker *t, void *closure) { return PyLong_FromSsize_t(t->malformed); }

static PyObject *Taker_errors(Taker *t, void *closure) {
    if (!ready(t)) return NULL;
    Py_INCREF(t->errors);
    return t->errors;
}

static PyMethodDef Taker_methods[] = {
    {"take", (PyCFunction)Taker_take, METH_NOARGS,
     "Take what the reader holds and deliver it; the count taken, negative when the reader is gone."},
    {"function", (PyCFunction)Taker_function, METH_NOARGS, "The address of the on_data_available function."},
    {"argument", (PyCFunction)Taker_argument, METH_NOARGS,
     "Its argument: this Taker, which must outlive the listener."},
    {NULL}};

static PyGetSetDef Taker_getset[] = {
    {"malformed", (getter)Taker_malformed, NULL, "Samples dropped: not CDR little endian, or shorter than 16 bytes.",
     NULL},
    {"errors", (getter)Taker_errors, NULL, "The callback's first exceptions.", NULL},
    {NULL}};

static PyTypeObject TakerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "roboscale.backends._dds_take.Taker",
    .tp_doc = "Takes a reader's serialized samples and calls deliver(id, Sample) for each valid one.",
    .tp_basicsize = sizeof(Taker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Taker_init,
    .tp_dealloc = (destructor)Taker_dealloc,
    .tp_methods = Taker_methods,
    .tp_getset = Taker_getset,
};

typedef struct {
    PyObject_HEAD
    ref_fn ref;
    writecdr_fn writecdr;
    int32_t writer;
    PyObject *serdata_name;
} Forwarder;

static int Forwarder_init(Forwarder *f, PyObject *args, PyObject *kwargs) {
    unsigned long long ref, writecdr;
    int writer;
    static char *names[] = {"functions", "writer", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(KK)i", names, &ref, &writecdr, &writer)) return -1;
    if (!ref || !writecdr) {
        PyErr_SetString(PyExc_ValueError, "a Forwarder needs two function addresses");
        return -1;
    }
    f->ref = (ref_fn)(uintptr_t)ref;
    f->writecdr = (writecdr_fn)(uintptr_t)writecdr;
    f->writer = writer;
    return 0;
}

/* forwarder(sample): dds_writecdr of a new reference to the sample's serdata, which
 * the write consumes; the GIL is let go while Cyclone sends. Cyclone's status. */
static PyObject *Forwarder_call(Forwarder *f, PyObject *args, PyObject *kwargs) {
    PyObject *sample;
    if (!PyArg_ParseTuple(args, "O", &sample)) return NULL;
    if (f->writecdr == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Forwarder was not initialized");
        return NULL;
    }
    PyObject *address = PyObject_CallMethod(sample, "serdata", NULL); /* raises once released */
    if (address == NULL) return NULL;
    void *serdata = PyLong_AsVoidPtr(address);
    Py_DECREF(address);
    if (serdata == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a sample without serialized data");
        return NULL;
    }
    int32_t status;
    f->ref(serdata);
    Py_BEGIN_ALLOW_THREADS
    status = f->writecdr(f->writer, serdata);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(status);
}

static PyTypeObject ForwarderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "roboscale.backends._dds_take.Forwarder",
    .tp_doc = "Writes received samples unchanged, by reference: forwarder(sample) -> Cyclone's status.",
    .tp_basicsize = sizeof(Forwarder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Forwarder_init,
    .tp_call = (ternaryfunc)Forwarder_call,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dds_take", "The dds backend's per-message path in C (see dds_cdr).", -1, NULL,
};

PyMODINIT_FUNC PyInit__dds_take(void) {
    release_name = PyUnicode_InternFromString("release");
    if (release_name == NULL || PyType_Ready(&TakerType) < 0 || PyType_Ready(&ForwarderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Taker", (PyObject *)&TakerType) < 0 ||
        PyModule_AddObjectRef(m, "Forwarder", (PyObject *)&ForwarderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
