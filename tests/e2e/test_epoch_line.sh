#!/usr/bin/env bash
# test_epoch_line.sh - rank 0's line after each epoch, its --metrics record and the summary's
# epoch_loss, against the loss lines every rank printed; and where the progress line is drawn.
#
#   tests/e2e/test_epoch_line.sh MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- [progress] TRAIN_ARGS...
#
# First --version and -h at 2 ranks (one text, rank 0's, status 0). Then one run at 2 ranks (--limit 2000 --batch-size 25: 40 steps an epoch, 3 epochs, --log-every 7:
# steps 0, 7, ..., 35 of each epoch logged on each rank, --eval-every 2), each rank's output in
# its own file (--output-filename). Then:
#   - rank 0, and only rank 0, prints one epoch line a epoch, in order, after that epoch's loss
#     lines and before the next epoch's: `epoch: E, mean loss: L, epoch time: T s, images per
#     second: I`, with `, test accuracy: A` after epoch 1 (scored, as the eval line says) and
#     after no other (epoch 2 is the last, not scored by --eval-every 2);
#   - L is the mean of that epoch's loss lines of both ranks (recomputed from the logs, within
#     2e-7 relative: the lines' floats are rounded to 8 digits);
#   - the --metrics epoch records agree with the lines (epoch, mean_loss, losses = 12 a epoch,
#     images = 2000 a epoch, images_per_second = images / seconds, test_accuracy after epoch 1);
#     the epochs' seconds add up to at most train_seconds;
#   - the summary's epoch_loss is the last epoch line's L, its test_accuracy the last line's.
# With "progress" (the host backend's registration; mnist-train's stderr is a pipe here):
#   - --progress on: rank 0's stderr holds the redrawn line, epochs from 0 ("epoch: 0 of 0-2,
#     step: S of 40"), and rank 1's none;
#   - --progress auto under mpirun on pipes: no line; started by script(1) on a terminal: the
#     line reaches mpirun's terminal; the same with mpirun writing the ranks' output to files
#     (--output-filename): no line, in the files or on the terminal.
# TRAIN_ARGS (e.g. --backend cuda on the simulator) are given to every run. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/../cudasim/mpirun_args.sh"
train_args 3 "[progress] [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
PROGRESS=0
if [ "${1:-}" = progress ]; then
	PROGRESS=1
	shift
fi
EXTRA=("$@")
checks_begin
PYTHON=${PYTHON:-python3}
COMMON=(--data "$DATA/train" --test-data "$DATA/test" --limit 2000 --batch-size 25 --epochs 3
	--log-every 7 --eval-every 2)

# run NAME ARGS...: 2 ranks, each rank's output under $TMP/NAME/1/rank.R; 0 on success.
run() {
	local name=$1
	shift
	if ! timeout -k 10 200 "${MPIRUN[@]}" -n 2 --output-filename "$TMP/$name" "$TRAIN" "${COMMON[@]}" \
		"${EXTRA[@]+"${EXTRA[@]}"}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train exited with an error"
		sed 's/^/    /' "$TMP/$name.err"
		return 1
	fi
}

# --version and -h under mpirun: rank 0's text alone, status 0, nothing trained.
VERSION=$(sed -nE 's/^project\(mnist_ddp VERSION ([0-9.]+).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
out=$(timeout -k 10 60 "${MPIRUN[@]}" -n 2 "$TRAIN" --version 2>"$TMP/version.err")
[ $? -eq 0 ] && [ "$out" = "mnist-train $VERSION" ] ||
	fail "--version at 2 ranks printed '$out' (status not 0, or not 'mnist-train $VERSION')"
out=$(timeout -k 10 60 "${MPIRUN[@]}" -n 2 "$TRAIN" -h 2>"$TMP/help.err")
[ $? -eq 0 ] && [ "$(grep -c '^Usage:' <<<"$out")" = 1 ] && grep -q -- '--epochs N' <<<"$out" &&
	! grep -q '^summary:' <<<"$out" ||
	fail "-h at 2 ranks: not one usage text with status 0: $(head -n 3 <<<"$out")"

if run main --metrics "$TMP/main.jsonl" --progress off; then
	bad=$("$PYTHON" - "$TMP/main/1" "$TMP/main.jsonl" <<'PY'
import json, re, sys
logs, metrics = sys.argv[1], sys.argv[2]
EPOCHS, STEPS, IMAGES, SCORED = 3, 40, 2000, {1}
bad = []
LOSS = re.compile(r"^epoch: (\d+), step: (\d+), loss is (\S+)$")
LINE = re.compile(r"^epoch: (\d+), mean loss: (\S+), epoch time: (\d+\.\d{3}) s, "
                  r"images per second: (\d+)(, test accuracy: ([01]\.\d{4}))?$")
out = [open("%s/rank.%d/stdout" % (logs, r)).read().splitlines() for r in (0, 1)]
losses = {}  # epoch -> every rank's logged losses
for r in (0, 1):
    for l in out[r]:
        m = LOSS.match(l)
        if m:
            losses.setdefault(int(m[1]), []).append(float(m[3]))
if any(LINE.match(l) or "mean loss" in l for l in out[1]):
    bad.append("rank 1 printed an epoch line")
lines = [(i, LINE.match(l)) for i, l in enumerate(out[0]) if "mean loss" in l]
if any("loss is" in out[0][i] or "test accuracy is" in out[0][i] for i, _ in lines):
    bad.append("an epoch line reads as a loss or eval line ('loss is', 'test accuracy is')")
for i, m in lines:
    if not m:
        bad.append("epoch line not in the expected form: %r" % out[0][i])
lines = [(i, m) for i, m in lines if m]
if [int(m[1]) for _, m in lines] != list(range(EPOCHS)):
    bad.append("epoch lines for epochs %s, expected %s" % ([m[1] for _, m in lines], list(range(EPOCHS))))
for i, m in lines:
    e = int(m[1])
    # After the epoch's loss lines, before the next epoch's.
    before = [int(x[1]) for x in map(LOSS.match, out[0][:i]) if x]
    after = [int(x[1]) for x in map(LOSS.match, out[0][i + 1:]) if x]
    if not before or max(before) != e or (after and min(after) != e + 1):
        bad.append("epoch %d's line is not between its loss lines and the next epoch's" % e)
    want = sum(losses.get(e, [])) / max(len(losses.get(e, [])), 1)
    if len(losses.get(e, [])) != 2 * len(range(0, STEPS, 7)):
        bad.append("epoch %d: %d loss lines over both ranks, expected %d" % (e, len(losses.get(e, [])), 2 * len(range(0, STEPS, 7))))
    if abs(float(m[2]) - want) > 2e-7 * abs(want):
        bad.append("epoch %d: mean loss is %s, the mean of both ranks' loss lines is %.9g" % (e, m[2], want))
    if (e in SCORED) != (m[6] is not None):
        bad.append("epoch %d: test accuracy %s, expected %s" % (e, m[6], "one" if e in SCORED else "none"))
summ = [l.split() for l in out[0] if l.startswith("summary:")]
f = dict(w.split("=", 1) for w in summ[0][1:]) if summ else {}
if not f:
    bad.append("no summary line")
elif lines:
    if f.get("epoch_loss") != lines[-1][1][2]:
        bad.append("summary epoch_loss=%s, the last epoch line's mean loss is %s" % (f.get("epoch_loss"), lines[-1][1][2]))
    if lines[-1][1][6] not in (None, f.get("test_accuracy")):
        bad.append("last epoch line's accuracy %s, summary test_accuracy=%s" % (lines[-1][1][6], f.get("test_accuracy")))
recs = [r for r in map(json.loads, open(metrics)) if r.get("event") == "epoch"]
if [r["epoch"] for r in recs] != list(range(EPOCHS)):
    bad.append("--metrics epoch records for %s" % [r["epoch"] for r in recs])
total = 0.0
for r, (_, m) in zip(recs, lines):
    total += r["seconds"]
    if abs(r["mean_loss"] - float(m[2])) > 1e-7 * abs(r["mean_loss"]) or r["losses"] != 12 or r["images"] != IMAGES:
        bad.append("epoch record %s does not match its line %r (12 losses, %d images)" % (r, m[0], IMAGES))
    if r["global_step"] != (r["epoch"] + 1) * STEPS:
        bad.append("epoch record global_step %s, expected %d" % (r["global_step"], (r["epoch"] + 1) * STEPS))
    # seconds is printed to the microsecond: images / seconds is known to that rounding.
    if r["seconds"] > 1e-6 and abs(r["images_per_second"] - r["images"] / r["seconds"]) > 0.06 + r["images"] * 0.5e-6 / (r["seconds"] * (r["seconds"] - 0.5e-6)):
        bad.append("epoch record images_per_second %s is not images / seconds" % r["images_per_second"])
    if ("test_accuracy" in r) != (r["epoch"] in SCORED):
        bad.append("epoch record %d: test_accuracy %s" % (r["epoch"], r.get("test_accuracy")))
if f and total > float(f["train_seconds"]) + 0.0015:
    bad.append("the epochs' seconds add up to %.6f, more than train_seconds=%s" % (total, f["train_seconds"]))
print("\n".join(bad))
PY
)
	[ -z "$bad" ] || fail "$bad"
	grep -h 'mean loss' "$TMP/main/1/rank.0/stdout" | sed 's/^/  /'
fi

if [ "$PROGRESS" = 1 ]; then
	ESC=$(printf '\033')
	has_draw() { grep -c "${ESC}\[Kepoch: [0-9] of 0-2, step: [0-9]* of 40, [0-9]* images/s" "$@" 2>/dev/null; }
	if run on --progress on; then
		[ "$(has_draw "$TMP/on/1/rank.0/stderr")" -gt 0 ] ||
			fail "--progress on: no progress line on rank 0's stderr ('epoch: E of 0-2, step: S of 40, ...')"
		[ "$(has_draw "$TMP/on/1/rank.1/stderr")" = 0 ] || fail "--progress on: rank 1 drew a progress line"
		grep -q "of 1-3\|epoch: 3 of" "$TMP/on/1/rank.0/stderr" && fail "--progress on: epochs not counted from 0"
	fi
	if run auto_pipe; then
		[ "$(has_draw "$TMP/auto_pipe.err" "$TMP/auto_pipe/1/rank.0/stderr" | awk -F: '{s += $NF} END {print s + 0}')" = 0 ] ||
			fail "--progress auto on pipes drew a progress line"
	fi
	# mpirun on a terminal (script(1) gives it one); the ranks' output as mpirun shows it.
	on_terminal() { # NAME MPIRUN_EXTRA...
		local name=$1
		shift
		local cmd
		cmd=$(printf '%q ' timeout -k 10 200 "${MPIRUN[@]}" -n 2 "$@" "$TRAIN" "${COMMON[@]}" \
			"${EXTRA[@]+"${EXTRA[@]}"}")
		script -qec "$cmd" "$TMP/$name.tty" </dev/null >/dev/null 2>&1 ||
			fail "$name: mnist-train under script(1) exited with an error"
	}
	on_terminal tty
	[ "$(has_draw "$TMP/tty.tty")" -gt 0 ] ||
		fail "--progress auto, mpirun on a terminal: no progress line reached it"
	grep -q '^summary:' <(tr -d '\r' <"$TMP/tty.tty") || fail "--progress auto, mpirun on a terminal: no summary line"
	on_terminal tty_files --output-filename "$TMP/tty_files"
	[ "$(has_draw "$TMP/tty_files.tty" "$TMP/tty_files/1/rank.0/stderr" | awk -F: '{s += $NF} END {print s + 0}')" = 0 ] ||
		fail "--progress auto, mpirun on a terminal writing files: a progress line was drawn"
fi

[ "$failures" -eq 0 ] || exit 1
echo "PASS epoch_line"
