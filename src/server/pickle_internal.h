/* What the files of the pickle reader share (pickle.c, pickle_numpy.c, pickle_safe.c, pickle_tree.c,
 * pickle_write.c); the API is pickle.h. */
#ifndef MACT_SERVER_PICKLE_INTERNAL_H
#define MACT_SERVER_PICKLE_INTERNAL_H
#include <stdint.h>
#include <string.h>
#include "server/pickle.h"

#define HELPERS "lerobot.async_inference.helpers"

/* ---- the arena: every value of a document ---- */
typedef struct pk_chunk {
    struct pk_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} pk_chunk;

struct pk_doc {
    pk_chunk *chunks;
    const pk_value *root;
    pk_format format;
    int protocol;
};

void *pki_alloc(pk_doc *d, size_t n);

/* ---- value flags ---- */
#define F_SEALED 1u     /* part of another value: immutable from now on */
#define F_BUILT 2u      /* BUILD has been applied */
#define F_ROLE_SHIFT 8  /* PK_GLOBAL: its role (G_*) */

/* ---- the reader's state (the PR #3048 reader uses it for the arena, limits, counters and messages) ---- */
typedef struct {
    const uint8_t *start, *p, *end;
    pk_doc *doc;
    pk_limits lim;
    pk_value **stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmark, mcap;
    pk_value **memo;
    size_t memo_cap, memo_len;
    size_t pushes;
    size_t op_at;
    int op;
    int safe;     /* reading the PR #3048 format: messages say so instead of naming an opcode */
    char *err;
    size_t el;
} rd;

/* formats "pickle byte N (OPCODE): ..." (or "PR #3048 message: ...") into r->err; returns -1 */
int pki_bad(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a name from the input, printable for a message: at most 80 characters, others as '?' */
const char *pki_printable(const char *s, size_t n, char *buf, size_t cap);
pk_value *pki_new(rd *r, pk_kind kind);
int pki_push(rd *r, pk_value *v);
/* child becomes part of parent: depth and tree size grow (limits checked), child is sealed */
int pki_adopt(rd *r, pk_value *parent, pk_value *child);
int pki_seq_reserve(rd *r, pk_value *v, size_t extra);
int pki_check_input(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t el);
void pki_clamp_limits(pk_limits *l, const pk_limits *in);

/* ---- dicts (pickle_tree.c) ---- */
uint64_t pki_key_hash(const pk_value *k);
long pki_dict_find(const pk_value *d, const pk_value *key, uint64_t h, size_t *slot);
int pki_dict_set(rd *r, pk_value *d, pk_value *key, pk_value *val);

/* ---- numpy (pickle_numpy.c) ---- */
int pki_make_dtype(rd *r, const pk_value *args);
int pki_build_dtype(rd *r, pk_value *d, const pk_value *st);
int pki_to_host_order(rd *r, pk_value *a);
int pki_fill_array(rd *r, pk_value *a, const pk_value *dtype, const pk_value *shape, const pk_value *data, int fortran);
int pki_build_array(rd *r, pk_value *a, const pk_value *st);
int pki_codecs_encode(rd *r, const pk_value *args);

/* FeatureType's members (an Enum pickles as REDUCE(cls, (value,)); Python refuses other values) */
#define PKI_N_FEATURE_TYPES 6
extern const char *const pki_feature_types[PKI_N_FEATURE_TYPES];

static inline int pki_host_little(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static inline int pki_as_flag(const pk_value *v, int *out)
{
    if (v->kind == PK_BOOL) { *out = v->u.b; return 0; }
    if (v->kind == PK_INT) { *out = v->u.i != 0; return 0; }
    return -1;
}

static inline int pki_is_str(const pk_value *v, const char *s)
{
    return v->kind == PK_STR && v->u.str.len == strlen(s) && !memcmp(v->u.str.s, s, v->u.str.len);
}
#endif
