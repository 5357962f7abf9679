#!/usr/bin/env bash
# scripts/local-slurm.sh up|down|status — a one-node Slurm cluster in user
# space for testing `srun --mpi=pmix` launches (Debian packages slurm-wlm and
# munge). Everything lives under $MEGATRAIN_SLURM_DIR (default /tmp/mt-slurm): a
# munge key and socket, slurm.conf, state, logs and pid files. The node is
# "localhost" with CPUs=8 declared (SlurmdParameters=config_overrides), so 8
# tasks fit even on a 2-core machine. Daemons are stopped by PID.
# After `up`, clients need:  export SLURM_CONF=$MEGATRAIN_SLURM_DIR/slurm.conf
# and OpenMPI jobs:          srun --mpi=pmix -n 4 prog  (export
# OMPI_MCA_mpi_yield_when_idle=1 yourself when oversubscribing; srun won't).
# Exit status: 0 ok; 1 failure (daemon logs are printed).
set -u
DIR=${MEGATRAIN_SLURM_DIR:-/tmp/mt-slurm}
cmd=${1:-}

die() { echo "local-slurm: $*" >&2; for f in "$DIR"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done; exit 1; }

stop_pid() { # pidfile
  [ -f "$1" ] || return 0
  local p; p=$(cat "$1" 2>/dev/null)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p"; for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  fi
  rm -f "$1"
}

down() {
  stop_pid "$DIR/slurmd.pid"; stop_pid "$DIR/slurmctld.pid"; stop_pid "$DIR/munged.pid"
}

up() {
  for b in slurmctld slurmd srun munged mungekey; do
    command -v $b >/dev/null || [ -x /usr/sbin/$b ] || die "$b not found (apt-get install slurm-wlm munge)"
  done
  down
  rm -rf "$DIR"; mkdir -p "$DIR/state" "$DIR/spool" && chmod 700 "$DIR" || die "cannot create $DIR"
  local user; user=$(id -un)
  # munge in user space: own key, socket and pid file
  /usr/sbin/mungekey --create --keyfile="$DIR/munge.key" 2>"$DIR/mungekey.log" || die "mungekey failed"
  chmod 400 "$DIR/munge.key"
  /usr/sbin/munged --socket="$DIR/munge.sock" --key-file="$DIR/munge.key" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed" \
    --force 2>>"$DIR/munged.log" || die "munged failed to start"
  # free ports from the pid (avoid clashes between concurrent users)
  local port=$(( 20000 + ($$ % 20000) ))
  cat > "$DIR/slurm.conf" <<CONF
ClusterName=mtlocal
SlurmctldHost=localhost
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.sock
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  export SLURM_CONF="$DIR/slurm.conf"
  /usr/sbin/slurmctld -f "$SLURM_CONF" || die "slurmctld failed to start"
  /usr/sbin/slurmd -N localhost -f "$SLURM_CONF" || die "slurmd failed to start"
  for _ in $(seq 100); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "local-slurm: up; export SLURM_CONF=$SLURM_CONF"; return 0
    fi
    sleep 0.1
  done
  die "node did not become idle: $(sinfo 2>&1 | tail -n 3)"
}

case "$cmd" in
  up) up ;;
  down) down; echo "local-slurm: down" ;;
  status) SLURM_CONF="$DIR/slurm.conf" sinfo ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
