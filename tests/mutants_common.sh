# mutants_common.sh - what the mutant scripts share (sourced by
# tests/cudasim/mutants.sh, bugs planted in cuda/, and tests/mutants_host.sh,
# bugs planted in host/, cpu/ and include/elem.h): the command line, the list
# of mutants, the scratch copy and its build, and the loop that plants one bug
# at a time, rebuilds and runs ctest. A script, in order:
#
#   . tests/mutants_common.sh "$@"        ROOT, JOBS, the options (--list, --keep, NAME...)
#   mutant NAME FILE OLD NEW KILLERS ...  its mutants
#   mutants_chosen                        --list printed (and exit), NAME... checked
#   mutants_scratch PATH...               the tree copied; PATH... kept pristine
#   mutants_configure TARGET...           the copy configured with the CUDA toolkit and built
#   mutants_baseline LABELS               the unmutated suite (ctest -L LABELS) must pass
#   mutants_run LABELS TARGET...          each mutant: planted, TARGET... rebuilt, ctest run
#
# with ME (its name in messages) set before sourcing. The worktree itself is
# never edited: the copy is git's tracked and unignored files.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-2}
keep=0
list=0
only=()
for a in "$@"; do
	case $a in
	--keep) keep=1 ;;
	--list) list=1 ;;
	-h | --help)
		sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "$ME: unknown option '$a' (--list, --keep, NAME...)" >&2
		exit 2
		;;
	*) only+=("$a") ;;
	esac
done

# mutant NAME FILE OLD NEW KILLERS: KILLERS, a regular expression of ctest names
# run first (the tests written to catch it).
names=() files=() olds=() news=() killers=()
mutant() {
	names+=("$1") files+=("$2") olds+=("$3") news+=("$4") killers+=("$5")
}

# --list: the mutants, then exit; else every NAME given must be one of them.
mutants_chosen() {
	if [ $list -eq 1 ]; then
		for i in "${!names[@]}"; do
			printf '%-36s %-22s first: %s\n' "${names[$i]}" "${files[$i]}" "${killers[$i]}"
		done
		exit 0
	fi
	for n in "${only[@]+"${only[@]}"}"; do
		printf '%s\n' "${names[@]}" | grep -qx -- "$n" || {
			echo "$ME: no mutant named '$n' (--list)" >&2
			exit 2
		}
	done
}

# mutants_scratch PATH...: the source tree copied into a scratch directory
# (WORK: SRC, BUILD, LOGS), and PATH... (the folders and files the mutants
# edit) kept as copied at the start, since the worktree may change meanwhile.
mutants_scratch() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnist-mutants.XXXXXX")
	trap '[ $keep -eq 1 ] || rm -rf "$WORK"' EXIT
	SRC=$WORK/src BUILD=$WORK/build LOGS=$WORK/logs PRISTINE=$WORK/pristine
	mkdir -p "$SRC" "$LOGS"
	start=$(date +%s)
	(cd "$ROOT" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -C "$SRC" -xf - ||
		{ echo "$ME: copying the source tree failed" >&2; exit 2; }
	local what="" p
	for p in "$@"; do
		[ -d "$ROOT/$p" ] && what="$what$p/, " || what="$what$p, "
	done
	mkdir -p "$PRISTINE" && (cd "$SRC" && cp -r --parents "$@" "$PRISTINE") ||
		{ echo "$ME: keeping the pristine ${what%, } failed" >&2; exit 2; }
	mnist=$(readlink -f "$ROOT/MNIST_Data")
}

# mutants_build LOG TARGET...: those targets of the copy, the output in LOG.
mutants_build() {
	local log=$1
	shift
	cmake --build "$BUILD" -j "$JOBS" --target "$@" >"$log" 2>&1
}

# mutants_configure TARGET...: the copy configured with the CUDA toolkit (the
# simulated module loads into a CUDA-enabled mnist-train; one architecture, to
# save time) and without -Werror (a mutant may leave a variable unused), then
# those targets built.
mutants_configure() {
	echo "$ME: ${#names[@]} mutants; scratch copy in $WORK"
	if ! cmake -S "$SRC" -B "$BUILD" -DMNIST_DDP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=80-real \
		-DMNIST_DDP_WERROR=OFF -DMNIST_DATA_DIR="$mnist" >"$LOGS/configure.log" 2>&1 ||
		! grep -q 'CUDA backend ON' "$LOGS/configure.log" || ! mutants_build "$LOGS/build.log" "$@"; then
		echo "$ME: the unmutated copy does not configure with the CUDA toolkit or build ($LOGS)" >&2
		keep=1
		exit 2
	fi
}

# ctest's verdict on a test list: 0 all passed; else the first failing test in $killed.
run_tests() { # LOG CTEST_ARGS...
	local log=$1
	shift
	OPENBLAS_NUM_THREADS=1 ctest --test-dir "$BUILD" --stop-on-failure "$@" >"$log" 2>&1 && return 0
	killed=$(sed -nE 's/.*Test +#[0-9]+: ([^ ]+) .*(\*\*\*|Failed).*/\1/p' "$log" | head -n 1)
	[ -n "$killed" ] || killed="(ctest: $(tail -n 1 "$log"))"
	return 1
}

# mutants_baseline LABELS: the unmutated suite; it must pass, or nothing can be concluded.
mutants_baseline() {
	echo "$ME: the unmutated suite first (ctest -L $1)"
	if ! run_tests "$LOGS/baseline.log" -L "$1"; then
		echo "$ME: the unmutated suite fails ($killed; $LOGS/baseline.log): fix that first" >&2
		keep=1
		exit 2
	fi
	echo "$ME: baseline passed in $(($(date +%s) - start)) s"
}

apply() { # FILE OLD NEW: 0 when OLD occurred exactly once and was replaced
	python3 - "$1" "$2" "$3" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    print(f"pattern found {n} times")
    sys.exit(1)
open(path, "w").write(text.replace(old, new))
PY
}

# mutants_run LABELS TARGET...: for each mutant chosen, the pristine file
# restored, the replacement applied, TARGET... rebuilt, and ctest run on the
# killers first, then the rest of -L LABELS, stopping at the first failure.
# Prints "killed", "SURVIVED", "NOT APPLIED" or "DID NOT BUILD" per mutant
# (with the killing test), then the kill score; returns 0 only when every
# mutant was applied, built and killed.
mutants_run() {
	local labels=$1
	shift
	local total=0 dead=0 bad=0 i name file t0 why first
	for i in "${!names[@]}"; do
		name=${names[$i]} file=${files[$i]}
		if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx -- "$name"; then
			continue
		fi
		total=$((total + 1))
		t0=$(date +%s)
		cp "$PRISTINE/$file" "$SRC/$file"
		if ! why=$(apply "$SRC/$file" "${olds[$i]}" "${news[$i]}"); then
			printf '%-14s %-36s %s: %s\n' "NOT APPLIED" "$name" "$file" "$why"
			bad=$((bad + 1))
			continue
		fi
		if ! mutants_build "$LOGS/$name.build.log" "$@"; then
			printf '%-14s %-36s see %s\n' "DID NOT BUILD" "$name" "$LOGS/$name.build.log"
			bad=$((bad + 1))
			cp "$PRISTINE/$file" "$SRC/$file"
			continue
		fi
		first="^(${killers[$i]})\$"
		if ! run_tests "$LOGS/$name.first.log" -R "$first" ||
			! run_tests "$LOGS/$name.rest.log" -L "$labels" -E "$first"; then
			printf '%-14s %-36s by %s (%d s)\n' "killed" "$name" "$killed" $(($(date +%s) - t0))
			dead=$((dead + 1))
		else
			printf '%-14s %-36s (%d s): no test failed\n' "SURVIVED" "$name" $(($(date +%s) - t0))
			bad=$((bad + 1))
		fi
		cp "$PRISTINE/$file" "$SRC/$file"
	done
	echo "$ME: kill score $dead/$total; $bad not killed, not applied or not built; $(($(date +%s) - start)) s in all"
	[ $keep -eq 1 ] && echo "$ME: kept $WORK"
	[ $bad -eq 0 ] && [ $total -gt 0 ]
}
