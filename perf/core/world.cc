#include "core/world.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if ACCL_PERF_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: no C++ bindings to link
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace perf {
namespace {

#if ACCL_PERF_MPI
// Started by an MPI launcher? Without one the driver runs as one process and
// never calls MPI_Init (a singleton MPI start can be slow or refused).
bool launchedByMpi() {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
                        "MV2_COMM_WORLD_SIZE", "I_MPI_HYDRA_HOST_FILE"};
  for (const char* v : vars) {
    if (std::getenv(v)) return true;
  }
  return false;
}

MPI_Op mpiOp(int how) {
  switch (how) {
    case Team::kMin: return MPI_MIN;
    case Team::kMax: return MPI_MAX;
    default: return MPI_SUM;
  }
}
#endif

}  // namespace

void World::init(int* argc, char*** argv) {
#if ACCL_PERF_MPI
  if (!launchedByMpi()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  mpi_ = true;
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs_);
  MPI_Comm_rank(MPI_COMM_WORLD, &proc_);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::vector<char> all(size_t(nprocs_) * sizeof host);
  MPI_Allgather(host, sizeof host, MPI_CHAR, all.data(), sizeof host, MPI_CHAR, MPI_COMM_WORLD);
  for (int p = 0; p < proc_; p++) {
    if (std::strncmp(&all[size_t(p) * sizeof host], host, sizeof host) == 0) localProc_++;
  }
#else
  (void)argc;
  (void)argv;
#endif
}

void World::finalize() {
#if ACCL_PERF_MPI
  if (mpi_) MPI_Finalize();
  mpi_ = false;
#endif
}

void World::broadcastId(ncclUniqueId* id) {
#if ACCL_PERF_MPI
  if (mpi_) MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD);
#else
  (void)id;
#endif
}

std::vector<std::string> World::gather(const std::string& mine) {
#if ACCL_PERF_MPI
  if (mpi_) {
    int len = int(mine.size());
    std::vector<int> lens(static_cast<size_t>(nprocs_)), offsets(static_cast<size_t>(nprocs_));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int p = 0; p < nprocs_; p++) offsets[p] = total, total += lens[p];
    std::vector<char> buf(size_t(std::max(total, 1)));
    MPI_Gatherv(mine.data(), len, MPI_CHAR, buf.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (proc_ == 0) {
      for (int p = 0; p < nprocs_; p++) out.emplace_back(&buf[size_t(offsets[p])], size_t(lens[p]));
    }
    return out;
  }
#endif
  return {mine};
}

void World::barrier() {
#if ACCL_PERF_MPI
  if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

double World::reduce(double v, int how) {
#if ACCL_PERF_MPI
  if (mpi_) {
    if (how == Team::kRank0) {
      MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    } else {
      MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, mpiOp(how), MPI_COMM_WORLD);
    }
  }
#else
  (void)how;
#endif
  return v;
}

long long World::sum(long long v) {
#if ACCL_PERF_MPI
  if (mpi_) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
#endif
  return v;
}

void World::abortAll(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#if ACCL_PERF_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  _exit(code);
}

double Team::combine(double v, Reduce how, int thread) {
  std::unique_lock<std::mutex> lock(mu_);
  unsigned long gen = generation_;
  if (arrived_ == 0) {
    acc_ = v;
  } else {
    switch (how) {
      case kRank0: break;
      case kMin: acc_ = std::min(acc_, v); break;
      case kMax: acc_ = std::max(acc_, v); break;
      default: acc_ += v; break;
    }
  }
  if (how == kRank0 && thread == 0) acc_ = v;  // whatever arrived first
  if (++arrived_ == nthreads_) {
    // The last thread in: combine across processes, then release the others.
    double r = world_->reduce(acc_, how);
    if (how == kMean) r /= double(nthreads_) * world_->nprocs();
    result_ = r;
    arrived_ = 0;
    generation_++;
    cv_.notify_all();
    return r;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
  return result_;
}

}  // namespace perf
