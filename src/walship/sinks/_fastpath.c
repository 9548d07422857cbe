/*
 * walship.sinks._fastpath: the Thrift sinks' per-cell steps that ran as Python loops over every
 * cell, compiled: the Thrift2 sink's grouping of put cells into a call's rows and the Thrift1
 * sink's grouping of cells by timestamp and row. Each gives what its Python original gives, to
 * the same objects; the Python originals stay for whatever these decline and where this module
 * is not built. (The entry filter and the batches are walship.replicate.batcher._batcher.)
 *
 * put_rows(entries, i, ci, table, ids, mutations, size, max_mutations, max_bytes)
 *     walship.sinks.hbase2.Thrift2Sink.calls' way with an entry of puts only, over one stream,
 *     for entries[i:] from cell ci of entries[i]: each run of cells of one row becomes a
 *     (row, [cells]) in `mutations` (a list: the open call's), and the call's size grows by the
 *     rows' share of their entries' WAL bytes. It stops at the first entry (from its first
 *     cell) that is not of puts only or not of `table` with cluster ids `ids` (empty entries
 *     are passed over, as in Python), or before a row when the call is full (max_mutations
 *     rows, or max_bytes): returns (i, ci, size, cells, tags, full), where to go on, the
 *     call's size, the cells and the cells with tags it took from entries it began, and
 *     whether it stopped because the call is full.
 *
 * group_rows(entries, i, groups)
 *     walship.sinks.hbase.ThriftSink.group's grouping for Thrift1, for entries[i:]: each cell
 *     goes to groups[(table, cluster ids, timestamp)][row] (dicts and lists made as needed, in
 *     the order Python makes them), up to the first entry holding a cell Thrift1 cannot express
 *     (a Delete or a DeleteFamilyVersion), which is left whole to Python. Returns (i, cells,
 *     tags): where it stopped, the cells grouped and those of them with tags.
 *
 * multi_call(region_name, mutations, cluster_ids), row_runs(cells)
 *     sink hbase's Multi call, serialized, and its cell block; an entry's cells as its
 *     mutations (_multicall.h).
 *
 * Entries, keys and cells are walship's named tuples, read by position (the layout in LAYOUT,
 * see ../wal/_tuples.h). tests/unit/test_fastpath.py checks both against the Python code on
 * the same entries.
 *
 * Plain CPython C API, no dependency; an optional ext-module declared in pyproject.toml.
 */
#include <stdint.h>
#include <string.h>

#include "../wal/_tuples.h"

/* walship.wal.model.CellType's values */
enum { CELL_PUT = 4, CELL_DELETE = 8, CELL_DELETE_FAMILY_VERSION = 10 };

static const tuple_field layout[] = {WAL_TUPLE_FIELDS};

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
        if (check_tuple(fe, FE_SIZE, "put_rows: a filtered entry") < 0) goto fail;
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
        if (check_tuple(fe, FE_SIZE, "group_rows: a filtered entry") < 0) goto fail;
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
            PyObject *ts = PyTuple_GET_ITEM(cell, CELL_TIMESTAMP);
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

#include "_multicall.h"

static PyMethodDef methods[] = {
    {"group_rows", group_rows, METH_VARARGS,
     "group_rows(entries, i, groups) -> (i, cells, tags)\n\n"
     "ThriftSink.group's grouping of cells by (table, cluster ids, timestamp), then row, into\n"
     "groups, from entries[i] up to the first entry with a cell Thrift1 cannot express."},
    {"put_rows", put_rows, METH_VARARGS,
     "put_rows(entries, i, ci, table, ids, mutations, size, max_mutations, max_bytes)\n"
     "    -> (i, ci, size, cells, tags, full)\n\n"
     "Thrift2Sink.calls' rows of put cells for one stream, into the open call's mutations."},
    {"row_runs", row_runs, METH_O,
     "row_runs(cells) -> [(row, delete, cells), ...]\n\n"
     "sink hbase's mutations of an entry's cells: runs of one row and one kind (_multicall.h)."},
    {"multi_call", multi_call, METH_VARARGS,
     "multi_call(region_name, mutations, cluster_ids) -> (request, block)\n\n"
     "walship.rpc.multi.multi_call for sink hbase, the MultiRequest serialized (_multicall.h)."},
    {"tagged", tagged, METH_O, "tagged(cells) -> int\n\nHow many of a tuple of cells carry tags (_multicall.h)."},
    {"multi_applied", multi_applied, METH_VARARGS,
     "multi_applied(body, actions) -> bool\n\n"
     "Whether a one-region Multi's answer says all `actions` mutations were applied (_multicall.h)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "walship.sinks._fastpath", "The Thrift sinks' grouping of cells, compiled.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    return module_with_layout(&module_def, layout, sizeof layout / sizeof layout[0]);
}
