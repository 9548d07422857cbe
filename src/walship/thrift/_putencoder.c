/*
 * walship.thrift._putencoder: the sinks' calls encoded straight from WAL cells: Thrift2's
 * THBaseService.putMultiple and Thrift1's Hbase.mutateRowsTs.
 *
 * encode_put_multiple(table, puts, attributes) -> bytes writes the call as thriftpy2's client
 * writes it in the binary protocol (strict message header, sequence id 0, fields in id order):
 * putMultiple_args {1: table, 2: list<TPut>}, each TPut {1: row, 2: list<TColumnValue>,
 * 5: attributes}, each TColumnValue {1: family, 2: qualifier, 3: value, 4: timestamp}.
 * `puts` is a list of (row, cells); a cell is walship's Cell named tuple (row, family,
 * qualifier, timestamp, type, value, tags), read by position. Nothing in between is built as a
 * Python object: the Thrift2 sink's cost per cell is this loop's.
 *
 * encode_mutate_rows_ts(table, rows, timestamp, attributes) -> bytes writes mutateRowsTs_args
 * {1: tableName, 2: list<BatchMutation>, 3: timestamp, 4: attributes}, each BatchMutation
 * {1: row, 2: list<Mutation>}, each Mutation {1: isDelete, 2: column, 3: value (puts only),
 * 4: writeToWAL = true} from a cell's type: a Put is family:qualifier = value, a DeleteColumn
 * deletes family:qualifier, a DeleteFamily the family; any other type is refused (the Thrift1
 * sink has dealt with those before).
 *
 * The bytes are checked against thriftpy2's own encoding of the same calls by
 * tests/unit/test_put_encoder.py; the sinks fall back to thriftpy2 where this module is not
 * built, and for the compact protocol.
 *
 * Plain CPython C API, no dependency; an optional ext-module declared in pyproject.toml.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* walship.wal.model.CellType's values a Thrift1 mutation can carry */
enum { CELL_PUT = 4, CELL_DELETE_COLUMN = 12, CELL_DELETE_FAMILY = 14 };

enum { T_STOP = 0, T_BOOL = 2, T_I32 = 8, T_I64 = 10, T_STRING = 11, T_STRUCT = 12, T_MAP = 13, T_LIST = 15 };

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    const char *fn; /* the function encoding into it, for errors */
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put_u8(Buf *b, uint8_t v) {
    if (buf_reserve(b, 1) < 0) return -1;
    b->data[b->len++] = (char)v;
    return 0;
}

static int put_be(Buf *b, uint64_t v, int n) {
    if (buf_reserve(b, n) < 0) return -1;
    for (int i = n - 1; i >= 0; i--) b->data[b->len++] = (char)((v >> (8 * i)) & 0xff);
    return 0;
}

static int put_field(Buf *b, uint8_t type, int16_t id) {
    if (put_u8(b, type) < 0) return -1;
    return put_be(b, (uint16_t)id, 2);
}

static int put_raw(Buf *b, const char *p, Py_ssize_t n) {
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a Thrift string holds at most 2 GiB");
        return -1;
    }
    if (put_be(b, (uint32_t)n, 4) < 0 || buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, (size_t)n);
    b->len += n;
    return 0;
}

/* a bytes object as a Thrift binary string; what names it, for the error */
static int put_bytes(Buf *b, PyObject *o, const char *what) {
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be bytes, not %.100s", b->fn, what, Py_TYPE(o)->tp_name);
        return -1;
    }
    return put_raw(b, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
}

static int put_string_field(Buf *b, int16_t id, PyObject *o, const char *what) {
    if (put_field(b, T_STRING, id) < 0) return -1;
    return put_bytes(b, o, what);
}

static int check_cell(Buf *b, PyObject *cell) {
    if (!PyTuple_Check(cell) || PyTuple_GET_SIZE(cell) < 6) {
        PyErr_Format(PyExc_TypeError, "%s: a cell must be a Cell, not %.100s", b->fn, Py_TYPE(cell)->tp_name);
        return -1;
    }
    return 0;
}

static int put_cell(Buf *b, PyObject *cell) {
    if (check_cell(b, cell) < 0) return -1;
    long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(cell, 3));
    if (ts == -1 && PyErr_Occurred()) return -1;
    if (put_string_field(b, 1, PyTuple_GET_ITEM(cell, 1), "a cell's family") < 0) return -1;
    if (put_string_field(b, 2, PyTuple_GET_ITEM(cell, 2), "a cell's qualifier") < 0) return -1;
    if (put_string_field(b, 3, PyTuple_GET_ITEM(cell, 5), "a cell's value") < 0) return -1;
    if (put_field(b, T_I64, 4) < 0 || put_be(b, (uint64_t)ts, 8) < 0) return -1;
    return put_u8(b, T_STOP);
}

static int put_attributes(Buf *b, int16_t id, PyObject *attributes) {
    if (put_field(b, T_MAP, id) < 0 || put_u8(b, T_STRING) < 0 || put_u8(b, T_STRING) < 0) return -1;
    if (put_be(b, (uint32_t)PyDict_GET_SIZE(attributes), 4) < 0) return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(attributes, &pos, &k, &v)) {
        if (put_bytes(b, k, "an attribute's name") < 0 || put_bytes(b, v, "an attribute's value") < 0) return -1;
    }
    return 0;
}

/* A (row, cells) tuple (`what` names it in errors) as fields 1: the row and 2: a list of one
 * struct a cell, each written by `item`; the caller writes what follows and the struct's stop. */
static int put_row_and_cells(Buf *b, PyObject *row, const char *what, int (*item)(Buf *, PyObject *)) {
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: a %s must be a (row, cells) tuple", b->fn, what);
        return -1;
    }
    PyObject *cells = PySequence_Fast(PyTuple_GET_ITEM(row, 1), "a row's cells must be a sequence");
    if (cells == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cells);
    PyObject **items = PySequence_Fast_ITEMS(cells);
    int rc = -1;
    if (put_string_field(b, 1, PyTuple_GET_ITEM(row, 0), "a row's key") < 0) goto done;
    if (put_field(b, T_LIST, 2) < 0 || put_u8(b, T_STRUCT) < 0 || put_be(b, (uint32_t)n, 4) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (item(b, items[i]) < 0) goto done;
    }
    rc = 0;
done:
    Py_DECREF(cells);
    return rc;
}

/* a TPut: the row, its cells' column values, the attributes */
static int put_tput(Buf *b, PyObject *put, PyObject *attributes) {
    if (put_row_and_cells(b, put, "put", put_cell) < 0 || put_attributes(b, 5, attributes) < 0) return -1;
    return put_u8(b, T_STOP);
}

/* a call's message header as thriftpy2 writes it (strict version, CALL, the name, sequence id
 * 0), then both calls' first arguments: 1: the table, 2: the head of a list of n structs */
static int put_call_start(Buf *b, const char *name, Py_ssize_t len, PyObject *table, Py_ssize_t n) {
    if (put_be(b, 0x80010000u | 1u, 4) < 0 || put_raw(b, name, len) < 0 || put_be(b, 0, 4) < 0) return -1;
    if (put_string_field(b, 1, table, "the table") < 0) return -1;
    if (put_field(b, T_LIST, 2) < 0 || put_u8(b, T_STRUCT) < 0) return -1;
    return put_be(b, (uint32_t)n, 4);
}

/* the argument struct's stop, then the bytes (the buffer is freed either way) */
static PyObject *finish(Buf *b) {
    PyObject *out = put_u8(b, T_STOP) < 0 ? NULL : PyBytes_FromStringAndSize(b->data, b->len);
    PyMem_Free(b->data);
    return out;
}

/* encode_put_multiple(table, puts, attributes) -> bytes */
static PyObject *encode_put_multiple(PyObject *module, PyObject *args) {
    PyObject *table, *puts, *attributes;
    if (!PyArg_ParseTuple(args, "SO!O!:encode_put_multiple", &table, &PyList_Type, &puts, &PyDict_Type, &attributes))
        return NULL;
    Buf b = {NULL, 0, 0, "encode_put_multiple"};
    static const char name[] = "putMultiple";
    Py_ssize_t n = PyList_GET_SIZE(puts);
    if (put_call_start(&b, name, (Py_ssize_t)sizeof(name) - 1, table, n) < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (put_tput(&b, PyList_GET_ITEM(puts, i), attributes) < 0) goto fail;
    }
    return finish(&b);
fail:
    PyMem_Free(b.data);
    return NULL;
}

/* one Thrift1 Mutation from a Put, DeleteColumn or DeleteFamily cell */
static int put_mutation(Buf *b, PyObject *cell) {
    if (check_cell(b, cell) < 0) return -1;
    long type = PyLong_AsLong(PyTuple_GET_ITEM(cell, 4));
    if (type == -1 && PyErr_Occurred()) return -1;
    PyObject *family = PyTuple_GET_ITEM(cell, 1);
    if (!PyBytes_Check(family) || !PyBytes_Check(PyTuple_GET_ITEM(cell, 2))) {
        PyErr_Format(PyExc_TypeError, "%s: a cell's family and qualifier must be bytes", b->fn);
        return -1;
    }
    int is_delete;
    if (type == CELL_PUT) is_delete = 0;
    else if (type == CELL_DELETE_COLUMN || type == CELL_DELETE_FAMILY) is_delete = 1;
    else {
        PyErr_Format(PyExc_ValueError, "%s: a cell of type %ld has no Thrift1 mutation", b->fn, type);
        return -1;
    }
    if (put_field(b, T_BOOL, 1) < 0 || put_u8(b, (uint8_t)is_delete) < 0) return -1;
    if (put_field(b, T_STRING, 2) < 0) return -1;
    Py_ssize_t flen = PyBytes_GET_SIZE(family);
    if (type == CELL_DELETE_FAMILY) {
        if (put_raw(b, PyBytes_AS_STRING(family), flen) < 0) return -1;
    } else {
        PyObject *qualifier = PyTuple_GET_ITEM(cell, 2);
        Py_ssize_t qlen = PyBytes_GET_SIZE(qualifier);
        if (flen + 1 + qlen > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a Thrift string holds at most 2 GiB");
            return -1;
        }
        if (put_be(b, (uint32_t)(flen + 1 + qlen), 4) < 0 || buf_reserve(b, flen + 1 + qlen) < 0) return -1;
        memcpy(b->data + b->len, PyBytes_AS_STRING(family), (size_t)flen);
        b->data[b->len + flen] = ':';
        memcpy(b->data + b->len + flen + 1, PyBytes_AS_STRING(qualifier), (size_t)qlen);
        b->len += flen + 1 + qlen;
    }
    if (!is_delete && put_string_field(b, 3, PyTuple_GET_ITEM(cell, 5), "a cell's value") < 0) return -1;
    if (put_field(b, T_BOOL, 4) < 0 || put_u8(b, 1) < 0) return -1;
    return put_u8(b, T_STOP);
}

/* a BatchMutation: the row, its cells' mutations */
static int put_batch_mutation(Buf *b, PyObject *row) {
    if (put_row_and_cells(b, row, "row", put_mutation) < 0) return -1;
    return put_u8(b, T_STOP);
}

/* encode_mutate_rows_ts(table, rows, timestamp, attributes) -> bytes */
static PyObject *encode_mutate_rows_ts(PyObject *module, PyObject *args) {
    PyObject *table, *rows, *attributes;
    long long ts;
    if (!PyArg_ParseTuple(args, "SO!LO!:encode_mutate_rows_ts", &table, &PyList_Type, &rows, &ts, &PyDict_Type,
                          &attributes))
        return NULL;
    Buf b = {NULL, 0, 0, "encode_mutate_rows_ts"};
    static const char name[] = "mutateRowsTs";
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (put_call_start(&b, name, (Py_ssize_t)sizeof(name) - 1, table, n) < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (put_batch_mutation(&b, PyList_GET_ITEM(rows, i)) < 0) goto fail;
    }
    if (put_field(&b, T_I64, 3) < 0 || put_be(&b, (uint64_t)ts, 8) < 0) goto fail;
    if (put_attributes(&b, 4, attributes) < 0) goto fail;
    return finish(&b);
fail:
    PyMem_Free(b.data);
    return NULL;
}

static PyMethodDef methods[] = {
    {"encode_put_multiple", encode_put_multiple, METH_VARARGS,
     "encode_put_multiple(table, puts, attributes) -> bytes\n\n"
     "THBaseService.putMultiple(table, [TPut(row, cells' column values, attributes) for row, cells\n"
     "in puts]) as thriftpy2's client writes it in the binary protocol."},
    {"encode_mutate_rows_ts", encode_mutate_rows_ts, METH_VARARGS,
     "encode_mutate_rows_ts(table, rows, timestamp, attributes) -> bytes\n\n"
     "Hbase.mutateRowsTs(table, [BatchMutation(row, cells' mutations) for row, cells in rows],\n"
     "timestamp, attributes) as thriftpy2's client writes it in the binary protocol."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "walship.thrift._putencoder", "The sinks' Thrift calls encoded from WAL cells.", -1, methods,
};

PyMODINIT_FUNC PyInit__putencoder(void) { return PyModule_Create(&module_def); }
