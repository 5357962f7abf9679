# scripts/gpu-step.sh — sourced by the GPU check scripts (gpu-check.sh,
# gpu-check-flash.sh) after they set $log (their log folder): step NAME
# LIMIT_S COMMAND... runs one timed step, tees its output to $log/NAME.log
# and appends "PASS/SKIP/FAIL  NAME ..." to the summary array; returns the
# command's exit status (77 = skip). Also prints the GPUs once.
mkdir -p "$log"
summary=()
step() { # name, time limit (s), command...
  local name=$1 lim=$2; shift 2
  local t0=$(date +%s) r
  echo "=== $name"
  timeout "$lim" "$@" 2>&1 | tee "$log/$name.log"
  r=${PIPESTATUS[0]}
  local dt=$(( $(date +%s) - t0 ))
  case $r in
    0) summary+=("PASS  $name (${dt}s)");;
    77) summary+=("SKIP  $name: $(grep -m1 -o 'SKIP.*' "$log/$name.log")");;
    *) summary+=("FAIL  $name (exit $r, ${dt}s; log $log/$name.log)");;
  esac
  return $r
}
echo "=== GPUs"; nvidia-smi -L 2>&1 || echo "(nvidia-smi not found)"
