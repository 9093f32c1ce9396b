# mpirun_args.sh - sourced by the simulator's mnist-train scripts (graph_nodes.sh,
# graph_steps.sh, plan_lazy_load.sh, plan_once.sh, side_stream.sh, step_time.sh, train_sim.sh) and by
# tests/e2e/test_host_gaps.sh, whose arguments end "MPIRUN [MPIRUN_ARGS...] -- REST...".
#
#   split_mpirun "$@"; set -- "${AFTER[@]+"${AFTER[@]}"}"
#
# sets MPIRUN (an array: mpirun and its options, up to "--") and AFTER (what follows "--").
#
#   train_args MIN "REST USAGE" "$@"; set -- "${AFTER[@]+"${AFTER[@]}"}"
#
# for arguments "TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- REST...": at least MIN words,
# else the usage and exit 1; sets TRAIN and DATA, then splits the rest as split_mpirun.
split_mpirun() {
	MPIRUN=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		MPIRUN+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	AFTER=("$@")
}

train_args() {
	local min=$1 rest=$2
	shift 2
	if [ $# -lt "$min" ]; then
		echo "usage: $0 TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- $rest" >&2
		exit 1
	fi
	TRAIN=$1 DATA=$2
	shift 2
	split_mpirun "$@"
}

# The checks' common part (graph_nodes.sh, graph_steps.sh, plan_lazy_load.sh, plan_once.sh,
# side_stream.sh, step_time.sh, train_sim.sh): checks_begin makes
# the scratch folder TMP (removed at exit) and zeroes failures; fail MESSAGE prints and counts
# one; field NAME KEY reads KEY= from the summary line of $TMP/NAME.out; launch_of NAME the
# "launch" of the gpu_plan record in $TMP/NAME.jsonl; follows_plan (below) whether a run
# followed another's plan; train_only prints a folder of TMP that
# holds DATA's training files alone (links): a run given it as --data scores no test set,
# for the checks that compare the trained model, not its accuracy (10,000 test images are a
# third of a simulated LeNet-5 run of 16 steps; mnist_train_only, tests/e2e/subset.sh).
# shellcheck source=../e2e/subset.sh
. "$(dirname "${BASH_SOURCE[0]}")/../e2e/subset.sh"
checks_begin() {
	TMP=$(mktemp -d)
	trap 'rm -rf "$TMP"' EXIT
	failures=0
}

train_only() {
	mnist_train_only "$DATA" "$TMP/train-only" && echo "$TMP/train-only/train"
}

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

field() {
	grep '^summary:' "$TMP/$1.out" | head -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}

launch_of() {
	python3 -c 'import json, sys
print(*[r.get("launch") for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"])' "$TMP/$1.jsonl"
}

# follows_plan NAME FROM: NAME's run (given --gpu-plan-from $TMP/FROM.jsonl) ran every op of
# FROM's plan the way FROM chose, and said so (source gpu-plan-from), measuring none of them.
# Prints what differs; exit 0 when nothing does.
follows_plan() {
	python3 -c 'import json, sys
def plan(path):
    recs = [r for r in map(json.loads, open(path)) if r.get("event") == "gpu_plan"]
    return {o["key"]: o for o in recs[-1]["ops"]} if recs else {}
ran, given = plan(sys.argv[1]), plan(sys.argv[2])
bad = ["no gpu_plan record"] if not ran or not given else []
for key, o in given.items():
    r = ran.get(key)
    if r is None:
        bad.append("%s: not met" % o["shape"])
    elif r["chosen"] != o["chosen"] or r["source"] != "gpu-plan-from":
        bad.append("%s: ran %s (%s), the plan says %s" % (o["shape"], r["chosen"], r["source"], o["chosen"]))
print("; ".join(bad))
sys.exit(1 if bad else 0)' "$TMP/$1.jsonl" "$TMP/$2.jsonl"
}
