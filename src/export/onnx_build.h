/* A small ONNX graph builder over the protobuf-c messages of src/export/onnx_subset.proto (compiled by
 * protoc-c into build/gen/). Every string and message lives in the builder's arena until og_free. Node and
 * value names are "<block>/<Op>_<n>", one block prefix per model block (og_block). Weights go to the external
 * data file (64-byte aligned offsets); with fp16 weights each is stored FLOAT16 and Cast to FLOAT in the graph. */
#ifndef MACT_EXPORT_ONNX_BUILD_H
#define MACT_EXPORT_ONNX_BUILD_H
#include <stdint.h>
#include <stdio.h>
#include "onnx_subset.pb-c.h"

typedef struct og_arena og_arena;

typedef struct {
    og_arena *arena;
    Onnx__NodeProto **node; size_t n_node, cap_node;
    Onnx__TensorProto **init; size_t n_init, cap_init;
    Onnx__ValueInfoProto **in, **out; size_t n_in, n_out, cap_in, cap_out;
    FILE *data;
    const char *data_name;       /* the external data file's name, relative to the .onnx */
    uint64_t data_off;
    int fp16;
    int counter;
    char block[96];
    int failed;                  /* out of memory or a write error: the graph is not usable */
    uint64_t n_weights;          /* parameters written */
} og;

void og_init(og *g, FILE *data, const char *data_name, int fp16);
void og_free(og *g);
void og_block(og *g, const char *fmt, ...);
/* graph input / output: float32 of the given dims; a dim < 0 is the symbolic "N" */
void og_input(og *g, const char *name, int ndim, const int64_t *dims);
void og_output(og *g, const char *name, int ndim, const int64_t *dims);
/* a float32 weight (external data; fp16 with Cast when the builder was made so) */
const char *og_weight(og *g, const char *what, const float *data, int ndim, const int64_t *dims);
/* inline constants */
const char *og_const_f(og *g, float v);
const char *og_const_fv(og *g, const float *v, int ndim, const int64_t *dims);  /* float32 table, inline */
const char *og_const_i(og *g, int n, const int64_t *v);
/* a node with n_in inputs and one output (its name returned; out_name NULL: generated). Attributes follow as
 * og_attr pointers, NULL-terminated. */
Onnx__AttributeProto *og_ai(og *g, const char *name, int64_t v);
Onnx__AttributeProto *og_af(og *g, const char *name, float v);
Onnx__AttributeProto *og_ais(og *g, const char *name, int n, const int64_t *v);
Onnx__AttributeProto *og_as(og *g, const char *name, const char *v);
const char *og_node(og *g, const char *op, const char *out_name, int n_in, const char *const *in, ...);
/* a node with several outputs: out[] receives n_out names */
void og_node_multi(og *g, const char *op, int n_in, const char *const *in, int n_out, const char **out, ...);
/* the model's bytes (packed ModelProto), malloc'd; NULL on failure */
uint8_t *og_pack(og *g, const char *graph_name, const char *doc, size_t *len);
char *og_strdup(og *g, const char *s);
#endif
