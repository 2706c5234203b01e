/* Python pickles as data, for LeRobot's async-inference protocol (its robot client sends a pickled
 * RemotePolicyConfig and pickled TimedObservations over gRPC and unpickles the TimedAction list it gets back).
 *
 * The reader never executes anything. It interprets the opcodes those payloads use (protocols 1-5) into a tree
 * of plain values; every global the pickle names is checked against a short allow-list (numpy's array, scalar
 * and dtype reconstructors, copyreg's object constructors, the LeRobot dataclasses, docs/pickle.md) when the
 * GLOBAL / STACK_GLOBAL opcode is read, so anything else (posix.system, builtins.eval, ...) is refused before
 * a value is built. REDUCE on an allowed global builds a data value (an ndarray, a numpy scalar, a dtype, an
 * object of an allowed class) from arguments of the expected shapes; nothing is called.
 *
 * The same tree also comes from the format LeRobot PR #3048 proposes instead of pickle ("safe" format:
 * [4-byte big-endian JSON length][JSON metadata][safetensors bytes]); pk_parse tells the two apart.
 *
 * The writer makes the reply: a pickled list of TimedAction whose action is a float32 torch.Tensor, or the
 * same in the PR #3048 format.
 *
 * Functions returning int give 0 on success and -1 on error, with a message in err (when errlen > 0). */
#ifndef MACT_SERVER_PICKLE_H
#define MACT_SERVER_PICKLE_H
#include <stddef.h>
#include <stdint.h>

#define PK_MAX_DIMS 16         /* ndarray dimensions accepted (numpy allows more; camera frames have 3) */
#define PK_MAX_DEPTH_CAP 256   /* the most a caller may set pk_limits.max_depth to */

/* Caller-set bounds; pk_limits_default gives the values in the comments. Each error names the limit. */
typedef struct {
    size_t max_input;        /* bytes of one message (64 MiB) */
    int max_depth;           /* nesting of list / tuple / dict / object values (32; at most PK_MAX_DEPTH_CAP) */
    size_t max_items;        /* values pushed while reading, and values in the result counted as a tree: a
                              * shared reference (memo GET) counts each time it appears (262144) */
    size_t max_memo;         /* memo indices are below this (65536) */
    size_t max_array_bytes;  /* one ndarray, bytes or bytearray (64 MiB) */
    size_t max_str_bytes;    /* one str (16 MiB: a protocol-2 pickle carries array data as a latin-1 str) */
} pk_limits;
void pk_limits_default(pk_limits *l);

typedef enum {
    PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES, PK_LIST, PK_TUPLE, PK_DICT,
    PK_NDARRAY,   /* numpy.ndarray, C order */
    PK_NPSCALAR,  /* a numpy scalar (np.float64(1.5), np.float32, np.int64, np.bool_): u.arr with ndim 0 */
    PK_DTYPE,     /* a numpy.dtype standing on its own (u.arr.dt) */
    PK_OBJECT,    /* an instance of an allowed class: a dataclass (state: its fields) or an enum member (args) */
    PK_GLOBAL     /* an allowed class or function named as a value (never called) */
} pk_kind;

typedef struct {
    char kind;       /* 'b' bool, 'i' signed int, 'u' unsigned int, 'f' IEEE float */
    char order;      /* '<' little endian, '>' big endian, '|' one byte */
    int itemsize;    /* 1, 2, 4 or 8 */
} pk_dtype;

typedef struct pk_value pk_value;
/* Read-only for callers. Every pointer points into the document's arena or into the parsed input. */
struct pk_value {
    pk_kind kind;
    unsigned flags;          /* internal */
    int depth;               /* nesting below this value: 0 for a scalar, 1 for a list of scalars */
    size_t size;             /* values in this tree, shared references counted each time */
    union {
        int b;                                                  /* PK_BOOL */
        int64_t i;                                              /* PK_INT (beyond 64 bits: refused) */
        double f;                                               /* PK_FLOAT */
        struct { const char *s; size_t len; } str;              /* PK_STR: valid UTF-8, NUL-terminated copy
                                                                 * (len excludes the NUL; s may hold a NUL) */
        struct { const uint8_t *p; size_t len; int bytearray; } bytes;  /* PK_BYTES (bytearray too) */
        struct { pk_value **v; size_t n, cap; } seq;            /* PK_LIST, PK_TUPLE */
        struct { pk_value **k, **v; size_t n, cap; uint32_t *slot; size_t nslot; } dict;  /* PK_DICT, in
                                                                 * insertion order; a repeated key keeps its
                                                                 * first place and takes the last value */
        struct { pk_dtype dt; int ndim; const int64_t *shape; size_t count; const uint8_t *data;
                 size_t nbytes; } arr;                          /* PK_NDARRAY, PK_NPSCALAR, PK_DTYPE: data is
                                                                 * count * itemsize bytes in host byte order (a
                                                                 * big-endian array is swapped, as numpy does
                                                                 * when it unpickles one), not aligned */
        struct { const char *module, *name; const pk_value *args, *state; } obj;  /* PK_OBJECT: args the
                                                                 * enum's (value,) tuple (NULL for a dataclass),
                                                                 * state a dataclass's BUILD dict (NULL when
                                                                 * none); PK_GLOBAL: module and name only */
    } u;
};

typedef enum { PK_FMT_PICKLE = 1, PK_FMT_SAFE = 2 } pk_format;

typedef struct pk_doc pk_doc;  /* a parsed message: one arena, one pk_free */

/* Reads one pickle (exactly: bytes after STOP are refused). lim NULL: the defaults. On success *out holds the
 * tree; bytes, bytearray and ndarray data point into buf, which must outlive *out. */
int pk_parse_pickle(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen);
/* Reads LeRobot PR #3048's format into the same tree as the pickle of the same payload: a TimedObservation or
 * RemotePolicyConfig object, or a list of TimedAction. Differences: JSON numbers that are integral read as int
 * (except the dataclasses' timestamp fields), torch tensors read as ndarrays, observation keys of tensors follow
 * the JSON ones in name order. NaN / Infinity in the JSON and bfloat16 tensors are refused. */
int pk_parse_safe(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen);
/* Either of the two: a pickle starts with PROTO (0x80) for protocols 2-5, the PR #3048 format with a JSON length
 * below 16 MiB followed by '{'; anything else is read as a protocol 0/1 pickle. */
int pk_parse(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen);
const pk_value *pk_root(const pk_doc *d);
pk_format pk_doc_format(const pk_doc *d);
int pk_doc_protocol(const pk_doc *d);   /* the pickle's PROTO (0 without one, 0 for the safe format) */
void pk_free(pk_doc *d);                /* NULL-safe */

/* ---- reading the tree (each accepts NULL and then fails / returns NULL) ---- */
/* "None", "bool", "int", "float", "str", "bytes", "bytearray", "list", "tuple", "dict", "numpy.ndarray",
 * "numpy scalar", "numpy.dtype", "global", or an object's class name ("TimedObservation") */
const char *pk_type_name(const pk_value *v);
/* dict entry under a str key; NULL when v is not a dict or has no such key */
const pk_value *pk_dict_get(const pk_value *dict, const char *key);
/* a field of an object (its state dict), or a dict entry; NULL when absent */
const pk_value *pk_attr(const pk_value *obj, const char *name);
/* 1 when v is an object (or global) of class module.name; module NULL matches any module */
int pk_is_class(const pk_value *v, const char *module, const char *name);
/* list or tuple: item count and item i (NULL past the end); dict: entry count */
size_t pk_len(const pk_value *v);
const pk_value *pk_item(const pk_value *seq, size_t i);
const pk_value *pk_dict_key(const pk_value *dict, size_t i);
const pk_value *pk_dict_val(const pk_value *dict, size_t i);
/* str contents (NUL-terminated) and length; NULL when v is not a str */
const char *pk_str(const pk_value *v, size_t *len);
/* bool, int, float, a numpy scalar of any accepted dtype, or a one-element ndarray -> double; -1 otherwise */
int pk_number(const pk_value *v, double *out);
/* bool, int, an integer or bool numpy scalar (a float is refused even when integral) -> int64; -1 otherwise
 * (also for a uint64 scalar above INT64_MAX) */
int pk_int(const pk_value *v, int64_t *out);
/* element i of an ndarray or numpy scalar as double (byte order and float16 handled); 0 when out of range */
double pk_arr_get(const pk_value *arr, size_t i);

/* ---- writing the reply ---- */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;   /* set when a growth failed; the content is then incomplete */
} pk_buf;
void pk_buf_free(pk_buf *b);

/* Appends a protocol-4 pickle that Python's pickle.loads turns into
 *   [TimedAction(timestamp=t0 + i*dt, timestep=i0 + i, action=torch.Tensor of dim float32)  for i < rows]
 * of lerobot.async_inference.helpers, actions[i*dim .. i*dim+dim) being row i. The tensor is built as
 * torch.Tensor.float(torch.tensor([...])), so no numpy is needed on the client and the float32 values arrive
 * bit-exact (each goes through an exact double) whatever torch's default dtype; a NaN keeps being a NaN but not
 * necessarily its payload bits. rows >= 0, 1 <= dim, rows * dim <= 2^24. */
int pk_write_timed_actions(pk_buf *b, const float *actions, int rows, int dim, double t0, double dt, int64_t i0,
                           char *err, size_t errlen);
/* The same reply in LeRobot PR #3048's format (JSON {"type": "TimedActions", "actions": [{"timestamp",
 * "timestep"}...]} + safetensors with F32 tensors action_0 .. action_{rows-1} of shape [dim]); t0 + i*dt must be
 * finite (JSON has no NaN). */
int pk_write_timed_actions_safe(pk_buf *b, const float *actions, int rows, int dim, double t0, double dt,
                                int64_t i0, char *err, size_t errlen);
#endif
