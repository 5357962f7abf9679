/* tools/cli.h — subcommands that need a config but do not train. */
#ifndef MT_TOOLS_CLI_H
#define MT_TOOLS_CLI_H

/* `megatrain topology --config FILE --world-size N [--json] [--set k=v]...`:
 * validate the config for N ranks and print every rank's coordinates and
 * groups (parallel/topology). Returns the exit status (2 on bad usage or
 * config). */
int mt_cli_topology(int argc, char **argv);

/* `megatrain convert ...` (tools/convert_cli.c): Hugging Face export and
 * import of layout-free checkpoints (docs/checkpoint.md). Returns the exit
 * status (2 usage, 1 bad input). */
int mt_cli_convert(int argc, char **argv);

/* `megatrain convert --upgrade --load OLD --output NEW [--set k=v]...`
 * (tools/upgrade_cli.c), run under the layout that wrote OLD: rebuild the
 * trainer from OLD's saved config, load OLD (previous per-layout format) and
 * save it in the layout-free format under NEW, same iteration. Collective
 * over the MPI world it initialises. Returns the exit status (2 usage or
 * config, 1 checkpoint error). */
int mt_cli_upgrade(int argc, char **argv);

/* `megatrain generate --load DIR --prompt TEXT ...` (tools/generate_cli.c):
 * sample text from a checkpoint with a KV cache, one process or under
 * mpirun with tensor parallelism. Returns the exit status. */
int mt_cli_generate(int argc, char **argv);

#endif
