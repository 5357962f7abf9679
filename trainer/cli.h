/* trainer/cli.h — subcommands that need a config but do not train. */
#ifndef MT_TRAINER_CLI_H
#define MT_TRAINER_CLI_H

/* `megatrain topology --config FILE --world-size N [--json] [--set k=v]...`:
 * validate the config for N ranks and print every rank's coordinates and
 * groups (parallel/topology). Returns the exit status (2 on bad usage or
 * config). */
int mt_cli_topology(int argc, char **argv);

#endif
