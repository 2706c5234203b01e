/* The open-loop evaluation's per-episode sums and their files (data/eval.c runs, data/eval_result.c writes and
 * merges; docs/datasets.md describes the metrics). Floats are written as %.9g and doubles as %.17g: read back
 * exactly, so a merge rewrites the same bytes. */
#ifndef MACT_DATA_EVAL_INTERNAL_H
#define MACT_DATA_EVAL_INTERNAL_H
#include <stdint.h>
#include <stdio.h>
#include "mact_data.h"
#include "data/lerobot.h"

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

/* ---- one run (data/eval.c drives it, data/eval_metrics.c measures) ---- */
#define MACT_EVAL_MAX_JOINTS 64   /* action and state dims an evaluation takes */
typedef struct {
    const mact_eval_options *o;
    mact_norm_tag_info ti;                  /* the policy's tag */
    double lo[MACT_EVAL_MAX_JOINTS], hi[MACT_EVAL_MAX_JOINTS];  /* its action statistics' pair */
    unsigned char mask[MACT_EVAL_MAX_JOINTS];
    const char *policy_name, *akey, *skey;
    const char *cams[MACT_EVAL_MAX_CAMERAS];
    int ncam, H, D, K, delay, chains, delta, grip;
    double tol;
    int *hmap;                              /* [D]: the state dim the hold baseline repeats (-1: none) */
    char hold_note[512];
    mact_ld *d;
    int *sel, n_sel;                        /* the selected episodes (indices into the dataset's) */
    char cfg[17], rtc_txt[96], epdir[4200];
    float *pred, *rp_raw[2];                /* this frame's chunk (dataset units); the chains' last chunks (the policy's) */
    double frames_run, t_predict, n_predict, t0;
    int done, q, dsd;
    const mact_ld_episode *e;               /* the episode being evaluated, its arrays (the producer's until its end) */
    double *act, *st;
    ep_sums S;
} ev_run;

/* data/eval_metrics.c */
/* hmap[j]: the state dim the hold-still baseline repeats for action dim j (-1: none, zero); a note (stderr,
 * result.json) when the state and action features name their dims differently or differ in dims */
int mact_eval_hold_map(const mact_ld_feature *fa, const mact_ld_feature *fs, const char *akey, const char *skey, int D,
                       FILE *progress, int *hmap, char *note, size_t nl, int delta);
/* episode_index in the selection "A:B" or "I,J,..." (NULL: all) */
int mact_eval_episode_selected(const char *episodes, int64_t index);
/* frame t of the episode: |pred - gt| and |hold - gt| per chunk step into S, raw and normalised */
void mact_eval_add_frame(ep_sums *S, ev_run *R, int64_t t);
/* at an episode's end: its joins' jumps and the executed rows' errors against the ground truth act [n x D] */
void mact_eval_replan_measure(ep_replan *r, const mact_eval_options *o, const double *lo, const double *hi,
                              const unsigned char *mask, const double *act, int H, int D);
/* the options' joint frame undone on actions [n x D] (data/eval.c) */
void mact_eval_frame_back(const mact_eval_options *o, float *x, int n, int D);
#endif
