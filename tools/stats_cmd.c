/* `mact stats`: flags in, mact_stats_compute (include/mact_data.h) out. */
#include <stdio.h>
#include <string.h>
#include "mact_data.h"
#include "commands.h"
#include "common/cli.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: mact stats --dataset DIR [--dataset DIR ...] --tag TAG [--action-key K] [--state-key K]\n"
               "       [--method lerobot|lerobot-f64|exact] [--horizon H] [--control-mode M] [--setup-type S]\n"
               "       [--normalize-gripper 0|1] [--lerobot-stats FILE] --out FILE\n"
               "  FILE: created, or TAG replaced in place; --lerobot-stats also writes LeRobot's meta/stats.json "
               "layout\n");
    return 2;
}

int cmd_stats(int argc, char **argv)
{
    const char *ds[64], *method = "lerobot";
    mact_stats_options o = {.datasets = ds};
    int horizon = -1, ngrip = -1, ngrip_seen = 0;
    const cli_opt opts[] = {
        CLI_O("--dataset", CLI_LIST, ds, .count = &o.n_datasets, .cap = 64, .required = 1),
        CLI_O("--tag", CLI_STR, &o.tag, .required = 1), CLI_O("--out", CLI_STR, &o.out, .required = 1),
        CLI_O("--action-key", CLI_STR, &o.action_key), CLI_O("--state-key", CLI_STR, &o.state_key), CLI_O("--method", CLI_STR, &method),
        CLI_O("--horizon", CLI_ATOI, &horizon), CLI_O("--control-mode", CLI_STR, &o.control_mode), CLI_O("--setup-type", CLI_STR, &o.setup_type),
        CLI_O("--normalize-gripper", CLI_ATOI, &ngrip, .seen = &ngrip_seen), CLI_O("--lerobot-stats", CLI_STR, &o.lerobot_stats), {0}};
    int rc = cli_parse("mact stats", argc, argv, opts, NULL, 0, NULL, usage);
    if (rc) return cli_exit(rc);
    if (mact_stats_method_parse(method, &o.method)) { fprintf(stderr, "mact stats: --method must be lerobot, lerobot-f64 or exact\n"); return 2; }
    o.horizon = horizon > 0 ? horizon : 0;
    o.normalize_gripper = !ngrip_seen ? 0 : ngrip ? 1 : 2;
    char err[4096];
    double frames = 0;
    mact_status st = mact_stats_compute(&o, &frames, err, sizeof err);
    if (st) { fprintf(stderr, "mact stats: %s\n", err); return 1; }
    fprintf(stderr, "mact stats: %s: tag %s (%s), %.0f frames\n", o.out, o.tag, method, frames);
    return 0;
}
