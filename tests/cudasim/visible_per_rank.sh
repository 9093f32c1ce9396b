#!/bin/sh
# visible_per_rank.sh - run a program with CUDA_VISIBLE_DEVICES set per local
# rank, for simulator runs of node layouts where the ranks of one node see
# different GPUs (under mpirun, which sets OMPI_COMM_WORLD_LOCAL_RANK).
#
#   visible_per_rank.sh LIST_FOR_RANK_0 LIST_FOR_RANK_1 ... -- PROGRAM [ARG...]
#
# Local rank L gets the L-th list (for example "1" or "0,1").
set -eu
rank=${OMPI_COMM_WORLD_LOCAL_RANK:?visible_per_rank.sh runs under mpirun}
i=0
list=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	[ "$i" -eq "$rank" ] && list=$1
	i=$((i + 1))
	shift
done
[ $# -gt 1 ] || { echo "visible_per_rank.sh: no program after --" >&2; exit 2; }
shift
[ -n "$list" ] || { echo "visible_per_rank.sh: no list for local rank $rank" >&2; exit 2; }
CUDA_VISIBLE_DEVICES=$list exec "$@"
