/* libFuzzer target for the LeRobot async-inference messages and the SendObservations chunk reassembly
 * (src/server/grpc_lerobot_msg.c, the pure part of the gRPC transport grpc_lerobot.c).
 *
 * Input: byte 0 sets the payload cap (16..4096 bytes, so the cap is reached), then records
 * [kind: 1 byte][length: 2 bytes little-endian][that many bytes of one protobuf message], the last one cut
 * short by the end of the input. kind & 3: 0 or 1 an Observation fed to the reassembler (one stream across
 * the records), 2 a PolicySetup, 3 an Empty (bit 2 clear) or an Actions (set).
 *
 * Checked: every failure leaves a message; the reassembler agrees with an independent model of the rules in
 * grpc_lerobot.h (which chunks are refused, with which status, and the exact bytes of each completed
 * payload, never over the cap); after a refusal the stream starts again, as a new call would; the end of
 * the input is the end of the stream (mact_lr_reasm_finish agrees with the model); an Actions packs back
 * to the same data and an over-limit pack is refused. */
#include "fuzz_common.h"
#include "server/grpc_lerobot.h"

typedef struct {
    uint8_t *b;
    size_t n, cap;
    int open, delivered;
} model;

static void model_add(model *m, const uint8_t *d, size_t n)
{
    if (m->n + n > m->cap) {
        size_t c = (m->n + n) * 2 + 16;
        uint8_t *b = realloc(m->b, c);
        if (!b) __builtin_trap();
        m->b = b;
        m->cap = c;
    }
    if (n) memcpy(m->b + m->n, d, n);
    m->n += n;
}

/* What the rules say about one chunk: 0 more, 1 complete, 3 or 8 refused. */
static int model_feed(model *m, int st, const uint8_t *d, size_t n, size_t cap)
{
    switch (st) {
    case MACT_LR_TRANSFER_BEGIN:
        if (m->open) return 3;
        m->n = 0;
        if (n > cap) return 8;
        model_add(m, d, n);
        m->open = 1;
        return 0;
    case MACT_LR_TRANSFER_MIDDLE:
        if (!m->open) return 3;
        if (m->n + n > cap) return 8;
        model_add(m, d, n);
        return 0;
    case MACT_LR_TRANSFER_END:
        if (!m->open) m->n = 0;
        if (m->n + n > cap) return 8;
        model_add(m, d, n);
        m->open = 0;
        m->delivered++;
        return 1;
    default:
        return 3;
    }
}

static void restart(mact_lr_reasm *r, model *m)
{
    mact_lr_reasm_reset(r);
    m->n = 0;
    m->open = m->delivered = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t cap = 16 + (size_t)data[0] * 16;
    mact_lr_reasm r;
    memset(&r, 0, sizeof r);
    model m = { 0 };
    char msg[512];
    size_t i = 1;
    while (i < size) {
        int kind = data[i++];
        size_t len = 0;
        if (i < size) len = data[i++];
        if (i < size) len |= (size_t)data[i++] << 8;
        if (len > size - i) len = size - i;
        const uint8_t *w = data + i;
        i += len;
        mact_lr_msg x;
        msg[0] = 0;
        switch (kind & 3) {
        case 0:
        case 1: {
            int rc = mact_lr_msg_unpack(MACT_LR_OBSERVATION, w, len, &x, msg, sizeof msg);
            fuzz_check_err(rc, msg, sizeof msg);
            if (rc) { restart(&r, &m); break; }  /* the transport ends the call */
            if (x.n > len) __builtin_trap();
            const uint8_t *p;
            size_t pn;
            msg[0] = 0;
            rc = mact_lr_reasm_feed(&r, x.state, x.data, x.n, cap, &p, &pn, msg, sizeof msg);
            fuzz_check_err(rc, msg, sizeof msg);
            int want = model_feed(&m, x.state, x.data, x.n, cap);
            if (want == 1) {
                if (rc || !p || pn != m.n || pn > cap || (pn && memcmp(p, m.b, pn))) __builtin_trap();
            } else if (want == 0) {
                if (rc || p) __builtin_trap();
            } else {
                if (rc != want || p) __builtin_trap();
                restart(&r, &m);
            }
            if (r.open != m.open) __builtin_trap();
            mact_lr_msg_free(&x);
            break;
        }
        case 2: {
            int rc = mact_lr_msg_unpack(MACT_LR_POLICY_SETUP, w, len, &x, msg, sizeof msg);
            fuzz_check_err(rc, msg, sizeof msg);
            if (!rc && (x.n > len || (x.n && !x.data))) __builtin_trap();
            mact_lr_msg_free(&x);
            break;
        }
        default: {
            int actions = (kind & 4) != 0;
            int rc = mact_lr_msg_unpack(actions ? MACT_LR_ACTIONS : MACT_LR_EMPTY, w, len, &x, msg, sizeof msg);
            fuzz_check_err(rc, msg, sizeof msg);
            if (!rc && actions) {
                uint8_t *o;
                size_t on;
                if (mact_lr_actions_pack(x.data, x.n, (size_t)1 << 20, &o, &on, msg, sizeof msg)) __builtin_trap();
                mact_lr_msg y;
                if (mact_lr_msg_unpack(MACT_LR_ACTIONS, o, on, &y, msg, sizeof msg)) __builtin_trap();
                if (y.n != x.n || (x.n && memcmp(x.data, y.data, x.n))) __builtin_trap();
                mact_lr_msg_free(&y);
                free(o);
                /* one byte under the packed size is over the limit */
                msg[0] = 0;
                if (on > 0) {
                    int r2 = mact_lr_actions_pack(x.data, x.n, on - 1, &o, &on, msg, sizeof msg);
                    if (r2 != 8 || o) __builtin_trap();
                    fuzz_check_err(r2, msg, sizeof msg);
                }
            }
            mact_lr_msg_free(&x);
            break;
        }
        }
    }
    msg[0] = 0;
    int rc = mact_lr_reasm_finish(&r, msg, sizeof msg);
    fuzz_check_err(rc, msg, sizeof msg);
    if ((rc == 0) != (!m.open && m.delivered > 0)) __builtin_trap();
    mact_lr_reasm_reset(&r);
    free(m.b);
    return 0;
}
