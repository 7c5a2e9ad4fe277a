/* The stage runner of pipeline.run in C: the same floats from the same operations in the same order.
 *
 * pipeline.py times a compiled program (program.py) with one Python generator per stage, parking a stage on a
 * transfer not yet sent; this file is that loop as a state machine (each stage's position and stream ends kept
 * between its turns), built when a C compiler is there (pyproject.toml, an optional extension) and used by
 * pipeline.run when it imports. Every float is computed as in pipeline._stage, _fused_stage, _special, _send and
 * _attribute: the same conditionals in place of max/min, the same association of each sum, the same order of
 * the DP collectives' extra seconds. tests/sim/test_runner.py holds both runners to the same bits.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

enum { FWD_LINK = 0, BWD_LINK = 1, ON_COMPUTE = 2 };
enum { DEP_ARRIVAL = 0, DEP_GATHER = 1, DEP_SHARD = 2 };
enum { KIND_PASS = 0, KIND_PP = 1, KIND_DP = 2 };

typedef struct {
    const int32_t *slot, *key, *send, *link, *reduce;
    const int32_t *fkey, *fsend, *flink;   /* NULL unless fused pairs */
    const uint8_t *ffirst;
    const double *sec;                     /* slot -> seconds; sec[n_slots] = -1.0 ("no task") */
    Py_ssize_t n_slots;
    double *hops;
    double *arr_end, *arr_start;           /* per transfer; NaN end: not sent yet */
    int32_t *waiter;
    /* specials */
    const int32_t *sp_dep_bounds, *sp_dep_kind, *sp_dep_x, *sp_gathers, *sp_pieces, *sp_reduce;
    const int32_t *sp_send_bounds, *sp_send_o, *sp_send_link;
    /* the DP stream's collectives, each stage's in a block of a flat array (dp_bounds): their extra seconds
     * (NULL: none) and where each run's start and end are noted */
    const double *more;
    const int32_t *dp_bounds;
    double *note_start, *note_end;
    int chunks;
    int param_gather, param_gather_rest, shard_gather;
} Prog;

typedef struct {
    Py_ssize_t pos, end, stop;            /* next task, one past the last, task count to snapshot after (-1) */
    int phase;                            /* 0: at a task's head; 1: inside a special (its deps) */
    double e, lf, lb, lp, de, dmax, dstart, pp, dp, bub;
    Py_ssize_t at, at_end;                /* the stage's next DP collective, one past its block */
    double *g_end, *g_start;              /* per chunk */
    /* a special in progress */
    int sp, sp_dep;                       /* special index, next dependency */
    double *deps_end, *deps_start;        /* per dependency */
    int *deps_kind;
    double *gath_end, *gath_start;
    int deps_cap, gath_cap;
    int fused_wait;                       /* fused pair: 0 none yet, 1 after fkey */
    int snapped;
} Stage;

static inline double take_more(const Prog *pr, const Stage *st) {
    return pr->more == NULL || st->at >= st->at_end ? 0.0 : pr->more[st->at];
}

static int note(const Prog *pr, Stage *st, double s0, double end) {
    if (st->at >= st->at_end) {
        PyErr_SetString(PyExc_RuntimeError, "_runner.run: a stage ran more DP collectives than its program counts");
        return -1;
    }
    pr->note_start[st->at] = s0;
    pr->note_end[st->at] = end;
    st->at++;
    return 0;
}

/* pipeline._attribute */
static inline void attribute(Stage *st, double gap, double t, double prev, double start, int kind) {
    if (kind == KIND_PP || kind == KIND_DP) {
        double m = start > prev ? start : prev;
        double x = t - m;
        double waited = x < gap ? x : gap;
        if (kind == KIND_PP) st->pp += waited; else st->dp += waited;
        st->bub += gap - waited;
    } else {
        st->bub += gap;
    }
}

/* pipeline._send: transfer o of a pass that ended at pe; wakes its consumer */
static inline void send(const Prog *pr, Stage *st, int o, int link, double pe, int32_t *ready, int *n_ready) {
    double s0;
    if (link == FWD_LINK) {
        s0 = pe > st->lf ? pe : st->lf;
        st->lf = s0 + pr->hops[o];
        pr->arr_end[o] = st->lf;
    } else if (link == BWD_LINK) {
        s0 = pe > st->lb ? pe : st->lb;
        st->lb = s0 + pr->hops[o];
        pr->arr_end[o] = st->lb;
    } else if (link == ON_COMPUTE) {
        s0 = st->e;
        st->e = st->e + pr->hops[o];
        pr->arr_end[o] = st->e;
    } else {
        s0 = -1.0;
        pr->arr_end[o] = pe;
    }
    pr->arr_start[o] = s0;
    int w = pr->waiter[o];
    if (w >= 0) ready[(*n_ready)++] = w;
}

static inline int dp_after(const Prog *pr, Stage *st, double r) {
    double s0 = st->e > st->de ? st->e : st->de;
    st->de = s0 + (r + take_more(pr, st));
    if (note(pr, st, s0, st->de)) return -1;
    if (st->de > st->dmax) { st->dmax = st->de; st->dstart = s0; }
    return 0;
}

static int grow(Stage *st, int deps, int gathers) {
    if (deps > st->deps_cap) {
        int cap = deps * 2;
        double *a = realloc(st->deps_end, cap * sizeof(double)), *b;
        if (!a) return -1;
        st->deps_end = a;
        b = realloc(st->deps_start, cap * sizeof(double));
        if (!b) return -1;
        st->deps_start = b;
        int *k = realloc(st->deps_kind, cap * sizeof(int));
        if (!k) return -1;
        st->deps_kind = k;
        st->deps_cap = cap;
    }
    if (gathers > st->gath_cap) {
        int cap = gathers * 2;
        double *a = realloc(st->gath_end, cap * sizeof(double)), *b;
        if (!a) return -1;
        st->gath_end = a;
        b = realloc(st->gath_start, cap * sizeof(double));
        if (!b) return -1;
        st->gath_start = b;
        st->gath_cap = cap;
    }
    return 0;
}

/* Runs stage st until it parks (returns the transfer it waits for, >= 0), finishes (-1) or fails (-2). */
static Py_ssize_t step(const Prog *pr, Stage *st, int32_t *ready, int *n_ready, double *snap) {
    const double *sec = pr->sec;
    for (;;) {
        if (st->stop >= 0 && !st->snapped && st->pos == st->stop && st->phase == 0) {
            st->snapped = 1;
            double s[7] = {st->e, st->lf, st->lb, st->lp, st->de, st->dmax, st->dstart};
            memcpy(snap, s, 7 * sizeof(double));
            snap[7] = st->pp; snap[8] = st->dp; snap[9] = st->bub;
        }
        if (st->pos >= st->end) return -1;
        Py_ssize_t i = st->pos;
        int key = pr->key[i];
        double d = sec[pr->slot[i]];
        if (key <= -2) {
            /* pipeline._special */
            int j = -2 - key;
            if (st->phase == 0) {
                int nd = pr->sp_dep_bounds[j + 1] - pr->sp_dep_bounds[j];
                int ng = pr->sp_gathers[j];
                if (grow(st, nd, ng)) { PyErr_NoMemory(); return -2; }
                if (ng) {
                    double sgd = sec[pr->shard_gather];
                    for (int g = 0; g < ng; g++) {
                        double s0 = st->de;
                        st->de = s0 + (sgd + take_more(pr, st));
                        st->gath_end[g] = st->de;
                        st->gath_start[g] = s0;
                        if (note(pr, st, s0, st->de)) return -2;
                    }
                }
                st->sp = j;
                st->sp_dep = 0;
                st->phase = 1;
            }
            int lo = pr->sp_dep_bounds[j], nd = pr->sp_dep_bounds[j + 1] - lo;
            for (; st->sp_dep < nd; st->sp_dep++) {
                int q = st->sp_dep, kind = pr->sp_dep_kind[lo + q], x = pr->sp_dep_x[lo + q];
                if (kind == DEP_ARRIVAL) {
                    if (isnan(pr->arr_end[x])) return x;
                    double s0 = pr->arr_start[x];
                    st->deps_end[q] = pr->arr_end[x];
                    st->deps_start[q] = s0;
                    st->deps_kind[q] = s0 >= 0.0 ? KIND_PP : KIND_PASS;
                } else if (kind == DEP_GATHER) {
                    st->deps_end[q] = st->g_end[x];
                    st->deps_start[q] = st->g_start[x];
                    st->deps_kind[q] = KIND_DP;
                } else {
                    st->deps_end[q] = st->gath_end[x];
                    st->deps_start[q] = st->gath_start[x];
                    st->deps_kind[q] = KIND_DP;
                }
            }
            double t = st->e;
            for (int q = 0; q < nd; q++) if (st->deps_end[q] > t) t = st->deps_end[q];
            if (t > st->e) {
                int q = 0;
                for (; q < nd; q++) if (st->deps_end[q] == t) break;
                if (q == nd) q = nd - 1;
                attribute(st, t - st->e, t, st->e, st->deps_start[q], st->deps_kind[q]);
            }
            int rs = pr->sp_reduce[j];
            double r = sec[rs < 0 ? pr->n_slots : rs];
            for (int k = 0; k < pr->sp_pieces[j]; k++) {
                st->e = t + d;
                t = st->e;
                if (r >= 0.0 && dp_after(pr, st, r)) return -2;
            }
            double pe = st->e;
            for (int k = pr->sp_send_bounds[j]; k < pr->sp_send_bounds[j + 1]; k++)
                send(pr, st, pr->sp_send_o[k], pr->sp_send_link[k], pe, ready, n_ready);
            st->lp = pe;
            st->phase = 0;
            st->pos++;
            continue;
        }
        int rslot = pr->reduce[i];
        double r = sec[rslot < 0 ? pr->n_slots : rslot];
        int o = pr->send[i], link = pr->link[i];
        if (pr->fkey == NULL) {
            /* pipeline._stage */
            if (key >= 0) {
                double a = pr->arr_end[key];
                if (isnan(a)) return key;
                if (a > st->e) {
                    double gap = a - st->e, s0 = pr->arr_start[key];
                    if (s0 >= 0.0) {
                        double w = a - (st->e >= s0 ? st->e : s0);
                        if (gap < w) w = gap;
                        st->pp += w;
                        st->bub += gap - w;
                    } else {
                        st->bub += gap;
                    }
                    st->e = a + d;
                } else {
                    st->e = st->e + d;
                }
            } else {
                st->e = st->e + d;
            }
            st->lp = st->e;
            if (r >= 0.0 && dp_after(pr, st, r)) return -2;
            if (o >= 0) send(pr, st, o, link, st->e, ready, n_ready);
        } else {
            /* pipeline._fused_stage */
            int fk = pr->fkey[i];
            double t = st->e;
            if (fk >= 0) {
                double a = pr->arr_end[fk];
                if (isnan(a)) return fk;
                if (a > t) t = a;
            }
            if (key >= 0) {
                double b = pr->arr_end[key];
                if (isnan(b)) return key;
                if (b > t) t = b;
            }
            if (t > st->e) {
                int k = (fk >= 0 && pr->arr_end[fk] == t && (pr->ffirst[i] || key < 0 || pr->arr_end[key] != t))
                        ? fk : key;
                double s0 = pr->arr_start[k], gap = t - st->e;
                if (s0 >= 0.0) {
                    double w = t - (st->e >= s0 ? st->e : s0);
                    if (gap < w) w = gap;
                    st->pp += w;
                    st->bub += gap - w;
                } else {
                    st->bub += gap;
                }
            }
            st->e = t + d;
            double pe = st->e;
            st->lp = pe;
            if (r >= 0.0 && dp_after(pr, st, r)) return -2;
            int fo = pr->fsend[i];
            if (fo >= 0) send(pr, st, fo, pr->flink[i], pe, ready, n_ready);
            if (o >= 0) send(pr, st, o, link, pe, ready, n_ready);
        }
        st->pos++;
    }
}

static int buf(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Format(PyExc_TypeError, "_runner.run: %s must be a contiguous%s buffer", what,
                     writable ? " writable" : "");
        return -1;
    }
    return 0;
}

#define NARGS 37

/* run(p, chunks, param_gather, param_gather_rest, shard_gather, n_slots, bounds, starts, stops, slot, key, send,
 *     link, reduce, fkey, fsend, flink, ffirst, sec, hops, arr_end, arr_start, sp_dep_bounds, sp_dep_kind,
 *     sp_dep_x, sp_gathers, sp_pieces, sp_reduce, sp_send_bounds, sp_send_o, sp_send_link, more, dp_bounds, acc,
 *     states, has_state, results, snaps, waiter, gathers, note_start, note_end, noted) -> number of stages that
 *     finished */
static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    int p, chunks, param_gather, param_gather_rest, shard_gather;
    Py_ssize_t n_slots;
    PyObject *o[NARGS];
    if (!PyArg_ParseTuple(args, "iiiiin" "OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO", &p, &chunks, &param_gather,
                          &param_gather_rest, &shard_gather, &n_slots,
                          &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11],
                          &o[12], &o[13], &o[14], &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22],
                          &o[23], &o[24], &o[25], &o[26], &o[27], &o[28], &o[29], &o[30], &o[31], &o[32], &o[33],
                          &o[34], &o[35], &o[36]))
        return NULL;
    /* o: 0 bounds 1 starts 2 stops 3 slot 4 key 5 send 6 link 7 reduce 8 fkey 9 fsend 10 flink 11 ffirst 12 sec
     * 13 hops 14 arr_end 15 arr_start 16 sp_dep_bounds 17 sp_dep_kind 18 sp_dep_x 19 sp_gathers 20 sp_pieces
     * 21 sp_reduce 22 sp_send_bounds 23 sp_send_o 24 sp_send_link 25 more 26 dp_bounds 27 acc 28 states
     * 29 has_state 30 results 31 snaps 32 waiter 33 gathers (p x 2 x chunks scratch) 34 note_start 35 note_end
     * 36 noted (per stage, DP collectives noted) */
    const int writable[NARGS] = {[14] = 1, [15] = 1, [27] = 1, [30] = 1, [31] = 1, [32] = 1, [33] = 1, [34] = 1,
                                 [35] = 1, [36] = 1};
    Py_buffer v[NARGS];
    int got = 0;
    PyObject *result = NULL;
    Stage *stages = NULL;
    int32_t *ready = NULL;
    for (; got < NARGS; got++) {
        if (o[got] == Py_None) { memset(&v[got], 0, sizeof(Py_buffer)); continue; }
        if (buf(o[got], &v[got], writable[got], "an argument")) goto done;
    }
    Prog pr = {
        .slot = v[3].buf, .key = v[4].buf, .send = v[5].buf, .link = v[6].buf, .reduce = v[7].buf,
        .fkey = v[8].buf, .fsend = v[9].buf, .flink = v[10].buf, .ffirst = v[11].buf, .sec = v[12].buf,
        .n_slots = n_slots, .hops = v[13].buf, .arr_end = v[14].buf, .arr_start = v[15].buf, .waiter = v[32].buf,
        .sp_dep_bounds = v[16].buf, .sp_dep_kind = v[17].buf, .sp_dep_x = v[18].buf, .sp_gathers = v[19].buf,
        .sp_pieces = v[20].buf, .sp_reduce = v[21].buf, .sp_send_bounds = v[22].buf, .sp_send_o = v[23].buf,
        .sp_send_link = v[24].buf, .more = v[25].buf, .dp_bounds = v[26].buf, .note_start = v[34].buf,
        .note_end = v[35].buf, .chunks = chunks, .param_gather = param_gather,
        .param_gather_rest = param_gather_rest, .shard_gather = shard_gather};
    const int32_t *bounds = v[0].buf, *starts = v[1].buf, *stops = v[2].buf;
    const uint8_t *has_state = v[29].buf;
    const double *states = v[28].buf;
    double *acc = v[27].buf, *results = v[30].buf, *snaps = v[31].buf, *g = v[33].buf;
    int32_t *noted = v[36].buf;
    stages = calloc(p, sizeof(Stage));
    ready = malloc(sizeof(int32_t) * (2 * (size_t)p + 2));
    if (!stages || !ready) { PyErr_NoMemory(); goto done; }
    int n_ready = 0;
    for (int i = 0; i < p; i++) {
        Stage *st = &stages[i];
        st->pos = bounds[i] + (starts ? starts[i] : 0);
        st->end = bounds[i + 1];
        st->stop = stops ? bounds[i] + stops[i] : -1;
        st->pp = acc[3 * i]; st->dp = acc[3 * i + 1]; st->bub = acc[3 * i + 2];
        st->dmax = -1.0;
        st->at = pr.dp_bounds[i];
        st->at_end = pr.dp_bounds[i + 1];
        st->g_end = g + (size_t)i * 2 * chunks;
        st->g_start = st->g_end + chunks;
        /* pipeline._gathers: each chunk's weight gather first on the DP stream, the part its first forward waits
         * for and then the rest */
        double de = 0.0, pg = pr.sec[param_gather], rest = pr.sec[param_gather_rest];
        for (int c = 0; c < chunks; c++) {
            st->g_start[c] = de;
            double s0 = de;
            de = de + (pg + take_more(&pr, st));
            st->g_end[c] = de;
            if (note(&pr, st, s0, de)) goto done;
            s0 = de;
            de = de + (rest + take_more(&pr, st));
            if (note(&pr, st, s0, de)) goto done;
        }
        st->de = de;
        if (has_state && has_state[i]) {
            const double *s = states + 10 * (size_t)i;
            st->e = s[0]; st->lf = s[1]; st->lb = s[2]; st->lp = s[3]; st->de = s[4]; st->dmax = s[5];
            st->dstart = s[6]; st->pp = s[7]; st->dp = s[8]; st->bub = s[9];
        }
    }
    for (int i = p - 1; i >= 0; i--) ready[n_ready++] = i;
    int finished = 0;
    while (n_ready) {
        int i = ready[--n_ready];
        Py_ssize_t k = step(&pr, &stages[i], ready, &n_ready, snaps + 10 * (size_t)i);
        if (k == -2) goto done;
        if (k == -1) finished++;
        else pr.waiter[k] = i;
    }
    for (int i = 0; i < p; i++) {
        Stage *st = &stages[i];
        double *r = results + 7 * (size_t)i;
        r[0] = st->e; r[1] = st->lp; r[2] = st->lf; r[3] = st->lb; r[4] = st->de; r[5] = st->dmax; r[6] = st->dstart;
        acc[3 * i] = st->pp; acc[3 * i + 1] = st->dp; acc[3 * i + 2] = st->bub;
        noted[i] = (int32_t)(st->at - pr.dp_bounds[i]);
    }
    result = PyLong_FromLong(finished);
done:
    for (int k = 0; k < got; k++) if (o[k] != Py_None) PyBuffer_Release(&v[k]);
    if (stages) {
        for (int i = 0; i < p; i++) {
            free(stages[i].deps_end); free(stages[i].deps_start); free(stages[i].deps_kind);
            free(stages[i].gath_end); free(stages[i].gath_start);
        }
        free(stages);
    }
    free(ready);
    return result;
}

/* fluid.stretch's overlaps: for every pair (g, h) of groups whose classes share a link, each task of g's overlap
 * with the running time of h, times the pair's factor, added per task in pair order (np.bincount's order). The
 * spans of each group lie on one axis, group h shifted by h·span; the running time before a time is found by
 * walking each group's sorted spans once per pair (the index np.searchsorted(e_axis, at, "right") gives), then
 * before[k] + max(at - s_axis[k], 0), as fluid._running computes it.
 * overlaps(s_axis, e_axis, before, start, end, bounds, g, h, factor, span, out) */
static PyObject *overlaps(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    double span;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOdO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &span, &o[10]))
        return NULL;
    o[9] = NULL;
    Py_buffer v[11];
    int got = 0, ok = 0;
    for (; got < 11; got++) {
        if (got == 9) continue;
        if (buf(o[got], &v[got], got == 10, "an argument")) goto done;
    }
    const double *s_axis = v[0].buf, *e_axis = v[1].buf, *before = v[2].buf, *start = v[3].buf,
                 *end = v[4].buf, *factor = v[8].buf;
    const int64_t *bounds = v[5].buf, *g = v[6].buf, *h = v[7].buf;
    double *out = v[10].buf;
    Py_ssize_t pairs = v[6].len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t n_axis = v[1].len / (Py_ssize_t)sizeof(double);
    for (Py_ssize_t q = 0; q < pairs; q++) {
        int64_t gg = g[q], hh = h[q];
        double shift = (double)hh * span, f = factor[q];
        Py_ssize_t ks = bounds[hh], ke = bounds[hh];
        for (Py_ssize_t task = bounds[gg]; task < bounds[gg + 1]; task++) {
            double at_e = end[task] + shift, at_s = start[task] + shift;
            while (ke < n_axis && !(e_axis[ke] > at_e)) ke++;
            while (ks < n_axis && !(e_axis[ks] > at_s)) ks++;
            double xe = at_e - s_axis[ke], xs = at_s - s_axis[ks];
            double re = before[ke] + (xe > 0.0 ? xe : 0.0), rs = before[ks] + (xs > 0.0 ? xs : 0.0);
            /* a product kept apart from the sum: never fused into one multiply-add (numpy rounds both) */
            volatile double part = (re - rs) * f;
            out[task] += part;
        }
    }
    ok = 1;
done:
    for (int k = 0; k < got; k++) if (k != 9) PyBuffer_Release(&v[k]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* fluid._pair_filling for many pairs of classes at once: the max-min fair shares of two running tasks (classes a,
 * b) over the links they use, the same floats from the same operations in the same order; NaN where the Python
 * one must answer (a class without weight, or listed twice in one row: fluid._filling).
 * pair_shares(weight, row_bounds, row_cls, row_u, a, b, out_a, out_b) */
static int row_util(const int64_t *cls, const double *u, int64_t lo, int64_t hi, int64_t k, double *got) {
    int n = 0;
    for (int64_t x = lo; x < hi; x++) if (cls[x] == k) { *got = u[x]; n++; }
    return n;
}

/* The pair (k, c)'s shares into *sa, *sb: 0, or 1 where fluid._filling must answer. r0, r1: scratch for 2·rows. */
static int fill_pair(const double *weight, const int64_t *bounds, const int64_t *row_cls, const double *row_u,
                     Py_ssize_t n_rows, int64_t k, int64_t c, double *r0, double *r1, double *sa, double *sb) {
    const double NONE = NAN;                 /* a row without that task */
    double w[2] = {weight[k], weight[c]};
    if (!(w[0] > 0 && w[1] > 0)) return 1;
    /* the rows as (k's utilisation, c's): k's rows in order, then c's without k */
    int n = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        double uk = 0.0, uc = 0.0;
        int nk = row_util(row_cls, row_u, bounds[r], bounds[r + 1], k, &uk);
        int nc = row_util(row_cls, row_u, bounds[r], bounds[r + 1], c, &uc);
        if (nk > 1 || nc > 1) return 1;
        if (nk) { r0[n] = uk; r1[n] = nc ? uc : NONE; n++; }
    }
    if (k != c) {
        for (Py_ssize_t r = 0; r < n_rows; r++) {
            double uk = 0.0, uc = 0.0;
            int nk = row_util(row_cls, row_u, bounds[r], bounds[r + 1], k, &uk);
            int nc = row_util(row_cls, row_u, bounds[r], bounds[r + 1], c, &uc);
            if (nc && !nk) { r0[n] = NONE; r1[n] = uc; n++; }
        }
    }
    /* first level: nothing frozen, each row fills at 1 / (q0 + q1) */
    double best = INFINITY;
    int full = -1;
    for (int j = 0; j < n; j++) {
        double slope;
        if (!isnan(r0[j]) && !isnan(r1[j])) slope = r0[j] / w[0] + r1[j] / w[1];
        else if (!isnan(r0[j])) slope = r0[j] / w[0];
        else slope = r1[j] / w[1];
        double at = 1.0 / slope;
        if (at < best) { best = at; full = j; }
    }
    int cap = w[0] <= w[1] ? 0 : 1;
    double frozen[2] = {NAN, NAN}, level;
    if (w[cap] <= best) {
        level = w[cap];
        frozen[cap] = 1.0;
    } else {
        level = best;
        if (!isnan(r0[full])) frozen[0] = level / w[0];
        if (!isnan(r1[full])) frozen[1] = level / w[1];
    }
    if (isnan(frozen[0]) || isnan(frozen[1])) {
        /* second level: the other task alone rises on the rows it is in, beside the frozen one's use */
        int f = isnan(frozen[0]) ? 1 : 0, oth = 1 - f;
        double x = frozen[f];
        const double *rf = f ? r1 : r0, *ro = oth ? r1 : r0;
        best = INFINITY;
        for (int j = 0; j < n; j++) {
            if (isnan(ro[j])) continue;
            double used = !isnan(rf[j]) ? rf[j] * x : 0.0;
            double at = (1.0 - used) / (ro[j] / w[oth]);
            if (at < best) best = at;
        }
        if (w[oth] <= best) frozen[oth] = 1.0;
        else frozen[oth] = (best > level ? best : level) / w[oth];
    }
    *sa = 0.0 > frozen[0] ? 0.0 : frozen[0];
    *sb = 0.0 > frozen[1] ? 0.0 : frozen[1];
    return 0;
}

static PyObject *pair_shares(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7])) return NULL;
    Py_buffer v[8];
    int got = 0, ok = 0;
    double *r0 = NULL, *r1 = NULL;
    for (; got < 8; got++) if (buf(o[got], &v[got], got >= 6, "an argument")) goto done;
    const double *weight = v[0].buf, *row_u = v[3].buf;
    const int64_t *bounds = v[1].buf, *row_cls = v[2].buf, *as = v[4].buf, *bs = v[5].buf;
    double *out_a = v[6].buf, *out_b = v[7].buf;
    Py_ssize_t n_rows = v[1].len / (Py_ssize_t)sizeof(int64_t) - 1, pairs = v[4].len / (Py_ssize_t)sizeof(int64_t);
    r0 = malloc(sizeof(double) * (2 * (size_t)n_rows + 1));
    r1 = malloc(sizeof(double) * (2 * (size_t)n_rows + 1));
    if (!r0 || !r1) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t q = 0; q < pairs; q++) {
        if (fill_pair(weight, bounds, row_cls, row_u, n_rows, as[q], bs[q], r0, r1, &out_a[q], &out_b[q]))
            out_a[q] = out_b[q] = NAN;
    }
    ok = 1;
done:
    free(r0); free(r1);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* fluid._pairs_of: (g, h, factor) for every two groups (of classes ``classes``) whose classes share a link, in the
 * order the Python loop makes them: groups in order, each class's conflicts in the order ``conf`` lists them (the
 * frozensets' iteration order), the other class's groups in order. None where a pair needs fluid._filling.
 * pairs_of(classes, weight, row_bounds, row_cls, row_u, conf_bounds, conf) -> (g, h, factor) lists or None */
static PyObject *pairs_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6])) return NULL;
    Py_buffer v[7];
    int got = 0;
    PyObject *result = NULL, *gl = NULL, *hl = NULL, *fl = NULL;
    double *r0 = NULL, *r1 = NULL, *slow_f = NULL;
    int64_t *first = NULL, *next = NULL, *slow_c = NULL, *slow_bounds = NULL;
    for (; got < 7; got++) if (buf(o[got], &v[got], 0, "an argument")) goto done;
    const int64_t *classes = v[0].buf, *bounds = v[2].buf, *row_cls = v[3].buf, *conf_bounds = v[5].buf,
                  *conf = v[6].buf;
    const double *weight = v[1].buf, *row_u = v[4].buf;
    Py_ssize_t n_groups = v[0].len / (Py_ssize_t)sizeof(int64_t), n_classes = v[1].len / (Py_ssize_t)sizeof(double);
    Py_ssize_t n_rows = v[2].len / (Py_ssize_t)sizeof(int64_t) - 1;
    Py_ssize_t n_conf = v[6].len / (Py_ssize_t)sizeof(int64_t);
    r0 = malloc(sizeof(double) * (2 * (size_t)n_rows + 1));
    r1 = malloc(sizeof(double) * (2 * (size_t)n_rows + 1));
    first = malloc(sizeof(int64_t) * ((size_t)n_classes + 1));
    next = malloc(sizeof(int64_t) * ((size_t)n_groups + 1));
    slow_c = malloc(sizeof(int64_t) * ((size_t)n_conf + 1));
    slow_f = malloc(sizeof(double) * ((size_t)n_conf + 1));
    slow_bounds = malloc(sizeof(int64_t) * ((size_t)n_classes + 1));
    if (!r0 || !r1 || !first || !next || !slow_c || !slow_f || !slow_bounds) { PyErr_NoMemory(); goto done; }
    /* each class's groups in order: a linked list through next[] from first[class] */
    int64_t *last = slow_bounds;             /* scratch: the last group of each class while linking */
    for (Py_ssize_t k = 0; k < n_classes; k++) first[k] = last[k] = -1;
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        int64_t k = classes[g];
        next[g] = -1;
        if (first[k] < 0) first[k] = g; else next[last[k]] = g;
        last[k] = g;
    }
    /* per class with groups, (c, factor) of each conflict c that has groups and slows it */
    int64_t at = 0;
    for (Py_ssize_t k = 0; k < n_classes; k++) {
        slow_bounds[k] = at;
        if (first[k] < 0) continue;
        double alone = 1.0;
        if (weight[k] > 0) { double inv = 1.0 / weight[k]; alone = inv < 1.0 ? inv : 1.0; }
        for (int64_t j = conf_bounds[k]; j < conf_bounds[k + 1]; j++) {
            int64_t c = conf[j], a = k <= c ? k : c, b = k <= c ? c : k;
            double sa, sb;
            if (fill_pair(weight, bounds, row_cls, row_u, n_rows, a, b, r0, r1, &sa, &sb)) { result = Py_None;
                Py_INCREF(result); goto done; }
            double share = k == a && k != b ? sa : sb;
            double factor = 1.0 / share - 1.0 / alone;
            if (factor > 0 && first[c] >= 0) { slow_c[at] = c; slow_f[at] = factor; at++; }
        }
    }
    slow_bounds[n_classes] = at;
    gl = PyList_New(0); hl = PyList_New(0); fl = PyList_New(0);
    if (!gl || !hl || !fl) goto done;
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        int64_t k = classes[g];
        int64_t hi = k + 1 < n_classes ? slow_bounds[k + 1] : at;
        for (int64_t j = slow_bounds[k]; j < hi; j++) {
            for (int64_t h = first[slow_c[j]]; h >= 0; h = next[h]) {
                if (h == g) continue;
                PyObject *x = PyLong_FromLongLong(g), *y = PyLong_FromLongLong(h), *z = PyFloat_FromDouble(slow_f[j]);
                int bad = !x || !y || !z || PyList_Append(gl, x) || PyList_Append(hl, y) || PyList_Append(fl, z);
                Py_XDECREF(x); Py_XDECREF(y); Py_XDECREF(z);
                if (bad) goto done;
            }
        }
    }
    result = PyTuple_Pack(3, gl, hl, fl);
done:
    Py_XDECREF(gl); Py_XDECREF(hl); Py_XDECREF(fl);
    free(r0); free(r1); free(first); free(next); free(slow_c); free(slow_f); free(slow_bounds);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Run a compiled program's stages (pipeline.run's loop); see _runner.c."},
    {"overlaps", overlaps, METH_VARARGS, "fluid.stretch's overlap of every pair of groups; see _runner.c."},
    {"pair_shares", pair_shares, METH_VARARGS, "fluid._pair_filling for many pairs of classes; see _runner.c."},
    {"pairs_of", pairs_of, METH_VARARGS, "fluid._pairs_of: every two groups whose classes share a link."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_runner", "pipeline.run's stage loop in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__runner(void) { return PyModule_Create(&module); }
