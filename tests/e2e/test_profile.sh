#!/usr/bin/env bash
# test_profile.sh - --profile: where one step's time goes, op by op, on one backend.
#
#   tests/e2e/test_profile.sh BACKEND MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
#
# BACKEND is passed as --backend (host, or cuda with the simulator's build:
# tests/cmake/45-cudasim.cmake). For LeNet-5 and the mlp, 1 rank (and the mlp
# at 2 ranks, where the step holds an allreduce), a short run with --profile
# and --metrics:
#   - rank 0 prints one table: a row per op of the step (LeNet-5's 18 at one
#     rank: 5 forward, the loss, 5 weight gradients, 4 input gradients, a pool
#     gradient, the allreduce, the optimizer; the mlp's at 2 ranks, run with
#     --clip-grad-norm, the clip too, labelled "clip", between the allreduce and
#     the optimizer: 2 kernels on the CUDA backend), named by layer and phase; on the
#     CUDA backend the dense layers' forwards, the loss and their input and
#     weight gradients and conv2's pool gradient are one op, the step's head
#     (struct head_req): 8 rows;
#   - --metrics gets one op_times record with the same ops; their times add up
#     to within 10% of the step they were taken from, which is more than 0;
#   - on the CUDA backend every op has a kernel count (graph nodes), and the
#     gradient GEMMs at least one; on the host none ("-", null);
#   - the model trained is left as it was: param_crc32 equals a run without
#     --profile;
#   - LeNet-5's run on the CUDA backend has its plan in --metrics: one gpu_plan record
#     of its 11 GEMMs, 3 convolution ops (2 forwards, conv2's input gradient) and its
#     head, each timed, the chosen way among its candidates (none on the host); each
#     dense forward with its ReLU lists cuBLASLt's ways that keep the ReLU's bit mask
#     (lt.relu_aux_bias.*: the simulator offers every epilogue, and refuses a mask
#     whose leading dimension breaks cublasLt.h's rule, which would leave only the
#     ways without it);
#   - the same run's --verbose table (rank 0's stderr): a row per op of that record,
#     in its order, naming the op, whose choice it is and the way chosen with its time;
#   - on the CUDA backend each op's own time: every op that launches a kernel takes
#     some, and the same op takes the same time, within a factor of 2, in a run on the
#     same plan with --no-side-stream (the profile times each op alone, in order: a
#     weight gradient left on the second stream would show ~0 us here, its time
#     charged to the op that joins it).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -lt 4 ]; then
	echo "usage: $0 BACKEND MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
fi
BACKEND=$1
shift
. "$(dirname "$0")/../script_args.sh"

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-profile.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
# The training files alone (no sibling test/: no evaluation, which the profile does not need).
mkdir -p "$TMP/data/train"
ln -s "$(cd "$DATA/train" && pwd)"/* "$TMP/data/train/"

# run NAME RANKS ARGS...
run() {
	local name=$1 ranks=$2
	shift 2
	timeout -k 10 150 "${MPIRUN[@]}" -n "$ranks" "$TRAIN" --backend "$BACKEND" \
		--data "$TMP/data/train" --limit 320 --epochs 1 --log-every 1000 \
		"$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ "$rc" -eq 0 ] || { fail "$name: mnist-train $* exited with status $rc:"; sed 's/^/    /' "$TMP/$name.err" >&2; }
}
crc() { sed -n 's/^summary:.* param_crc32=\([0-9a-f]*\).*/\1/p' "$TMP/$1.out"; }

# check NAME RANKS OPS: the table and the record of run NAME, OPS ops expected.
check() {
	local name=$1 ops=$2
	local rows
	rows=$(sed -n '/^profile: /,/^summary:/p' "$TMP/$name.out" | grep -c '^  [a-z0-9 ]' || true)
	# The header row is one of them.
	[ "$rows" -eq $((ops + 1)) ] || fail "$name: the table has $((rows - 1)) op rows, expected $ops"
	python3 - "$TMP/$name.jsonl" "$ops" "$BACKEND" <<'PY' || fail "$name: op_times: see above"
import json, sys
path, ops, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
recs = [json.loads(l) for l in open(path) if '"op_times"' in l]
recs = [r for r in recs if r.get("event") == "op_times"]
bad = []
if len(recs) != 1:
    sys.exit(print("%d op_times records, expected 1" % len(recs)) or 1)
r = recs[0]
if len(r["ops"]) != ops:
    bad.append("%d ops, expected %d" % (len(r["ops"]), ops))
total = sum(o["us"] for o in r["ops"])
if not r["step_us"] > 0 or abs(total - r["step_us"]) > 0.10 * r["step_us"] or abs(total - r["ops_us"]) > 1e-6 * max(1.0, total):
    bad.append("the ops add up to %.1f us (ops_us %.1f), the step took %.1f us: not within 10%%" % (total, r["ops_us"], r["step_us"]))
for o in r["ops"]:
    if backend == "cuda":
        if o["kernels"] is None:
            bad.append("%s %s %s: no kernel count" % (o["layer"], o["phase"], o["op"]))
        elif o["phase"] == "weight grad" and o["kernels"] < 1:
            bad.append("%s weight grad: %d kernels" % (o["layer"], o["kernels"]))
    elif o["kernels"] is not None:
        bad.append("%s %s: a kernel count (%s) on the host" % (o["layer"], o["phase"], o["kernels"]))
    if not o["phase"]:
        bad.append("%s: no phase" % o["op"])
if bad:
    sys.exit(print("\n".join(bad)) or 1)
print("ok: op_times: %d ops adding up to %.1f us of a %.1f us step" % (len(r["ops"]), total, r["step_us"]))
PY
}

run lenet 1 --model lenet --profile --metrics "$TMP/lenet.jsonl" --verbose
# The same run without --profile; on a GPU on the plan the first measured (--gpu-plan-from), so
# that the two differ in the profile alone (and the second measures no plan of its own).
same_plan=()
[ "$BACKEND" = cuda ] && same_plan=(--gpu-plan-from "$TMP/lenet.jsonl")
run lenet_plain 1 --model lenet "${same_plan[@]}"
# The CUDA backend runs the step's head (the dense layers' forwards, the loss, their input
# and weight gradients, the pool gradient under them: LeNet-5's 11 ops, the mlp's 9) as one
# op; the host backend op by op.
head_ops() { [ "$BACKEND" = cuda ] && echo $(($1 - $2 + 1)) || echo "$1"; }
check lenet "$(head_ops 18 11)"
[ -n "$(crc lenet)" ] && [ "$(crc lenet)" = "$(crc lenet_plain)" ] ||
	fail "lenet: param_crc32 $(crc lenet) with --profile, $(crc lenet_plain) without: the profile changed the model"
grep -q '^  conv1  weight grad ' "$TMP/lenet.out" || fail "lenet: no 'conv1 weight grad' row"
# The CUDA backend's plan of the same run: one gpu_plan record, LeNet-5's 11 GEMMs and 3
# convolution ops, each measured by rank 0 with its choice among its candidates; none on
# the host.
python3 - "$TMP/lenet.jsonl" "$BACKEND" <<'PY' || fail "lenet: gpu_plan: see above"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if r.get("event") == "gpu_plan"]
if sys.argv[2] != "cuda":
    sys.exit(print("%d gpu_plan records on the host, expected none" % len(recs)) or 1 if recs else 0)
want = {"gemm": 11, "conv_forward": 2, "conv_input_grad": 1, "head": 1}
got = [{k: sum(o["op"] == k for o in r["ops"]) for k in want} for r in recs]
if len(recs) != 1 or got[0] != want or len(recs[0]["ops"]) != sum(want.values()):
    sys.exit(print("%d gpu_plan records (%s ops), expected one of %s" % (len(recs), got, want)) or 1)
for op in recs[0]["ops"]:
    names = [c["name"] for c in op["candidates"]]
    timed = [c["us"] for c in op["candidates"] if c["us"] is not None]
    if op["chosen"] not in names or (len(names) > 1 and (op["source"] != "measured" or len(timed) != len(names))):
        sys.exit(print("%s %s: chose %s (%s) among %s, timed %d" % (op["op"], op["shape"], op["chosen"], op["source"], names, len(timed))) or 1)
relu = [op for op in recs[0]["ops"] if op["op"] == "gemm" and op["shape"].endswith(" bias+relu")]
for op in relu:
    if not any(c["name"].startswith("lt.relu_aux_bias.") for c in op["candidates"]):
        sys.exit(print("gemm %s: no cuBLASLt way keeping the ReLU's bit mask (lt.relu_aux_bias.*) among %s"
                       % (op["shape"], [c["name"] for c in op["candidates"]])) or 1)
if len(relu) != 2:
    sys.exit(print("%d dense forwards with a ReLU in the plan, expected 2 (fc1, fc2)" % len(relu)) or 1)
print("ok: gpu_plan: 11 GEMMs, 3 convolution ops and the head, each measured, the choice among its candidates; "
      "fc1's and fc2's forwards offered with the ReLU's bit mask")
PY
if [ "$BACKEND" = cuda ]; then
	grep -q 'CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD' "$TMP/lenet.err" &&
		fail "lenet: the simulator refused a ReLU mask's leading dimension: $(grep 'EPILOGUE_AUX_LD' "$TMP/lenet.err")"
	# --verbose's table against the record it is printed from (cuda/plan_json.c, print_table).
	python3 - "$TMP/lenet.jsonl" "$TMP/lenet.err" <<'PY' || fail "lenet: --verbose's plan table: see above"
import json, re, sys
plan = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"][-1]
lines = open(sys.argv[2]).read().splitlines()
head = "plan: %d ops on %s (%s)" % (len(plan["ops"]), plan["device"], plan["library"])
if head not in lines:
    sys.exit(print("no line '%s' on rank 0's stderr" % head) or 1)
row = re.compile(r"^  (\S.*?) +(measured|heuristic|checkpoint|gpu-plan-from) +(-|[0-9]+\.[0-9]{2})  (\S+)$")
rows = [m.groups() for m in map(row.match, lines[lines.index(head):]) if m]
bad = ["%d op rows, the plan has %d ops" % (len(rows), len(plan["ops"]))] if len(rows) != len(plan["ops"]) else []
for o, (name, how, us, chosen) in zip(plan["ops"], rows):
    want = ("%s %s" % (o["op"], o["shape"]))[:47]
    t = [c["us"] for c in o["candidates"] if c["name"] == o["chosen"] and c["us"] is not None]
    if name != want or how != o["source"] or chosen != o["chosen"] or \
            (us == "-") != (not t) or (t and abs(float(us) - t[0]) > 0.006):
        bad.append("row '%s | %s | %s | %s', the record's op '%s' %s %s (%s us)"
                   % (name, how, us, chosen, want, o["source"], o["chosen"], t[0] if t else "-"))
if bad:
    sys.exit(print("\n".join(bad)) or 1)
print("ok: --verbose: the plan's table, a row per op of the record (%d) with its chosen way" % len(rows))
PY
	# Each op's own time against a run on the same plan with one stream.
	run lenet_one 1 --model lenet --profile --no-side-stream --metrics "$TMP/lenet_one.jsonl" \
		--gpu-plan-from "$TMP/lenet.jsonl"
	python3 - "$TMP/lenet.jsonl" "$TMP/lenet_one.jsonl" <<'PY' || fail "lenet: op times against --no-side-stream's: see above"
import json, sys
def ops(path):
    return [r for r in map(json.loads, open(path)) if r.get("event") == "op_times"][-1]["ops"]
two, one = ops(sys.argv[1]), ops(sys.argv[2])
name = lambda o: "%s %s %s %s" % (o["layer"], o["phase"], o["op"], o["shape"])
if [name(o) for o in two] != [name(o) for o in one]:
    sys.exit(print("the ops differ with --no-side-stream: %s against %s" % ([name(o) for o in two], [name(o) for o in one])) or 1)
bad = []
for a, b in zip(two, one):
    if not a["kernels"]:
        continue
    if not (a["us"] > 0 and b["us"] > 0) or max(a["us"], b["us"]) > 2.0 * min(a["us"], b["us"]):
        bad.append("%s: %.2f us, %.2f us with --no-side-stream (%d kernels): not within a factor of 2"
                   % (name(a), a["us"], b["us"], a["kernels"]))
if bad:
    sys.exit(print("\n".join(bad)) or 1)
print("ok: op times: each of the %d ops that launch kernels took time, within a factor of 2 of its time on one stream"
      % sum(1 for o in two if o["kernels"]))
PY
fi

run mlp2 2 --model mlp --hidden 64,32 --clip-grad-norm 0.5 --profile --metrics "$TMP/mlp2.jsonl"
# forward 3, loss, weight grads 3, input grads 2, allreduce, clip, optimizer (the head: all
# but the allreduce, the clip and the optimizer)
check mlp2 "$(head_ops 12 9)"
grep -q '^ *allreduce *allreduce ' "$TMP/mlp2.out" || fail "mlp at 2 ranks: no allreduce row"
# --clip-grad-norm: one op between the allreduce and the optimizer, phase "clip"; on the
# CUDA backend its two kernels (the norm, the scale).
python3 - "$TMP/mlp2.jsonl" "$BACKEND" <<'PY' || fail "mlp at 2 ranks, --clip-grad-norm: see above"
import json, sys
ops = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "op_times"][-1]["ops"]
seq = [(o["phase"], o["op"]) for o in ops][-3:]
want = [("allreduce", "allreduce"), ("clip", "clip_grad_norm"), ("optimizer", "sgd_update")]
kernels = ops[-2]["kernels"]
if seq != want or kernels != (2 if sys.argv[2] == "cuda" else None):
    sys.exit(print("the step ends %s (clip's kernels %s), expected %s (2 kernels on cuda)" % (seq, kernels, want)) or 1)
print("ok: --clip-grad-norm: the clip op between the allreduce and the optimizer, labelled clip, %s kernels" % kernels)
PY
[ "$(grep -c '^profile: ' "$TMP/mlp2.out")" -eq 1 ] || fail "mlp at 2 ranks: the table is printed $(grep -c '^profile: ' "$TMP/mlp2.out") times, expected once (rank 0)"

if [ "$failures" -eq 0 ]; then
	echo "PASS test_profile $BACKEND"
	exit 0
fi
exit 1
