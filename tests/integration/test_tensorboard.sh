#!/usr/bin/env bash
# logging.tensorboard_dir and logging.timing_log_level (docs/observability.md):
# dp=2 ZeRO-1 for 6 iterations writes one event file (the last rank's); it is
# read back with Debian's python3-protobuf through Event / Summary
# descriptors written here from TensorFlow's public event.proto and
# summary.proto: every record's length and data CRC-32C (masked) check, the
# first event is file_version "brain.Event:2", and the scalars carry
# Megatron's tags with the JSONL's values (lm loss, grad-norm, learning-rate,
# batch-size per iteration and "vs samples" at the consumed samples; at the
# log lines iteration-time, throughput and the timers' "<name>-time"). The
# stdout shows Megatron's "(min, max) time across ranks (ms):" report with
# its section names; timing_log_level 0 prints none. Under a simulated link
# of 0.5 GB/s (MEGATRAIN_SIM_LINK) the log line has the exposed
# communication, and the JSONL's is at least the link's time for the step's
# dp bytes (bus bytes >= bytes (n-1)/n = bytes / 2 for every collective on 2
# ranks, so >= bytes / 1e6 ms).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null ||
  { echo "SKIP: python3-protobuf not installed (scripts/install-deps.sh test)"; exit 77; }
export MEGATRAIN_SIM_LINK=0.5,10
MPI="mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_SIM_LINK"
$MPI "$MT" --config $CFG --set training.train_iters=6 --set logging.log_interval=3 \
  --set training.eval_interval=6 --set parallel.zero_stage=1 \
  --set logging.timing_log_level=1 --set logging.tensorboard_dir="$TMP/tb" \
  --set logging.log_timers_to_tensorboard=true --set logging.log_memory_to_tensorboard=true \
  --set logging.metrics_file="$TMP/m.jsonl" >"$TMP/run.log" 2>&1 || { tail -20 "$TMP/run.log"; exit 1; }
[ "$(grep -c '^(min, max) time across ranks (ms):$' "$TMP/run.log")" = 2 ] ||
  { echo "FAIL: expected 2 timer reports"; cat "$TMP/run.log"; exit 1; }
for s in forward-backward all-grads-sync params-all-gather optimizer-inner-step optimizer; do
  grep -Eq "^    $s \.+: \([0-9.]+, [0-9.]+\)$" "$TMP/run.log" || { echo "FAIL: no $s line"; exit 1; }
done
! grep -q "forward-compute" "$TMP/run.log" || { echo "FAIL: a level-2 timer at level 1"; exit 1; }
grep -Eq "\| exposed communication \(ms\): [0-9.]+ of [0-9.]+ \|" "$TMP/run.log" ||
  { echo "FAIL: no exposed communication in the log line"; exit 1; }
ls "$TMP"/tb/events.out.tfevents.* >/dev/null
[ "$(ls "$TMP"/tb | wc -l)" = 1 ] || { echo "FAIL: more than one event file"; ls "$TMP/tb"; exit 1; }
/usr/bin/python3 - "$TMP"/tb/events.out.tfevents.* "$TMP/m.jsonl" <<'PY'
import json, math, struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# tensorflow/core/framework/summary.proto and tensorflow/core/util/event.proto
# (the fields this reader needs, with their public numbers and types)
F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tensorflow", syntax="proto3")
def msg(name, fields, oneof=None):
    m = fd.message_type.add(name=name)
    if oneof:
        m.oneof_decl.add(name=oneof[0])
    for fname, num, typ, extra in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=F.LABEL_OPTIONAL)
        if extra.get("repeated"): f.label = F.LABEL_REPEATED
        if "type_name" in extra: f.type_name = extra["type_name"]
        if oneof and fname in oneof[1]: f.oneof_index = 0
    return m
val = msg("SummaryValue", [("node_name", 7, F.TYPE_STRING, {}), ("tag", 1, F.TYPE_STRING, {}),
                           ("simple_value", 2, F.TYPE_FLOAT, {}),
                           ("obsolete_old_style_histogram", 3, F.TYPE_BYTES, {})],
          ("value", ["simple_value", "obsolete_old_style_histogram"]))
msg("Summary", [("value", 1, F.TYPE_MESSAGE, {"repeated": 1, "type_name": ".tensorflow.SummaryValue"})])
msg("Event", [("wall_time", 1, F.TYPE_DOUBLE, {}), ("step", 2, F.TYPE_INT64, {}),
              ("file_version", 3, F.TYPE_STRING, {}), ("graph_def", 4, F.TYPE_BYTES, {}),
              ("summary", 5, F.TYPE_MESSAGE, {"type_name": ".tensorflow.Summary"})],
    ("what", ["file_version", "graph_def", "summary"]))
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
Event = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorflow.Event"))

def crc32c(data):  # Castagnoli, reflected 0x82f63b78, bit by bit
    c = 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff
assert crc32c(b"123456789") == 0xe3069283
def masked(c): return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff

raw = open(sys.argv[1], "rb").read()
events, pos = [], 0
while pos < len(raw):
    (n,) = struct.unpack_from("<Q", raw, pos)
    (lc,) = struct.unpack_from("<I", raw, pos + 8)
    assert lc == masked(crc32c(raw[pos:pos + 8])), "length CRC at %d" % pos
    data = raw[pos + 12:pos + 12 + n]
    (dc,) = struct.unpack_from("<I", raw, pos + 12 + n)
    assert dc == masked(crc32c(data)), "data CRC at %d" % pos
    e = Event(); e.ParseFromString(data); events.append(e)
    pos += 16 + n
assert pos == len(raw)
assert events[0].WhichOneof("what") == "file_version" and events[0].file_version == "brain.Event:2"
sc = {}
for e in events[1:]:
    assert e.WhichOneof("what") == "summary" and len(e.summary.value) == 1
    assert abs(e.wall_time - events[0].wall_time) < 3600
    v = e.summary.value[0]
    sc.setdefault(v.tag, {})[e.step] = v.simple_value

f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
recs = [json.loads(l) for l in open(sys.argv[2])]
recs = [r for r in recs if "lm_loss" in r]
assert [r["iteration"] for r in recs] == list(range(1, 7))
for tag, key in (("lm loss", "lm_loss"), ("grad-norm", "grad_norm"), ("learning-rate", "lr"),
                 ("batch-size", "global_batch_size")):
    got = sc[tag]
    assert sorted(got) == list(range(1, 7)), (tag, sorted(got))
    vs = sc[tag + " vs samples"]
    for r in recs:
        assert got[r["iteration"]] == f32(r[key]), (tag, r["iteration"], got[r["iteration"]], r[key])
        assert vs[r["consumed_samples"]] == f32(r[key]), (tag, r["consumed_samples"])
val = [r for r in open(sys.argv[2]) if "val_loss" in r]
assert sc["lm loss validation"][6] == f32(json.loads(val[0])["val_loss"])
for tag in ("iteration-time", "throughput", "forward-backward-time", "all-grads-sync-time",
            "params-all-gather-time", "optimizer-time"):
    assert sorted(sc[tag]) == [3, 6] and all(x > 0 for x in sc[tag].values()), (tag, sc.get(tag))
assert "forward-compute-time" not in sc
for r in recs:  # 0.5 GB/s: the dp bytes take >= bytes / 2 / 0.5e6 ms, blocking
    link_ms = r["comm_bytes"]["dp"] / 1e6
    assert r["exposed_comm_ms"] >= 0.99 * link_ms and r["comm_ms"] >= 0.99 * link_ms, (r, link_ms)
    assert r["exposed_comm_ms_by_group"]["dp"] <= r["exposed_comm_ms"] + 1e-9

assert all(x > 0 for x in sc["mem-allocated-bytes"].values()) and len(sc["mem-allocated-bytes"]) == 6
assert all(sc["mem-max-allocated-bytes"][i] >= sc["mem-allocated-bytes"][i] for i in range(1, 7))
print("event file: %d records, CRCs good, %d tags agree with the JSONL" % (len(events), len(sc)))
PY
# level 0 (Megatron's default): no timer report
"$MT" --config $CFG --set training.train_iters=4 --set logging.log_interval=2 >"$TMP/l0.log" 2>&1 || { tail "$TMP/l0.log"; exit 1; }
grep -q "iteration        4/" "$TMP/l0.log"
! grep -q "time across ranks" "$TMP/l0.log" || { echo "FAIL: timers printed at level 0"; exit 1; }
echo "PASS"
