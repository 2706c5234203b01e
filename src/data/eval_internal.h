/* The open-loop evaluation's per-episode sums and their files (data/eval.c runs, data/eval_result.c writes and
 * merges; docs/datasets.md describes the metrics). Floats are written as %.9g and doubles as %.17g: read back
 * exactly, so a merge rewrites the same bytes. */
#ifndef MACT_DATA_EVAL_INTERNAL_H
#define MACT_DATA_EVAL_INTERNAL_H
#include <stdint.h>
#include <stdio.h>
#include "mact_data.h"

#define MAXH MACT_EVAL_MAX_HORIZON

/* --replan K --delay D (docs/datasets.md "Replanning and real-time chunking"): the chunks an episode's chains
 * predicted at its replan points t = 0, K, 2K, ... (chain 0 plain, chain 1 RTC-guided), and what was measured on
 * the trajectory the robot executed from them */
typedef struct {
    int K, delay, chains;   /* K 0: no replanning; chains: bit 0 the plain chain, bit 1 the RTC chain */
    int n_chunks;           /* replan points */
    float *chunk[2];        /* [n_chunks][H][D] as the policy returned them (dataset units) */
    double *jump[2];        /* [n_chunks - 1]: per join, mean over dims of |a_first_new - a_last_old|, normalised */
    double *step[2];        /* [n_chunks - 1] when K + delay < H: the old chunk's own step there, |old[K+D] - old[K+D-1]| */
    double ex_raw[2], ex_norm[2], ex_values;  /* sums of |executed - gt| (raw, eval's normalised units); values */
    char rtc[96];           /* the RTC settings, for result.json */
} ep_replan;

typedef struct {
    int64_t ep;
    int H, D;
    double frames, excluded, outside, gt_values, grip_values;
    double m_raw[MAXH], h_raw[MAXH], m_norm[MAXH], h_norm[MAXH];
    double m_grip, h_grip;
    char config[17];     /* what produced the sums (the settings' fingerprint): episodes of different settings never mix */
    char hold_note[512]; /* "" or why the hold-still baseline is not state[t][:D] (the state and action features differ) */
    ep_replan rp;        /* --replan only (rp.K > 0) */
} ep_sums;

extern const char *const mact_eval_chain_name[2];

void mact_eval_ep_free(ep_sums *s);
void mact_eval_eps_free(ep_sums *e, int n);
/* an episode's file text (malloc'd), and back (0, or -1: not an episode result) */
char *mact_eval_ep_json(const ep_sums *s);
int mact_eval_ep_parse(const char *text, ep_sums *s);
/* every DIR/episodes/ep_*.json of the dirs (the first occurrence of an episode wins), sorted by episode; refuses
 * a mix of settings. 0, or a status with err set */
int mact_eval_load_eps(const char *const *dirs, int nd, ep_sums **out, int *n, char *err, size_t el);
/* out/episodes.jsonl and out/result.json from the episodes in order, the table to rep; *res (may be NULL) */
int mact_eval_write_result(const char *out, ep_sums *e, int n, const int *first_k, int n_k, const char *policy,
                           int selected, FILE *rep, mact_eval_result **res, char *err, size_t el);
/* the rows the robot executed in replan segment c of chain ch */
const float *mact_eval_exec_row(const ep_replan *r, int ch, int H, int D, int c, int i);
/* the temp + rename write (base/file.h): a killed task leaves no partial file */
int mact_eval_write_atomic(const char *path, const char *text, char *err, size_t el);
#endif
