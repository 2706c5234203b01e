/* The SO-100/101 follower arm, stated once: its joints' names (LeRobot's) and the calibration change of
 * LeRobot's MolmoAct2StateFrameTransformStep (docs/spec/molmoact2.md 4.3): old = signs * new + offsets, joint by
 * joint, the gripper unchanged. Read by the runtime's state transform (model/model.c), the evaluation's
 * --so101-transform (data/eval.c) and the synthesizers (compress/synth.c, data/lerobot_synth.c). */
#ifndef MACT_IO_SO101_H
#define MACT_IO_SO101_H

#define MACT_SO101_DIM 6
static const float mact_so101_signs[MACT_SO101_DIM] = {1, -1, 1, 1, 1, 1};
static const float mact_so101_offsets[MACT_SO101_DIM] = {0, 90, 90, 0, 0, 0};
static const char *const mact_so101_joints[MACT_SO101_DIM] = {"shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos",
                                                               "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"};
#endif
