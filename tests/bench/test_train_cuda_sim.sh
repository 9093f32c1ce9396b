#!/usr/bin/env bash
# test_train_cuda_sim.sh - bench/train --backend cuda --quick against the CUDA simulator's
# build (mnist-train-cudasim, tests/cmake/45-cudasim.cmake; every device of one name,
# CUDASIM_DEVICE_NAMES=same): the results file must exist,
# say that it is simulated (at the top and in every column of ours), its diagnostic columns run
# on the graph column's plan (--gpu-plan-from), carry mnist-train's
# figures (graph and --no-graph, 1 and 2 ranks, 128 steps each: step time, images/s over the
# run and at the steady state, the kernels per step or "-"), mark every PyTorch column
# (eager, CUDA graph, inductor + CUDA graph) "not available" (no CUDA here) with no PyTorch
# figure anywhere, and judge no goal from simulated timings. The raw data (metrics JSON
# lines, raw.json) must be one archive beside the results file, which says where it is, with
# nothing of it left uncompressed in the results folder. A --build-dir without a
# mnist-train is refused with exit status 2 and nothing written.
#
#   tests/bench/test_train_cuda_sim.sh SIM_BUILD_DIR DATA_DIR
set -uo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 SIM_BUILD_DIR DATA_DIR" >&2
	exit 1
fi
SIM=$1 DATA=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# The training set without its test set: scoring 10,000 images on the simulator takes longer than training.
mkdir -p "$TMP/data"
ln -s "$(cd "$DATA/train" && pwd)" "$TMP/data/train"
"$ROOT/bench/train" --backend cuda --quick --build-dir "$SIM" --data "$TMP/data/train" --out-dir "$TMP/out" \
	>"$TMP/stdout" 2>"$TMP/stderr"
rc=$?
[ $rc -eq 0 ] || fail "bench/train exited $rc: $(tail -n 20 "$TMP/stderr")"
mds=("$TMP"/out/*.md)
if [ ${#mds[@]} -ne 1 ] || [ ! -f "${mds[0]}" ]; then
	fail "expected one results file in $TMP/out, found: ${mds[*]}"
	exit 1
fi
md=${mds[0]}
dir=${md%.md}
[ "$(cat "$TMP/stdout")" = "$md" ] || fail "stdout names '$(cat "$TMP/stdout")', not $md"
case $(basename "$md") in *-cudasim.md) ;; *) fail "the results file's name does not say cudasim: $md" ;; esac

# The raw data: one archive beside the results file, named in it; nothing raw left in the folder.
archive=$dir.tar.xz
[ -f "$archive" ] || fail "no raw-data archive $archive beside the results file"
grep -q "^\[\`$(basename "$archive")\`\]($(basename "$archive"))" "$md" || fail "the results file does not say where its raw data is"
left=$(find "$TMP/out" -type f ! -name '*.md' ! -name '*.png' ! -name '*.tar.xz')
[ -z "$left" ] || fail "raw data left uncompressed beside the results file: $left"
tar xJf "$archive" -C "$TMP/out" || fail "$archive does not unpack"

grep -q '^\*\*SIMULATED: mnist-train ran on the CUDA simulator' "$md" || fail "no SIMULATED label at the top"
grep -q '^- device (mnist-train.s start-up line): cuda:0 cudasim device (simulated on the CPU, not a GPU)' "$md" ||
	fail "the device line does not name the simulated device"
grep -q '^- PyTorch on CUDA: not available: ' "$md" || fail "the PyTorch line does not say 'not available'"

# Step-time table: ours (graph, --no-graph) "median / p95", PyTorch's three columns and the
# ratio "not available", the kernels per step a count or "-" (the trainer may not print graph_nodes).
na='not available'
num='[0-9]+(\.[0-9]+)?'
grep -q '^| model | batch/rank | ranks | mnist-train graph, SIMULATED | mnist-train graph, 1 step a launch, SIMULATED | mnist-train graph, --no-pdl, SIMULATED | mnist-train graph, --no-side-stream, SIMULATED | mnist-train --no-graph, SIMULATED | PyTorch eager | PyTorch CUDA graph | PyTorch inductor + CUDA graph | PyTorch best / mnist-train | kernels per step (graph nodes), SIMULATED |$' "$md" ||
	fail "the step-time table's header is not the expected one (SIMULATED on ours, PyTorch's compiled column, kernels per step)"
for r in 1 2; do
	row=$(sed -n '/^## Step time/,/^## /p' "$md" | grep -E "^\| seed \| 32 \| $r \| ")
	[ -n "$row" ] || { fail "no step-time row for seed b32 r$r"; continue; }
	pat="^\| seed \| 32 \| $r \| $num / $num \| $num / $num \| $num / $num \| $num / $num \| $num / $num \| $na \| $na \| $na \| $na \| ([0-9]+|-) \|$"
	[[ $row =~ $pat ]] || fail "step-time row r$r is not ours filled, PyTorch not available: $row"
done
# Images/s table: reps, then whole run and steady state for each column, ours numbers, PyTorch's
# six "not available", and the scaling.
grep -q '^| model | batch/rank | ranks | reps | mnist-train graph, SIMULATED | steady, SIMULATED | 1 step a launch, SIMULATED | steady, SIMULATED | --no-pdl, SIMULATED | steady, SIMULATED | --no-side-stream, SIMULATED | steady, SIMULATED | --no-graph, SIMULATED | steady, SIMULATED | PyTorch eager | steady | PyTorch CUDA graph | steady | PyTorch inductor + CUDA graph | steady | scaling |$' "$md" ||
	fail "the images/s table's header is not the expected one (whole run and steady state per column)"
for r in 1 2; do
	row=$(sed -n '/^## Images\/s/,/^## /p' "$md" | grep -E "^\| seed \| 32 \| $r \| ")
	[ -n "$row" ] || { fail "no images/s row for seed b32 r$r"; continue; }
	pat="^\| seed \| 32 \| $r \| 1 \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| [1-9][0-9]* \| $na \| $na \| $na \| $na \| $na \| $na \| $num \|$"
	[[ $row =~ $pat ]] || fail "images/s row r$r is not ours filled (whole and steady), PyTorch not available: $row"
done
[ "$(grep -c '^| seed | 32 | ' "$md")" -eq 4 ] || fail "expected 2 rows in each of the two tables"

# No PyTorch figure: no PyTorch run or step server, no metrics file of one, nothing in raw.json.
sed -n '/^<details>/,/^<\/details>/p' "$md" | grep -Eq 'train_ref.py|step_ref.py' && fail "the commands list a PyTorch run"
ls "$dir"/torch-* >/dev/null 2>&1 && fail "a PyTorch file exists: $(ls "$dir"/torch-*)"
for f in ours-seed-b32-r{1,2}-graph ours-seed-b32-r{1,2}-graph-single ours-seed-b32-r{1,2}-graph-nopdl \
	ours-seed-b32-r{1,2}-graph-noside ours-seed-b32-r{1,2}-nograph; do
	grep -Eq '"event": "step_times", "steps": 128,' "$dir/$f.jsonl" 2>/dev/null ||
		fail "$f.jsonl missing, or without 128 timed steps (--quick's --steps)"
done
# The diagnostic columns ran on the plan their cell's graph column measured (--gpu-plan-from its
# metrics file): every op the same way, and said so.
/usr/bin/python3 - "$dir" <<'PY' || fail "the diagnostic columns' plans: see above"
import json, sys
def plan(path):
    recs = [r for r in map(json.loads, open(path)) if r.get("event") == "gpu_plan"]
    return {o["key"]: o for o in recs[-1]["ops"]} if recs else {}
bad = []
for r in (1, 2):
    graph = plan(f"{sys.argv[1]}/ours-seed-b32-r{r}-graph.jsonl")
    for tag in ("graph-single", "graph-nopdl", "graph-noside", "nograph"):
        ran = plan(f"{sys.argv[1]}/ours-seed-b32-r{r}-{tag}.jsonl")
        if not graph or ran.keys() != graph.keys() or any(
                o["chosen"] != graph[k]["chosen"] or o["source"] != "gpu-plan-from" for k, o in ran.items()):
            bad.append(f"r{r} {tag}: {[(o['chosen'], o['source']) for o in ran.values()]}, "
                       f"the graph column's {[o['chosen'] for o in graph.values()]}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
/usr/bin/python3 - "$dir/raw.json" <<'PY' || fail "raw.json: see above"
import json, sys
raw = json.load(open(sys.argv[1]))
bad = []
if raw["simulated"] is not True:
    bad.append("simulated is not true")
for name, c in raw["cells"].items():
    for k in ("ours", "ours_single", "ours_nopdl", "ours_noside", "ours_nograph"):
        if not c.get(k) or not c[k]["ips"] > 0:
            bad.append(f"{name}: {k} not filled")
        elif not c[k].get("steady_ips", 0) > 0 or not c[k]["steady_ips"] >= c[k]["ips"] * 0.5:
            bad.append(f"{name}: {k}: steady images/s missing or implausible: {c[k].get('steady_ips')}")
    for k in ("torch", "torch_graph", "torch_compiled"):
        if c.get(k) is not None:
            bad.append(f"{name}: {k} has a figure: {c[k]}")
        if not c["not_run"].get(k, "").startswith("not available"):
            bad.append(f"{name}: {k} not marked not available: {c['not_run'].get(k)}")
if sorted(raw["cells"]) != ["seed-b32-r1", "seed-b32-r2"]:
    bad.append(f"cells: {sorted(raw['cells'])}")
for b in bad:
    print("raw.json:", b)
sys.exit(1 if bad else 0)
PY

# Goals (issue 25's baseline, issue 21's step times, PyTorch, time to accuracy, issue 25's plan
# measurement, issue 15's allreduce): every one "not measured (simulated run)", none met or
# missed, and a figure shown beside one only labelled SIMULATED; kernels per step a row apart,
# "not judged".
table=$(sed -n '/^## Goals/,/^## /p' "$md" | grep -E '^\| [^-g]')
goals=$(echo "$table" | grep -v '^| kernels per step')
[ "$(echo "$goals" | grep -c .)" -eq 9 ] || fail "expected 9 goal rows, got: $goals"
echo "$table" | grep -q '^| kernels per step (graph nodes): a diagnostic, not a goal | .*(SIMULATED) | not judged |$' ||
	fail "no kernels-per-step row shown as a diagnostic, not judged: $table"
echo "$goals" | grep -vq '| not measured (simulated run) |$' && fail "a goal is judged from a simulated run: $goals"
echo "$goals" | awk -F' [|] ' '$2 != "-" && $2 !~ /\(SIMULATED\)$/' | grep -q . &&
	fail "a goal's simulated figure is not labelled SIMULATED: $goals"

# A build directory without mnist-train: exit 2, one message naming --build-dir, nothing written.
"$ROOT/bench/train" --backend cuda --quick --build-dir "$TMP/nowhere" --data "$DATA/train" --out-dir "$TMP/out2" \
	>"$TMP/stdout2" 2>"$TMP/stderr2"
rc=$?
[ $rc -eq 2 ] || fail "a missing build exited $rc, not 2"
grep -q -- "--build-dir: $TMP/nowhere/mnist-train missing" "$TMP/stderr2" || fail "no message naming --build-dir: $(cat "$TMP/stderr2")"
[ -e "$TMP/out2" ] && fail "a refused run wrote $TMP/out2"

if [ $failures -ne 0 ]; then
	echo "--- results file"
	cat "$md"
	exit 1
fi
echo "PASS: $md: simulated, ours filled (2 rows: step time, whole-run and steady images/s), PyTorch not available, no goal judged"
