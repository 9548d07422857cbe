/*
 * walship.replicate.batcher._batcher: a queue's batch taken from a run of entries, compiled,
 * with the peer's entry filter it runs every entry through. Each gives what its Python
 * original gives, to the same objects; the Python originals stay for whatever these decline
 * and where this module is not built.
 *
 * filter_entry(rules, own_ids, source_id, peer_cluster_id, filtered_type, fallback, entry)
 *     walship.replicate.batcher.filters.EntryFilter.apply for one WalEntry (the entry last, so
 *     that a functools.partial of the rest is the filter's apply): None (nothing of it goes to
 *     the peer), a FilteredEntry (filtered_type) of the entry, its kept cells (the entry's own
 *     tuple when every cell is kept) and its cluster ids, or fallback(entry) (the Python
 *     method) where Python must decide: the table has no rule in `rules` yet (dict table ->
 *     TableRule), or the entry's scopes are neither a plain dict nor a read-only view of one
 *     (mappingproxy, as the reader gives them).
 *
 * take_run(entries, i, filter_args, batch, tally, limits)
 *     walship.replicate.batcher.member.Member.take for each of entries[i:] (a list) of a queue
 *     that is not a serial peer's: an entry before the tally's position is passed over; the
 *     others go through the filter (filter_args: filter_entry's first six) into `batch` (a
 *     list), counted into `tally` (a list laid out as Tally: position, read, size, wire,
 *     filtered, last_write_time; written back whatever stops the run, an error included),
 *     until the batch reaches `limits` (a tuple laid out as Limits: read, wire, size). It stops
 *     before an entry filtered out whose first cell is a METAFAMILY marker (a bulk load's,
 *     maybe), which Member.take takes. Returns (i, marker): where it stopped, and whether at
 *     such a marker.
 *
 * Every tuple and list is read by position (the layout in LAYOUT, see ../../wal/_tuples.h).
 * tests/unit/test_fastpath.py and test_member_runs.py check both ways on the same entries.
 *
 * Plain CPython C API, no dependency; an optional ext-module declared in pyproject.toml.
 */
#include "../../wal/_tuples.h"
#include <string.h>

/* walship.replicate.batcher.filters.TableRule; member.Tally and member.Limits */
enum { RULE_REPLICATE = 0, RULE_INCLUDE = 1, RULE_EXCLUDE = 2, RULE_SIZE = 3 };
enum { TALLY_POSITION = 0, TALLY_READ, TALLY_SIZE, TALLY_WIRE, TALLY_FILTERED, TALLY_LAST_WRITE_TIME, TALLY_N };
enum { LIMIT_READ = 0, LIMIT_WIRE, LIMIT_SIZE, LIMIT_N };
enum { SCOPE_GLOBAL = 1 };

static const tuple_field layout[] = {
    WAL_TUPLE_FIELDS,
    {"TableRule.replicate", RULE_REPLICATE},
    {"TableRule.include", RULE_INCLUDE},
    {"TableRule.exclude", RULE_EXCLUDE},
    {"Tally.position", TALLY_POSITION},
    {"Tally.read", TALLY_READ},
    {"Tally.size", TALLY_SIZE},
    {"Tally.wire", TALLY_WIRE},
    {"Tally.filtered", TALLY_FILTERED},
    {"Tally.last_write_time", TALLY_LAST_WRITE_TIME},
    {"Limits.read", LIMIT_READ},
    {"Limits.wire", LIMIT_WIRE},
    {"Limits.size", LIMIT_SIZE},
};

static PyObject *str_get, *long_global;

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
    if (check_tuple(rule, RULE_SIZE, "filter_entry: a table rule") < 0) goto done;
    int yes = PyObject_IsTrue(PyTuple_GET_ITEM(rule, RULE_REPLICATE));
    if (yes < 0) goto done;
    if (!yes) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    include = Py_NewRef(PyTuple_GET_ITEM(rule, RULE_INCLUDE));
    exclude = Py_NewRef(PyTuple_GET_ITEM(rule, RULE_EXCLUDE));
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


/* whether the entry's first cell is of METAFAMILY (-1 on error) */
static int marker_first(PyObject *entry) {
    PyObject *cells = PyTuple_GET_ITEM(entry, ENTRY_CELLS);
    if (!PyTuple_Check(cells) || PyTuple_GET_SIZE(cells) == 0) return 0;
    PyObject *cell = PyTuple_GET_ITEM(cells, 0);
    if (check_tuple(cell, CELL_SIZE, "take_run: a cell") < 0) return -1;
    PyObject *family = PyTuple_GET_ITEM(cell, CELL_FAMILY);
    return PyBytes_Check(family) && PyBytes_GET_SIZE(family) == 10 && memcmp(PyBytes_AS_STRING(family), "METAFAMILY", 10) == 0;
}

/* a non-negative int item of a tuple or list, or -1 with an error set */
static Py_ssize_t size_item(PyObject *item, const char *what) {
    if (!PyLong_Check(item)) {
        PyErr_Format(PyExc_TypeError, "take_run: %s must be an int", what);
        return -1;
    }
    Py_ssize_t out = PyLong_AsSsize_t(item);
    if (out < 0 && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "take_run: %s must be >= 0", what);
    return out;
}

/* tally[at] = value; -1 on error */
static int set_count(PyObject *tally, Py_ssize_t at, Py_ssize_t value) {
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL) return -1;
    return PyList_SetItem(tally, at, v); /* steals v */
}

/* take_run(entries, i, filter_args, batch, tally, limits) -> (i, marker) */
static PyObject *take_run(PyObject *module, PyObject *args) {
    PyObject *entries, *fargs, *batch, *tally, *limits;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!O!:take_run", &PyList_Type, &entries, &i, &PyTuple_Type, &fargs,
                          &PyList_Type, &batch, &PyList_Type, &tally, &PyTuple_Type, &limits))
        return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "take_run: i must be >= 0");
        return NULL;
    }
    if (PyTuple_GET_SIZE(fargs) != 6) {
        PyErr_SetString(PyExc_TypeError, "take_run: filter_args must be the compiled filter's 6 arguments");
        return NULL;
    }
    if (PyList_GET_SIZE(tally) != TALLY_N || PyTuple_GET_SIZE(limits) != LIMIT_N) {
        PyErr_SetString(PyExc_TypeError, "take_run: tally must be a list of 6 items (a Tally) and limits a tuple of 3 (Limits)");
        return NULL;
    }
    PyObject *rules = PyTuple_GET_ITEM(fargs, 0), *own_ids = PyTuple_GET_ITEM(fargs, 1);
    PyObject *source_id = PyTuple_GET_ITEM(fargs, 2), *peer_cluster_id = PyTuple_GET_ITEM(fargs, 3);
    PyObject *type = PyTuple_GET_ITEM(fargs, 4), *fallback = PyTuple_GET_ITEM(fargs, 5);
    if (check_filter_args(rules, own_ids, type, "take_run") < 0) return NULL;
    Py_ssize_t position, read, size, wire, filtered, max_read, max_wire, max_size;
    if ((position = size_item(PyList_GET_ITEM(tally, TALLY_POSITION), "Tally.position")) < 0 ||
        (read = size_item(PyList_GET_ITEM(tally, TALLY_READ), "Tally.read")) < 0 ||
        (size = size_item(PyList_GET_ITEM(tally, TALLY_SIZE), "Tally.size")) < 0 ||
        (wire = size_item(PyList_GET_ITEM(tally, TALLY_WIRE), "Tally.wire")) < 0 ||
        (filtered = size_item(PyList_GET_ITEM(tally, TALLY_FILTERED), "Tally.filtered")) < 0 ||
        (max_read = size_item(PyTuple_GET_ITEM(limits, LIMIT_READ), "Limits.read")) < 0 ||
        (max_wire = size_item(PyTuple_GET_ITEM(limits, LIMIT_WIRE), "Limits.wire")) < 0 ||
        (max_size = size_item(PyTuple_GET_ITEM(limits, LIMIT_SIZE), "Limits.size")) < 0)
        return NULL;
    PyObject *last = NULL; /* the last entry taken (a new reference) */
    int marker = 0, failed = 0;
    while (i < PyList_GET_SIZE(entries)) {
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(entries, i));
        Py_ssize_t offset, end;
        if (check_tuple(entry, ENTRY_SIZE, "take_run: an entry") < 0 ||
            (offset = size_item(PyTuple_GET_ITEM(entry, ENTRY_OFFSET), "an entry's offset")) < 0 ||
            (end = size_item(PyTuple_GET_ITEM(entry, ENTRY_END), "an entry's end offset")) < 0) {
            Py_DECREF(entry);
            failed = 1;
            break;
        }
        if (offset < position) { /* shipped already */
            Py_DECREF(entry);
            i++;
            continue;
        }
        read++; /* counted before the filter, as Member.take counts it (an error keeps the count) */
        size += end - offset;
        PyObject *kept = filter_one(entry, rules, own_ids, source_id, peer_cluster_id, (PyTypeObject *)type);
        if (kept == Py_NotImplemented) {
            Py_DECREF(kept);
            kept = PyObject_CallOneArg(fallback, entry);
        }
        if (kept == NULL) {
            Py_DECREF(entry);
            failed = 1;
            break;
        }
        if (kept == Py_None) {
            Py_DECREF(kept);
            int m = marker_first(entry);
            if (m != 0) { /* a marker, maybe a bulk load: left to Member.take (which counts it), or an error */
                read--;
                size -= end - offset;
                Py_DECREF(entry);
                marker = m > 0;
                failed = m < 0;
                break;
            }
            filtered++;
        } else {
            PyObject *cells = PyTuple_GET_ITEM(entry, ENTRY_CELLS);
            if (!PyTuple_Check(kept) || PyTuple_GET_SIZE(kept) < FE_SIZE || !PyTuple_Check(PyTuple_GET_ITEM(kept, FE_CELLS)) ||
                !PyTuple_Check(cells) || PyList_Append(batch, kept) < 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "take_run: the filter must give a FilteredEntry of a cells tuple");
                Py_DECREF(kept);
                Py_DECREF(entry);
                failed = 1;
                break;
            }
            Py_ssize_t k = PyTuple_GET_SIZE(PyTuple_GET_ITEM(kept, FE_CELLS)), c = PyTuple_GET_SIZE(cells);
            wire += k == c || c == 0 ? end - offset : (end - offset) * k / c; /* the kept cells' share */
            Py_DECREF(kept);
        }
        position = end;
        Py_XSETREF(last, entry);
        i++;
        if (read >= max_read || wire >= max_wire || size >= max_size) break;
    }
    /* the counts go back to the tally whatever stopped the run (an error keeps its place) */
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    int r = set_count(tally, TALLY_POSITION, position);
    if (r == 0) r = set_count(tally, TALLY_READ, read);
    if (r == 0) r = set_count(tally, TALLY_SIZE, size);
    if (r == 0) r = set_count(tally, TALLY_WIRE, wire);
    if (r == 0) r = set_count(tally, TALLY_FILTERED, filtered);
    if (r == 0 && last != NULL) {
        PyObject *key = PyTuple_GET_ITEM(last, ENTRY_KEY);
        if (check_tuple(key, KEY_SIZE, "take_run: a WAL key") < 0)
            r = -1;
        else
            r = PyList_SetItem(tally, TALLY_LAST_WRITE_TIME, Py_NewRef(PyTuple_GET_ITEM(key, KEY_WRITE_TIME)));
    }
    Py_XDECREF(last);
    if (exc_type != NULL) {
        if (r < 0) PyErr_Clear(); /* the run's own error is the one raised */
        PyErr_Restore(exc_type, exc_value, exc_tb);
        return NULL;
    }
    if (r < 0 || failed) return NULL;
    return Py_BuildValue("nO", i, marker ? Py_True : Py_False);
}

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
    {"filter_entry", (PyCFunction)(void (*)(void))filter_entry, METH_FASTCALL,
     "filter_entry(rules, own_ids, source_id, peer_cluster_id, filtered_type, fallback, entry)\n\n"
     "EntryFilter.apply for one entry: None or a filtered entry; fallback(entry) where the\n"
     "Python method must decide (no rule for the table yet, scopes of another mapping type)."},
    {"take_run", take_run, METH_VARARGS,
     "take_run(entries, i, filter_args, batch, tally, limits) -> (i, marker)\n\n"
     "Member.take for entries[i:] (a list) into batch, counted into tally, up to limits or an\n"
     "entry filtered out whose first cell is a METAFAMILY marker (marker: True; Member.take takes it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "walship.replicate.batcher._batcher", "A queue's batch taken and filtered, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__batcher(void) {
    str_get = PyUnicode_InternFromString("get");
    long_global = PyLong_FromLong(SCOPE_GLOBAL);
    if (str_get == NULL || long_global == NULL) return NULL;
    return module_with_layout(&module_def, layout, sizeof layout / sizeof layout[0]);
}
