/* tier: fast */
/* src/server/pickle.c on hand-made bytes: refused globals, every opcode byte, truncation and corruption of a
 * valid observation pickle at every byte, the limits, memo sharing, cycles, numpy arrays / scalars / dtypes,
 * Python's dict-key equality, the PR #3048 format and the writers. Real pickles from Python: tests/test_pickle.sh. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "th.h"
#include "server/pickle.h"

/* ---- a byte builder ---- */
typedef struct { uint8_t b[1 << 16]; size_t n; } bb;
static void B(bb *x, const void *p, size_t n) { memcpy(x->b + x->n, p, n); x->n += n; }
static void B1(bb *x, int c) { x->b[x->n++] = (uint8_t)c; }
static void Bs(bb *x, const char *s) { B(x, s, strlen(s)); }
static void Bustr(bb *x, const char *s) { B1(x, 0x8c); B1(x, (int)strlen(s)); Bs(x, s); }  /* SHORT_BINUNICODE */
static void Bglobal(bb *x, const char *m, const char *n) { Bustr(x, m); Bustr(x, n); B1(x, 0x93); }
static void Bfloat(bb *x, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    B1(x, 'G');
    for (int i = 7; i >= 0; i--) B1(x, (int)(u >> (8 * i)) & 0xff);
}
static void Bbytes(bb *x, const void *p, size_t n) { B1(x, 'C'); B1(x, (int)n); B(x, p, n); }
/* numpy.dtype(name, False, True) with its BUILD state */
static void Bdtype(bb *x, const char *name, const char *order)
{
    Bglobal(x, "numpy", "dtype");
    Bustr(x, name);
    B1(x, 0x89);
    B1(x, 0x88);
    B1(x, 0x87);
    B1(x, 'R');
    B1(x, '(');
    B1(x, 'K'); B1(x, 3);
    Bustr(x, order);
    Bs(x, "NNN");
    Bs(x, "J\xff\xff\xff\xff" "J\xff\xff\xff\xff");
    B1(x, 'K'); B1(x, 0);
    B1(x, 't');
    B1(x, 'b');
}
/* numpy 1 _reconstruct + BUILD of a C-order array */
static void Barray(bb *x, const char *mod, const char *dname, const char *order, const int *shape, int nd,
                   const void *data, size_t n, int fortran)
{
    Bglobal(x, mod, "_reconstruct");
    Bglobal(x, "numpy", "ndarray");
    B1(x, 'K'); B1(x, 0); B1(x, 0x85);
    Bbytes(x, "b", 1);
    B1(x, 0x87);
    B1(x, 'R');
    B1(x, '(');
    B1(x, 'K'); B1(x, 1);
    B1(x, '(');
    for (int i = 0; i < nd; i++) { B1(x, 'M'); B1(x, shape[i] & 0xff); B1(x, shape[i] >> 8); }
    B1(x, 't');
    Bdtype(x, dname, order);
    B1(x, fortran ? 0x88 : 0x89);
    B1(x, 'B');
    for (int i = 0; i < 4; i++) B1(x, (int)(n >> (8 * i)) & 0xff);
    B(x, data, n);
    B1(x, 't');
    B1(x, 'b');
}
static void Bscalar(bb *x, const char *dname, const void *raw, size_t n)
{
    Bglobal(x, "numpy.core.multiarray", "scalar");
    Bdtype(x, dname, n == 1 ? "|" : "<");
    Bbytes(x, raw, n);
    B1(x, 0x86);
    B1(x, 'R');
}
static void Bhead(bb *x) { x->n = 0; B1(x, 0x80); B1(x, 4); }

static char err[512];
static pk_doc *parse(const bb *x, const pk_limits *l)
{
    pk_doc *d = NULL;
    err[0] = 0;
    if (pk_parse(x->b, x->n, l, &d, err, sizeof err)) return NULL;
    return d;
}
static int refused(const bb *x, const pk_limits *l, const char *needle)
{
    pk_doc *d = parse(x, l);
    if (d) { pk_free(d); return 0; }
    return needle ? strstr(err, needle) != NULL : err[0] != 0;
}

/* the SO-101-like observation the truncation / corruption sweeps use: every opcode family LeRobot's pickles use */
static const uint8_t frame[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static void observation(bb *x)
{
    Bhead(x);
    B1(x, 0x95);
    for (int i = 0; i < 8; i++) B1(x, 0);  /* FRAME of 0: a length hint */
    Bglobal(x, "lerobot.async_inference.helpers", "TimedObservation");
    B1(x, 0x94);
    B1(x, ')');
    B1(x, 0x81);
    B1(x, 0x94);
    B1(x, '}');
    B1(x, '(');
    Bustr(x, "timestamp"); Bfloat(x, 1724400000.25);
    Bustr(x, "timestep"); B1(x, 'J'); B(x, "\x10\x27\x00\x00", 4);
    Bustr(x, "observation");
    B1(x, '}');
    B1(x, '(');
    Bustr(x, "shoulder_pan.pos"); Bfloat(x, -12.5);
    Bustr(x, "gripper.pos");
    double g = 33.75;
    Bscalar(x, "f8", &g, 8);
    Bustr(x, "front");
    int sh[3] = {2, 2, 3};
    Barray(x, "numpy.core.multiarray", "u1", "|", sh, 3, frame, sizeof frame, 0);
    B1(x, 0x94);
    Bustr(x, "front_again");
    B1(x, 'h'); B1(x, 2);  /* the same array again */
    Bustr(x, "task"); Bustr(x, "pick the cube");
    B1(x, 'u');
    Bustr(x, "must_go"); B1(x, 0x88);
    B1(x, 'u');
    B1(x, 'b');
    B1(x, '.');
}

static void test_observation(void)
{
    bb x;
    observation(&x);
    pk_doc *d = parse(&x, NULL);
    TH_CHECK("observation_parses", d != NULL, "%s", err);
    if (!d) return;
    const pk_value *o = pk_root(d);
    TH_CHECK("observation_class", pk_is_class(o, "lerobot.async_inference.helpers", "TimedObservation") &&
             !strcmp(pk_type_name(o), "TimedObservation"), "got %s", pk_type_name(o));
    double t = 0;
    int64_t step = 0;
    TH_CHECK("observation_timestamp", !pk_number(pk_attr(o, "timestamp"), &t) && t == 1724400000.25, "%.17g", t);
    TH_CHECK("observation_timestep", !pk_int(pk_attr(o, "timestep"), &step) && step == 10000, "%lld", (long long)step);
    const pk_value *obs = pk_attr(o, "observation");
    double a = 0, gp = 0;
    TH_CHECK("observation_joint_float", !pk_number(pk_dict_get(obs, "shoulder_pan.pos"), &a) && a == -12.5, "%g", a);
    const pk_value *gv = pk_dict_get(obs, "gripper.pos");
    TH_CHECK("observation_joint_np_float64", gv && gv->kind == PK_NPSCALAR && !pk_number(gv, &gp) && gp == 33.75,
             "%s %g", pk_type_name(gv), gp);
    TH_CHECK("observation_np_float_is_not_int", pk_int(gv, &step) != 0, "pk_int accepted a float scalar");
    const pk_value *f = pk_dict_get(obs, "front");
    int ok = f && f->kind == PK_NDARRAY && f->u.arr.ndim == 3 && f->u.arr.shape[0] == 2 && f->u.arr.shape[2] == 3 &&
             f->u.arr.dt.kind == 'u' && f->u.arr.dt.itemsize == 1 && f->u.arr.nbytes == 12 &&
             !memcmp(f->u.arr.data, frame, 12) && pk_arr_get(f, 11) == 12;
    TH_CHECK("observation_frame", ok, "frame wrong (%s)", pk_type_name(f));
    TH_CHECK("observation_frame_zero_copy", f && f->u.arr.data >= x.b && f->u.arr.data < x.b + x.n, "data was copied");
    TH_CHECK("observation_memo_shared", pk_dict_get(obs, "front_again") == f, "GET made a copy");
    size_t tl = 0;
    const char *task = pk_str(pk_dict_get(obs, "task"), &tl);
    TH_CHECK("observation_task", task && tl == 13 && !strcmp(task, "pick the cube"), "task %s", task ? task : "NULL");
    const pk_value *mg = pk_attr(o, "must_go");
    TH_CHECK("observation_must_go", mg && mg->kind == PK_BOOL && mg->u.b == 1, "must_go");
    TH_CHECK("observation_missing_key", pk_dict_get(obs, "nope") == NULL && pk_attr(o, "nope") == NULL, "found a missing key");
    TH_CHECK("observation_format", pk_doc_format(d) == PK_FMT_PICKLE && pk_doc_protocol(d) == 4, "format %d proto %d",
             pk_doc_format(d), pk_doc_protocol(d));
    pk_free(d);

    /* every strict prefix is refused with a message; every byte replaced by a few values never crashes and
     * fails only with a message (ASan / UBSan watch the reads) */
    int pre_ok = 1, mut_ok = 1;
    size_t bad_at = 0;
    for (size_t n = 0; n < x.n; n++) {
        bb y = x;
        y.n = n;
        if (!refused(&y, NULL, NULL)) { pre_ok = 0; bad_at = n; break; }
    }
    TH_CHECK("truncated_at_every_byte", pre_ok, "prefix of %zu bytes accepted or refused without a message", bad_at);
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '(', '.', 'h', 'u', 'b', 'R', 0x93, 0x94};
    for (size_t i = 0; i < x.n && mut_ok; i++)
        for (size_t k = 0; k < sizeof vals; k++) {
            bb y = x;
            y.b[i] = vals[k];
            pk_doc *dd = NULL;
            err[0] = 0;
            if (pk_parse(y.b, y.n, NULL, &dd, err, sizeof err)) {
                if (!err[0]) { mut_ok = 0; bad_at = i; }
            } else pk_free(dd);
        }
    TH_CHECK("corrupted_at_every_byte", mut_ok, "byte %zu: failure without a message", bad_at);
}

static void test_refused_globals(void)
{
    static const char *const g[][2] = {
        {"posix", "system"}, {"os", "system"}, {"nt", "system"}, {"builtins", "eval"}, {"builtins", "exec"},
        {"builtins", "getattr"}, {"builtins", "__import__"}, {"builtins", "open"}, {"subprocess", "Popen"},
        {"subprocess", "check_output"}, {"__builtin__", "eval"}, {"torch._utils", "_rebuild_tensor_v2"},
        {"torch", "Tensor.float"}, {"numpy.core.multiarray", "fromfile"}, {"numpy", "load"},
        {"numpy.core.multiarray", "_reconstruct.__globals__"}, {"copyreg", "__reduce_ex__"}, {"builtins", "set"},
        {"lerobot.async_inference.helpers", "TimedData"}, {"lerobot.async_inference.helpers", "os"},
        {"collections", "namedtuple"}, {"functools", "partial"}};
    int ok = 1;
    char name[160];
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        snprintf(name, sizeof name, "%s.%s", g[i][0], g[i][1]);
        bb x;
        /* GLOBAL (text) and STACK_GLOBAL, each followed by a REDUCE that must never be reached */
        Bhead(&x);
        B1(&x, 'c'); Bs(&x, g[i][0]); B1(&x, '\n'); Bs(&x, g[i][1]); B1(&x, '\n');
        Bustr(&x, "touch /tmp/pwned"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
        int a = refused(&x, NULL, name) && strstr(err, "refused");
        Bhead(&x);
        Bglobal(&x, g[i][0], g[i][1]);
        Bustr(&x, "x"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
        int b = refused(&x, NULL, name);
        if (!a || !b) {
            ok = 0;
            printf("  %s: %s\n", name, err);
        }
    }
    TH_CHECK("refused_globals_named", ok, "a global was accepted or its error did not name it");

    /* allowed globals used the wrong way */
    bb x;
    Bhead(&x); Bglobal(&x, "numpy", "dtype"); Bustr(&x, "O8"); B1(&x, 0x89); B1(&x, 0x88); B1(&x, 0x87); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("dtype_object_refused", refused(&x, NULL, "'O8' is not supported"), "%s", err);
    Bhead(&x); Bglobal(&x, "numpy", "dtype"); Bustr(&x, "U5"); B1(&x, 0x89); B1(&x, 0x88); B1(&x, 0x87); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("dtype_unicode_refused", refused(&x, NULL, "'U5'"), "%s", err);
    Bhead(&x); Bglobal(&x, "lerobot.async_inference.helpers", "TimedAction"); Bustr(&x, "x"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("reduce_on_dataclass_refused", refused(&x, NULL, "NEWOBJ + BUILD"), "%s", err);
    Bhead(&x); Bglobal(&x, "numpy", "ndarray"); B1(&x, ')'); B1(&x, 0x81); B1(&x, '.');
    TH_CHECK("newobj_ndarray_refused", refused(&x, NULL, "NEWOBJ of a ndarray is refused"), "%s", err);
    Bhead(&x); Bglobal(&x, "lerobot.async_inference.helpers", "TimedAction"); Bustr(&x, "a"); B1(&x, 0x85); B1(&x, 0x81); B1(&x, '.');
    TH_CHECK("newobj_with_args_refused", refused(&x, NULL, "no constructor arguments"), "%s", err);
    Bhead(&x); Bglobal(&x, "_codecs", "encode"); Bustr(&x, "abc"); Bustr(&x, "utf-8"); B1(&x, 0x86); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("codecs_encode_only_latin1", refused(&x, NULL, "latin1"), "%s", err);
    Bhead(&x); Bglobal(&x, "lerobot.configs.types", "FeatureType"); Bustr(&x, "EVIL"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("enum_unknown_value_refused", refused(&x, NULL, "'EVIL' is not a FeatureType"), "%s", err);
    Bhead(&x); Bustr(&x, "posix.system"); Bustr(&x, "ls"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("reduce_on_non_global_refused", refused(&x, NULL, "not an allowed global"), "%s", err);
    /* the enum allowed: FeatureType('VISUAL') */
    Bhead(&x); Bglobal(&x, "lerobot.configs.types", "FeatureType"); Bustr(&x, "VISUAL"); B1(&x, 0x85); B1(&x, 'R'); B1(&x, '.');
    pk_doc *d = parse(&x, NULL);
    const pk_value *v = pk_root(d);
    TH_CHECK("enum_member", d && pk_is_class(v, NULL, "FeatureType") && v->u.obj.args && pk_len(v->u.obj.args) == 1 &&
             !strcmp(pk_str(pk_item(v->u.obj.args, 0), NULL), "VISUAL"), "%s", err);
    pk_free(d);
}

static int supported(int op)
{
    return strchr("(.IJKMNRXabcd}eghjlpqrstu)GBC]", op) != NULL ||
           (op >= 0x80 && op <= 0x98 && op != 0x82 && op != 0x83 && op != 0x84 && op != 0x8f && op != 0x90 &&
            op != 0x91 && op != 0x97 && op != 0x98);
}

static void test_opcodes(void)
{
    /* every byte as the first opcode after PROTO: a supported one may fail for lack of arguments, an unsupported
     * one must be refused by name (or as an unknown byte) */
    int ok = 1;
    for (int op = 0; op < 256; op++) {
        if (op == 0) continue;
        bb x;
        Bhead(&x);
        B1(&x, op);
        B1(&x, '.');
        pk_doc *d = parse(&x, NULL);
        if (d) { pk_free(d); continue; }
        if (!err[0]) { ok = 0; printf("  0x%02x: no message\n", op); continue; }
        if (!supported(op) && !strstr(err, "not supported") && !strstr(err, "unknown opcode") && !strstr(err, "refused")) {
            ok = 0;
            printf("  0x%02x: %s\n", op, err);
        }
    }
    TH_CHECK("every_opcode_byte", ok, "an opcode failed without the expected message");
    bb x;
    Bhead(&x); B1(&x, 0x97); B1(&x, '.');
    TH_CHECK("next_buffer_named", refused(&x, NULL, "NEXT_BUFFER") && strstr(err, "out-of-band"), "%s", err);
    Bhead(&x); B1(&x, 0x98); B1(&x, '.');
    TH_CHECK("readonly_buffer_named", refused(&x, NULL, "READONLY_BUFFER"), "%s", err);
    Bhead(&x); B1(&x, 'Q'); B1(&x, '.');
    TH_CHECK("persid_named", refused(&x, NULL, "BINPERSID"), "%s", err);
    Bhead(&x); B1(&x, 'i'); Bs(&x, "os\nsystem\n"); B1(&x, '.');
    TH_CHECK("inst_refused", refused(&x, NULL, "INST"), "%s", err);
    Bhead(&x); B1(&x, 0x8f); B1(&x, '.');
    TH_CHECK("empty_set_named", refused(&x, NULL, "EMPTY_SET"), "%s", err);
    Bhead(&x); B1(&x, 0xf0); B1(&x, '.');
    TH_CHECK("unknown_opcode_named", refused(&x, NULL, "unknown opcode 0xf0"), "%s", err);
    Bhead(&x); B1(&x, 'N'); B1(&x, '.'); B1(&x, 'N');
    TH_CHECK("bytes_after_stop", refused(&x, NULL, "1 bytes after STOP"), "%s", err);
    Bhead(&x); B1(&x, 'N'); B1(&x, 'N'); B1(&x, '.');
    TH_CHECK("stop_with_two_values", refused(&x, NULL, "2 values on the stack"), "%s", err);
    Bhead(&x); B1(&x, '('); B1(&x, 'N'); B1(&x, '.');
    TH_CHECK("stop_with_open_mark", refused(&x, NULL, "open MARK"), "%s", err);
    Bhead(&x); B1(&x, '.');
    TH_CHECK("stop_on_empty_stack", refused(&x, NULL, "0 values"), "%s", err);
    x.n = 0; B1(&x, 0x80); B1(&x, 6); B1(&x, 'N'); B1(&x, '.');
    TH_CHECK("protocol_6_refused", refused(&x, NULL, "protocol 6"), "%s", err);
    Bhead(&x); B1(&x, '('); B1(&x, 'N'); B1(&x, 'e'); B1(&x, '.');
    TH_CHECK("appends_without_list", refused(&x, NULL, "APPENDS"), "%s", err);
    Bhead(&x); B1(&x, ']'); B1(&x, '('); B1(&x, 'a'); B1(&x, '.');
    TH_CHECK("append_across_mark", refused(&x, NULL, "underflow"), "%s", err);
    Bhead(&x); B1(&x, 'N'); B1(&x, '}'); B1(&x, 'N'); B1(&x, 'N'); B1(&x, 's'); B1(&x, '.');
    TH_CHECK("setitem_on_dict", refused(&x, NULL, "2 values"), "a dict under a None: %s", err);
    Bhead(&x); B1(&x, 'N'); B1(&x, 'N'); B1(&x, 'N'); B1(&x, 's'); B1(&x, '.');
    TH_CHECK("setitem_on_none", refused(&x, NULL, "SETITEM on a None"), "%s", err);
    Bhead(&x); B1(&x, 'h'); B1(&x, 7); B1(&x, '.');
    TH_CHECK("get_unset_memo", refused(&x, NULL, "memo entry 7 was never stored"), "%s", err);
    Bhead(&x); B1(&x, 0x94); B1(&x, '.');
    TH_CHECK("memoize_empty_stack", refused(&x, NULL, "underflow"), "%s", err);
    /* protocol 0/1 text forms: INT, PUT, GET, GLOBAL lines */
    x.n = 0; Bs(&x, "(I01\nI00\nI-42\nI9223372036854775807\np3\ng3\nt.");
    pk_doc *d = parse(&x, NULL);
    const pk_value *t = pk_root(d);
    int64_t i3 = 0, i4 = 0;
    TH_CHECK("protocol0_text_ints", d && pk_len(t) == 5 && pk_item(t, 0)->kind == PK_BOOL && pk_item(t, 0)->u.b == 1 &&
             pk_item(t, 1)->u.b == 0 && !pk_int(pk_item(t, 2), &i3) && i3 == -42 && !pk_int(pk_item(t, 3), &i4) &&
             i4 == INT64_MAX && pk_item(t, 4) == pk_item(t, 3) && pk_doc_protocol(d) == 0, "%s", err);
    pk_free(d);
    x.n = 0; Bs(&x, "I9223372036854775808\n.");
    TH_CHECK("protocol0_int_overflow", refused(&x, NULL, "64-bit"), "%s", err);
    x.n = 0; Bs(&x, "cposix\nsystem");
    TH_CHECK("global_line_truncated", refused(&x, NULL, "truncated"), "%s", err);
}

static void test_ints_floats_strings(void)
{
    bb x;
    /* LONG1: 2^63 - 1, -2^63, 0 (zero bytes), 9 bytes sign-extended; 2^63 refused */
    Bhead(&x); B1(&x, '(');
    B1(&x, 0x8a); B1(&x, 8); B(&x, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
    B1(&x, 0x8a); B1(&x, 8); B(&x, "\x00\x00\x00\x00\x00\x00\x00\x80", 8);
    B1(&x, 0x8a); B1(&x, 0);
    B1(&x, 0x8b); B(&x, "\x09\x00\x00\x00", 4); B(&x, "\xfe\xff\xff\xff\xff\xff\xff\xff\xff", 9);
    B1(&x, 'J'); B(&x, "\xff\xff\xff\xff", 4);
    B1(&x, 'M'); B(&x, "\xff\xff", 2);
    Bfloat(&x, -0.0);
    B1(&x, 'l'); B1(&x, '.');
    pk_doc *d = parse(&x, NULL);
    const pk_value *l = pk_root(d);
    int64_t v[6] = {0};
    int ok = d && pk_len(l) == 7;
    for (int i = 0; ok && i < 6; i++) ok = !pk_int(pk_item(l, (size_t)i), &v[i]);
    ok = ok && v[0] == INT64_MAX && v[1] == INT64_MIN && v[2] == 0 && v[3] == -2 && v[4] == -1 && v[5] == 65535;
    ok = ok && pk_item(l, 6)->kind == PK_FLOAT && signbit(pk_item(l, 6)->u.f);
    TH_CHECK("integers_and_floats", ok, "%s", err);
    pk_free(d);
    Bhead(&x); B1(&x, 0x8a); B1(&x, 9); B(&x, "\x00\x00\x00\x00\x00\x00\x00\x80\x00", 9); B1(&x, '.');
    TH_CHECK("long1_2_63_refused", refused(&x, NULL, "does not fit in 64 bits"), "%s", err);
    Bhead(&x); B1(&x, 0x8b); B(&x, "\x00\x00\x01\x00", 4); B1(&x, '.');
    TH_CHECK("long4_huge_refused", refused(&x, NULL, "65536 bytes"), "%s", err);
    Bhead(&x); B1(&x, 0x8c); B1(&x, 2); B(&x, "\xc3\x28", 2); B1(&x, '.');
    TH_CHECK("str_bad_utf8_refused", refused(&x, NULL, "UTF-8"), "%s", err);
    Bhead(&x); B1(&x, 'X'); B(&x, "\xff\xff\xff\x7f", 4); B1(&x, '.');
    TH_CHECK("binunicode_past_input", refused(&x, NULL, "max_str_bytes"), "%s", err);
    Bhead(&x); B1(&x, 'B'); B(&x, "\x00\x00\x10\x00", 4); B1(&x, '.');
    TH_CHECK("binbytes_past_input", refused(&x, NULL, "truncated"), "%s", err);
    Bhead(&x); B1(&x, 0x8e); B(&x, "\xff\xff\xff\xff\xff\xff\xff\xff", 8); B1(&x, '.');
    TH_CHECK("binbytes8_huge", refused(&x, NULL, "max_array_bytes"), "%s", err);
    /* a str holding a NUL keeps its length */
    Bhead(&x); B1(&x, 0x8c); B1(&x, 3); B(&x, "a\0b", 3); B1(&x, '.');
    d = parse(&x, NULL);
    size_t n = 0;
    const char *s = pk_str(pk_root(d), &n);
    TH_CHECK("str_with_nul", s && n == 3 && s[1] == 0 && s[2] == 'b' && s[3] == 0, "%s", err);
    pk_free(d);
    /* protocol-2 bytes: _codecs.encode('\xe9\x00A', 'latin1') */
    Bhead(&x); Bglobal(&x, "_codecs", "encode"); B1(&x, 0x8c); B1(&x, 4); B(&x, "\xc3\xa9\x00" "A", 4); Bustr(&x, "latin1");
    B1(&x, 0x86); B1(&x, 'R'); B1(&x, '.');
    d = parse(&x, NULL);
    const pk_value *b = pk_root(d);
    TH_CHECK("codecs_latin1_bytes", d && b->kind == PK_BYTES && b->u.bytes.len == 3 && b->u.bytes.p[0] == 0xe9 &&
             b->u.bytes.p[1] == 0 && b->u.bytes.p[2] == 'A', "%s", err);
    pk_free(d);
    Bhead(&x); Bglobal(&x, "_codecs", "encode"); Bustr(&x, "\xc4\x80"); Bustr(&x, "latin1"); B1(&x, 0x86); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("codecs_beyond_latin1", refused(&x, NULL, "beyond latin-1"), "%s", err);
}

static void test_dict_keys(void)
{
    /* {1: 'a', True: 'b', 1.0: 'c', 'k': 'd', b'k': 'e', 2.5: 'f'} -> Python keeps key 1 with 'c' in first place */
    bb x;
    Bhead(&x); B1(&x, '}'); B1(&x, '(');
    B1(&x, 'K'); B1(&x, 1); Bustr(&x, "a");
    B1(&x, 0x88); Bustr(&x, "b");
    Bfloat(&x, 1.0); Bustr(&x, "c");
    Bustr(&x, "k"); Bustr(&x, "d");
    Bbytes(&x, "k", 1); Bustr(&x, "e");
    Bfloat(&x, 2.5); Bustr(&x, "f");
    B1(&x, 'u'); B1(&x, '.');
    pk_doc *d = parse(&x, NULL);
    const pk_value *m = pk_root(d);
    int ok = d && pk_len(m) == 4 && pk_dict_key(m, 0)->kind == PK_INT && !strcmp(pk_str(pk_dict_val(m, 0), NULL), "c") &&
             !strcmp(pk_str(pk_dict_get(m, "k"), NULL), "d") && !strcmp(pk_str(pk_dict_val(m, 2), NULL), "e") &&
             pk_dict_key(m, 3)->kind == PK_FLOAT;
    TH_CHECK("dict_python_key_equality", ok, "%s (n=%zu)", err, pk_len(m));
    pk_free(d);
    /* a list as a key is refused (Python: unhashable) */
    Bhead(&x); B1(&x, '}'); B1(&x, ']'); B1(&x, 'N'); B1(&x, 's'); B1(&x, '.');
    TH_CHECK("dict_unhashable_key", refused(&x, NULL, "dict key of type list"), "%s", err);
    /* a large dict: 3000 keys, each found again */
    Bhead(&x); B1(&x, '}'); B1(&x, '(');
    for (int i = 0; i < 3000; i++) { char k[16]; snprintf(k, sizeof k, "k%d", i); Bustr(&x, k); B1(&x, 'M'); B1(&x, i & 0xff); B1(&x, i >> 8); }
    B1(&x, 'u'); B1(&x, '.');
    d = parse(&x, NULL);
    ok = d && pk_len(pk_root(d)) == 3000;
    for (int i = 0; ok && i < 3000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        int64_t v = -1;
        ok = !pk_int(pk_dict_get(pk_root(d), k), &v) && v == i;
    }
    TH_CHECK("dict_3000_keys", ok, "%s", err);
    pk_free(d);
}

static void test_limits_and_sharing(void)
{
    pk_limits l;
    bb x;
    /* nesting: 100 lists inside each other */
    pk_limits_default(&l);
    Bhead(&x);
    for (int i = 0; i < 100; i++) B1(&x, ']');
    for (int i = 0; i < 99; i++) B1(&x, 'a');
    B1(&x, '.');
    TH_CHECK("max_depth_named", refused(&x, &l, "max_depth (32)"), "%s", err);
    l.max_depth = 128;
    pk_doc *d = parse(&x, &l);
    TH_CHECK("max_depth_raised", d && pk_root(d)->depth == 99, "%s", err);
    pk_free(d);
    /* items: a list of 1000 Nones under max_items 100 */
    pk_limits_default(&l);
    l.max_items = 100;
    Bhead(&x); B1(&x, ']'); B1(&x, '(');
    for (int i = 0; i < 1000; i++) B1(&x, 'N');
    B1(&x, 'e'); B1(&x, '.');
    TH_CHECK("max_items_named", refused(&x, &l, "max_items (100)"), "%s", err);
    /* memo "billion laughs": L0 = [], L(k+1) = [Lk, Lk] for 40 levels -> 2^40 values as a tree */
    pk_limits_default(&l);
    Bhead(&x); B1(&x, ']'); B1(&x, 'q'); B1(&x, 0);
    for (int k = 0; k < 40; k++) {
        B1(&x, ']'); B1(&x, '('); B1(&x, 'h'); B1(&x, k); B1(&x, 'h'); B1(&x, k); B1(&x, 'e'); B1(&x, 'q'); B1(&x, k + 1);
    }
    B1(&x, '0'); /* POP is unsupported, but the tree must be refused before it */
    B1(&x, '.');
    TH_CHECK("memo_expansion_refused", refused(&x, &l, "value tree larger than max_items"), "%s", err);
    /* sharing: {'a': X, 'b': X} with X = [1, 2, 3] memoized, counted twice, one object */
    Bhead(&x); B1(&x, '}'); B1(&x, '(');
    Bustr(&x, "a"); B1(&x, ']'); B1(&x, 0x94); B1(&x, '('); B1(&x, 'K'); B1(&x, 1); B1(&x, 'K'); B1(&x, 2); B1(&x, 'K'); B1(&x, 3); B1(&x, 'e');
    Bustr(&x, "b"); B1(&x, 'h'); B1(&x, 0);
    B1(&x, 'u'); B1(&x, '.');
    d = parse(&x, NULL);
    const pk_value *m = pk_root(d);
    TH_CHECK("memo_shared_reference", d && pk_dict_get(m, "a") == pk_dict_get(m, "b") && pk_len(pk_dict_get(m, "a")) == 3 &&
             m->size == 1 + 2 * 1 + 2 * 4, "%s (size %zu)", err, m ? m->size : 0);
    pk_free(d);
    /* a list appended to itself, and a two-list cycle */
    Bhead(&x); B1(&x, ']'); B1(&x, 0x94); B1(&x, 'h'); B1(&x, 0); B1(&x, 'a'); B1(&x, '.');
    TH_CHECK("self_cycle_refused", refused(&x, NULL, "containing itself"), "%s", err);
    Bhead(&x);
    B1(&x, ']'); B1(&x, 0x94); B1(&x, ']'); B1(&x, 0x94); B1(&x, 'a');  /* L0.append(L1) */
    B1(&x, 'h'); B1(&x, 1); B1(&x, 'h'); B1(&x, 0); B1(&x, 'a');         /* L1.append(L0) */
    B1(&x, '.');
    TH_CHECK("two_cycle_refused", refused(&x, NULL, "already part of another value"), "%s", err);
    /* a dataclass whose field holds itself */
    Bhead(&x); Bglobal(&x, "lerobot.async_inference.helpers", "TimedAction"); B1(&x, ')'); B1(&x, 0x81); B1(&x, 0x94);
    B1(&x, '}'); Bustr(&x, "me"); B1(&x, 'h'); B1(&x, 0); B1(&x, 's'); B1(&x, 'b'); B1(&x, '.');
    TH_CHECK("object_self_reference_refused", refused(&x, NULL, "already part of another value"), "%s", err);
    /* memo index limit */
    pk_limits_default(&l);
    Bhead(&x); B1(&x, 'N'); B1(&x, 'r'); B(&x, "\x00\x00\x10\x00", 4); B1(&x, '.');
    TH_CHECK("max_memo_named", refused(&x, &l, "max_memo (65536)"), "%s", err);
    l.max_memo = 1 << 21;
    d = parse(&x, &l);
    TH_CHECK("max_memo_raised", d != NULL, "%s", err);
    pk_free(d);
    /* string and array byte limits, input limit */
    pk_limits_default(&l);
    l.max_str_bytes = 4;
    Bhead(&x); Bustr(&x, "hello"); B1(&x, '.');
    TH_CHECK("max_str_named", refused(&x, &l, "max_str_bytes (4)"), "%s", err);
    pk_limits_default(&l);
    l.max_array_bytes = 4;
    Bhead(&x); Bbytes(&x, "hello", 5); B1(&x, '.');
    TH_CHECK("max_array_bytes_named", refused(&x, &l, "max_array_bytes (4)"), "%s", err);
    pk_limits_default(&l);
    l.max_input = 3;
    Bhead(&x); B1(&x, 'N'); B1(&x, '.');
    TH_CHECK("max_input_named", refused(&x, &l, "max_input (3)"), "%s", err);
    /* BUILD twice, BUILD on a dict */
    Bhead(&x); Bglobal(&x, "lerobot.async_inference.helpers", "TimedAction"); B1(&x, ')'); B1(&x, 0x81);
    B1(&x, '}'); B1(&x, 'b'); B1(&x, '}'); B1(&x, 'b'); B1(&x, '.');
    TH_CHECK("build_twice_refused", refused(&x, NULL, "BUILD applied twice"), "%s", err);
    Bhead(&x); B1(&x, '}'); B1(&x, '}'); B1(&x, 'b'); B1(&x, '.');
    TH_CHECK("build_on_dict_refused", refused(&x, NULL, "BUILD on a dict"), "%s", err);
    /* a small error buffer is still terminated */
    char small[8];
    memset(small, 'x', sizeof small);
    pk_doc *dd = NULL;
    int rc = pk_parse((const uint8_t *)"\x80\x04\xf0.", 4, NULL, &dd, small, sizeof small);
    TH_CHECK("small_error_buffer", rc == -1 && memchr(small, 0, sizeof small) != NULL && !dd, "rc %d", rc);
    TH_CHECK("empty_input", pk_parse((const uint8_t *)"", 0, NULL, &dd, err, sizeof err) == -1 && err[0], "no error");
}

static void test_numpy(void)
{
    bb x;
    /* big-endian float32 array, float16 array, bool array, int64 scalar, numpy 2 module names */
    const uint8_t be[8] = {0x3f, 0xc0, 0, 0, 0xc0, 0x20, 0, 0};  /* 1.5, -2.5 */
    const uint16_t h[2] = {0x3c00, 0xc000};                          /* 1.0, -2.0 */
    const uint8_t bo[3] = {1, 0, 1};
    int64_t big = -5;
    int s2[1] = {2}, s3[1] = {3};
    Bhead(&x); B1(&x, '(');
    Barray(&x, "numpy._core.multiarray", "f4", ">", s2, 1, be, 8, 0);
    Barray(&x, "numpy.core.multiarray", "f2", "<", s2, 1, h, 4, 0);
    Barray(&x, "numpy._core.multiarray", "b1", "|", s3, 1, bo, 3, 0);
    Bglobal(&x, "numpy._core.multiarray", "scalar"); Bdtype(&x, "i8", "<"); Bbytes(&x, &big, 8); B1(&x, 0x86); B1(&x, 'R');
    B1(&x, 't'); B1(&x, '.');
    pk_doc *d = parse(&x, NULL);
    const pk_value *t = pk_root(d);
    int64_t iv = 0;
    float f0 = 0;
    if (d && pk_len(t) == 4) memcpy(&f0, pk_item(t, 0)->u.arr.data, 4);
    /* the big-endian array comes out in host order (numpy does the same on unpickling) */
    int ok = d && pk_len(t) == 4 && pk_item(t, 0)->u.arr.dt.order == '<' && f0 == 1.5f && pk_arr_get(pk_item(t, 0), 0) == 1.5 &&
             pk_arr_get(pk_item(t, 0), 1) == -2.5 && pk_arr_get(pk_item(t, 1), 1) == -2.0 &&
             pk_arr_get(pk_item(t, 2), 0) == 1 && pk_arr_get(pk_item(t, 2), 1) == 0 && !pk_int(pk_item(t, 3), &iv) && iv == -5;
    TH_CHECK("numpy_arrays_byte_order_f16_bool_scalar", ok, "%s", err);
    pk_free(d);
    /* protocol 5: _frombuffer(bytearray, dtype, shape, 'C') */
    Bhead(&x); Bglobal(&x, "numpy._core.numeric", "_frombuffer");
    B1(&x, '('); B1(&x, 0x96); B(&x, "\x06\0\0\0\0\0\0\0", 8); B(&x, frame, 6); Bdtype(&x, "u1", "|");
    B1(&x, 'K'); B1(&x, 2); B1(&x, 'K'); B1(&x, 3); B1(&x, 0x86); Bustr(&x, "C"); B1(&x, 't'); B1(&x, 'R'); B1(&x, '.');
    d = parse(&x, NULL);
    const pk_value *a = pk_root(d);
    TH_CHECK("numpy_frombuffer_protocol5", d && a->kind == PK_NDARRAY && a->u.arr.ndim == 2 && a->u.arr.shape[1] == 3 &&
             pk_arr_get(a, 5) == 6, "%s", err);
    pk_free(d);
    /* wrong data length, Fortran order (2-D refused, 1-D accepted), a too-high ndim, negative shape */
    int s23[2] = {2, 3};
    Bhead(&x); Barray(&x, "numpy.core.multiarray", "u1", "|", s23, 2, frame, 5, 0); B1(&x, '.');
    TH_CHECK("numpy_data_length_checked", refused(&x, NULL, "has 5 bytes, its shape and dtype need 6"), "%s", err);
    Bhead(&x); Barray(&x, "numpy.core.multiarray", "u1", "|", s23, 2, frame, 6, 1); B1(&x, '.');
    TH_CHECK("numpy_fortran_refused", refused(&x, NULL, "Fortran-order"), "%s", err);
    Bhead(&x); Barray(&x, "numpy.core.multiarray", "u1", "|", s3, 1, frame, 3, 1); B1(&x, '.');
    d = parse(&x, NULL);
    TH_CHECK("numpy_fortran_1d_accepted", d != NULL, "%s", err);
    pk_free(d);
    int s17[17];
    for (int i = 0; i < 17; i++) s17[i] = 1;
    Bhead(&x); Barray(&x, "numpy.core.multiarray", "u1", "|", s17, 17, frame, 1, 0); B1(&x, '.');
    TH_CHECK("numpy_ndim_limit", refused(&x, NULL, "17 dimensions"), "%s", err);
    Bhead(&x); Bdtype(&x, "f4", "|"); B1(&x, '.');
    TH_CHECK("numpy_dtype_order_needed", refused(&x, NULL, "needs a byte order"), "%s", err);
    Bhead(&x); Bglobal(&x, "numpy.core.multiarray", "scalar"); Bdtype(&x, "f8", "<"); Bbytes(&x, "abc", 3); B1(&x, 0x86); B1(&x, 'R'); B1(&x, '.');
    TH_CHECK("numpy_scalar_length_checked", refused(&x, NULL, "has 3 bytes, its dtype needs 8"), "%s", err);
    /* a 0-d ndarray that never got its BUILD is numpy's empty int8 array, as in Python */
    Bhead(&x); Bglobal(&x, "numpy.core.multiarray", "_reconstruct"); Bglobal(&x, "numpy", "ndarray"); B1(&x, 'K'); B1(&x, 0);
    B1(&x, 0x85); Bbytes(&x, "b", 1); B1(&x, 0x87); B1(&x, 'R'); B1(&x, '.');
    d = parse(&x, NULL);
    a = pk_root(d);
    TH_CHECK("numpy_unbuilt_reconstruct", d && a->kind == PK_NDARRAY && a->u.arr.count == 0 && a->u.arr.ndim == 1, "%s", err);
    pk_free(d);
}

static void put_be32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v; }

static void safe_msg(bb *x, const char *json, const char *st_header, const void *data, size_t dn)
{
    x->n = 4;
    put_be32(x->b, (uint32_t)strlen(json));
    Bs(x, json);
    if (st_header) {
        uint64_t hl = strlen(st_header);
        for (int i = 0; i < 8; i++) B1(x, (int)(hl >> (8 * i)) & 0xff);
        Bs(x, st_header);
        B(x, data, dn);
    }
}

static void test_safe_format(void)
{
    bb x;
    const uint8_t img[12] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2};
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": 12.0, \"timestep\": 7, \"must_go\": true, "
             "\"scalar_data\": {\"shoulder_pan.pos\": 1.25, \"task\": \"pick\"}, \"numpy_keys\": [\"front\"]}",
             "{\"front\":{\"dtype\":\"U8\",\"shape\":[2,2,3],\"data_offsets\":[0,12]}}", img, 12);
    pk_doc *d = parse(&x, NULL);
    const pk_value *o = pk_root(d);
    const pk_value *obs = pk_attr(o, "observation"), *f = pk_dict_get(obs, "front");
    double j = 0;
    int64_t step = 0;
    int ok = d && pk_doc_format(d) == PK_FMT_SAFE && pk_is_class(o, "lerobot.async_inference.helpers", "TimedObservation") &&
             pk_attr(o, "timestamp")->kind == PK_FLOAT && pk_attr(o, "timestamp")->u.f == 12.0 &&
             !pk_int(pk_attr(o, "timestep"), &step) && step == 7 && pk_attr(o, "must_go")->u.b == 1 &&
             !pk_number(pk_dict_get(obs, "shoulder_pan.pos"), &j) && j == 1.25 && f && f->kind == PK_NDARRAY &&
             f->u.arr.ndim == 3 && pk_arr_get(f, 0) == 9 && !strcmp(pk_str(pk_dict_get(obs, "task"), NULL), "pick");
    TH_CHECK("safe_observation", ok, "%s", err);
    pk_free(d);
    safe_msg(&x, "{\"type\": \"RemotePolicyConfig\", \"policy_type\": \"act\", \"pretrained_name_or_path\": \"m\", "
             "\"lerobot_features\": {\"observation.state\": {\"dtype\": \"float32\", \"shape\": [6], \"names\": [\"a\"]}, "
             "\"observation.images.front\": {\"type\": \"VISUAL\", \"shape\": [3, 480, 640]}}, \"actions_per_chunk\": 50, "
             "\"device\": \"cuda\", \"rename_map\": {}}", NULL, NULL, 0);
    d = parse(&x, NULL);
    o = pk_root(d);
    const pk_value *lf = pk_attr(o, "lerobot_features"), *pf = pk_dict_get(lf, "observation.images.front");
    int64_t apc = 0;
    ok = d && pk_is_class(o, NULL, "RemotePolicyConfig") && !pk_int(pk_attr(o, "actions_per_chunk"), &apc) && apc == 50 &&
         pk_is_class(pf, "lerobot.configs.types", "PolicyFeature") && pk_is_class(pk_attr(pf, "type"), NULL, "FeatureType") &&
         pk_len(pk_attr(pf, "shape")) == 3 && pk_dict_get(lf, "observation.state")->kind == PK_DICT &&
         !strcmp(pk_str(pk_attr(o, "device"), NULL), "cuda");
    TH_CHECK("safe_config", ok, "%s", err);
    pk_free(d);
    safe_msg(&x, "{\"type\": \"TimedActions\", \"actions\": [{\"timestamp\": 1.5, \"timestep\": 3}]}", NULL, NULL, 0);
    TH_CHECK("safe_actions_missing_tensor", refused(&x, NULL, "tensor 'action_0' is missing"), "%s", err);
    safe_msg(&x, "{\"type\": \"Evil\"}", NULL, NULL, 0);
    TH_CHECK("safe_unknown_type", refused(&x, NULL, "type 'Evil'"), "%s", err);
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": NaN, \"timestep\": 1, \"scalar_data\": {}}", NULL, NULL, 0);
    TH_CHECK("safe_nan_refused", refused(&x, NULL, "NaN"), "%s", err);
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestep\": 1, \"scalar_data\": {}}", NULL, NULL, 0);
    TH_CHECK("safe_missing_field", refused(&x, NULL, "'timestamp' is missing"), "%s", err);
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": 1, \"timestep\": 1, \"scalar_data\": {}}",
             "{\"x\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]}}", "\0\0", 2);
    TH_CHECK("safe_bf16_refused", refused(&x, NULL, "BF16"), "%s", err);
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": 1, \"timestep\": 1, \"scalar_data\": {}}",
             "{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", "\0\0", 2);
    TH_CHECK("safe_bad_tensors", refused(&x, NULL, "PR #3048 message"), "%s", err);
    /* a tensor name that is not UTF-8 (cJSON does not check the safetensors header; found by fuzz_pickle) */
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": 1, \"timestep\": 1, \"scalar_data\": {}}",
             "{\"f\x8c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "\0", 1);
    TH_CHECK("safe_tensor_name_utf8", refused(&x, NULL, "not valid UTF-8"), "%s", err);
    x.n = 0; B(&x, "\0\0\1\0{", 5);
    TH_CHECK("safe_json_length_past_input", refused(&x, NULL, "JSON length 256"), "%s", err);
    /* truncation at every byte of the observation message */
    safe_msg(&x, "{\"type\": \"TimedObservation\", \"timestamp\": 2.5, \"timestep\": 1, \"scalar_data\": {\"a\": [1, {\"b\": null}]}}",
             "{\"front\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "\0\0\x80\x3f", 4);
    d = parse(&x, NULL);
    TH_CHECK("safe_nested_scalars", d != NULL, "%s", err);
    pk_free(d);
    ok = 1;
    size_t jl = (size_t)x.b[0] << 24 | (size_t)x.b[1] << 16 | (size_t)x.b[2] << 8 | x.b[3];
    for (size_t n = 0; n < x.n && ok; n++) {
        bb y = x;
        y.n = n;
        pk_doc *dd = NULL;
        err[0] = 0;
        /* the one prefix that is a message of its own: the JSON without tensors */
        if (pk_parse_safe(y.b, y.n, NULL, &dd, err, sizeof err) == 0) { pk_free(dd); ok = n == 4 + jl; }
        else ok = err[0] != 0;
    }
    TH_CHECK("safe_truncated_at_every_byte", ok, "a prefix failed without a message");
}

static void test_writers(void)
{
    float a[2 * 3] = {0.1f, -0.0f, 1e-40f, 3.4e38f, -7.25f, 1.0f / 3.0f};
    pk_buf b = {0};
    int rc = pk_write_timed_actions(&b, a, 2, 3, 100.0, 0.1, 41, err, sizeof err);
    TH_CHECK("writer_pickle_frame", rc == 0 && b.len > 20 && b.p[0] == 0x80 && b.p[1] == 4 && b.p[b.len - 1] == '.', "%s", err);
    /* the reader never accepts the torch reconstruction the reply uses: it is for the client, not for us */
    pk_doc *d = NULL;
    rc = pk_parse(b.p, b.len, NULL, &d, err, sizeof err);
    TH_CHECK("writer_pickle_refused_by_reader", rc == -1 && strstr(err, "torch.Tensor.float"), "%s", err);
    pk_buf_free(&b);
    rc = pk_write_timed_actions(&b, a, 0, 3, 0, 0.1, 0, err, sizeof err);
    TH_CHECK("writer_pickle_empty", rc == 0 && b.len == 4 && !memcmp(b.p, "\x80\x04].", 4), "%s", err);
    pk_buf_free(&b);
    TH_CHECK("writer_bad_dims", pk_write_timed_actions(&b, a, 1, 0, 0, 0, 0, err, sizeof err) == -1 && b.len == 0, "accepted dim 0");
    TH_CHECK("writer_timestep_overflow", pk_write_timed_actions(&b, a, 2, 3, 0, 0, INT64_MAX, err, sizeof err) == -1, "accepted");
    /* the PR #3048 reply reads back bit-exact */
    rc = pk_write_timed_actions_safe(&b, a, 2, 3, 100.0, 0.1, 41, err, sizeof err);
    d = NULL;
    if (!rc) rc = pk_parse(b.p, b.len, NULL, &d, err, sizeof err);
    const pk_value *l = pk_root(d);
    int ok = rc == 0 && pk_len(l) == 2;
    for (int i = 0; ok && i < 2; i++) {
        const pk_value *ta = pk_item(l, (size_t)i), *act = pk_attr(ta, "action");
        int64_t step = 0;
        double ts = 0;
        ok = pk_is_class(ta, NULL, "TimedAction") && !pk_int(pk_attr(ta, "timestep"), &step) && step == 41 + i &&
             !pk_number(pk_attr(ta, "timestamp"), &ts) && ts == 100.0 + (double)i * 0.1 && act && act->u.arr.count == 3 &&
             !memcmp(act->u.arr.data, a + 3 * i, 12);
    }
    TH_CHECK("writer_safe_roundtrip", ok, "%s", err);
    pk_free(d);
    pk_buf_free(&b);
    TH_CHECK("writer_safe_nan_time", pk_write_timed_actions_safe(&b, a, 1, 3, NAN, 0, 0, err, sizeof err) == -1 && strstr(err, "finite"), "%s", err);
    pk_buf_free(&b);
}

int main(void)
{
    test_observation();
    test_refused_globals();
    test_opcodes();
    test_ints_floats_strings();
    test_dict_keys();
    test_limits_and_sharing();
    test_numpy();
    test_safe_format();
    test_writers();
    TH_EXIT();
}
