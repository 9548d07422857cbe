/*
 * walship's named tuples as compiled code reads them: by position, never by attribute name.
 * Included by walship.sinks._fastpath and walship.replicate.batcher._batcher.
 *
 * Each module publishes the positions it was built with as LAYOUT, a dict "Type.field" ->
 * position (module_with_layout); walship.wal.layout.load compares it with the tuples' _fields
 * at import, and the Python code is used instead of a module built against another layout.
 */
#ifndef WALSHIP_TUPLES_H
#define WALSHIP_TUPLES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* walship.wal.model.WalEntry, WalKey, Cell; walship.sinks.base.FilteredEntry */
enum { ENTRY_KEY = 0, ENTRY_CELLS = 1, ENTRY_OFFSET = 2, ENTRY_END = 3, ENTRY_SIZE = 4 };
enum { KEY_TABLE = 1, KEY_WRITE_TIME = 3, KEY_CLUSTER_IDS = 4, KEY_SCOPES = 5, KEY_SIZE = 6 };
enum { CELL_ROW = 0, CELL_FAMILY = 1, CELL_QUALIFIER = 2, CELL_TIMESTAMP = 3, CELL_TYPE = 4, CELL_VALUE = 5, CELL_TAGS = 6, CELL_SIZE = 7 };
enum { FE_ENTRY = 0, FE_CELLS = 1, FE_IDS = 2, FE_SIZE = 3 };

/* one field of a named tuple and the position the code reads it at */
typedef struct {
    const char *name; /* "Type.field" */
    Py_ssize_t at;
} tuple_field;

/* the positions every module reads */
#define WAL_TUPLE_FIELDS                                                                                            \
    {"WalEntry.key", ENTRY_KEY}, {"WalEntry.cells", ENTRY_CELLS}, {"WalEntry.offset", ENTRY_OFFSET},             \
        {"WalEntry.end_offset", ENTRY_END}, {"WalKey.table", KEY_TABLE}, {"WalKey.write_time", KEY_WRITE_TIME},   \
        {"WalKey.cluster_ids", KEY_CLUSTER_IDS}, {"WalKey.scopes", KEY_SCOPES}, {"Cell.row", CELL_ROW},           \
        {"Cell.family", CELL_FAMILY}, {"Cell.qualifier", CELL_QUALIFIER}, {"Cell.timestamp", CELL_TIMESTAMP}, {"Cell.type", CELL_TYPE},               \
        {"Cell.value", CELL_VALUE}, {"Cell.tags", CELL_TAGS}, {"FilteredEntry.entry", FE_ENTRY},                  \
        {"FilteredEntry.cells", FE_CELLS}, {"FilteredEntry.cluster_ids", FE_IDS}

/* the module of `def` with LAYOUT = {name: position} of the n fields; NULL on error */
static PyObject *module_with_layout(struct PyModuleDef *def, const tuple_field *fields, size_t n) {
    PyObject *module = PyModule_Create(def), *layout = PyDict_New();
    for (size_t i = 0; module != NULL && layout != NULL && i < n; i++) {
        PyObject *at = PyLong_FromSsize_t(fields[i].at);
        if (at == NULL || PyDict_SetItemString(layout, fields[i].name, at) < 0) Py_CLEAR(layout);
        Py_XDECREF(at);
    }
    if (module != NULL && (layout == NULL || PyModule_AddObjectRef(module, "LAYOUT", layout) < 0)) Py_CLEAR(module);
    Py_XDECREF(layout);
    return module;
}

/* a tuple (or named tuple) of at least n items, or a TypeError naming what it should be */
static int check_tuple(PyObject *o, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < n) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of at least %zd items, not %.100s", what, n,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

#endif
