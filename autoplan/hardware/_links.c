/* topology._sharing's tally in C: every flow class's load on every link from the routed (link, class, rate)
 * entries, the links that more than one class uses (or one class overloads), as rows of (class, utilisation), each
 * distinct row once. The same floats as the numpy tally: each (link, class) sum taken over its entries in route
 * order (np.bincount's), divided by the link's bandwidth and rounded as np.round(x, 12) rounds (x·10^12 to the
 * nearest even integer, over 10^12). Built where a C compiler is found (setup.py, an optional extension); where
 * it is not, topology._sharing tallies with numpy (tests/hardware/test_topology.py holds the two to the same rows).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

static int buf(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_SetString(PyExc_TypeError, "_links.link_rows: arguments must be contiguous buffers");
        return -1;
    }
    return 0;
}

typedef struct {
    int64_t start, len;                    /* into the row store */
    uint64_t hash;
} Row;

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* link_rows(link, cls, rate, capacity, n_classes) -> list of distinct rows, each a tuple of (class, load) */
static PyObject *link_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    Py_ssize_t n_classes;
    if (!PyArg_ParseTuple(args, "OOOOn", &o[0], &o[1], &o[2], &o[3], &n_classes)) return NULL;
    Py_buffer v[4];
    int got = 0;
    PyObject *out = NULL;
    int64_t *count = NULL, *order = NULL, *touched = NULL, *row_cls = NULL;
    double *sum = NULL, *row_load = NULL;
    Row *rows = NULL;
    int64_t *table = NULL;
    for (; got < 4; got++) if (buf(o[got], &v[got])) goto done;
    const int64_t *link = v[0].buf, *cls = v[1].buf;
    const double *rate = v[2].buf, *cap = v[3].buf;
    Py_ssize_t n = v[0].len / (Py_ssize_t)sizeof(int64_t), n_links = v[3].len / (Py_ssize_t)sizeof(double);
    /* a stable counting sort of the entries by link: each link's entries in route order */
    count = calloc((size_t)n_links + 1, sizeof(int64_t));
    order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    sum = calloc((size_t)n_classes, sizeof(double));
    touched = malloc(sizeof(int64_t) * (size_t)(n_classes ? n_classes : 1));
    row_cls = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    row_load = malloc(sizeof(double) * (size_t)(n ? n : 1));
    rows = malloc(sizeof(Row) * (size_t)(n_links ? n_links : 1));
    if (!count || !order || !sum || !touched || !row_cls || !row_load || !rows) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) count[link[i] + 1]++;
    for (Py_ssize_t l = 0; l < n_links; l++) count[l + 1] += count[l];
    for (Py_ssize_t i = 0; i < n; i++) order[count[link[i]]++] = i;
    /* count[l] is now the end of link l's entries; its start is count[l - 1] (0 for the first) */
    char *seen = calloc((size_t)n_classes, 1);
    if (!seen) { PyErr_NoMemory(); goto done; }
    int64_t stored = 0, n_rows = 0;
    for (Py_ssize_t l = 0; l < n_links; l++) {
        int64_t lo = l ? count[l - 1] : 0, hi = count[l];
        if (lo == hi) continue;
        int64_t k = 0;
        for (int64_t x = lo; x < hi; x++) {
            int64_t c = cls[order[x]];
            if (!seen[c]) { seen[c] = 1; sum[c] = 0.0; touched[k++] = c; }
            sum[c] += rate[order[x]];
        }
        qsort(touched, (size_t)k, sizeof(int64_t), cmp_int64);
        int over = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t c = touched[j];
            double y = rint((sum[c] / cap[l]) * 1e12) / 1e12;   /* np.round(x, 12) */
            row_cls[stored + j] = c;
            row_load[stored + j] = y;
            if (y > 1.0) over = 1;
            seen[c] = 0;
        }
        if (k > 1 || over) {
            uint64_t hsh = 1469598103934665603ULL;
            for (int64_t j = 0; j < k; j++) {
                uint64_t bits;
                memcpy(&bits, &row_load[stored + j], sizeof bits);
                hsh = (hsh ^ (uint64_t)row_cls[stored + j]) * 1099511628211ULL;
                hsh = (hsh ^ bits) * 1099511628211ULL;
            }
            rows[n_rows].start = stored;
            rows[n_rows].len = k;
            rows[n_rows].hash = hsh;
            n_rows++;
            stored += k;
        }
    }
    free(seen);
    /* each distinct row once: an open-addressing table of row indices by hash, rows compared whole */
    int64_t size = 1;
    while (size < 2 * n_rows + 2) size <<= 1;
    table = malloc(sizeof(int64_t) * (size_t)size);
    if (!table) { PyErr_NoMemory(); goto done; }
    for (int64_t s = 0; s < size; s++) table[s] = -1;
    out = PyList_New(0);
    if (!out) goto done;
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t s = (int64_t)(rows[r].hash & (uint64_t)(size - 1));
        int dup = 0;
        while (table[s] >= 0) {
            Row *q = &rows[table[s]];
            if (q->hash == rows[r].hash && q->len == rows[r].len &&
                !memcmp(&row_cls[q->start], &row_cls[rows[r].start], sizeof(int64_t) * (size_t)q->len) &&
                !memcmp(&row_load[q->start], &row_load[rows[r].start], sizeof(double) * (size_t)q->len)) {
                dup = 1;
                break;
            }
            s = (s + 1) & (size - 1);
        }
        if (dup) continue;
        table[s] = r;
        PyObject *row = PyTuple_New(rows[r].len);
        if (!row) { Py_CLEAR(out); goto done; }
        for (int64_t j = 0; j < rows[r].len; j++) {
            PyObject *pair = Py_BuildValue("(Ld)", (long long)row_cls[rows[r].start + j], row_load[rows[r].start + j]);
            if (!pair) { Py_DECREF(row); Py_CLEAR(out); goto done; }
            PyTuple_SET_ITEM(row, j, pair);
        }
        int bad = PyList_Append(out, row);
        Py_DECREF(row);
        if (bad) { Py_CLEAR(out); goto done; }
    }
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    free(count); free(order); free(sum); free(touched); free(row_cls); free(row_load); free(rows); free(table);
    return out;
}

static PyMethodDef methods[] = {
    {"link_rows", link_rows, METH_VARARGS, "topology._sharing's tally of loads per link and class; see _links.c."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_links", "topology._sharing's tally in C.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__links(void) { return PyModule_Create(&module); }
