#!/usr/bin/env bash
# test_train_cuda_sim.sh - bench/train --backend cuda --quick against the CUDA simulator's
# build (mnist-train-cudasim, tests/cmake/45-cudasim.cmake): the results file must exist,
# say that it is simulated, carry mnist-train's figures (graph and --no-graph, 1 and 2
# ranks) and mark every PyTorch column "not available" (no CUDA here) with no PyTorch
# figure anywhere, and judge no goal from simulated timings. A --build-dir without a
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

grep -q '^\*\*SIMULATED: mnist-train ran on the CUDA simulator' "$md" || fail "no SIMULATED label at the top"
grep -q '^- device (mnist-train.s start-up line): cuda:0 cudasim device 0 (simulated on the CPU, not a GPU)' "$md" ||
	fail "the device line does not name the simulated device"
grep -q '^- PyTorch on CUDA: not available: ' "$md" || fail "the PyTorch line does not say 'not available'"

# Each row: our four figures numbers, then PyTorch's four columns and the ratio "not available".
na='not available'
for r in 1 2; do
	row=$(grep -E "^\| seed \| 32 \| $r \| " "$md")
	[ -n "$row" ] || { fail "no matrix row for seed b32 r$r"; continue; }
	num='[0-9]+(\.[0-9]+)?'
	pat="^\| seed \| 32 \| $r \| [1-9][0-9]* \| $num / $num \| [1-9][0-9]* \| $num / $num \| $na \| $na \| $na \| $na \| $na \| $num \|$"
	[[ $row =~ $pat ]] || fail "row r$r is not ours filled, PyTorch not available: $row"
done
[ "$(grep -c '^| seed | 32 | ' "$md")" -eq 2 ] || fail "expected exactly 2 matrix rows"

# No PyTorch figure: no PyTorch run, no metrics file of one, nothing in raw.json.
grep -q '^MASTER_ADDR=.*train_ref.py' "$md" && fail "the commands list a PyTorch run"
ls "$dir"/torch-* >/dev/null 2>&1 && fail "a PyTorch metrics file exists: $(ls "$dir"/torch-*)"
for f in ours-seed-b32-r1-graph ours-seed-b32-r1-nograph ours-seed-b32-r2-graph ours-seed-b32-r2-nograph; do
	grep -q '"event": "step_times"' "$dir/$f.jsonl" 2>/dev/null || fail "$f.jsonl missing or without step times"
done
/usr/bin/python3 - "$dir/raw.json" <<'PY' || fail "raw.json: see above"
import json, sys
raw = json.load(open(sys.argv[1]))
bad = []
if raw["simulated"] is not True:
    bad.append("simulated is not true")
for name, c in raw["cells"].items():
    for k in ("ours", "ours_nograph"):
        if not c.get(k) or not c[k]["ips"] > 0:
            bad.append(f"{name}: {k} not filled")
    for k in ("torch", "torch_graph"):
        if c.get(k) is not None:
            bad.append(f"{name}: {k} has a figure: {c[k]}")
if sorted(raw["cells"]) != ["seed-b32-r1", "seed-b32-r2"]:
    bad.append(f"cells: {sorted(raw['cells'])}")
for b in bad:
    print("raw.json:", b)
sys.exit(1 if bad else 0)
PY

# Goals: every one "not measured (simulated run)", none met or missed.
goals=$(sed -n '/^## Goals/,/^## /p' "$md" | grep -E '^\| [^-g]')
[ "$(echo "$goals" | grep -c .)" -eq 5 ] || fail "expected 5 goal rows, got: $goals"
echo "$goals" | grep -vq '| not measured (simulated run) |$' && fail "a goal is judged from a simulated run: $goals"

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
echo "PASS: $md: simulated, ours filled (2 rows), PyTorch not available, no goal judged"
