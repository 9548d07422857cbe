/*
 * The dictionaries of one compressed WAL for the compiled decoder (_walcodec_compressed.h):
 * walship.wal._walcodec.Context, the twin of walship.wal.dictionaries.CompressionContext, and
 * the tokens that read them.
 * Included by _walcodec.c.
 *
 * Each dictionary is HBase's LRUDictionary: entries by index, most recent first in a linked
 * list; a full one overwrites its least recent entry in place. Every change is journalled, so
 * that an entry cut short by the end of the buffer is undone (ctx_rollback) and decoded again
 * once the rest has been read; a whole entry commits its changes (ctx_commit). export() and
 * load() copy the dictionaries to and from the Python model, for the entries the compiled
 * decoder leaves to the Python parser.
 */

enum { D_REGION, D_TABLE, D_FAMILY, D_QUALIFIER, D_ROW, D_TAG, N_DICTS };
enum { U_TOUCH, U_APPEND, U_REPLACE };
/* results of the helpers below */
#define T_OK 1
#define T_MORE 0   /* the buffer ends inside the entry */
#define T_DEFER -2 /* not plainly valid: the Python parser names it */
#define T_ERR -1   /* a Python exception is set */

typedef struct {
    int32_t capacity, size, head, tail;
    PyObject **entries;
    int32_t *prev, *next;
} Lru;

typedef struct {
    Lru *d;
    int32_t idx, old_prev, old_next, old_head, old_tail;
    int kind;
    PyObject *old; /* owned: the entry a replace overwrote */
} Undo;

typedef struct {
    PyObject_HEAD
    Lru dicts[N_DICTS];
    int tag_compression;
    PyObject *decompress; /* value codec's decompress(bytes, size), or NULL */
    PyObject *scopes_fn;  /* (family, scope) pairs -> shared mapping */
    Undo *journal;
    Py_ssize_t jlen, jcap;
    uint64_t prev_write_time; /* the write time of the last entry decoded */
    /* the last key's decoded scopes, shared with the next key that has the same */
    PyObject *last_scopes;
    int n_last;
    PyObject *last_family[MAX_REPEATED];
    int last_scope[MAX_REPEATED];
} Context;

/* ---- dictionaries -------------------------------------------------------------------- */

static int journal_grow(Context *ctx) {
    Py_ssize_t cap = ctx->jcap ? ctx->jcap * 2 : 64;
    Undo *grown = PyMem_Realloc(ctx->journal, cap * sizeof(Undo));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    ctx->journal = grown;
    ctx->jcap = cap;
    return 0;
}

static inline int journal_push(Context *ctx, Lru *d, int32_t i, int kind, PyObject *old) {
    if (ctx->jlen == ctx->jcap && journal_grow(ctx) < 0) return -1;
    Undo *u = &ctx->journal[ctx->jlen++];
    u->d = d;
    u->idx = i;
    u->kind = kind;
    u->old = old;
    u->old_prev = kind == U_APPEND ? -1 : d->prev[i];
    u->old_next = kind == U_APPEND ? -1 : d->next[i];
    u->old_head = d->head;
    u->old_tail = d->tail;
    return 0;
}

static inline void lru_to_head(Lru *d, int32_t i) {
    int32_t p = d->prev[i], n = d->next[i];
    if (p == -1) return;
    d->next[p] = n;
    if (n != -1)
        d->prev[n] = p;
    else
        d->tail = p;
    d->prev[i] = -1;
    d->next[i] = d->head;
    d->prev[d->head] = i;
    d->head = i;
}

/* The entry at index i, made the most recent (borrowed); NULL without an exception when
 * there is none, NULL with one on a memory error. */
static inline PyObject *lru_get(Context *ctx, Lru *d, int32_t i) {
    if (i < 0 || i >= d->size) return NULL;
    if (i != d->head) {
        if (journal_push(ctx, d, i, U_TOUCH, NULL) < 0) return NULL;
        lru_to_head(d, i);
    }
    return d->entries[i];
}

/* Add v (not empty) as the most recent entry; -1 on a memory error. */
static int lru_add(Context *ctx, Lru *d, PyObject *v) {
    if (d->size < d->capacity) {
        int32_t i = d->size;
        if (journal_push(ctx, d, i, U_APPEND, NULL) < 0) return -1;
        d->entries[i] = Py_NewRef(v);
        d->prev[i] = -1;
        d->next[i] = d->head;
        if (d->head != -1)
            d->prev[d->head] = i;
        else
            d->tail = i;
        d->head = i;
        d->size++;
        return 0;
    }
    int32_t victim = d->tail;
    if (journal_push(ctx, d, victim, U_REPLACE, d->entries[victim]) < 0) return -1;
    d->entries[victim] = Py_NewRef(v); /* the journal owns the old one now */
    lru_to_head(d, victim);
    return 0;
}

static void ctx_commit(Context *ctx) {
    for (Py_ssize_t j = 0; j < ctx->jlen; j++) Py_CLEAR(ctx->journal[j].old);
    ctx->jlen = 0;
}

static void ctx_rollback(Context *ctx) {
    while (ctx->jlen > 0) {
        Undo *u = &ctx->journal[--ctx->jlen];
        Lru *d = u->d;
        int32_t i = u->idx, n = d->next[i]; /* i is the head: unlink it */
        if (n != -1) d->prev[n] = -1;
        if (u->kind == U_APPEND) {
            d->size--;
            Py_CLEAR(d->entries[i]);
        } else {
            if (u->kind == U_REPLACE) {
                Py_SETREF(d->entries[i], u->old);
                u->old = NULL;
            }
            d->prev[i] = u->old_prev;
            d->next[i] = u->old_next;
            if (u->old_prev != -1) d->next[u->old_prev] = i;
            if (u->old_next != -1) d->prev[u->old_next] = i;
        }
        d->head = u->old_head;
        d->tail = u->old_tail;
    }
}

/* ---- tokens and varints -------------------------------------------------------------- */

/* A varint32 as StreamUtils / CodedInputStream read it, bounded by end: T_OK (*out set, *pos
 * after it), T_MORE when it runs past end, T_DEFER when malformed or >= 2^31 (a negative int
 * to Java). */
static inline int varint32(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, uint32_t *out) {
    Py_ssize_t k = *pos;
    if (k < end && buf[k] < 0x80) { /* the common one-byte case */
        *out = buf[k];
        *pos = k + 1;
        return T_OK;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (k >= end) return T_MORE;
        uint8_t b = buf[k++];
        if (i < 5) v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            v &= 0xFFFFFFFFu;
            if (v > 0x7FFFFFFFu) return T_DEFER;
            *out = (uint32_t)v;
            *pos = k;
            return T_OK;
        }
    }
    return T_DEFER;
}

/* stream_token for any token: a literal, or an index that may be out of range or cut short. */
static int any_token(Context *ctx, Lru *d, const uint8_t *buf, Py_ssize_t n, Py_ssize_t *c, PyObject **out) {
    Py_ssize_t k = *c;
    if (k >= n) return T_MORE;
    uint8_t status = buf[k];
    if (status == 0xFF) {
        uint32_t len;
        k++;
        int r = varint32(buf, &k, n, &len);
        if (r != T_OK) return r;
        if ((Py_ssize_t)len > n - k) return T_MORE;
        PyObject *v = PyBytes_FromStringAndSize((const char *)buf + k, len);
        if (v == NULL) return T_ERR;
        if (len && lru_add(ctx, d, v) < 0) {
            Py_DECREF(v);
            return T_ERR;
        }
        *out = v;
        *c = k + len;
        return T_OK;
    }
    if (status & 0x80) return T_DEFER;
    if (k + 2 > n) return T_MORE;
    PyObject *v = lru_get(ctx, d, ((int32_t)status << 8) | buf[k + 1]);
    if (v == NULL) return PyErr_Occurred() ? T_ERR : T_DEFER;
    *out = Py_NewRef(v);
    *c = k + 2;
    return T_OK;
}

/* One token of the cell stream at buf[*c] (ends at n): T_OK with *out a new reference. The
 * common one, an index of an entry the dictionary has, is looked up here; any_token does the
 * rest. */
static inline int stream_token(Context *ctx, Lru *d, const uint8_t *buf, Py_ssize_t n, Py_ssize_t *c,
                               PyObject **out) {
    Py_ssize_t k = *c;
    if (k + 2 <= n && buf[k] < 0x80) {
        int32_t i = ((int32_t)buf[k] << 8) | buf[k + 1];
        if (i < d->size) {
            if (i != d->head) {
                if (journal_push(ctx, d, i, U_TOUCH, NULL) < 0) return T_ERR;
                lru_to_head(d, i);
            }
            *out = Py_NewRef(d->entries[i]);
            *c = k + 2;
            return T_OK;
        }
    }
    return any_token(ctx, d, buf, n, c, out);
}

/* One token held whole in buf[s:s+len] (a key field): T_OK with *out a new reference. */
static int key_token(Context *ctx, Lru *d, const uint8_t *buf, Py_ssize_t s, Py_ssize_t len, PyObject **out) {
    Py_ssize_t end = s + len, k = s;
    int r = stream_token(ctx, d, buf, end, &k, out);
    if (r == T_OK && k != end) {
        Py_CLEAR(*out); /* trailing bytes; the change it made is rolled back with the entry */
        return T_DEFER;
    }
    return r == T_MORE ? T_DEFER : r;
}

static PyTypeObject Context_Type;

/* ---- the Context type ---------------------------------------------------------------- */

static void lru_free(Lru *d) {
    for (int32_t i = 0; i < d->size; i++) Py_CLEAR(d->entries[i]);
    PyMem_Free(d->entries);
    PyMem_Free(d->prev);
    PyMem_Free(d->next);
    memset(d, 0, sizeof(*d));
}

static void Context_dealloc(Context *ctx) {
    ctx_commit(ctx);
    PyMem_Free(ctx->journal);
    for (int i = 0; i < N_DICTS; i++) lru_free(&ctx->dicts[i]);
    for (int i = 0; i < ctx->n_last; i++) Py_CLEAR(ctx->last_family[i]);
    Py_CLEAR(ctx->last_scopes);
    Py_CLEAR(ctx->decompress);
    Py_CLEAR(ctx->scopes_fn);
    Py_TYPE(ctx)->tp_free((PyObject *)ctx);
}

/* Context(capacities, tag_compression, decompress or None, scopes_fn) */
static int Context_init(Context *ctx, PyObject *args, PyObject *kwds) {
    PyObject *caps, *decompress, *scopes;
    int tags;
    if (!PyArg_ParseTuple(args, "O!pOO:Context", &PyTuple_Type, &caps, &tags, &decompress, &scopes)) return -1;
    if (PyTuple_GET_SIZE(caps) != N_DICTS || !PyCallable_Check(scopes) ||
        (decompress != Py_None && !PyCallable_Check(decompress))) {
        PyErr_SetString(PyExc_TypeError, "Context(six capacities, tag_compression, decompress or None, scopes)");
        return -1;
    }
    ctx_commit(ctx);
    Py_CLEAR(ctx->scopes_fn); /* not usable until initialised again */
    for (int i = 0; i < N_DICTS; i++) {
        lru_free(&ctx->dicts[i]);
        long cap = PyLong_AsLong(PyTuple_GET_ITEM(caps, i));
        if (cap == -1 && PyErr_Occurred()) return -1;
        if (cap < 1 || cap > 0x7FFF) {
            PyErr_Format(PyExc_ValueError, "capacity %d must be within 1..32767, got %ld", i, cap);
            return -1;
        }
        Lru *d = &ctx->dicts[i];
        d->capacity = (int32_t)cap;
        d->head = d->tail = -1;
        d->entries = PyMem_Calloc(cap, sizeof(PyObject *));
        d->prev = PyMem_Calloc(cap, sizeof(int32_t));
        d->next = PyMem_Calloc(cap, sizeof(int32_t));
        if (d->entries == NULL || d->prev == NULL || d->next == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    ctx->tag_compression = tags;
    Py_XSETREF(ctx->decompress, decompress == Py_None ? NULL : Py_NewRef(decompress));
    Py_XSETREF(ctx->scopes_fn, Py_NewRef(scopes));
    return 0;
}

/* export() -> ((entries, order from most recent) per dictionary; None for TAG without tags) */
static PyObject *Context_export(Context *ctx, PyObject *unused) {
    ctx_commit(ctx);
    PyObject *out = PyTuple_New(N_DICTS);
    if (out == NULL) return NULL;
    for (int i = 0; i < N_DICTS; i++) {
        Lru *d = &ctx->dicts[i];
        PyObject *item;
        if (i == D_TAG && !ctx->tag_compression) {
            item = Py_NewRef(Py_None);
        } else {
            PyObject *entries = PyList_New(d->size), *order = PyList_New(d->size);
            for (int32_t j = 0; entries != NULL && j < d->size; j++) PyList_SET_ITEM(entries, j, Py_NewRef(d->entries[j]));
            int32_t at = d->head;
            for (int32_t j = 0; order != NULL && j < d->size; j++, at = d->next[at]) {
                PyObject *ix = PyLong_FromLong(at);
                if (ix == NULL) Py_CLEAR(order);
                else PyList_SET_ITEM(order, j, ix);
            }
            item = entries != NULL && order != NULL ? PyTuple_Pack(2, entries, order) : NULL;
            Py_XDECREF(entries);
            Py_XDECREF(order);
        }
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, item);
    }
    return out;
}

/* load(state): the dictionaries as export() gives them (or the Python model's export_state) */
static PyObject *Context_load(Context *ctx, PyObject *state) {
    ctx_commit(ctx);
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != N_DICTS) {
        PyErr_SetString(PyExc_TypeError, "load: a tuple of six dictionary states");
        return NULL;
    }
    for (int i = 0; i < N_DICTS; i++) {
        Lru *d = &ctx->dicts[i];
        PyObject *s = PyTuple_GET_ITEM(state, i), *entries, *order;
        if (s == Py_None) continue;
        if (!PyArg_ParseTuple(s, "O!O!", &PyList_Type, &entries, &PyList_Type, &order)) return NULL;
        Py_ssize_t size = PyList_GET_SIZE(entries);
        if (size > d->capacity || PyList_GET_SIZE(order) != size) {
            PyErr_Format(PyExc_ValueError, "load: not a state of dictionary %d", i);
            return NULL;
        }
        for (Py_ssize_t j = 0; j < size; j++) {
            if (!PyBytes_Check(PyList_GET_ITEM(entries, j))) {
                PyErr_SetString(PyExc_TypeError, "load: dictionary entries must be bytes");
                return NULL;
            }
        }
        for (int32_t j = 0; j < d->size; j++) Py_CLEAR(d->entries[j]);
        for (Py_ssize_t j = 0; j < size; j++) d->entries[j] = Py_NewRef(PyList_GET_ITEM(entries, j));
        d->size = (int32_t)size;
        int32_t before = -1;
        d->head = d->tail = -1;
        for (Py_ssize_t j = 0; j < size; j++) {
            long ix = PyLong_AsLong(PyList_GET_ITEM(order, j));
            if (ix < 0 || ix >= size) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "load: bad order of dictionary %d", i);
                return NULL;
            }
            d->prev[ix] = before;
            d->next[ix] = -1;
            if (before != -1) d->next[before] = (int32_t)ix;
            else d->head = (int32_t)ix;
            before = d->tail = (int32_t)ix;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef Context_methods[] = {
    {"export", (PyCFunction)Context_export, METH_NOARGS, "export() -> the dictionaries' states"},
    {"load", (PyCFunction)Context_load, METH_O, "load(state): take the dictionaries' states"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Context_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "walship.wal._walcodec.Context",
    .tp_basicsize = sizeof(Context),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The dictionaries of one compressed WAL (see walship.wal.compressed).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Context_init,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_methods = Context_methods,
};
