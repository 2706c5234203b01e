/* ONNX graph builder (onnx_build.h): protobuf-c messages, an arena for their memory. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "export/onnx_build.h"
#include "mact.h"

struct og_arena {
    struct og_arena *next;
    max_align_t pad[];
};

static void *amalloc(og *g, size_t n)
{
    og_arena *a = calloc(1, sizeof *a + n + 16);
    if (!a) { g->failed = 1; return NULL; }
    a->next = g->arena;
    g->arena = a;
    return a->pad;
}

char *og_strdup(og *g, const char *s)
{
    size_t l = strlen(s);
    char *p = amalloc(g, l + 1);
    if (p) memcpy(p, s, l + 1);
    return p;
}

#define PUSH(g, arr, n, cap, v) do { \
        if ((g)->n == (g)->cap) { \
            size_t nc = (g)->cap ? (g)->cap * 2 : 64; \
            void *np = realloc((g)->arr, nc * sizeof *(g)->arr); \
            if (!np) { (g)->failed = 1; break; } \
            (g)->arr = np; (g)->cap = nc; \
        } \
        (g)->arr[(g)->n++] = (v); \
    } while (0)

void og_init(og *g, FILE *data, const char *data_name, int fp16)
{
    memset(g, 0, sizeof *g);
    g->data = data;
    g->data_name = data_name;
    g->fp16 = fp16;
    strcpy(g->block, "graph");
}

void og_free(og *g)
{
    while (g->arena) { og_arena *n = g->arena->next; free(g->arena); g->arena = n; }
    free(g->node); free(g->init); free(g->in); free(g->out);
    memset(g, 0, sizeof *g);
}

void og_block(og *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->block, sizeof g->block, fmt, ap);
    va_end(ap);
}

static char *fresh(og *g, const char *what)
{
    char b[160];
    snprintf(b, sizeof b, "%s/%s_%d", g->block, what, g->counter++);
    return og_strdup(g, b);
}

static Onnx__ValueInfoProto *vinfo(og *g, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = amalloc(g, sizeof *v);
    Onnx__TypeProto *t = amalloc(g, sizeof *t);
    Onnx__TypeProto__Tensor *tt = amalloc(g, sizeof *tt);
    Onnx__TensorShapeProto *sh = amalloc(g, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **d = amalloc(g, (size_t)(ndim + 1) * sizeof *d);
    if (!v || !t || !tt || !sh || !d) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(t);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < ndim; i++) {
        d[i] = amalloc(g, sizeof **d);
        if (!d[i]) return NULL;
        onnx__tensor_shape_proto__dimension__init(d[i]);
        if (dims[i] < 0) {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[i]->dim_param = og_strdup(g, "N");
        } else {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[i]->dim_value = dims[i];
        }
    }
    sh->n_dim = (size_t)ndim;
    sh->dim = d;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->name = og_strdup(g, name);
    v->type = t;
    return v;
}

void og_input(og *g, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = vinfo(g, name, ndim, dims);
    if (v) PUSH(g, in, n_in, cap_in, v);
}

void og_output(og *g, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = vinfo(g, name, ndim, dims);
    if (v) PUSH(g, out, n_out, cap_out, v);
}

static Onnx__TensorProto *tensor(og *g, const char *name, int dtype, int ndim, const int64_t *dims)
{
    Onnx__TensorProto *t = amalloc(g, sizeof *t);
    int64_t *d = amalloc(g, (size_t)(ndim + 1) * sizeof *d);
    if (!t || !d) return NULL;
    onnx__tensor_proto__init(t);
    if (ndim) memcpy(d, dims, (size_t)ndim * sizeof *d);  /* a scalar (ndim 0) may come with dims NULL */
    t->n_dims = (size_t)ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->name = og_strdup(g, name);
    return t;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int ee = (int)e - 127 + 15;
    if (ee >= 31) return (uint16_t)(sign | 0x7c00u);
    if (ee <= 0) {
        if (ee < -10) return (uint16_t)sign;
        m |= 0x800000u;
        int shift = 14 - ee;
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = sign | ((uint32_t)ee << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1))) h++;
    return (uint16_t)h;
}

static void ext(og *g, Onnx__TensorProto *t, const void *bytes, size_t n)
{
    static const char zeros[64];
    uint64_t pad = (64 - g->data_off % 64) % 64;
    if (pad && fwrite(zeros, 1, pad, g->data) != pad) g->failed = 1;
    g->data_off += pad;
    if (n && fwrite(bytes, 1, n, g->data) != n) g->failed = 1;
    Onnx__StringStringEntryProto **e = amalloc(g, 3 * sizeof *e);
    if (!e) return;
    char num[2][32];
    snprintf(num[0], sizeof num[0], "%llu", (unsigned long long)g->data_off);
    snprintf(num[1], sizeof num[1], "%llu", (unsigned long long)n);
    const char *k[3] = {"location", "offset", "length"}, *v[3] = {g->data_name, num[0], num[1]};
    for (int i = 0; i < 3; i++) {
        e[i] = amalloc(g, sizeof **e);
        if (!e[i]) return;
        onnx__string_string_entry_proto__init(e[i]);
        e[i]->key = og_strdup(g, k[i]);
        e[i]->value = og_strdup(g, v[i]);
    }
    t->n_external_data = 3;
    t->external_data = e;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    g->data_off += n;
}

const char *og_weight(og *g, const char *what, const float *data, int ndim, const int64_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)dims[i];
    char nm[200];
    snprintf(nm, sizeof nm, "%s.%s", g->block, what);
    g->n_weights += n;
    if (!g->fp16) {
        Onnx__TensorProto *t = tensor(g, nm, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, dims);
        if (!t) return "";
        ext(g, t, data, n * sizeof(float));
        PUSH(g, init, n_init, cap_init, t);
        return t->name;
    }
    uint16_t *h = malloc(n ? n * 2 : 2);
    if (!h) { g->failed = 1; return ""; }
    for (size_t i = 0; i < n; i++) h[i] = f32_to_f16(data[i]);
    char nm16[220];
    snprintf(nm16, sizeof nm16, "%s.fp16", nm);
    Onnx__TensorProto *t = tensor(g, nm16, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, ndim, dims);
    if (t) { ext(g, t, h, n * 2); PUSH(g, init, n_init, cap_init, t); }
    free(h);
    if (!t) return "";
    const char *in[1] = {t->name};
    return og_node(g, "Cast", og_strdup(g, nm), 1, in, og_ai(g, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT), NULL);
}

static const char *inline_raw(og *g, int dtype, const void *bytes, size_t n, int ndim, const int64_t *dims)
{
    char *nm = fresh(g, "const");
    Onnx__TensorProto *t = tensor(g, nm, dtype, ndim, dims);
    void *copy = amalloc(g, n + 1);
    if (!t || !copy) return "";
    if (n) memcpy(copy, bytes, n);
    t->has_raw_data = 1;
    t->raw_data.len = n;
    t->raw_data.data = copy;
    PUSH(g, init, n_init, cap_init, t);
    return t->name;
}

const char *og_const_f(og *g, float v) { return inline_raw(g, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &v, 4, 0, NULL); }

const char *og_const_fv(og *g, const float *v, int ndim, const int64_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)dims[i];
    return inline_raw(g, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, v, n * 4, ndim, dims);
}

const char *og_const_i(og *g, int n, const int64_t *v)
{
    int64_t d = n;
    return inline_raw(g, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, v, (size_t)n * 8, 1, &d);
}

static Onnx__AttributeProto *attr(og *g, const char *name, int type)
{
    Onnx__AttributeProto *a = amalloc(g, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = og_strdup(g, name);
    a->has_type = 1;
    a->type = type;
    return a;
}

Onnx__AttributeProto *og_ai(og *g, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) { a->has_i = 1; a->i = v; }
    return a;
}

Onnx__AttributeProto *og_af(og *g, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) { a->has_f = 1; a->f = v; }
    return a;
}

Onnx__AttributeProto *og_ais(og *g, const char *name, int n, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = amalloc(g, (size_t)(n + 1) * sizeof *c);
    if (!a || !c) return NULL;
    if (n) memcpy(c, v, (size_t)n * sizeof *c);
    a->n_ints = (size_t)n;
    a->ints = c;
    return a;
}

Onnx__AttributeProto *og_as(og *g, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return NULL;
    a->has_s = 1;
    a->s.data = (uint8_t *)og_strdup(g, v);
    a->s.len = strlen(v);
    return a;
}

static Onnx__NodeProto *mknode(og *g, const char *op, int n_in, const char *const *in, int n_out, va_list ap)
{
    Onnx__NodeProto *nd = amalloc(g, sizeof *nd);
    char **ins = amalloc(g, (size_t)(n_in + 1) * sizeof *ins);
    char **outs = amalloc(g, (size_t)(n_out + 1) * sizeof *outs);
    Onnx__AttributeProto **at = amalloc(g, 9 * sizeof *at);
    if (!nd || !ins || !outs || !at) return NULL;
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_in; i++) ins[i] = og_strdup(g, in[i] ? in[i] : "");
    size_t na = 0;
    Onnx__AttributeProto *a;
    while ((a = va_arg(ap, Onnx__AttributeProto *)) && na < 8) at[na++] = a;
    nd->name = fresh(g, op);
    nd->op_type = og_strdup(g, op);
    nd->n_input = (size_t)n_in;
    nd->input = ins;
    nd->n_output = (size_t)n_out;
    nd->output = outs;
    nd->n_attribute = na;
    nd->attribute = at;
    return nd;
}

const char *og_node(og *g, const char *op, const char *out_name, int n_in, const char *const *in, ...)
{
    va_list ap;
    va_start(ap, in);
    Onnx__NodeProto *nd = mknode(g, op, n_in, in, 1, ap);
    va_end(ap);
    if (!nd) return "";
    nd->output[0] = out_name ? og_strdup(g, out_name) : nd->name;
    PUSH(g, node, n_node, cap_node, nd);
    return nd->output[0];
}

void og_node_multi(og *g, const char *op, int n_in, const char *const *in, int n_out, const char **out, ...)
{
    va_list ap;
    va_start(ap, out);
    Onnx__NodeProto *nd = mknode(g, op, n_in, in, n_out, ap);
    va_end(ap);
    if (!nd) { for (int i = 0; i < n_out; i++) out[i] = ""; return; }
    for (int i = 0; i < n_out; i++) {
        char b[200];
        snprintf(b, sizeof b, "%s:%d", nd->name, i);
        nd->output[i] = og_strdup(g, b);
        out[i] = nd->output[i];
    }
    PUSH(g, node, n_node, cap_node, nd);
}

uint8_t *og_pack(og *g, const char *graph_name, const char *doc, size_t *len)
{
    if (g->failed) return NULL;
    Onnx__GraphProto gr;
    onnx__graph_proto__init(&gr);
    gr.name = (char *)graph_name;
    gr.n_node = g->n_node; gr.node = g->node;
    gr.n_initializer = g->n_init; gr.initializer = g->init;
    gr.n_input = g->n_in; gr.input = g->in;
    gr.n_output = g->n_out; gr.output = g->out;
    Onnx__OperatorSetIdProto ops;
    onnx__operator_set_id_proto__init(&ops);
    ops.domain = "";
    ops.has_version = 1;
    ops.version = 20;
    Onnx__OperatorSetIdProto *opp = &ops;
    Onnx__ModelProto mp;
    onnx__model_proto__init(&mp);
    mp.has_ir_version = 1;
    mp.ir_version = 9;  /* opset 20 ships with IR version 9 (ONNX 1.15) */
    mp.n_opset_import = 1;
    mp.opset_import = &opp;
    mp.producer_name = "mact";
    mp.producer_version = MACT_VERSION_STRING;
    mp.has_model_version = 1;
    mp.model_version = 1;
    mp.doc_string = (char *)doc;
    mp.graph = &gr;
    size_t n = onnx__model_proto__get_packed_size(&mp);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    *len = onnx__model_proto__pack(&mp, buf);
    return buf;
}
