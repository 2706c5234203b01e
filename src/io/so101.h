/* The SO-100/101 follower arm's joint names (LeRobot's), for the synthetic datasets and checkpoints. Its joint
 * frame is never a constant here: a checkpoint carries it (LeRobot's molmoact2_*_frame_transform steps, read by
 * model/lerobot.c), or the user gives it (mact eval --joint-signs / --joint-offsets). */
#ifndef MACT_IO_SO101_H
#define MACT_IO_SO101_H

#define MACT_SO101_DIM 6
static const char *const mact_so101_joints[MACT_SO101_DIM] = {"shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos",
                                                               "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"};
#endif
