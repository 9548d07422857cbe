/*
 * multi_call(region_name, mutations, cluster_ids) -> (request, block), row_runs(cells) and
 * multi_applied(body, actions) (below),
 * for sink hbase
 * (walship.sinks.regionservers): walship.rpc.multi.multi_call compiled, its request already
 * serialized. Included by _fastpath.c.
 *
 * `mutations` is a list of walship.rpc.multi.RowMutation (row, delete, cells); `cluster_ids` the
 * `_cs.id` value every mutation carries, or None. `request` is the bytes of the MultiRequest
 * protobuf's serializer writes for the same message (fields in number order, every field set
 * written, index 0 too), `block` the cells in KeyValueCodec (tags left out).
 * tests/unit/test_fastpath.py checks both against the Python function's.
 */

/* the bytes of a varint */
static inline Py_ssize_t pb_varint_len(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *pb_varint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static inline char *pb_bytes(char *p, int tag, const char *data, Py_ssize_t len) {
    *p++ = (char)tag;
    p = pb_varint(p, (uint64_t)len);
    memcpy(p, data, len);
    return p + len;
}

static inline char *kv_be(char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) *p++ = (char)(v >> (8 * i));
    return p;
}

static const char CS_ID[] = "_cs.id";

/* one mutation's MutationProto size */
static Py_ssize_t mutation_size(Py_ssize_t rowlen, Py_ssize_t cells, Py_ssize_t attr) {
    Py_ssize_t n = 1 + pb_varint_len(rowlen) + rowlen + 2 + 1 + pb_varint_len((uint64_t)cells);
    return attr ? n + 1 + pb_varint_len(attr) + attr : n;
}

static PyObject *multi_call(PyObject *module, PyObject *args) {
    PyObject *region, *mutations, *ids;
    if (!PyArg_ParseTuple(args, "SO!O:multi_call", &region, &PyList_Type, &mutations, &ids)) return NULL;
    if (ids != Py_None && !PyBytes_Check(ids)) {
        PyErr_SetString(PyExc_TypeError, "multi_call: cluster_ids must be bytes or None");
        return NULL;
    }
    Py_ssize_t nmut = PyList_GET_SIZE(mutations), idlen = ids == Py_None ? 0 : PyBytes_GET_SIZE(ids);
    /* NameBytesPair {1: "_cs.id", 2: ids} */
    Py_ssize_t attr = ids == Py_None ? 0 : 2 + (Py_ssize_t)(sizeof CS_ID - 1) + 1 + pb_varint_len(idlen) + idlen;
    /* first pass: sizes, and a check of every item read */
    Py_ssize_t rlen = PyBytes_GET_SIZE(region);
    Py_ssize_t spec = 2 + 1 + pb_varint_len(rlen) + rlen; /* RegionSpecifier {1: REGION_NAME, 2: name} */
    Py_ssize_t action_bytes = 1 + pb_varint_len(spec) + spec, block_len = 0;
    for (Py_ssize_t i = 0; i < nmut; i++) {
        PyObject *m = PyList_GET_ITEM(mutations, i);
        if (check_tuple(m, 3, "multi_call: a mutation") < 0) return NULL;
        PyObject *row = PyTuple_GET_ITEM(m, 0), *cells = PyTuple_GET_ITEM(m, 2);
        if (!PyBytes_Check(row) || !PyTuple_Check(cells)) {
            PyErr_SetString(PyExc_TypeError, "multi_call: a mutation must be (row bytes, delete, cells tuple)");
            return NULL;
        }
        Py_ssize_t nc = PyTuple_GET_SIZE(cells);
        Py_ssize_t mp = mutation_size(PyBytes_GET_SIZE(row), nc, attr);
        Py_ssize_t action = 1 + pb_varint_len((uint64_t)i) + 1 + pb_varint_len(mp) + mp;
        action_bytes += 1 + pb_varint_len(action) + action;
        for (Py_ssize_t c = 0; c < nc; c++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, c);
            if (check_tuple(cell, CELL_SIZE, "multi_call: a cell") < 0) return NULL;
            PyObject *r = PyTuple_GET_ITEM(cell, CELL_ROW), *f = PyTuple_GET_ITEM(cell, CELL_FAMILY),
                     *q = PyTuple_GET_ITEM(cell, CELL_QUALIFIER), *v = PyTuple_GET_ITEM(cell, CELL_VALUE);
            if (!PyBytes_Check(r) || !PyBytes_Check(f) || !PyBytes_Check(q) || !PyBytes_Check(v) ||
                PyBytes_GET_SIZE(f) > 255 || PyBytes_GET_SIZE(r) > 0x7FFF) {
                PyErr_SetString(PyExc_TypeError, "multi_call: a cell's row, family, qualifier and value must be bytes");
                return NULL;
            }
            block_len += 4 + 8 + 12 + PyBytes_GET_SIZE(r) + PyBytes_GET_SIZE(f) + PyBytes_GET_SIZE(q) +
                         PyBytes_GET_SIZE(v);
        }
    }
    Py_ssize_t total = 1 + pb_varint_len(action_bytes) + action_bytes;
    PyObject *request = PyBytes_FromStringAndSize(NULL, total), *block = PyBytes_FromStringAndSize(NULL, block_len);
    if (request == NULL || block == NULL) goto fail;
    char *p = PyBytes_AS_STRING(request), *b = PyBytes_AS_STRING(block);
    *p++ = 0x0A; /* MultiRequest.regionAction */
    p = pb_varint(p, (uint64_t)action_bytes);
    *p++ = 0x0A; /* RegionAction.region */
    p = pb_varint(p, (uint64_t)spec);
    *p++ = 0x08; /* RegionSpecifier.type = REGION_NAME */
    *p++ = 0x01;
    p = pb_bytes(p, 0x12, PyBytes_AS_STRING(region), rlen);
    for (Py_ssize_t i = 0; i < nmut; i++) {
        PyObject *m = PyList_GET_ITEM(mutations, i);
        PyObject *row = PyTuple_GET_ITEM(m, 0), *cells = PyTuple_GET_ITEM(m, 2);
        int delete = PyObject_IsTrue(PyTuple_GET_ITEM(m, 1));
        if (delete < 0) goto fail;
        Py_ssize_t nc = PyTuple_GET_SIZE(cells);
        Py_ssize_t mp = mutation_size(PyBytes_GET_SIZE(row), nc, attr);
        Py_ssize_t action = 1 + pb_varint_len((uint64_t)i) + 1 + pb_varint_len(mp) + mp;
        *p++ = 0x1A; /* RegionAction.action */
        p = pb_varint(p, (uint64_t)action);
        *p++ = 0x08; /* Action.index */
        p = pb_varint(p, (uint64_t)i);
        *p++ = 0x12; /* Action.mutation */
        p = pb_varint(p, (uint64_t)mp);
        p = pb_bytes(p, 0x0A, PyBytes_AS_STRING(row), PyBytes_GET_SIZE(row)); /* MutationProto.row */
        *p++ = 0x10;                                                            /* mutate_type */
        *p++ = delete ? 3 : 2;                                                  /* DELETE : PUT */
        if (attr) {
            *p++ = 0x2A; /* attribute */
            p = pb_varint(p, (uint64_t)attr);
            p = pb_bytes(p, 0x0A, CS_ID, sizeof CS_ID - 1);
            p = pb_bytes(p, 0x12, PyBytes_AS_STRING(ids), idlen);
        }
        *p++ = 0x40; /* associated_cell_count */
        p = pb_varint(p, (uint64_t)nc);
        for (Py_ssize_t c = 0; c < nc; c++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, c);
            PyObject *r = PyTuple_GET_ITEM(cell, CELL_ROW), *f = PyTuple_GET_ITEM(cell, CELL_FAMILY),
                     *q = PyTuple_GET_ITEM(cell, CELL_QUALIFIER), *v = PyTuple_GET_ITEM(cell, CELL_VALUE);
            long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(cell, CELL_TIMESTAMP));
            long type = PyLong_AsLong(PyTuple_GET_ITEM(cell, CELL_TYPE));
            if ((ts == -1 || type == -1) && PyErr_Occurred()) goto fail;
            Py_ssize_t rl = PyBytes_GET_SIZE(r), fl = PyBytes_GET_SIZE(f), ql = PyBytes_GET_SIZE(q),
                       vl = PyBytes_GET_SIZE(v), kl = 12 + rl + fl + ql;
            b = kv_be(b, (uint64_t)(8 + kl + vl), 4);
            b = kv_be(b, (uint64_t)kl, 4);
            b = kv_be(b, (uint64_t)vl, 4);
            b = kv_be(b, (uint64_t)rl, 2);
            memcpy(b, PyBytes_AS_STRING(r), rl);
            b += rl;
            *b++ = (char)fl;
            memcpy(b, PyBytes_AS_STRING(f), fl);
            b += fl;
            memcpy(b, PyBytes_AS_STRING(q), ql);
            b += ql;
            b = kv_be(b, (uint64_t)ts, 8);
            *b++ = (char)type;
            memcpy(b, PyBytes_AS_STRING(v), vl);
            b += vl;
        }
    }
    if (p != PyBytes_AS_STRING(request) + total || b != PyBytes_AS_STRING(block) + block_len) {
        PyErr_SetString(PyExc_SystemError, "multi_call: sizes computed and written differ");
        goto fail;
    }
    return Py_BuildValue("(NN)", request, block);
fail:
    Py_XDECREF(request);
    Py_XDECREF(block);
    return NULL;
}

/* row_runs(cells) -> [(row, delete, cells), ...]: walship.sinks.regionservers.row_mutations
 * compiled, for a tuple of cells: each run of consecutive cells of one row and of one kind
 * (puts, or deletes) is one (row, delete, the run's cells as a tuple). */
static PyObject *row_runs(PyObject *module, PyObject *cells) {
    if (!PyTuple_Check(cells)) {
        PyErr_SetString(PyExc_TypeError, "row_runs: cells must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(cells), start = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    PyObject *row = NULL;
    int put = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        PyObject *r = NULL;
        int p = 0;
        if (i < n) {
            PyObject *cell = PyTuple_GET_ITEM(cells, i);
            if (check_tuple(cell, CELL_SIZE, "row_runs: a cell") < 0) goto fail;
            r = PyTuple_GET_ITEM(cell, CELL_ROW);
            long t = PyLong_AsLong(PyTuple_GET_ITEM(cell, CELL_TYPE));
            if (t == -1 && PyErr_Occurred()) goto fail;
            if (!PyBytes_Check(r)) {
                PyErr_SetString(PyExc_TypeError, "row_runs: a cell's row must be bytes");
                goto fail;
            }
            p = t == CELL_PUT;
            if (i > 0 && p == put &&
                (r == row || (PyBytes_GET_SIZE(r) == PyBytes_GET_SIZE(row) &&
                              memcmp(PyBytes_AS_STRING(r), PyBytes_AS_STRING(row), PyBytes_GET_SIZE(r)) == 0)))
                continue;
        }
        if (i > 0) {
            PyObject *run = PyTuple_GetSlice(cells, start, i);
            PyObject *item = run != NULL ? PyTuple_Pack(3, row, put ? Py_False : Py_True, run) : NULL;
            Py_XDECREF(run);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
        }
        start = i;
        row = r;
        put = p;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* tagged(cells) -> int: how many of a tuple of cells carry tags (sink hbase leaves them out). */
static PyObject *tagged(PyObject *module, PyObject *cells) {
    if (!PyTuple_Check(cells)) {
        PyErr_SetString(PyExc_TypeError, "tagged: cells must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(cells), count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cell = PyTuple_GET_ITEM(cells, i);
        if (check_tuple(cell, CELL_SIZE, "tagged: a cell") < 0) return NULL;
        int r = PyObject_IsTrue(PyTuple_GET_ITEM(cell, CELL_TAGS));
        if (r < 0) return NULL;
        count += r;
    }
    return PyLong_FromSsize_t(count);
}

/* ---- the answer ---------------------------------------------------------------------------- */

/* A varint at buf[*p] (before end) into *v: 0 when it runs past end or over 10 bytes. */
static inline int pb_read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *p, uint64_t *v) {
    uint64_t out = 0;
    for (int i = 0; i < 10 && *p < end; i++) {
        uint8_t b = buf[(*p)++];
        out |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *v = out;
            return 1;
        }
    }
    return 0;
}

/* Skip a field of wire type `wt` at buf[*p]: 0 for a wire type other than varint or bytes, or
 * one that runs past end. */
static inline int pb_skip(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *p, int wt) {
    uint64_t v;
    if (!pb_read_varint(buf, end, p, &v)) return 0;
    if (wt == 0) return 1;
    if (wt != 2 || v > (uint64_t)(end - *p)) return 0;
    *p += (Py_ssize_t)v;
    return 1;
}

/* Whether a RegionActionResult's bytes are ResultOrExceptions of indexes `*next` on, in order,
 * none with an exception (and no exception of its own); *next moves past the last. */
static int region_result_applied(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, uint64_t *next) {
    while (p < end) {
        uint64_t tag, len;
        if (!pb_read_varint(buf, end, &p, &tag)) return 0;
        if (tag != ((1 << 3) | 2)) return 0; /* the action's own exception, or anything else */
        if (!pb_read_varint(buf, end, &p, &len) || len > (uint64_t)(end - p)) return 0;
        Py_ssize_t q = p, rend = p + (Py_ssize_t)len;
        int indexed = 0;
        while (q < rend) {
            uint64_t t, index;
            if (!pb_read_varint(buf, rend, &q, &t)) return 0;
            if (t == ((1 << 3) | 0)) { /* index */
                if (!pb_read_varint(buf, rend, &q, &index) || index != *next) return 0;
                indexed = 1;
            } else if ((t >> 3) == 2 || (t >> 3) == 4 || (t >> 3) == 5) { /* result, service result, stats */
                if (!pb_skip(buf, rend, &q, (int)(t & 7))) return 0;
            } else {
                return 0; /* an exception, or a field this does not know */
            }
        }
        if (!indexed) return 0;
        (*next)++;
        p = rend;
    }
    return 1;
}

/* multi_applied(body, actions) -> bool: whether a one-region Multi's answer (a MultiResponse's
 * bytes) says every one of `actions` mutations was applied: one region result, no exception,
 * a result for each index from 0 in order. False is not a failure: it means "look closer"
 * (walship.rpc.multi.failures parses the answer and names what failed). */
static PyObject *multi_applied(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t actions;
    if (!PyArg_ParseTuple(args, "y*n:multi_applied", &view, &actions)) return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t p = 0, end = view.len;
    int regions = 0, ok = 1;
    uint64_t next = 0;
    while (ok && p < end) {
        uint64_t tag, len;
        if (!pb_read_varint(buf, end, &p, &tag)) {
            ok = 0;
        } else if (tag == ((1 << 3) | 2)) { /* regionActionResult */
            if (!pb_read_varint(buf, end, &p, &len) || len > (uint64_t)(end - p) || ++regions > 1) {
                ok = 0;
            } else {
                ok = region_result_applied(buf, p, p + (Py_ssize_t)len, &next);
                p += (Py_ssize_t)len;
            }
        } else if ((tag >> 3) == 2 || (tag >> 3) == 3) { /* processed, region statistics */
            ok = pb_skip(buf, end, &p, (int)(tag & 7));
        } else {
            ok = 0;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok && regions == 1 && next == (uint64_t)actions);
}
