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
        PyErr_SetString(PyExc_TypeError, "_links.routed_rows: arguments must be contiguous buffers");
        return -1;
    }
    return 0;
}

typedef struct {
    int64_t start, len;                    /* into the row store */
    uint64_t hash;
} Row;

/* The tally: every (link, class)'s load from the entries (link[i], cls[i], rate[i]) in their order, the shared links'
 * rows, each distinct row once (a new list), or NULL with an exception set. */
static PyObject *tally(const int64_t *link, const int64_t *cls, const double *rate, Py_ssize_t n, const double *cap,
                       Py_ssize_t n_links, Py_ssize_t n_classes) {
    PyObject *out = NULL;
    int64_t *count = NULL, *order = NULL, *touched = NULL, *row_cls = NULL, *table = NULL;
    double *sum = NULL, *row_load = NULL;
    char *seen = NULL;
    Row *rows = NULL;
    /* a stable counting sort of the entries by link: each link's entries in their order */
    count = calloc((size_t)n_links + 1, sizeof(int64_t));
    order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    sum = calloc((size_t)(n_classes ? n_classes : 1), sizeof(double));
    seen = calloc((size_t)(n_classes ? n_classes : 1), 1);
    touched = malloc(sizeof(int64_t) * (size_t)(n_classes ? n_classes : 1));
    row_cls = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    row_load = malloc(sizeof(double) * (size_t)(n ? n : 1));
    rows = malloc(sizeof(Row) * (size_t)(n_links ? n_links : 1));
    if (!count || !order || !sum || !seen || !touched || !row_cls || !row_load || !rows) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) count[link[i] + 1]++;
    for (Py_ssize_t l = 0; l < n_links; l++) count[l + 1] += count[l];
    for (Py_ssize_t i = 0; i < n; i++) order[count[link[i]]++] = i;
    /* count[l] is now the end of link l's entries; its start is count[l - 1] (0 for the first) */
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
        for (int64_t a = 1; a < k; a++) {          /* a link carries few classes: insertion sort */
            int64_t x = touched[a], b = a - 1;
            while (b >= 0 && touched[b] > x) { touched[b + 1] = touched[b]; b--; }
            touched[b + 1] = x;
        }
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
    free(count); free(order); free(sum); free(seen); free(touched); free(row_cls); free(row_load); free(rows);
    free(table);
    return out;
}

/* routed_rows(src, dst, rate, cls, gpus, domain, per_su, sus, capacity, n_classes): topology._Links.route's links
 * for every flow (its segments in route's order: NVLink out and in inside a domain; NIC out and in, leaf to spine
 * and spine to leaf across su's, the NVLink hop to the destination from the rail's peer), then the tally */
static PyObject *routed_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    long long n, g, per_su, sus;
    Py_ssize_t n_classes;
    if (!PyArg_ParseTuple(args, "OOOOLLLLOn", &o[0], &o[1], &o[2], &o[3], &n, &g, &per_su, &sus, &o[4], &n_classes))
        return NULL;
    Py_buffer v[5];
    int got = 0;
    PyObject *out = NULL;
    int64_t *link = NULL, *ecls = NULL;
    double *erate = NULL;
    for (; got < 5; got++) if (buf(o[got], &v[got])) goto done;
    const int64_t *src = v[0].buf, *dst = v[1].buf, *cls = v[3].buf;
    const double *rate = v[2].buf;
    Py_ssize_t flows = v[0].len / (Py_ssize_t)sizeof(int64_t);
    size_t cap = 8 * (size_t)flows + 1;
    link = malloc(sizeof(int64_t) * cap);
    ecls = malloc(sizeof(int64_t) * cap);
    erate = malloc(sizeof(double) * cap);
    if (!link || !ecls || !erate) { PyErr_NoMemory(); goto done; }
    Py_ssize_t m = 0;
    /* each flow's route once: 0 inside a domain; else its rail's peer, and whether it crosses su's */
    int64_t *peer = malloc(sizeof(int64_t) * (size_t)(flows ? flows : 1));
    char *kind = malloc((size_t)(flows ? flows : 1));
    int64_t *up_a = malloc(sizeof(int64_t) * (size_t)(flows ? flows : 1));
    int64_t *up_b = malloc(sizeof(int64_t) * (size_t)(flows ? flows : 1));
    if (!peer || !kind || !up_a || !up_b) { free(peer); free(kind); free(up_a); free(up_b); PyErr_NoMemory(); goto done; }
    for (Py_ssize_t f = 0; f < flows; f++) {
        int64_t a = src[f], b = dst[f], da = a / g, db = b / g;
        if (da == db) { kind[f] = 0; continue; }
        int64_t rail = a - da * g;
        peer[f] = db * g + rail;
        int64_t su_a = da / per_su, su_b = db / per_su;
        kind[f] = su_a != su_b ? 2 : 1;
        up_a[f] = 4 * n + su_a * g + rail;
        up_b[f] = 4 * n + (sus + su_b) * g + rail;
    }
#define EMIT(l, f) do { link[m] = (l); ecls[m] = cls[f]; erate[m] = rate[f]; m++; } while (0)
    for (Py_ssize_t f = 0; f < flows; f++) if (!kind[f]) EMIT(src[f], f);                  /* NVLink out */
    for (Py_ssize_t f = 0; f < flows; f++) if (!kind[f]) EMIT(n + dst[f], f);              /* NVLink in */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f]) EMIT(2 * n + src[f], f);           /* NIC out */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f]) EMIT(3 * n + peer[f], f);          /* NIC in (peer) */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f] == 2) EMIT(up_a[f], f);             /* leaf -> spine */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f] == 2) EMIT(up_b[f], f);             /* spine -> leaf */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f] && peer[f] != dst[f]) EMIT(peer[f], f);    /* to b */
    for (Py_ssize_t f = 0; f < flows; f++) if (kind[f] && peer[f] != dst[f]) EMIT(n + dst[f], f);
    free(peer); free(kind); free(up_a); free(up_b);
#undef EMIT
    out = tally(link, ecls, erate, m, v[4].buf, v[4].len / (Py_ssize_t)sizeof(double), n_classes);
done:
    free(link); free(ecls); free(erate);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return out;
}

static PyMethodDef methods[] = {
    {"routed_rows", routed_rows, METH_VARARGS, "topology._sharing's route and tally; see _links.c."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_links", "topology._sharing's tally in C.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__links(void) { return PyModule_Create(&module); }
