#!/usr/bin/env bash
# HPC Challenge (Debian's hpcc package, Open MPI): HPL, DGEMM, STREAM,
# PTRANS, RandomAccess, FFT and the network tests, 2 ranks on this node,
# HPL's matrix N x N. Each run works in a directory of its own (hpcc reads
# hpccinf.txt and writes hpccoutf.txt in its working directory) and prints
# its own check: HPL's scaled residual (the same for the same N, ranks
# and BLAS) and how many of hpcc's verifications passed and failed.
#
#   bench/apps/hpcc.sh N       MPI_BTL=self,tcp: ranks talk over TCP (as
#                              between nodes), not shared memory
#                              NP=4: ranks (default 2; in a Slurm job, one
#                              per task of its allocation), grid P x Q with
#                              Q the largest divisor of NP up to its root
#                              MPI_ARGS: more words for mpirun
set -euo pipefail
n=${1:?usage: hpcc.sh N (HPL matrix size)}
dir=$(mktemp -d "${TMPDIR:-/tmp}/memgang-hpcc.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
np=${NP:-2} q=1
for ((d = 1; d * d <= np; d++)); do ((np % d)) || q=$d; done
# The example input with one problem size N and a P x Q process grid.
zcat -f /usr/share/doc/hpcc/examples/_hpccinf.txt* |
  sed -e "6s/^[0-9]* /$n /" -e "11s/^[0-9]* /$((np / q)) /" -e "12s/^[0-9]* /$q /" > hpccinf.txt
# Open MPI's session directory under $dir too (TMPDIR), so that a run
# that is killed leaves nothing in /tmp.
# shellcheck disable=SC2086 # MPI_ARGS: words for mpirun
TMPDIR=$dir mpirun --allow-run-as-root --oversubscribe --mca btl "${MPI_BTL:-self,vader,tcp}" ${MPI_ARGS:-} -np "$np" hpcc > mpirun.log 2>&1 ||
  { cat mpirun.log >&2; exit 1; }
residual=$(grep -m1 -o '||Ax-b||_oo/(eps\*(||A||_oo\*||x||_oo+||b||_oo)\*N)= *[0-9.e+-]*' hpccoutf.txt | awk '{print $NF}')
passed=$(grep -c 'PASSED' hpccoutf.txt || true)
failed=$(grep -c 'FAILED' hpccoutf.txt || true)
echo "hpcc n $n residual $residual passed $passed failed $failed"
[ "$failed" = 0 ]
