/* One RPC call's round trip on a plain socket, without Python's global lock
 * (walship.rpc.connection; walship.rpc.wire frames the bytes).
 *
 * exchange(fd, parts, timeout, max_frame) sends the call's parts (the frame's length, headers
 * and request, then its cell block) in one sendmsg() loop, without joining them, and reads the
 * answer's frame: a 4-byte big-endian length and as many bytes. The interpreter's lock is
 * released for all of it and taken again once, at the end, so a thread that holds it meanwhile
 * (decoding WALs, encoding the next call) delays the round trip once, not at every send() and
 * recv() that Python's socket methods would make of it. A signal interrupting a wait takes the
 * lock to run its handlers (KeyboardInterrupt ends the exchange), then the wait goes on.
 *
 * The answer: the frame's bytes; its length (an int) when that is above max_frame (nothing of
 * it read); None when the server closed the connection first. OSError (with the errno: a
 * BrokenPipeError, a ConnectionResetError) when a send or recv failed, TimeoutError when the
 * socket stayed without progress for `timeout` seconds (a negative timeout: none), as Python's
 * socket timeouts count.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define MAX_PARTS 4

enum { DONE = 0, FAILED = 1, TIMED_OUT = 2, CLOSED = 3, TOO_LARGE = 4, NO_MEMORY = 5, INTERRUPTED = 6 };

typedef struct {
    int fd;
    int timeout_ms; /* -1: none */
    struct iovec iov[MAX_PARTS];
    int iovcnt;
    int sent_all; /* the parts are sent */
    uint8_t head[4];
    size_t head_got;
    uint32_t length;
    uint8_t *body;
    size_t body_got;
    uint32_t max_frame;
    int err; /* errno of FAILED */
} Exchange;

/* Wait until the socket is ready for `events`: DONE, TIMED_OUT, FAILED or INTERRUPTED. */
static int wait_ready(Exchange *x, short events) {
    struct pollfd p = {x->fd, events, 0};
    int r = poll(&p, 1, x->timeout_ms);
    if (r > 0) return DONE;
    if (r == 0) return TIMED_OUT;
    if (errno == EINTR) return INTERRUPTED;
    x->err = errno;
    return FAILED;
}

/* After a send or recv that failed (errno set): DONE to try it again, the socket ready for
 * `events`, or why the exchange stops. */
static int after_error(Exchange *x, short events) {
    if (errno == EINTR) return INTERRUPTED;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return wait_ready(x, events);
    x->err = errno;
    return FAILED;
}

/* What is left to send, then the answer: DONE with the frame read, or why not. */
static int run(Exchange *x) {
    while (!x->sent_all) {
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = x->iov;
        msg.msg_iovlen = (size_t)x->iovcnt;
        ssize_t n = sendmsg(x->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            int w = after_error(x, POLLOUT);
            if (w != DONE) return w;
            continue;
        }
        size_t left = (size_t)n;
        int i = 0;
        while (i < x->iovcnt && left >= x->iov[i].iov_len) left -= x->iov[i++].iov_len;
        if (i == x->iovcnt) {
            x->sent_all = 1;
            break;
        }
        x->iov[i].iov_base = (uint8_t *)x->iov[i].iov_base + left;
        x->iov[i].iov_len -= left;
        memmove(x->iov, x->iov + i, (size_t)(x->iovcnt - i) * sizeof(struct iovec));
        x->iovcnt -= i;
    }
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (x->head_got < 4) {
            dst = x->head + x->head_got;
            want = 4 - x->head_got;
        } else {
            if (x->body == NULL) {
                x->length = ((uint32_t)x->head[0] << 24) | ((uint32_t)x->head[1] << 16) | ((uint32_t)x->head[2] << 8) |
                            (uint32_t)x->head[3];
                if (x->length > x->max_frame) return TOO_LARGE;
                x->body = malloc(x->length ? x->length : 1);
                if (x->body == NULL) return NO_MEMORY;
            }
            if (x->body_got == x->length) return DONE;
            dst = x->body + x->body_got;
            want = x->length - x->body_got;
        }
        ssize_t n = recv(x->fd, dst, want, 0);
        if (n > 0) {
            if (x->head_got < 4)
                x->head_got += (size_t)n;
            else
                x->body_got += (size_t)n;
            continue;
        }
        if (n == 0) return CLOSED;
        int w = after_error(x, POLLIN);
        if (w != DONE) return w;
    }
}

static PyObject *exchange(PyObject *module, PyObject *args) {
    int fd;
    PyObject *parts;
    double timeout;
    unsigned long max_frame;
    if (!PyArg_ParseTuple(args, "iO!dk:exchange", &fd, &PyTuple_Type, &parts, &timeout, &max_frame)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(parts);
    if (count > MAX_PARTS) {
        PyErr_Format(PyExc_ValueError, "'parts' holds at most %d byte strings, got %zd", MAX_PARTS, count);
        return NULL;
    }
    if (max_frame > UINT32_MAX) max_frame = UINT32_MAX;
    Exchange x;
    memset(&x, 0, sizeof x);
    x.fd = fd;
    x.max_frame = (uint32_t)max_frame;
    x.timeout_ms = timeout < 0 ? -1 : timeout * 1000.0 > INT32_MAX ? INT32_MAX : (int)(timeout * 1000.0 + 0.999);
    PyObject *out = NULL;
    Py_buffer views[MAX_PARTS];
    Py_ssize_t held = 0;
    for (; held < count; held++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, held), &views[held], PyBUF_SIMPLE) < 0) goto done;
        if (views[held].len > 0) {
            x.iov[x.iovcnt].iov_base = views[held].buf;
            x.iov[x.iovcnt].iov_len = (size_t)views[held].len;
            x.iovcnt++;
        }
    }
    x.sent_all = x.iovcnt == 0;
    int status;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        status = run(&x);
        Py_END_ALLOW_THREADS
        if (status != INTERRUPTED) break;
        if (PyErr_CheckSignals() < 0) goto done;
    }
    switch (status) {
    case DONE:
        out = PyBytes_FromStringAndSize((const char *)x.body, (Py_ssize_t)x.length);
        break;
    case TOO_LARGE:
        out = PyLong_FromUnsignedLong(x.length);
        break;
    case CLOSED:
        out = Py_NewRef(Py_None);
        break;
    case TIMED_OUT:
        PyErr_SetString(PyExc_TimeoutError, "timed out");
        break;
    case NO_MEMORY:
        PyErr_NoMemory();
        break;
    default:
        errno = x.err;
        PyErr_SetFromErrno(PyExc_OSError);
    }
done:
    free(x.body);
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return out;
}

static PyMethodDef methods[] = {
    {"exchange", exchange, METH_VARARGS,
     "exchange(fd, parts, timeout, max_frame) -> bytes | int | None\n\n"
     "Send the parts of a call and read the answer's frame, without the interpreter's lock."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "walship.rpc._exchange", "An RPC call's round trip on a plain socket, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__exchange(void) { return PyModule_Create(&module_def); }
