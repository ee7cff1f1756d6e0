/* An MPI job for memgang's Slurm benchmarks and tests: each rank holds
 * MIB MiB, and every iteration sweeps all of it (a stencil-like update)
 * and joins an MPI_Allreduce, so that a rank that is stopped or faulting
 * holds every other rank up, as in the papers' gang-scheduled codes.
 * Prints a checksum that does not depend on timing: the same arguments
 * give the same line whatever was switched in between.
 *   mpirun mpi_sweep MIB ITERATIONS */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: mpi_sweep MIB ITERATIONS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t n = (size_t)atol(argv[1]) << 17; /* 8-byte words in MIB MiB */
  long iters = atol(argv[2]);
  uint64_t *a = malloc(n * sizeof *a);
  if (!a) MPI_Abort(MPI_COMM_WORLD, 3);
  for (size_t i = 0; i < n; i++) a[i] = i * 2654435761u + (uint64_t)rank;
  uint64_t total = 0;
  for (long it = 0; it < iters; it++) {
    uint64_t local = 0;
    for (size_t i = 1; i < n; i++) {
      a[i] += a[i - 1] >> 3;
      local += a[i];
    }
    uint64_t sum;
    MPI_Allreduce(&local, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    total ^= sum;
  }
  if (rank == 0) printf("mpi_sweep ranks %d mib %s iterations %ld checksum %016llx\n", size, argv[1], iters, (unsigned long long)total);
  MPI_Finalize();
  return 0;
}
