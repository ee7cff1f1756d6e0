#!/usr/bin/env bash
# LAMMPS (Debian's lammps package, Open MPI): the Lennard-Jones melt of
# LAMMPS's own benchmarks (bench/in.lj: fcc lattice, cutoff 2.5 sigma,
# neighbour lists rebuilt every 20 steps), on a box of SIDE^3 unit cells
# (4 atoms each), STEPS steps, 2 MPI ranks on this node. Memory is mostly
# neighbour lists and per-atom arrays, swept every step: a steady working
# set, unlike hpcc's phases. Its check is the last thermo line (step,
# temperature, energies, pressure): the same for the same box, steps and
# ranks, whatever the switches did.
#
#   bench/apps/lammps.sh SIDE STEPS      MPI_BTL=self,tcp as hpcc.sh; NP and MPI_ARGS as hpcc.sh
set -euo pipefail
side=${1:?usage: lammps.sh SIDE STEPS}
steps=${2:?usage: lammps.sh SIDE STEPS}
dir=$(mktemp -d "${TMPDIR:-/tmp}/memgang-lammps.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > in.lj <<IN
units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 $side 0 $side 0 $side
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 1.44 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify delay 0 every 20 check no
fix 1 all nve
thermo $steps
run $steps
IN
# shellcheck disable=SC2086 # MPI_ARGS: words for mpirun
TMPDIR=$dir mpirun --allow-run-as-root --oversubscribe --mca btl "${MPI_BTL:-self,vader,tcp}" ${MPI_ARGS:-} -np "${NP:-2}" \
  lmp -in in.lj -log log.lammps -screen none > mpirun.log 2>&1 || { cat mpirun.log >&2; exit 1; }
# The thermo lines are "Step Temp E_pair E_mol TotEng Press"; the last one
# printed, at step STEPS, is the result.
last=$(awk -v s="$steps" '$1 == s && NF == 6 {line = $0} END {print line}' log.lammps)
[ -n "$last" ] || { tail -20 log.lammps >&2; exit 1; }
echo "lammps side $side steps $steps thermo $last"
