/* Synthetic LeRobot datasets (`mact synth-dataset`, the tests' datasets): v2.1 and v3.0 trees (docs/spec/datasets.md 1)
 * with SO-101-like or LIBERO-like signals, written with src/data/pq_write.c in pyarrow's layout or a
 * variant. Deterministic for a seed. */
#ifndef MACT_DEV_LEROBOT_SYNTH_H
#define MACT_DEV_LEROBOT_SYNTH_H
#include <stdint.h>
#include <stddef.h>
#include "mact_data.h"

typedef mact_lerobot_synth_options mact_lrs_options;  /* include/mact_data.h */

/* mact_lerobot_synth, mact_lerobot_synth_variants: include/mact_data.h */
#endif
