/*
 * The sinks' grouping of cells for walship.sinks._fastpath (put_rows for the Thrift2 sink,
 * group_rows for the Thrift1 sink; see _fastpath.c for what each gives).
 * Included by _fastpath.c, after its positions and check_tuple.
 */

/* whether every cell is a Put (-1 on error), counting those with tags into *tags */
static int puts_only(PyObject *cells, Py_ssize_t *tags) {
    Py_ssize_t n = PyTuple_GET_SIZE(cells), with_tags = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cell = PyTuple_GET_ITEM(cells, i);
        if (check_tuple(cell, CELL_SIZE, "put_rows: a cell") < 0) return -1;
        PyObject *type = PyTuple_GET_ITEM(cell, CELL_TYPE);
        long t = PyLong_Check(type) ? PyLong_AsLong(type) : -1;
        if (t == -1 && PyErr_Occurred()) return -1;
        if (t != CELL_PUT) return 0;
        int r = PyObject_IsTrue(PyTuple_GET_ITEM(cell, CELL_TAGS));
        if (r < 0) return -1;
        with_tags += r;
    }
    *tags = with_tags;
    return 1;
}

/* whether the filtered entry is of `table` with cluster ids `ids` (-1 on error) */
static int same_origin(PyObject *fe, PyObject *table, PyObject *ids) {
    PyObject *key = PyTuple_GET_ITEM(PyTuple_GET_ITEM(fe, FE_ENTRY), ENTRY_KEY);
    if (check_tuple(key, KEY_SIZE, "put_rows: a WAL key") < 0) return -1;
    int r = PyObject_RichCompareBool(PyTuple_GET_ITEM(key, KEY_TABLE), table, Py_EQ);
    if (r <= 0) return r;
    return PyObject_RichCompareBool(PyTuple_GET_ITEM(fe, FE_IDS), ids, Py_EQ);
}

static PyObject *put_rows(PyObject *module, PyObject *args) {
    PyObject *entries, *table, *ids, *mutations;
    Py_ssize_t i, ci, max_mutations;
    double size, max_bytes;
    if (!PyArg_ParseTuple(args, "OnnOOO!dnd:put_rows", &entries, &i, &ci, &table, &ids, &PyList_Type, &mutations,
                          &size, &max_mutations, &max_bytes))
        return NULL;
    if (i < 0 || ci < 0) {
        PyErr_SetString(PyExc_ValueError, "put_rows: i and ci must be >= 0");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(entries, "put_rows: entries must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), cells_taken = 0, tags_taken = 0, pending_cells = 0, pending_tags = 0;
    int full = 0;
    PyObject *fe = NULL; /* held while it is read: comparing cluster ids runs Python code */
    for (; i < n; i++, ci = 0) {
        Py_XDECREF(fe);
        fe = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        if (check_tuple(fe, 3, "put_rows: a filtered entry") < 0) goto fail;
        PyObject *entry = PyTuple_GET_ITEM(fe, FE_ENTRY), *cells = PyTuple_GET_ITEM(fe, FE_CELLS);
        if (check_tuple(entry, ENTRY_SIZE, "put_rows: an entry") < 0) goto fail;
        if (!PyTuple_Check(cells)) {
            PyErr_SetString(PyExc_TypeError, "put_rows: a filtered entry's cells must be a tuple");
            goto fail;
        }
        Py_ssize_t ncells = PyTuple_GET_SIZE(cells);
        if (ci >= ncells && ci > 0) {
            PyErr_Format(PyExc_ValueError, "put_rows: entry %zd has %zd cells, none at %zd", i, ncells, ci);
            goto fail;
        }
        if (ncells == 0) continue;
        if (ci == 0) {
            int r = same_origin(fe, table, ids);
            if (r < 0) goto fail;
            if (!r) break;
            Py_ssize_t tags = 0;
            r = puts_only(cells, &tags);
            if (r < 0) goto fail;
            if (!r) break;
            pending_cells = ncells; /* counted once its first row is taken */
            pending_tags = tags;
        }
        long long off = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, ENTRY_OFFSET));
        if (off == -1 && PyErr_Occurred()) goto fail;
        long long end = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, ENTRY_END));
        if (end == -1 && PyErr_Occurred()) goto fail;
        /* a row's share of the call's bytes: its cells' share of the entry, as the WAL holds it */
        double unit = (double)(end - off) / (double)ncells;
        PyObject *row = NULL, *group = NULL; /* borrowed: `mutations` holds them */
        for (; ci < ncells; ci++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, ci);
            if (check_tuple(cell, CELL_SIZE, "put_rows: a cell") < 0) goto fail;
            PyObject *cell_row = PyTuple_GET_ITEM(cell, CELL_ROW);
            int same = 0;
            if (row != NULL) {
                same = PyObject_RichCompareBool(cell_row, row, Py_EQ);
                if (same < 0) goto fail;
            }
            if (!same) {
                if (group != NULL) size += unit * (double)PyList_GET_SIZE(group);
                Py_ssize_t held = PyList_GET_SIZE(mutations);
                if (held > 0 && (held >= max_mutations || size >= max_bytes)) {
                    full = 1;
                    goto out;
                }
                cells_taken += pending_cells;
                tags_taken += pending_tags;
                pending_cells = pending_tags = 0;
                group = PyList_New(0);
                if (group == NULL) goto fail;
                PyObject *pair = PyTuple_Pack(2, cell_row, group);
                Py_DECREF(group);
                if (pair == NULL || PyList_Append(mutations, pair) < 0) {
                    Py_XDECREF(pair);
                    goto fail;
                }
                Py_DECREF(pair);
                row = cell_row;
            }
            if (PyList_Append(group, cell) < 0) goto fail;
        }
        if (group != NULL) size += unit * (double)PyList_GET_SIZE(group);
    }
out:
    Py_XDECREF(fe);
    Py_DECREF(seq);
    return Py_BuildValue("nndnnO", i, ci, size, cells_taken, tags_taken, full ? Py_True : Py_False);
fail:
    Py_XDECREF(fe);
    Py_DECREF(seq);
    return NULL;
}

/* walship.wal.model.CellType's values Thrift1 cannot express */
enum { CELL_DELETE = 8, CELL_DELETE_FAMILY_VERSION = 10 };

static PyObject *group_rows(PyObject *module, PyObject *args) {
    PyObject *entries, *groups;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "OnO!:group_rows", &entries, &i, &PyDict_Type, &groups)) return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "group_rows: i must be >= 0");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(entries, "group_rows: entries must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), applied = 0, tags = 0;
    PyObject *group_key = NULL, *rows = NULL; /* (table, ids, timestamp) and its rows, held */
    PyObject *fe = NULL; /* held while it is read: comparing timestamps may run Python code */
    for (; i < n; i++) {
        Py_XDECREF(fe);
        fe = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        if (check_tuple(fe, 3, "group_rows: a filtered entry") < 0) goto fail;
        PyObject *entry = PyTuple_GET_ITEM(fe, FE_ENTRY), *cells = PyTuple_GET_ITEM(fe, FE_CELLS);
        if (check_tuple(entry, ENTRY_SIZE, "group_rows: an entry") < 0) goto fail;
        PyObject *key = PyTuple_GET_ITEM(entry, ENTRY_KEY);
        if (check_tuple(key, KEY_SIZE, "group_rows: a WAL key") < 0) goto fail;
        if (!PyTuple_Check(cells)) {
            PyErr_SetString(PyExc_TypeError, "group_rows: a filtered entry's cells must be a tuple");
            goto fail;
        }
        Py_ssize_t ncells = PyTuple_GET_SIZE(cells);
        int stop = 0;
        for (Py_ssize_t ci = 0; ci < ncells; ci++) { /* an entry with a cell Thrift1 cannot carry: Python's */
            PyObject *cell = PyTuple_GET_ITEM(cells, ci);
            if (check_tuple(cell, CELL_SIZE, "group_rows: a cell") < 0) goto fail;
            long t = PyLong_AsLong(PyTuple_GET_ITEM(cell, CELL_TYPE));
            if (t == -1 && PyErr_Occurred()) goto fail;
            if (t == CELL_DELETE || t == CELL_DELETE_FAMILY_VERSION) {
                stop = 1;
                break;
            }
        }
        if (stop) break;
        PyObject *table = PyTuple_GET_ITEM(key, KEY_TABLE), *ids = PyTuple_GET_ITEM(fe, FE_IDS);
        for (Py_ssize_t ci = 0; ci < ncells; ci++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, ci);
            int r = PyObject_IsTrue(PyTuple_GET_ITEM(cell, CELL_TAGS));
            if (r < 0) goto fail;
            tags += r;
            PyObject *ts = PyTuple_GET_ITEM(cell, 3);
            /* consecutive cells mostly share the group: compare before building and hashing a
             * new key (hashing one runs UUID.__hash__, in Python, for each cluster id) */
            int same = 0;
            if (group_key != NULL && PyTuple_GET_ITEM(group_key, 1) == ids) {
                PyObject *t = PyTuple_GET_ITEM(group_key, 0);
                same = t == table || (PyBytes_CheckExact(t) && PyBytes_CheckExact(table) &&
                                      PyBytes_GET_SIZE(t) == PyBytes_GET_SIZE(table) &&
                                      memcmp(PyBytes_AS_STRING(t), PyBytes_AS_STRING(table),
                                             (size_t)PyBytes_GET_SIZE(t)) == 0);
                if (same) {
                    same = PyObject_RichCompareBool(PyTuple_GET_ITEM(group_key, 2), ts, Py_EQ);
                    if (same < 0) goto fail;
                }
            }
            if (!same) {
                Py_XDECREF(group_key);
                Py_CLEAR(rows);
                group_key = PyTuple_Pack(3, table, ids, ts);
                if (group_key == NULL) goto fail;
                rows = PyDict_GetItemWithError(groups, group_key); /* borrowed, then held */
                if (rows != NULL) {
                    Py_INCREF(rows);
                } else {
                    if (PyErr_Occurred()) goto fail;
                    rows = PyDict_New();
                    if (rows == NULL || PyDict_SetItem(groups, group_key, rows) < 0) goto fail;
                }
            }
            PyObject *row = PyTuple_GET_ITEM(cell, CELL_ROW);
            PyObject *list = PyDict_GetItemWithError(rows, row); /* borrowed */
            if (list == NULL) {
                if (PyErr_Occurred()) goto fail;
                list = PyList_New(0);
                if (list == NULL) goto fail;
                if (PyDict_SetItem(rows, row, list) < 0) {
                    Py_DECREF(list);
                    goto fail;
                }
                Py_DECREF(list);
            }
            if (PyList_Append(list, cell) < 0) goto fail;
            applied++;
        }
    }
    Py_XDECREF(fe);
    Py_XDECREF(group_key);
    Py_XDECREF(rows);
    Py_DECREF(seq);
    return Py_BuildValue("nnn", i, applied, tags);
fail:
    Py_XDECREF(fe);
    Py_XDECREF(group_key);
    Py_XDECREF(rows);
    Py_DECREF(seq);
    return NULL;
}
