/* One entry per `mact` subcommand; each returns the process exit status. */
#ifndef MACT_COMMANDS_H
#define MACT_COMMANDS_H
int cmd_run(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_prune_analyze(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_distill_eval(int argc, char **argv);
int cmd_dataset(int argc, char **argv);
int cmd_synth_dataset(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_export(int argc, char **argv);
#endif
