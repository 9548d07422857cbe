/*
 * walship.wal._walcodec: the compiled twin of walship.wal.entries.parse_entries_py.
 *
 * parse(buf, p, buf_off, limit) decodes the complete, valid entries of a buffer of WAL bytes
 * (a delimited WALKey, then following_kv_count KeyValue cells) from index p into the same
 * WalEntry / WalKey / Cell / Tag tuples the pure-Python parser builds, and returns
 * (entries, stop index, status).
 *
 * It never decides about anything unusual. Whenever an entry is not plainly valid (a length
 * or a cell type is wrong, the WALKey has a field, wire type, duplicate or varint shape
 * outside the common ones, a nested message does not parse), it stops before that entry with
 * status 1 (defer), and the caller hands the entry to the Python parser, which either decodes
 * it or names the corruption with its usual message and offset. An entry that is valid as
 * far as the buffer goes but runs past its end stops it with status 2 (more bytes needed),
 * exactly where the Python parser would ask for more: the caller reads on and comes back,
 * without parsing the cells before the cut a second time in Python (status 0: stopped at the
 * limit or the buffer's end). So every error, and every odd-but-valid key protobuf accepts, comes
 * from one place; this file only has to agree with it on the entries it does decode. Every
 * length is still checked here before it is trusted: deferring is how a failed check ends.
 *
 * Repeated bytes are shared, not copied again: a cell's row, family, qualifier and
 * timestamp are looked up in the previous cell and the previous entry, and a key's region,
 * table, scopes, cluster ids and attributes in the previous key (bytes are immutable, so
 * sharing is invisible to consumers). Scopes, cluster ids and attributes are turned into
 * Python objects by the reader's own cached helpers (walship.wal.keys: scopes_from_raw,
 * cluster_uuid, attribute).
 *
 * Compressed WALs are decoded by parse_compressed (_walcodec_compressed.h) with the dictionaries
 * of a Context (_walcodec_context.h), both included below.
 *
 * Plain CPython C API, no dependency; built as an optional ext-module declared in
 * pyproject.toml by every install of walship (the editable one of `make setup`, which also
 * installs gcc and python3-dev, or a wheel): without it the reader decodes in pure Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- configuration (set once by the reader through configure()) ---------------------- */

static PyTypeObject *Cell_t, *Tag_t, *WalKey_t, *WalEntry_t;
static PyObject *uuid_fn, *scopes_fn, *attribute_fn, *empty_scopes, *decode_error;

#define MAX_REPEATED 32 /* more scopes / cluster ids / attributes than this: defer */
#define DEFER 1     /* parse's status: an entry left to the Python parser */
#define NEED_MORE 2 /* parse's status: the buffer ends inside a valid entry */
#define MIN_CELL 24     /* int32 total + int32 klen + int32 vlen + the 12 fixed key bytes */

typedef struct {
    int n;
    Py_ssize_t start[MAX_REPEATED];
    Py_ssize_t len[MAX_REPEATED];
} Spans;

typedef struct {
    Py_ssize_t region, region_len, table, table_len, cluster_id, cluster_id_len;
    uint64_t seq, write_time, count, nonce_group, nonce, orig_seq;
    int has_region, has_table, has_seq, has_time, has_cluster_id, has_count;
    int has_nonce_group, has_nonce, has_orig_seq;
    Spans scopes, cluster_ids, attributes;
} Key;

/* What the previous entry of this call left behind, for sharing (see the file comment). */
typedef struct {
    PyObject *entry; /* owned; NULL before the first entry */
    uint64_t write_time;
    int64_t last_ts; /* the timestamp of its last cell, when it has cells */
    Spans scopes, cluster_ids, attributes;
} Previous;

/* ---- bytes helpers ------------------------------------------------------------------- */

static inline int32_t be32(const uint8_t *b) {
    return (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | (uint32_t)b[3]);
}

static inline int16_t be16(const uint8_t *b) { return (int16_t)(((uint16_t)b[0] << 8) | (uint16_t)b[1]); }

static inline int64_t be64(const uint8_t *b) {
    uint64_t v;
    memcpy(&v, b, 8);
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#elif !defined(__GNUC__) || __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
    v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | b[i];
#endif
    return (int64_t)v;
}

static inline int valid_type(uint8_t t) { return t == 4 || t == 8 || t == 10 || t == 12 || t == 14; }

/* A new reference to bytes equal to buf[start:start+len]: `cand` itself when it holds those
 * bytes, else a fresh copy. */
static inline PyObject *bytes_like(const uint8_t *buf, Py_ssize_t start, Py_ssize_t len, PyObject *cand) {
    if (cand != NULL && PyBytes_GET_SIZE(cand) == len &&
        (len == 0 || (PyBytes_AS_STRING(cand)[len - 1] == (char)buf[start + len - 1] &&
                      memcmp(PyBytes_AS_STRING(cand), buf + start, len) == 0))) {
        Py_INCREF(cand);
        return cand;
    }
    return PyBytes_FromStringAndSize((const char *)buf + start, len);
}

/* A varint of at most 10 bytes ending before `end`, whose bits beyond 64 are zero: 1, and
 * *pos moves past it; anything else: 0 (the caller defers to protobuf). */
static inline int read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    uint64_t v = 0;
    Py_ssize_t k = *pos;
    for (int i = 0; i < 10; i++) {
        if (k >= end) return 0;
        uint8_t b = buf[k++];
        if (i == 9 && b > 1) return 0;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = v;
            *pos = k;
            return 1;
        }
    }
    return 0;
}

static inline void copy_spans(Spans *dst, const Spans *src) {
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) {
        dst->start[i] = src->start[i];
        dst->len[i] = src->len[i];
    }
}

static inline int spans_equal(const uint8_t *buf, const Spans *a, const Spans *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        if (a->len[i] != b->len[i] || memcmp(buf + a->start[i], buf + b->start[i], a->len[i]) != 0) return 0;
    }
    return 1;
}

/* ---- the WALKey ---------------------------------------------------------------------- */

/* Parse the WALKey in buf[k:end] as WALKeyRaw: 1 when it holds only the fields of WAL.proto
 * with their wire types, each singular field once, the required ones present; else 0. */
static int parse_key(const uint8_t *buf, Py_ssize_t k, Py_ssize_t end, Key *key) {
    /* not memset whole: the spans arrays are large and written before they are read */
    memset(key, 0, offsetof(Key, scopes));
    key->scopes.n = key->cluster_ids.n = key->attributes.n = 0;
    while (k < end) {
        uint8_t tag = buf[k++];
        if (tag & 0x80) return 0; /* every field of WALKey has a one-byte tag */
        int field = tag >> 3, wire = tag & 7;
        uint64_t v;
        if (!read_varint(buf, &k, end, &v)) return 0;
        if (wire == 0) {
            switch (field) {
#define SCALAR(num, flag, dst) \
    case num:                  \
        if (key->flag) return 0; \
        key->flag = 1;         \
        key->dst = v;          \
        break;
                SCALAR(3, has_seq, seq)
                SCALAR(4, has_time, write_time)
                SCALAR(7, has_count, count)
                SCALAR(9, has_nonce_group, nonce_group)
                SCALAR(10, has_nonce, nonce)
                SCALAR(11, has_orig_seq, orig_seq)
#undef SCALAR
                default:
                    return 0;
            }
        } else if (wire == 2) {
            if (v > (uint64_t)(end - k)) return 0;
            Py_ssize_t len = (Py_ssize_t)v;
            Spans *rep = NULL;
            switch (field) {
                case 1:
                    if (key->has_region) return 0;
                    key->has_region = 1;
                    key->region = k;
                    key->region_len = len;
                    break;
                case 2:
                    if (key->has_table) return 0;
                    key->has_table = 1;
                    key->table = k;
                    key->table_len = len;
                    break;
                case 5:
                    if (key->has_cluster_id) return 0;
                    key->has_cluster_id = 1;
                    key->cluster_id = k;
                    key->cluster_id_len = len;
                    break;
                case 6:
                    rep = &key->scopes;
                    break;
                case 8:
                    rep = &key->cluster_ids;
                    break;
                case 12:
                    rep = &key->attributes;
                    break;
                default:
                    return 0;
            }
            if (rep != NULL) {
                if (rep->n == MAX_REPEATED) return 0;
                rep->start[rep->n] = k;
                rep->len[rep->n] = len;
                rep->n++;
            }
            k += len;
        } else {
            return 0;
        }
    }
    /* following_kv_count is a uint32: a larger varint is truncated by protobuf; leave it to it */
    if (key->count > 0xFFFFFFFFu) return 0;
    return key->has_region && key->has_table && key->has_seq && key->has_time;
}

/* fn(bytes) for every span, as a tuple; NULL with an exception set on failure. */
static PyObject *map_spans(const uint8_t *buf, const Spans *s, PyObject *fn) {
    PyObject *out = PyTuple_New(s->n);
    if (out == NULL) return NULL;
    for (int i = 0; i < s->n; i++) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)buf + s->start[i], s->len[i]);
        if (raw == NULL) goto fail;
        PyObject *item = PyObject_CallOneArg(fn, raw);
        Py_DECREF(raw);
        if (item == NULL) goto fail;
        PyTuple_SET_ITEM(out, i, item);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* A NamedTuple of `n` fields, all NULL until the caller sets them (as PyTuple_New does).
 * Not tracked by the garbage collector: the caller tracks it once its fields are set, or, for
 * a Cell or a Tag, which hold only bytes, ints and tuples of Tags and so can never be part of
 * a reference cycle, never (as CPython untracks such tuples itself). */
static PyObject *new_record(PyTypeObject *type, Py_ssize_t n) {
    PyTupleObject *op = PyObject_GC_NewVar(PyTupleObject, type, n);
    if (op == NULL) return NULL;
#if PY_VERSION_HEX >= 0x030E0000
    op->ob_hash = -1; /* tuples cache their hash from 3.14 on: "not computed yet" */
#endif
    memset(op->ob_item, 0, n * sizeof(PyObject *));
    return (PyObject *)op;
}

/* The WalKey of `key`, sharing what equals the previous entry's (its write time also the
 * timestamp int of `last_cell`, whose timestamp is last_ts: HBase stamps a put's cells and its
 * WALKey with the same clock reading); NULL with an exception set. A DecodeError from a nested
 * message is left set for the caller to turn into a deferral. */
static PyObject *build_key(const uint8_t *buf, const Key *key, Previous *prev, PyObject *last_cell, int64_t last_ts) {
    PyObject *pk = prev->entry != NULL ? PyTuple_GET_ITEM(prev->entry, 0) : NULL;
    PyObject *out = new_record(WalKey_t, 10);
    if (out == NULL) return NULL;
    PyObject *v;

    v = bytes_like(buf, key->region, key->region_len, pk ? PyTuple_GET_ITEM(pk, 0) : NULL);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 0, v);
    v = bytes_like(buf, key->table, key->table_len, pk ? PyTuple_GET_ITEM(pk, 1) : NULL);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 1, v);
    v = PyLong_FromUnsignedLongLong(key->seq);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 2, v);
    if (pk != NULL && prev->write_time == key->write_time) {
        v = Py_NewRef(PyTuple_GET_ITEM(pk, 3));
    } else if (last_cell != NULL && last_ts >= 0 && (uint64_t)last_ts == key->write_time) {
        v = Py_NewRef(PyTuple_GET_ITEM(last_cell, 3));
    } else {
        v = PyLong_FromUnsignedLongLong(key->write_time);
        if (v == NULL) goto fail;
    }
    PyTuple_SET_ITEM(out, 3, v);

    /* cluster ids: the repeated field, else the 0.94-era single id when it is not empty */
    if (key->cluster_ids.n) {
        if (pk != NULL && spans_equal(buf, &key->cluster_ids, &prev->cluster_ids)) {
            v = Py_NewRef(PyTuple_GET_ITEM(pk, 4));
        } else {
            v = map_spans(buf, &key->cluster_ids, uuid_fn);
        }
    } else if (key->has_cluster_id && key->cluster_id_len) {
        Spans one = {.start = {key->cluster_id}, .len = {key->cluster_id_len}, .n = 1};
        v = map_spans(buf, &one, uuid_fn);
    } else {
        v = PyTuple_New(0);
    }
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 4, v);

    if (key->scopes.n == 0) {
        v = Py_NewRef(empty_scopes);
    } else if (pk != NULL && spans_equal(buf, &key->scopes, &prev->scopes)) {
        v = Py_NewRef(PyTuple_GET_ITEM(pk, 5));
    } else {
        PyObject *raw = PyList_New(key->scopes.n);
        if (raw == NULL) goto fail;
        for (int i = 0; i < key->scopes.n; i++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)buf + key->scopes.start[i], key->scopes.len[i]);
            if (b == NULL) {
                Py_DECREF(raw);
                goto fail;
            }
            PyList_SET_ITEM(raw, i, b);
        }
        v = PyObject_CallOneArg(scopes_fn, raw);
        Py_DECREF(raw);
    }
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 5, v);

    v = PyLong_FromUnsignedLongLong(key->nonce_group);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 6, v);
    v = PyLong_FromUnsignedLongLong(key->nonce);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 7, v);
    v = PyLong_FromUnsignedLongLong(key->orig_seq);
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 8, v);

    if (key->attributes.n == 0) {
        v = PyTuple_New(0);
    } else if (pk != NULL && spans_equal(buf, &key->attributes, &prev->attributes)) {
        v = Py_NewRef(PyTuple_GET_ITEM(pk, 9));
    } else {
        v = map_spans(buf, &key->attributes, attribute_fn);
    }
    if (v == NULL) goto fail;
    PyTuple_SET_ITEM(out, 9, v);
    PyObject_GC_Track(out);
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ---- cells --------------------------------------------------------------------------- */

/* The tags of a cell, buf[start:end] (start = end of the value): a tuple of Tag, or NULL
 * with *defer set (malformed: the Python parser names it) or with an exception set. */
static PyObject *parse_tags(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int *defer) {
    Py_ssize_t tags_len = (Py_ssize_t)((uint16_t)be16(buf + start));
    Py_ssize_t t = start + 2;
    if (t + tags_len != end) goto bad;
    Py_ssize_t count = 0;
    for (Py_ssize_t u = t; u < end;) {
        if (u + 3 > end) goto bad;
        Py_ssize_t tlen = (Py_ssize_t)((uint16_t)be16(buf + u));
        if (tlen < 1 || u + 2 + tlen > end) goto bad;
        u += 2 + tlen;
        count++;
    }
    PyObject *out = PyTuple_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t tlen = (Py_ssize_t)((uint16_t)be16(buf + t));
        PyObject *tag = new_record(Tag_t, 2);
        if (tag == NULL) goto fail;
        PyTuple_SET_ITEM(out, i, tag);
        PyObject *type = PyLong_FromLong(buf[t + 2]);
        if (type == NULL) goto fail;
        PyTuple_SET_ITEM(tag, 0, type);
        PyObject *value = PyBytes_FromStringAndSize((const char *)buf + t + 3, tlen - 1);
        if (value == NULL) goto fail;
        PyTuple_SET_ITEM(tag, 1, value);
        t += 2 + tlen;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
bad:
    *defer = 1;
    return NULL;
}

/* Decode `count` cells from buf[*c], which ends at n, into a new tuple; NULL with *defer set
 * (DEFER: a cell is not valid; NEED_MORE: the buffer ends inside one, every cell before it
 * valid), or with an exception set. */
static PyObject *parse_cells(const uint8_t *buf, Py_ssize_t n, Py_ssize_t *cpos, Py_ssize_t count,
                             PyObject *prev_cells, int64_t *last_ts, int *defer) {
    Py_ssize_t c = *cpos;
    /* cells that cannot all be in the buffer: the loop below meets its end (or a cell it
     * defers) before filling more than this many slots */
    Py_ssize_t room = (n - c) / MIN_CELL + 1;
    PyObject *cells = PyTuple_New(count < room ? count : room);
    if (cells == NULL) return NULL;
    Py_ssize_t n_prev = prev_cells != NULL ? PyTuple_GET_SIZE(prev_cells) : 0;
    /* the cell whose fields the next one is compared with: the last one decoded, or the
     * previous entry's last */
    PyObject *last = n_prev ? PyTuple_GET_ITEM(prev_cells, n_prev - 1) : NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the buffer ends inside the cell: more bytes, as the Python parser asks for them (it
         * names a length too small first) */
        if (c + 18 > n) {
            if (c + 4 <= n && be32(buf + c) < 14) goto defer;
            goto need_more;
        }
        Py_ssize_t total = be32(buf + c), klen = be32(buf + c + 4), vlen = be32(buf + c + 8);
        Py_ssize_t rowlen = be16(buf + c + 12);
        if (total < 14) goto defer;
        Py_ssize_t cend = c + 4 + total;
        if (cend > n) goto need_more;
        Py_ssize_t kend = c + 12 + klen;
        Py_ssize_t vend = kend + vlen;
        if (rowlen < 0 || klen < 12 + rowlen || vlen < 0 || (vend != cend && vend + 2 > cend)) goto defer;
        Py_ssize_t fpos = c + 14 + rowlen;
        Py_ssize_t qstart = fpos + 1 + buf[fpos];
        Py_ssize_t tspos = kend - 9;
        if (qstart > tspos) goto defer;
        uint8_t type = buf[tspos + 8];
        if (!valid_type(type)) goto defer;
        int64_t ts = be64(buf + tspos);

        if (i >= PyTuple_GET_SIZE(cells)) goto defer; /* never: a valid cell takes MIN_CELL bytes */
        PyObject *same = i < n_prev ? PyTuple_GET_ITEM(prev_cells, i) : last;
        PyObject *cell = new_record(Cell_t, 7);
        if (cell == NULL) goto fail;
        PyTuple_SET_ITEM(cells, i, cell);
        PyObject *v = bytes_like(buf, c + 14, rowlen, last ? PyTuple_GET_ITEM(last, 0) : NULL);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(cell, 0, v);
        v = bytes_like(buf, fpos + 1, qstart - fpos - 1, same ? PyTuple_GET_ITEM(same, 1) : NULL);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(cell, 1, v);
        v = bytes_like(buf, qstart, tspos - qstart, same ? PyTuple_GET_ITEM(same, 2) : NULL);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(cell, 2, v);
        if (last != NULL && *last_ts == ts) {
            v = Py_NewRef(PyTuple_GET_ITEM(last, 3));
        } else {
            v = PyLong_FromLongLong(ts);
            if (v == NULL) goto fail;
        }
        PyTuple_SET_ITEM(cell, 3, v);
        v = PyLong_FromLong(type);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(cell, 4, v);
        v = PyBytes_FromStringAndSize((const char *)buf + kend, vlen);
        if (v == NULL) goto fail;
        PyTuple_SET_ITEM(cell, 5, v);
        if (vend == cend) {
            v = PyTuple_New(0);
        } else {
            v = parse_tags(buf, vend, cend, defer);
            if (v == NULL) {
                if (*defer) goto defer;
                goto fail;
            }
        }
        PyTuple_SET_ITEM(cell, 6, v);
        last = cell;
        *last_ts = ts;
        c = cend;
    }
    *cpos = c;
    return cells;
need_more:
    *defer = NEED_MORE;
    Py_DECREF(cells);
    return NULL;
defer:
    *defer = DEFER;
fail:
    Py_DECREF(cells);
    return NULL;
}

/* ---- entries ------------------------------------------------------------------------- */

/* One entry at buf[p]: 1 with *entry set and *end after it, 0 to defer, NEED_MORE when the
 * buffer ends inside it, -1 on an exception. */
static int parse_entry(const uint8_t *buf, Py_ssize_t n, Py_ssize_t p, Py_ssize_t buf_off, Previous *prev,
                       PyObject **entry, Py_ssize_t *end) {
    /* the key's length prefix, as entries.varint reads it (at most 5 bytes here) */
    uint64_t klen = 0;
    Py_ssize_t q = p;
    for (int i = 0;; i++) {
        if (i == 5) return 0;
        if (q >= n) return NEED_MORE;
        uint8_t b = buf[q++];
        klen |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) break;
    }
    klen &= 0xFFFFFFFFu;
    if (klen > (uint64_t)(n - q)) return NEED_MORE;
    Py_ssize_t kend = q + (Py_ssize_t)klen;
    Key key;
    if (!parse_key(buf, q, kend, &key)) return 0;

    Py_ssize_t c = kend;
    int defer = 0;
    int64_t last_ts = prev->last_ts;
    PyObject *cells = parse_cells(buf, n, &c, (Py_ssize_t)key.count,
                                  prev->entry != NULL ? PyTuple_GET_ITEM(prev->entry, 1) : NULL, &last_ts, &defer);
    if (cells == NULL) return defer == NEED_MORE ? NEED_MORE : defer ? 0 : -1;
    Py_ssize_t ncells = PyTuple_GET_SIZE(cells);
    PyObject *wkey = build_key(buf, &key, prev, ncells ? PyTuple_GET_ITEM(cells, ncells - 1) : NULL, last_ts);
    if (wkey == NULL) {
        Py_DECREF(cells);
        if (PyErr_ExceptionMatches(decode_error)) { /* a nested message: Python names it */
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    PyObject *out = new_record(WalEntry_t, 4);
    /* an entry starts where the previous one ended: share that int */
    PyObject *off = prev->entry != NULL ? Py_NewRef(PyTuple_GET_ITEM(prev->entry, 3)) : PyLong_FromSsize_t(buf_off + p);
    PyObject *end_off = PyLong_FromSsize_t(buf_off + c);
    if (out == NULL || off == NULL || end_off == NULL) {
        Py_XDECREF(out);
        Py_XDECREF(off);
        Py_XDECREF(end_off);
        Py_DECREF(cells);
        Py_DECREF(wkey);
        return -1;
    }
    PyTuple_SET_ITEM(out, 0, wkey);
    PyTuple_SET_ITEM(out, 1, cells);
    PyTuple_SET_ITEM(out, 2, off);
    PyTuple_SET_ITEM(out, 3, end_off);
    PyObject_GC_Track(out);
    Py_XSETREF(prev->entry, Py_NewRef(out));
    prev->write_time = key.write_time;
    if (key.count) prev->last_ts = last_ts;
    copy_spans(&prev->scopes, &key.scopes);
    copy_spans(&prev->cluster_ids, &key.cluster_ids);
    copy_spans(&prev->attributes, &key.attributes);
    *entry = out;
    *end = c;
    return 1;
}

static PyObject *walcodec_parse(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t p, buf_off, limit;
    if (!PyArg_ParseTuple(args, "y*nnn:parse", &view, &p, &buf_off, &limit)) return NULL;
    if (Cell_t == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "walship.wal._walcodec.configure() was not called");
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len;
    if (p < 0 || p > n) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "'p' must be within the buffer (0..%zd), got %zd", n, p);
        return NULL;
    }
    Previous prev;
    memset(&prev, 0, sizeof(prev));
    int status = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto error;
    while (p < n && PyList_GET_SIZE(out) < limit) {
        PyObject *entry = NULL;
        Py_ssize_t end = p;
        int r = parse_entry(buf, n, p, buf_off, &prev, &entry, &end);
        if (r < 0) goto error;
        if (r != 1) {
            status = r == NEED_MORE ? NEED_MORE : DEFER;
            break;
        }
        int appended = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (appended < 0) goto error;
        p = end;
    }
    Py_XDECREF(prev.entry);
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nni)", out, p, status);
error:
    Py_XDECREF(prev.entry);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* cellblock(buf, counts) -> [cells tuple per count], or None when the block is not exactly
 * that many whole, valid cells without tags (the Python decoder then says where). */
static PyObject *walcodec_cellblock(PyObject *module, PyObject *args) {
    Py_buffer view;
    PyObject *counts;
    if (!PyArg_ParseTuple(args, "y*O:cellblock", &view, &counts)) return NULL;
    if (Cell_t == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "walship.wal._walcodec.configure() was not called");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(counts, "cellblock: counts must be a sequence of ints");
    if (seq == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len, c = 0, results = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(results);
    if (out == NULL) goto error;
    for (Py_ssize_t i = 0; i < results; i++) {
        Py_ssize_t count = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (count == -1 && PyErr_Occurred()) goto error;
        if (count < 0) goto invalid;
        int64_t last_ts = 0;
        int defer = 0;
        PyObject *cells = parse_cells(buf, n, &c, count, NULL, &last_ts, &defer);
        if (cells == NULL) {
            if (defer) goto invalid;
            goto error;
        }
        PyList_SET_ITEM(out, i, cells);
        for (Py_ssize_t j = 0; j < count; j++) /* KeyValueCodec carries no tags */
            if (PyTuple_GET_SIZE(PyTuple_GET_ITEM(PyTuple_GET_ITEM(cells, j), 6)) != 0) goto invalid;
    }
    if (c != n) goto invalid;
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return out;
invalid:
    Py_XDECREF(out);
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
error:
    Py_XDECREF(out);
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return NULL;
}

/* configure(Cell, Tag, WalKey, WalEntry, uuid, scopes, attribute, EMPTY_SCOPES, DecodeError) */
static PyObject *walcodec_configure(PyObject *module, PyObject *args) {
    PyObject *types[4], *fns[3], *empty, *error;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:configure", &types[0], &types[1], &types[2], &types[3], &fns[0], &fns[1],
                          &fns[2], &empty, &error))
        return NULL;
    static const Py_ssize_t arity[4] = {7, 2, 10, 4};
    for (int i = 0; i < 4; i++) {
        PyTypeObject *t = (PyTypeObject *)types[i];
        /* records are built as plain tuples of their type: it must be a tuple subclass
         * without instance dict or weakref slot (a NamedTuple) */
        if (!PyType_Check(types[i]) || !PyType_IsSubtype(t, &PyTuple_Type) ||
            t->tp_basicsize != PyTuple_Type.tp_basicsize || t->tp_itemsize != PyTuple_Type.tp_itemsize ||
            t->tp_dictoffset != 0 || t->tp_weaklistoffset != 0) {
            PyErr_Format(PyExc_TypeError, "configure: argument %d must be a NamedTuple class", i + 1);
            return NULL;
        }
        PyObject *fields = PyObject_GetAttrString(types[i], "_fields");
        if (fields == NULL) return NULL;
        Py_ssize_t nf = PyTuple_Check(fields) ? PyTuple_GET_SIZE(fields) : -1;
        Py_DECREF(fields);
        if (nf != arity[i]) {
            PyErr_Format(PyExc_TypeError, "configure: argument %d must have %zd fields, has %zd", i + 1, arity[i], nf);
            return NULL;
        }
    }
    for (int i = 0; i < 3; i++) {
        if (!PyCallable_Check(fns[i])) {
            PyErr_Format(PyExc_TypeError, "configure: argument %d must be callable", i + 5);
            return NULL;
        }
    }
    if (!PyExceptionClass_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "configure: argument 9 must be an exception class");
        return NULL;
    }
    /* a record built here must be the tuple it holds: equal, same hash, same repr */
    for (int i = 0; i < 4; i++) {
        PyObject *rec = new_record((PyTypeObject *)types[i], arity[i]);
        if (rec == NULL) return NULL;
        for (Py_ssize_t j = 0; j < arity[i]; j++) PyTuple_SET_ITEM(rec, j, PyLong_FromSsize_t(j));
        PyObject *plain = PySequence_Tuple(rec);
        PyObject *made = plain != NULL ? PyObject_CallObject(types[i], plain) : NULL;
        int same = made != NULL ? PyObject_RichCompareBool(rec, made, Py_EQ) : -1;
        Py_hash_t h1 = same == 1 ? PyObject_Hash(rec) : -1, h2 = same == 1 ? PyObject_Hash(made) : -1;
        Py_XDECREF(made);
        Py_XDECREF(plain);
        Py_DECREF(rec);
        if (same < 0 || PyErr_Occurred()) return NULL;
        if (!same || h1 != h2) {
            PyErr_Format(PyExc_TypeError, "configure: argument %d is not built right by this build", i + 1);
            return NULL;
        }
    }
    Py_XSETREF(Cell_t, (PyTypeObject *)Py_NewRef(types[0]));
    Py_XSETREF(Tag_t, (PyTypeObject *)Py_NewRef(types[1]));
    Py_XSETREF(WalKey_t, (PyTypeObject *)Py_NewRef(types[2]));
    Py_XSETREF(WalEntry_t, (PyTypeObject *)Py_NewRef(types[3]));
    Py_XSETREF(uuid_fn, Py_NewRef(fns[0]));
    Py_XSETREF(scopes_fn, Py_NewRef(fns[1]));
    Py_XSETREF(attribute_fn, Py_NewRef(fns[2]));
    Py_XSETREF(empty_scopes, Py_NewRef(empty));
    Py_XSETREF(decode_error, Py_NewRef(error));
    Py_RETURN_NONE;
}

#include "_walcodec_context.h"
#include "_walcodec_compressed.h"

static PyMethodDef walcodec_methods[] = {
    {"parse", walcodec_parse, METH_VARARGS,
     "parse(buf, p, buf_off, limit) -> (entries, stop, status)\n\n"
     "Decode up to `limit` whole, valid entries of `buf` from index `p`; status 0: done, 1: the\n"
     "entry at `stop` is left to the Python parser, 2: buf ends inside it."},
    {"parse_compressed", walcodec_parse_compressed, METH_VARARGS,
     "parse_compressed(context, buf, p, buf_off, limit) -> (entries, stop, status)\n\n"
     "Decode up to `limit` whole, valid entries of a compressed WAL; status 0: done, 1: the\n"
     "entry at `stop` is left to the Python parser, 2: buf ends inside it."},
    {"cellblock", walcodec_cellblock, METH_VARARGS,
     "cellblock(buf, counts) -> [cells tuple per count] or None\n\n"
     "Decode an RPC cell block (KeyValueCodec) into a tuple of cells for each count; None when\n"
     "it is not exactly that many whole, valid cells without tags."},
    {"configure", walcodec_configure, METH_VARARGS,
     "configure(Cell, Tag, WalKey, WalEntry, uuid, scopes, attribute, EMPTY_SCOPES, DecodeError)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef walcodec_module = {
    PyModuleDef_HEAD_INIT, "walship.wal._walcodec", "Compiled WAL entry decoder (see walship.wal.reader).", -1,
    walcodec_methods,
};

PyMODINIT_FUNC PyInit__walcodec(void) {
    if (PyType_Ready(&Context_Type) < 0) return NULL;
    PyObject *m = PyModule_Create(&walcodec_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Context", (PyObject *)&Context_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
