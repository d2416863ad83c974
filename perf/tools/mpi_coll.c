/* mpi_coll: OpenMPI's own time for a collective, the peer the perf drivers'
 * host-mode rows are read against, with no Python in between. Float32 sum,
 * out of place, buffers from malloc (as the drivers' own), one line per size:
 * the mean time per call over the ranks' slowest.
 *
 *   mpirun -np 2 mpi_coll COLL MINBYTES MAXBYTES [ITERS]
 *   COLL: allreduce reduce bcast allgather reducescatter alltoall gather
 *         scatter sendrecv; sizes are per-rank bytes as in nccl-tests
 *         (allgather/gather: the output; alltoall/reducescatter: the input).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1 << 10;
  if (*end == 'M' || *end == 'm') v *= 1 << 20;
  if (*end == 'G' || *end == 'g') v *= 1 << 30;
  return (size_t)v;
}

static int run(const char* coll, float* in, float* out, int count, int n, int me) {
  int block = count / n;
  if (!strcmp(coll, "allreduce")) return MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (!strcmp(coll, "reduce")) return MPI_Reduce(in, out, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (!strcmp(coll, "bcast")) return MPI_Bcast(in, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (!strcmp(coll, "allgather")) return MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
  if (!strcmp(coll, "reducescatter"))
    return MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (!strcmp(coll, "alltoall")) return MPI_Alltoall(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
  if (!strcmp(coll, "gather")) return MPI_Gather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (!strcmp(coll, "scatter")) return MPI_Scatter(in, block, MPI_FLOAT, out, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (!strcmp(coll, "sendrecv"))
    return MPI_Sendrecv(in, count, MPI_FLOAT, (me + 1) % n, 0, out, count, MPI_FLOAT, (me + n - 1) % n, 0,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (me == 0) fprintf(stderr, "usage: mpi_coll COLL MINBYTES MAXBYTES [ITERS]\n");
    MPI_Finalize();
    return 2;
  }
  const char* coll = argv[1];
  static const char* known[] = {"allreduce", "reduce", "bcast", "allgather", "reducescatter",
                                 "alltoall", "gather", "scatter", "sendrecv"};
  int ok = 0;
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); ++i) ok |= !strcmp(coll, known[i]);
  if (!ok) {
    if (me == 0) fprintf(stderr, "mpi_coll: unknown collective '%s'\n", coll);
    MPI_Finalize();
    return 2;
  }
  size_t lo = parse_size(argv[2]), hi = parse_size(argv[3]);
  int iters = argc > 4 ? atoi(argv[4]) : 0;
  float* in = malloc(hi * (size_t)n + 64);
  float* out = malloc(hi * (size_t)n + 64);
  memset(in, 1, hi * (size_t)n);
  memset(out, 0, hi * (size_t)n);
  if (me == 0) printf("# mpi_coll %s, %d ranks: bytes, us per call\n", coll, n);
  for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
    int count = (int)(bytes / sizeof(float));
    if (count < n) count = n;
    /* About 0.2 s of calls at a guessed 5 GB/s, at least 20 and at most 20000. */
    int k = iters > 0 ? iters : (int)(1e9 / (bytes + 4096));
    k = iters > 0 ? k : (k < 20 ? 20 : k > 20000 ? 20000 : k);
    for (int i = 0; i < k / 10 + 2; ++i)
      if (run(coll, in, out, count, n, me) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < k; ++i) run(coll, in, out, count, n, me);
    double t = (MPI_Wtime() - t0) / k * 1e6, worst = 0;
    MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (me == 0) printf("%12zu %10.2f\n", bytes, worst);
    fflush(stdout);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
