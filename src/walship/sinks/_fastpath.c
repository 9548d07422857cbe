/*
 * walship.sinks._fastpath: the per-entry steps of shipping that ran as Python loops over every
 * cell, compiled: the peer's entry filter, the Thrift2 sink's grouping of put cells into a
 * call's rows and the Thrift1 sink's grouping of cells by timestamp and row. Each gives what its Python original gives, to the same objects; the
 * Python originals stay for whatever these decline and where this module is not built.
 *
 * filter_entry(rules, own_ids, source_id, peer_cluster_id, filtered_type, fallback, entry)
 *     walship.replicate.filters.EntryFilter.apply for one WalEntry (the entry last, so that a
 *     functools.partial of the rest is the filter's apply): None (nothing of it goes to the
 *     peer), a FilteredEntry (filtered_type) of the entry, its kept cells (the entry's own
 *     tuple when every cell is kept) and its cluster ids, or fallback(entry) (the Python
 *     method) where Python must decide: the table has no rule in `rules` yet (dict table -> TableRule), or
 *     the entry's scopes are neither a plain dict nor a read-only view of one (mappingproxy, as the
 *     reader gives them).
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
 * take_run(member, entries, i, filter_args)
 *     walship.replicate.feeds.Member.take for each of entries[i:] (a list) of a queue that is
 *     not a serial peer's: an entry before member.position is passed over; the others go
 *     through the filter (filter_args: filter_entry's first six) into member.batch, counted
 *     into member.read, .size, .wire, .position, .last_write_time and member.qs.entries_filtered
 *     (written back whatever stops the run, an error included), until the batch reaches
 *     member.max_read, .max_wire or .max_size. It stops before an entry filtered out whose
 *     first cell is a METAFAMILY marker (a bulk load's, maybe), which Member.take takes.
 *     Returns (i, marker): where it stopped, and whether at such a marker.
 *
 * group_rows(entries, i, groups)
 *     walship.sinks.hbase.ThriftSink.group's grouping for Thrift1, for entries[i:]: each cell
 *     goes to groups[(table, cluster ids, timestamp)][row] (dicts and lists made as needed, in
 *     the order Python makes them), up to the first entry holding a cell Thrift1 cannot express
 *     (a Delete or a DeleteFamilyVersion), which is left whole to Python. Returns (i, cells,
 *     tags): where it stopped, the cells grouped and those of them with tags.
 *
 * Entries, keys and cells are walship's named tuples, read by position. tests/unit/
 * test_fastpath.py checks both against the Python code on the same entries.
 *
 * Plain CPython C API, no dependency; an optional ext-module declared in pyproject.toml.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* positions in walship.wal.model's named tuples and walship.sinks.base.FilteredEntry */
enum { ENTRY_KEY = 0, ENTRY_CELLS = 1, ENTRY_OFFSET = 2, ENTRY_END = 3, ENTRY_SIZE = 4 };
enum { KEY_TABLE = 1, KEY_CLUSTER_IDS = 4, KEY_SCOPES = 5, KEY_SIZE = 6 };
enum { CELL_ROW = 0, CELL_FAMILY = 1, CELL_TYPE = 4, CELL_TAGS = 6, CELL_SIZE = 7 };
enum { FE_ENTRY = 0, FE_CELLS = 1, FE_IDS = 2 };
enum { CELL_PUT = 4, SCOPE_GLOBAL = 1 };

static PyObject *str_replicate, *str_include, *str_exclude, *str_get, *long_global;

/* a tuple (or named tuple) of at least n items, or a TypeError naming what it should be */
static int check_tuple(PyObject *o, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < n) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of at least %zd items, not %.100s", what, n,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

/* the tuple subclass `type` (a FilteredEntry: a NamedTuple, no fields of its own beyond the
 * tuple's) holding the three items, made as tuple.__new__ makes it, without its argument tuples */
static PyObject *make_filtered(PyTypeObject *type, PyObject *entry, PyObject *cells, PyObject *ids) {
    PyTupleObject *op = PyObject_GC_NewVar(PyTupleObject, type, 3);
    if (op == NULL) return NULL;
#if PY_VERSION_HEX >= 0x030E0000
    op->ob_hash = -1; /* tuples cache their hash from 3.14 on: "not computed yet" */
#endif
    op->ob_item[0] = Py_NewRef(entry);
    op->ob_item[1] = Py_NewRef(cells);
    op->ob_item[2] = Py_NewRef(ids);
    PyObject_GC_Track(op);
    return (PyObject *)op;
}

/* whether a cell of `family` goes: scoped GLOBAL, included (or no include list), not excluded;
 * -1 on error. `get` is the bound get() of scopes that are not a plain dict (else NULL). */
static int kept(PyObject *family, PyObject *scopes, PyObject *get, PyObject *include, PyObject *exclude) {
    PyObject *scope;
    int r;
    if (get == NULL) {
        scope = PyDict_GetItemWithError(scopes, family);
        if (scope == NULL) return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(scope);
    } else { /* the reader's read-only view of its dict: its get(), as Python calls it */
        scope = PyObject_CallOneArg(get, family);
        if (scope == NULL) return -1;
    }
    r = PyObject_RichCompareBool(scope, long_global, Py_EQ);
    Py_DECREF(scope);
    if (r <= 0) return r;
    if (include != Py_None) {
        r = PySet_Contains(include, family);
        if (r <= 0) return r;
    }
    if (exclude != Py_None) {
        r = PySet_Contains(exclude, family);
        if (r != 0) return r < 0 ? -1 : 0;
    }
    return 1;
}

/* the entry's filtered part, None, or NotImplemented where Python must decide */
static PyObject *filter_one(PyObject *entry, PyObject *rules, PyObject *own_ids, PyObject *source_id,
                            PyObject *peer_cluster_id, PyTypeObject *type) {
    if (check_tuple(entry, ENTRY_SIZE, "filter_entry: an entry") < 0) return NULL;
    PyObject *key = PyTuple_GET_ITEM(entry, ENTRY_KEY);
    PyObject *cells = PyTuple_GET_ITEM(entry, ENTRY_CELLS);
    if (check_tuple(key, KEY_SIZE, "filter_entry: a WAL key") < 0) return NULL;
    if (!PyTuple_Check(cells)) {
        PyErr_SetString(PyExc_TypeError, "filter_entry: an entry's cells must be a tuple");
        return NULL;
    }
    PyObject *table = PyTuple_GET_ITEM(key, KEY_TABLE);
    if (!PyBytes_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "filter_entry: a WAL key's table must be bytes");
        return NULL;
    }
    if (PyBytes_GET_SIZE(table) >= 6 && memcmp(PyBytes_AS_STRING(table), "hbase:", 6) == 0) Py_RETURN_NONE;
    PyObject *scopes = PyTuple_GET_ITEM(key, KEY_SCOPES);
    if (!PyDict_CheckExact(scopes) && !Py_IS_TYPE(scopes, &PyDictProxy_Type)) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t nscopes = PyObject_Length(scopes);
    if (nscopes < 0) return NULL;
    if (nscopes == 0) Py_RETURN_NONE;
    PyObject *rule = PyDict_GetItemWithError(rules, table); /* borrowed */
    if (rule == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_INCREF(rule);
    PyObject *include = NULL, *exclude = NULL, *get = NULL, *kept_cells = NULL, *result = NULL;
    PyObject *replicate = PyObject_GetAttr(rule, str_replicate);
    if (replicate == NULL) goto done;
    int yes = PyObject_IsTrue(replicate);
    Py_DECREF(replicate);
    if (yes < 0) goto done;
    if (!yes) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    include = PyObject_GetAttr(rule, str_include);
    if (include == NULL) goto done;
    exclude = PyObject_GetAttr(rule, str_exclude);
    if (exclude == NULL) goto done;
    if (!PyDict_CheckExact(scopes)) {
        get = PyObject_GetAttr(scopes, str_get); /* once an entry */
        if (get == NULL) goto done;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(cells), first_dropped = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cell = PyTuple_GET_ITEM(cells, i);
        if (check_tuple(cell, CELL_SIZE, "filter_entry: a cell") < 0) goto done;
        int k = kept(PyTuple_GET_ITEM(cell, CELL_FAMILY), scopes, get, include, exclude);
        if (k < 0) goto done;
        if (!k) {
            first_dropped = i;
            break;
        }
    }
    if (first_dropped < 0) {
        kept_cells = Py_NewRef(cells); /* most entries keep every cell: the entry's own tuple */
    } else {
        PyObject *list = PyList_New(0);
        if (list == NULL) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, i);
            int k = i < first_dropped ? 1 : 0;
            if (i > first_dropped) {
                if (check_tuple(cell, CELL_SIZE, "filter_entry: a cell") < 0) {
                    Py_DECREF(list);
                    goto done;
                }
                k = kept(PyTuple_GET_ITEM(cell, CELL_FAMILY), scopes, get, include, exclude);
            }
            if (k < 0 || (k && PyList_Append(list, cell) < 0)) {
                Py_DECREF(list);
                goto done;
            }
        }
        kept_cells = PyList_AsTuple(list);
        Py_DECREF(list);
        if (kept_cells == NULL) goto done;
    }
    if (PyTuple_GET_SIZE(kept_cells) == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *ids = PyTuple_GET_ITEM(key, KEY_CLUSTER_IDS);
    int truth = PyObject_IsTrue(ids);
    if (truth < 0) goto done;
    if (!truth) {
        result = make_filtered(type, entry, kept_cells, own_ids);
        goto done;
    }
    int r = PySequence_Contains(ids, peer_cluster_id);
    if (r < 0) goto done;
    if (r) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    r = PySequence_Contains(ids, source_id);
    if (r < 0) goto done;
    if (r) {
        result = make_filtered(type, entry, kept_cells, ids);
    } else {
        PyObject *one = PyTuple_Pack(1, source_id), *more = NULL;
        if (one != NULL) more = PySequence_Concat(ids, one);
        Py_XDECREF(one);
        if (more == NULL) goto done;
        result = make_filtered(type, entry, kept_cells, more);
        Py_DECREF(more);
    }
done:
    Py_DECREF(rule);
    Py_XDECREF(include);
    Py_XDECREF(exclude);
    Py_XDECREF(get);
    Py_XDECREF(kept_cells);
    return result;
}

/* the filter's bound arguments are what filter_one takes; -1 with a TypeError otherwise */
static int check_filter_args(PyObject *rules, PyObject *own_ids, PyObject *type, const char *fn) {
    if (!PyDict_Check(rules) || !PyTuple_Check(own_ids) || !PyType_Check(type) ||
        !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type) ||
        ((PyTypeObject *)type)->tp_basicsize != PyTuple_Type.tp_basicsize ||
        ((PyTypeObject *)type)->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s: rules must be a dict, own_ids a tuple and filtered_type a "
                                      "tuple type with no fields of its own (a NamedTuple)", fn);
        return -1;
    }
    return 0;
}

#include "_fastpath_rows.h"
#include "_fastpath_take.h"

/* filter_entry(rules, own_ids, source_id, peer_cluster_id, filtered_type, fallback, entry) */
static PyObject *filter_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "filter_entry takes 7 arguments, not %zd", nargs);
        return NULL;
    }
    PyObject *rules = args[0], *own_ids = args[1], *type = args[4], *fallback = args[5], *entry = args[6];
    if (check_filter_args(rules, own_ids, type, "filter_entry") < 0) return NULL;
    PyObject *out = filter_one(entry, rules, own_ids, args[2], args[3], (PyTypeObject *)type);
    if (out != Py_NotImplemented) return out;
    Py_DECREF(out);
    return PyObject_CallOneArg(fallback, entry);
}

static PyMethodDef methods[] = {
    {"group_rows", group_rows, METH_VARARGS,
     "group_rows(entries, i, groups) -> (i, cells, tags)\n\n"
     "ThriftSink.group's grouping of cells by (table, cluster ids, timestamp), then row, into\n"
     "groups, from entries[i] up to the first entry with a cell Thrift1 cannot express."},
    {"filter_entry", (PyCFunction)(void (*)(void))filter_entry, METH_FASTCALL,
     "filter_entry(rules, own_ids, source_id, peer_cluster_id, filtered_type, fallback, entry)\n\n"
     "EntryFilter.apply for one entry: None or a filtered entry; fallback(entry) where the\n"
     "Python method must decide (no rule for the table yet, scopes of another mapping type)."},
    {"put_rows", put_rows, METH_VARARGS,
     "put_rows(entries, i, ci, table, ids, mutations, size, max_mutations, max_bytes)\n"
     "    -> (i, ci, size, cells, tags, full)\n\n"
     "Thrift2Sink.calls' rows of put cells for one stream, into the open call's mutations."},
    {"take_run", take_run, METH_VARARGS,
     "take_run(member, entries, i, filter_args) -> (i, marker)\n\n"
     "Member.take for entries[i:] (a list) into the member's batch, up to its limits or an entry\n"
     "filtered out whose first cell is a METAFAMILY marker (marker: True; Member.take takes it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "walship.sinks._fastpath", "The entry filter and the Thrift sinks' grouping of cells, compiled.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    str_replicate = PyUnicode_InternFromString("replicate");
    str_include = PyUnicode_InternFromString("include");
    str_exclude = PyUnicode_InternFromString("exclude");
    str_get = PyUnicode_InternFromString("get");
    long_global = PyLong_FromLong(SCOPE_GLOBAL);
    if (str_replicate == NULL || str_include == NULL || str_exclude == NULL || str_get == NULL || long_global == NULL ||
        init_take() < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
