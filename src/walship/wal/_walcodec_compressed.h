/*
 * The compiled twin of walship.wal.compressed.parse_compressed_py: the entries of compressed
 * WALs (hbase.regionserver.wal.enablecompression), decoded with the dictionaries of a Context
 * (_walcodec_context.h). Included by _walcodec.c after it, and uses its helpers.
 *
 * parse_compressed(ctx, buf, p, buf_off, limit) -> (entries, stop, status): status 0 when it
 * stopped at the limit or the end of buf, 2 when buf ends inside an entry (whose dictionary
 * changes are undone), 1 when it leaves the entry at `stop` to the Python parser (a corrupt
 * entry or a rare key shape), which then works on a copy of the dictionaries (Context.export
 * / Context.load). Dictionary hits hand out the dictionary's own bytes objects, so repeated
 * rows, families and qualifiers cost no allocation.
 */
/* ---- the key ------------------------------------------------------------------------- */

/* FamilyScope {1: family bytes, 2: scope enum}: T_OK with *family a new reference. */
static int family_scope(Context *ctx, const uint8_t *buf, Py_ssize_t s, Py_ssize_t len, PyObject **family, int *scope) {
    Py_ssize_t k = s, end = s + len, fam = -1, fam_len = 0;
    int have_scope = 0;
    while (k < end) {
        uint8_t tag = buf[k++];
        uint64_t v;
        if (!read_varint(buf, &k, end, &v)) return T_DEFER;
        if (tag == 0x0A && fam < 0 && v <= (uint64_t)(end - k)) {
            fam = k;
            fam_len = (Py_ssize_t)v;
            k += fam_len;
        } else if (tag == 0x10 && !have_scope && v <= 2) {
            have_scope = 1;
            *scope = (int)v;
        } else {
            return T_DEFER;
        }
    }
    if (fam < 0 || !have_scope) return T_DEFER;
    return key_token(ctx, &ctx->dicts[D_FAMILY], buf, fam, fam_len, family);
}

/* Attribute {1: key string, 2: value bytes}: T_OK with *pair a new (key, value) tuple. */
static int attribute(Context *ctx, const uint8_t *buf, Py_ssize_t s, Py_ssize_t len, PyObject **pair) {
    Py_ssize_t k = s, end = s + len, name = -1, name_len = 0, val = -1, val_len = 0;
    while (k < end) {
        uint8_t tag = buf[k++];
        uint64_t v;
        if (!read_varint(buf, &k, end, &v) || v > (uint64_t)(end - k)) return T_DEFER;
        if (tag == 0x0A && name < 0) {
            name = k;
            name_len = (Py_ssize_t)v;
        } else if (tag == 0x12 && val < 0) {
            val = k;
            val_len = (Py_ssize_t)v;
        } else {
            return T_DEFER;
        }
        k += (Py_ssize_t)v;
    }
    if (name < 0 || val < 0) return T_DEFER;
    PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + name, name_len, NULL);
    if (key == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return T_ERR;
        PyErr_Clear();
        return T_DEFER;
    }
    PyObject *value;
    int r = key_token(ctx, &ctx->dicts[D_TABLE], buf, val, val_len, &value);
    if (r != T_OK) {
        Py_DECREF(key);
        return r;
    }
    *pair = PyTuple_Pack(2, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    return *pair != NULL ? T_OK : T_ERR;
}

/* The scopes mapping of the key: the last key's when the same, else scopes_fn(pairs). */
static int build_scopes(Context *ctx, const uint8_t *buf, const Key *key, PyObject **out) {
    int ns = key->scopes.n;
    PyObject *fams[MAX_REPEATED];
    int scopes[MAX_REPEATED];
    int same = ctx->last_scopes != NULL && ns == ctx->n_last, r = T_OK;
    for (int i = 0; i < ns; i++) {
        r = family_scope(ctx, buf, key->scopes.start[i], key->scopes.len[i], &fams[i], &scopes[i]);
        if (r != T_OK) {
            while (--i >= 0) Py_DECREF(fams[i]);
            return r;
        }
        if (same && (scopes[i] != ctx->last_scope[i] ||
                     (fams[i] != ctx->last_family[i] &&
                      PyObject_RichCompareBool(fams[i], ctx->last_family[i], Py_EQ) != 1)))
            same = 0;
    }
    if (same) {
        *out = Py_NewRef(ctx->last_scopes);
    } else {
        PyObject *pairs = PyTuple_New(ns);
        for (int i = 0; pairs != NULL && i < ns; i++) {
            PyObject *pair = Py_BuildValue("(Oi)", fams[i], scopes[i]);
            if (pair == NULL) Py_CLEAR(pairs);
            else PyTuple_SET_ITEM(pairs, i, pair);
        }
        *out = pairs != NULL ? PyObject_CallOneArg(ctx->scopes_fn, pairs) : NULL;
        Py_XDECREF(pairs);
        if (*out == NULL) r = T_ERR;
    }
    if (r == T_OK && !same) {
        for (int i = 0; i < ctx->n_last; i++) Py_CLEAR(ctx->last_family[i]);
        for (int i = 0; i < ns; i++) {
            ctx->last_family[i] = Py_NewRef(fams[i]);
            ctx->last_scope[i] = scopes[i];
        }
        ctx->n_last = ns;
        Py_XSETREF(ctx->last_scopes, Py_NewRef(*out));
    }
    for (int i = 0; i < ns; i++) Py_DECREF(fams[i]);
    return r;
}

/* The WalKey, its tokens decoded in readFieldsFromPb's order: region, table, scope families,
 * attribute values. Its write time is the int of `prev_key` (the key of the entry before it in
 * this call, whose write time is ctx->prev_write_time) when equal. */
static int compressed_key(Context *ctx, const uint8_t *buf, const Key *key, PyObject *prev_key, PyObject **out) {
    PyObject *k = new_record(WalKey_t, 10), *v;
    if (k == NULL) return T_ERR;
    int r = key_token(ctx, &ctx->dicts[D_REGION], buf, key->region, key->region_len, &v);
    if (r != T_OK) goto done;
    PyTuple_SET_ITEM(k, 0, v);
    r = key_token(ctx, &ctx->dicts[D_TABLE], buf, key->table, key->table_len, &v);
    if (r != T_OK) goto done;
    PyTuple_SET_ITEM(k, 1, v);
    r = T_ERR;
    if ((v = PyLong_FromUnsignedLongLong(key->seq)) == NULL) goto done;
    PyTuple_SET_ITEM(k, 2, v);
    if (prev_key != NULL && ctx->prev_write_time == key->write_time) {
        v = Py_NewRef(PyTuple_GET_ITEM(prev_key, 3));
    } else if ((v = PyLong_FromUnsignedLongLong(key->write_time)) == NULL) {
        goto done;
    }
    PyTuple_SET_ITEM(k, 3, v);
    if (key->cluster_ids.n) {
        v = map_spans(buf, &key->cluster_ids, uuid_fn);
    } else if (key->has_cluster_id && key->cluster_id_len) {
        Spans one = {.start = {key->cluster_id}, .len = {key->cluster_id_len}, .n = 1};
        v = map_spans(buf, &one, uuid_fn);
    } else {
        v = PyTuple_New(0);
    }
    if (v == NULL) {
        if (PyErr_ExceptionMatches(decode_error)) { /* a nested message: Python names it */
            PyErr_Clear();
            r = T_DEFER;
        }
        goto done;
    }
    PyTuple_SET_ITEM(k, 4, v);
    if (key->scopes.n == 0) {
        v = Py_NewRef(empty_scopes);
    } else if ((r = build_scopes(ctx, buf, key, &v)) != T_OK) {
        goto done;
    }
    PyTuple_SET_ITEM(k, 5, v);
    r = T_ERR;
    if ((v = PyLong_FromUnsignedLongLong(key->nonce_group)) == NULL) goto done;
    PyTuple_SET_ITEM(k, 6, v);
    if ((v = PyLong_FromUnsignedLongLong(key->nonce)) == NULL) goto done;
    PyTuple_SET_ITEM(k, 7, v);
    if ((v = PyLong_FromUnsignedLongLong(key->orig_seq)) == NULL) goto done;
    PyTuple_SET_ITEM(k, 8, v);
    if ((v = PyTuple_New(key->attributes.n)) == NULL) goto done;
    PyTuple_SET_ITEM(k, 9, v);
    for (int i = 0; i < key->attributes.n; i++) {
        PyObject *pair;
        r = attribute(ctx, buf, key->attributes.start[i], key->attributes.len[i], &pair);
        if (r != T_OK) goto done;
        PyTuple_SET_ITEM(v, i, pair);
    }
    r = T_OK;
done:
    if (r != T_OK) {
        Py_DECREF(k);
        return r;
    }
    PyObject_GC_Track(k);
    *out = k;
    return T_OK;
}

/* ---- cells --------------------------------------------------------------------------- */

/* The tags of a cell (tlen > 0) at buf[*c]: a new tuple of Tag in *out. */
static int compressed_tags(Context *ctx, const uint8_t *buf, Py_ssize_t n, Py_ssize_t *c, Py_ssize_t tlen,
                           PyObject **out) {
    PyObject *list = PyList_New(0);
    if (list == NULL) return T_ERR;
    int r = T_OK;
    Py_ssize_t got = 0, k = *c;
    while (got < tlen) {
        const char *data;
        Py_ssize_t len;
        PyObject *token = NULL;
        if (ctx->tag_compression) { /* TagCompressionContext.uncompressTags: a token per tag */
            if ((r = stream_token(ctx, &ctx->dicts[D_TAG], buf, n, &k, &token)) != T_OK) break;
            data = PyBytes_AS_STRING(token);
            len = PyBytes_GET_SIZE(token);
        } else { /* the tags' bytes: int16 length, type byte, value */
            if (k + 2 > n) {
                r = T_MORE;
                break;
            }
            len = (Py_ssize_t)((uint16_t)be16(buf + k));
            if (k + 2 + len > n) {
                r = got + 2 + len > tlen ? T_DEFER : T_MORE;
                break;
            }
            data = (const char *)buf + k + 2;
            k += 2 + len;
        }
        got += 2 + len;
        PyObject *tag = NULL;
        if (len < 1 || got > tlen) {
            r = T_DEFER;
        } else if ((tag = new_record(Tag_t, 2)) != NULL) {
            PyObject *type = PyLong_FromLong((uint8_t)data[0]);
            PyObject *value = PyBytes_FromStringAndSize(data + 1, len - 1);
            if (type != NULL) PyTuple_SET_ITEM(tag, 0, type);
            if (value != NULL) PyTuple_SET_ITEM(tag, 1, value);
            if (type == NULL || value == NULL || PyList_Append(list, tag) < 0) r = T_ERR;
            Py_DECREF(tag);
        } else {
            r = T_ERR;
        }
        Py_XDECREF(token);
        if (r != T_OK) break;
    }
    if (r == T_OK) {
        *out = PyList_AsTuple(list);
        if (*out == NULL) r = T_ERR;
        *c = k;
    }
    Py_DECREF(list);
    return r;
}

/* The value of a cell at buf[*c]: a new bytes object in *out. */
static int compressed_value(Context *ctx, const uint8_t *buf, Py_ssize_t n, Py_ssize_t *c, Py_ssize_t vlen,
                            PyObject **out) {
    Py_ssize_t k = *c;
    if (ctx->decompress == NULL) {
        if (vlen > n - k) return T_MORE;
        *out = PyBytes_FromStringAndSize((const char *)buf + k, vlen);
        *c = k + vlen;
        return *out != NULL ? T_OK : T_ERR;
    }
    uint32_t clen;
    int r = varint32(buf, &k, n, &clen);
    if (r != T_OK) return r;
    if ((Py_ssize_t)clen > n - k) return T_MORE;
    if (vlen == 0) { /* HBase skips an empty value's bytes unread */
        *out = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        PyObject *packed = PyBytes_FromStringAndSize((const char *)buf + k, clen);
        if (packed == NULL) return T_ERR;
        PyObject *size = PyLong_FromSsize_t(vlen);
        *out = size != NULL ? PyObject_CallFunctionObjArgs(ctx->decompress, packed, size, NULL) : NULL;
        Py_DECREF(packed);
        Py_XDECREF(size);
        if (*out == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) return T_ERR;
            PyErr_Clear(); /* bytes the codec refuses: the Python parser names them */
            return T_DEFER;
        }
        if (!PyBytes_CheckExact(*out) || PyBytes_GET_SIZE(*out) != vlen) {
            Py_CLEAR(*out);
            return T_DEFER;
        }
    }
    if (*out == NULL) return T_ERR;
    *c = k + clen;
    return T_OK;
}

/* One cell (CompressedKvDecoder.parseCell) at buf[*c]: a new Cell in *out. `ts_int` is an int
 * whose value is *last_ts (the cell before it's timestamp, or the key's write time), shared
 * when the cell's timestamp equals it; *last_ts becomes the cell's. */
static int compressed_cell(Context *ctx, const uint8_t *buf, Py_ssize_t n, Py_ssize_t *c, PyObject *ts_int,
                           int64_t *last_ts, PyObject **out) {
    Py_ssize_t k = *c;
    uint32_t klen, vlen, tlen;
    int r;
    if ((r = varint32(buf, &k, n, &klen)) != T_OK || (r = varint32(buf, &k, n, &vlen)) != T_OK ||
        (r = varint32(buf, &k, n, &tlen)) != T_OK)
        return r;
    if (tlen > 0xFFFF) return T_DEFER;
    PyObject *cell = new_record(Cell_t, 7), *v;
    if (cell == NULL) return T_ERR;
    for (int f = 0; f < 3; f++) { /* row, family, qualifier */
        static const int dict_of[3] = {D_ROW, D_FAMILY, D_QUALIFIER};
        if ((r = stream_token(ctx, &ctx->dicts[dict_of[f]], buf, n, &k, &v)) != T_OK) goto done;
        PyTuple_SET_ITEM(cell, f, v);
    }
    Py_ssize_t rowlen = PyBytes_GET_SIZE(PyTuple_GET_ITEM(cell, 0));
    Py_ssize_t famlen = PyBytes_GET_SIZE(PyTuple_GET_ITEM(cell, 1));
    Py_ssize_t qlen = PyBytes_GET_SIZE(PyTuple_GET_ITEM(cell, 2));
    r = T_DEFER;
    if (rowlen > 0x7FFF || famlen > 0x7F || (Py_ssize_t)klen != 12 + rowlen + famlen + qlen) goto done;
    r = T_MORE;
    if (k + 9 > n) goto done;
    int64_t ts = be64(buf + k);
    uint8_t type = buf[k + 8];
    r = T_DEFER;
    if (!valid_type(type)) goto done;
    k += 9;
    r = T_ERR;
    if (ts_int != NULL && *last_ts == ts) {
        v = Py_NewRef(ts_int);
    } else if ((v = PyLong_FromLongLong(ts)) == NULL) {
        goto done;
    }
    PyTuple_SET_ITEM(cell, 3, v);
    if ((v = PyLong_FromLong(type)) == NULL) goto done;
    PyTuple_SET_ITEM(cell, 4, v);
    if ((r = compressed_value(ctx, buf, n, &k, vlen, &v)) != T_OK) goto done;
    PyTuple_SET_ITEM(cell, 5, v);
    if (tlen == 0) {
        v = PyTuple_New(0);
        r = v != NULL ? T_OK : T_ERR;
    } else {
        r = compressed_tags(ctx, buf, n, &k, tlen, &v);
    }
    if (r != T_OK) goto done;
    PyTuple_SET_ITEM(cell, 6, v);
    *last_ts = ts;
done:
    if (r != T_OK) {
        Py_DECREF(cell);
        return r;
    }
    *out = cell;
    *c = k;
    return T_OK;
}

/* One entry at buf[p]: T_OK with *entry set and *end after it; any other result leaves the
 * dictionaries as they were before it. */
static int compressed_entry(Context *ctx, const uint8_t *buf, Py_ssize_t n, Py_ssize_t p, Py_ssize_t buf_off,
                            PyObject *prev, PyObject **entry, Py_ssize_t *end) {
    Py_ssize_t q = p;
    uint64_t klen = 0;
    for (int i = 0;; i++) { /* the key's length prefix, as entries.varint reads it */
        if (i == 5) return T_DEFER;
        if (q >= n) return T_MORE;
        uint8_t b = buf[q++];
        klen |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) break;
    }
    klen &= 0xFFFFFFFFu;
    if (klen > (uint64_t)(n - q)) return T_MORE;
    Py_ssize_t kend = q + (Py_ssize_t)klen;
    Key key;
    if (!parse_key(buf, q, kend, &key)) return T_DEFER;
    PyObject *wkey = NULL, *cells = NULL, *out = NULL;
    int r = compressed_key(ctx, buf, &key, prev != NULL ? PyTuple_GET_ITEM(prev, 0) : NULL, &wkey);
    if (r != T_OK) goto fail;
    /* a cell takes at least 18 bytes (three varints, three tokens, timestamp, type): more cells
     * than the buffer can hold are decoded only until they run out (or are found corrupt), as
     * the Python parser does, and never allocated for (a corrupt count may be 2^32 - 1) */
    int fits = key.count <= (uint64_t)(n - kend) / 18;
    r = T_ERR;
    if (fits && (cells = PyTuple_New((Py_ssize_t)key.count)) == NULL) goto fail;
    Py_ssize_t c = kend;
    /* HBase stamps a put's cells and its WALKey with the same clock reading: the first cell
     * shares the key's write time int when equal, the others the cell before's timestamp */
    int64_t last_ts = (int64_t)key.write_time;
    PyObject *ts_int = key.write_time <= INT64_MAX ? PyTuple_GET_ITEM(wkey, 3) : NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)key.count; i++) {
        PyObject *cell;
        r = compressed_cell(ctx, buf, n, &c, ts_int, &last_ts, &cell);
        if (r != T_OK) goto fail;
        if (fits) {
            PyTuple_SET_ITEM(cells, i, cell);
            ts_int = PyTuple_GET_ITEM(cell, 3);
        } else {
            Py_DECREF(cell);
            ts_int = NULL;
        }
    }
    r = T_MORE;
    if (!fits) goto fail; /* cannot happen: the cells ran past the buffer */
    r = T_ERR;
    if ((out = new_record(WalEntry_t, 4)) == NULL) goto fail;
    /* an entry starts where the previous one of this call ended: share that int */
    PyObject *off = prev != NULL ? Py_NewRef(PyTuple_GET_ITEM(prev, 3)) : PyLong_FromSsize_t(buf_off + p);
    PyObject *end_off = PyLong_FromSsize_t(buf_off + c);
    if (off != NULL) PyTuple_SET_ITEM(out, 2, off);
    if (end_off != NULL) PyTuple_SET_ITEM(out, 3, end_off);
    if (off == NULL || end_off == NULL) goto fail;
    PyTuple_SET_ITEM(out, 0, wkey);
    PyTuple_SET_ITEM(out, 1, cells);
    PyObject_GC_Track(out);
    ctx_commit(ctx);
    ctx->prev_write_time = key.write_time;
    *entry = out;
    *end = c;
    return T_OK;
fail:
    Py_XDECREF(out);
    Py_XDECREF(wkey);
    Py_XDECREF(cells);
    ctx_rollback(ctx);
    return r;
}

static PyObject *walcodec_parse_compressed(PyObject *module, PyObject *args) {
    PyObject *ctxobj;
    Py_buffer view;
    Py_ssize_t p, buf_off, limit;
    if (!PyArg_ParseTuple(args, "O!y*nnn:parse_compressed", &Context_Type, &ctxobj, &view, &p, &buf_off, &limit))
        return NULL;
    Context *ctx = (Context *)ctxobj;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len;
    if (ctx->scopes_fn == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "parse_compressed: the Context was not initialised");
        return NULL;
    }
    if (Cell_t == NULL || p < 0 || p > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(Cell_t == NULL ? PyExc_RuntimeError : PyExc_ValueError,
                        Cell_t == NULL ? "walship.wal._walcodec.configure() was not called" : "'p' is outside the buffer");
        return NULL;
    }
    int status = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto error;
    while (p < n && PyList_GET_SIZE(out) < limit) {
        PyObject *entry = NULL;
        Py_ssize_t end = p, done = PyList_GET_SIZE(out);
        int r = compressed_entry(ctx, buf, n, p, buf_off, done ? PyList_GET_ITEM(out, done - 1) : NULL, &entry, &end);
        if (r == T_ERR) goto error;
        if (r != T_OK) {
            status = r == T_MORE ? 2 : 1;
            break;
        }
        int appended = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (appended < 0) goto error;
        p = end;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nni)", out, p, status);
error:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

