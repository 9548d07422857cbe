/*
 * A queue's batch taken from a run of entries, for walship.sinks._fastpath (take_run; see
 * _fastpath.c). Included by _fastpath.c, after filter_one.
 */

enum { KEY_WRITE_TIME = 3 };

static PyObject *str_batch, *str_position, *str_read, *str_size, *str_wire, *str_max_read, *str_max_wire,
    *str_max_size, *str_last_write_time, *str_qs, *str_entries_filtered;

/* the member's integer attribute `name` into *out; -1 on error */
static int member_int(PyObject *member, PyObject *name, Py_ssize_t *out) {
    PyObject *v = PyObject_GetAttr(member, name);
    if (v == NULL) return -1;
    *out = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int set_member_int(PyObject *member, PyObject *name, Py_ssize_t value) {
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(member, name, v);
    Py_DECREF(v);
    return r;
}

/* member.qs.entries_filtered += filtered */
static int add_filtered(PyObject *member, Py_ssize_t filtered) {
    PyObject *qs = PyObject_GetAttr(member, str_qs);
    if (qs == NULL) return -1;
    Py_ssize_t before;
    int r = member_int(qs, str_entries_filtered, &before);
    if (r == 0) r = set_member_int(qs, str_entries_filtered, before + filtered);
    Py_DECREF(qs);
    return r;
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

/* an int item of a tuple, or -1 with an error set */
static Py_ssize_t item_size(PyObject *tuple, Py_ssize_t at, const char *what) {
    PyObject *v = PyTuple_GET_ITEM(tuple, at);
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "take_run: %s must be an int", what);
        return -1;
    }
    Py_ssize_t out = PyLong_AsSsize_t(v);
    if (out < 0 && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "take_run: %s must be >= 0", what);
    return out;
}

/* take_run(member, entries, i, filter_args) -> (i, marker); see _fastpath.c */
static PyObject *take_run(PyObject *module, PyObject *args) {
    PyObject *member, *entries, *fargs;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "OO!nO!:take_run", &member, &PyList_Type, &entries, &i, &PyTuple_Type, &fargs))
        return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "take_run: i must be >= 0");
        return NULL;
    }
    if (PyTuple_GET_SIZE(fargs) != 6) {
        PyErr_SetString(PyExc_TypeError, "take_run: filter_args must be the compiled filter's 6 arguments");
        return NULL;
    }
    PyObject *rules = PyTuple_GET_ITEM(fargs, 0), *own_ids = PyTuple_GET_ITEM(fargs, 1);
    PyObject *source_id = PyTuple_GET_ITEM(fargs, 2), *peer_cluster_id = PyTuple_GET_ITEM(fargs, 3);
    PyObject *type = PyTuple_GET_ITEM(fargs, 4), *fallback = PyTuple_GET_ITEM(fargs, 5);
    if (check_filter_args(rules, own_ids, type, "take_run") < 0) return NULL;
    PyObject *batch = PyObject_GetAttr(member, str_batch);
    if (batch == NULL) return NULL;
    if (!PyList_Check(batch)) {
        Py_DECREF(batch);
        PyErr_SetString(PyExc_TypeError, "take_run: member.batch must be a list");
        return NULL;
    }
    Py_ssize_t position, read, size, wire, max_read, max_wire, max_size, filtered = 0;
    if (member_int(member, str_position, &position) < 0 || member_int(member, str_read, &read) < 0 ||
        member_int(member, str_size, &size) < 0 || member_int(member, str_wire, &wire) < 0 ||
        member_int(member, str_max_read, &max_read) < 0 || member_int(member, str_max_wire, &max_wire) < 0 ||
        member_int(member, str_max_size, &max_size) < 0) {
        Py_DECREF(batch);
        return NULL;
    }
    PyObject *last = NULL; /* the last entry taken (a new reference) */
    int marker = 0, failed = 0;
    while (i < PyList_GET_SIZE(entries)) {
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(entries, i));
        Py_ssize_t offset, end;
        if (check_tuple(entry, ENTRY_SIZE, "take_run: an entry") < 0 ||
            (offset = item_size(entry, ENTRY_OFFSET, "an entry's offset")) < 0 ||
            (end = item_size(entry, ENTRY_END, "an entry's end offset")) < 0) {
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
            if (!PyTuple_Check(kept) || PyTuple_GET_SIZE(kept) < 3 || !PyTuple_Check(PyTuple_GET_ITEM(kept, FE_CELLS)) ||
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
    Py_DECREF(batch);
    /* the counters go back to the member whatever stopped the run (an error keeps its place) */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised = PyErr_GetRaisedException();
#else
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *raised = exc_type;
#endif
    int r = set_member_int(member, str_position, position);
    if (r == 0) r = set_member_int(member, str_read, read);
    if (r == 0) r = set_member_int(member, str_size, size);
    if (r == 0) r = set_member_int(member, str_wire, wire);
    if (r == 0 && filtered) r = add_filtered(member, filtered);
    if (r == 0 && last != NULL) {
        PyObject *key = PyTuple_GET_ITEM(last, ENTRY_KEY);
        if (check_tuple(key, KEY_SIZE, "take_run: a WAL key") < 0)
            r = -1;
        else
            r = PyObject_SetAttr(member, str_last_write_time, PyTuple_GET_ITEM(key, KEY_WRITE_TIME));
    }
    Py_XDECREF(last);
    if (raised != NULL) {
        if (r < 0) PyErr_Clear(); /* the run's own error is the one raised */
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(raised);
#else
        PyErr_Restore(exc_type, exc_value, exc_tb);
#endif
        return NULL;
    }
    if (r < 0 || failed) return NULL;
    return Py_BuildValue("nO", i, marker ? Py_True : Py_False);
}

static int init_take(void) {
    str_batch = PyUnicode_InternFromString("batch");
    str_position = PyUnicode_InternFromString("position");
    str_read = PyUnicode_InternFromString("read");
    str_size = PyUnicode_InternFromString("size");
    str_wire = PyUnicode_InternFromString("wire");
    str_max_read = PyUnicode_InternFromString("max_read");
    str_max_wire = PyUnicode_InternFromString("max_wire");
    str_max_size = PyUnicode_InternFromString("max_size");
    str_last_write_time = PyUnicode_InternFromString("last_write_time");
    str_qs = PyUnicode_InternFromString("qs");
    str_entries_filtered = PyUnicode_InternFromString("entries_filtered");
    return str_batch && str_position && str_read && str_size && str_wire && str_max_read && str_max_wire &&
                   str_max_size && str_last_write_time && str_qs && str_entries_filtered
               ? 0
               : -1;
}
