// The ranks' processes and threads. Processes: MPI when the driver was built
// with it (ACCL_PERF_MPI) and started by an MPI launcher, otherwise one
// process. Threads: a Team of this process's threads; its barrier and
// reductions span every thread of every process.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"

namespace perf {

class World {
 public:
  // MPI_Init when started by mpirun/srun (and built with MPI).
  void init(int* argc, char*** argv);
  void finalize();
  bool usesMpi() const { return mpi_; }
  int nprocs() const { return nprocs_; }
  int proc() const { return proc_; }
  int localProc() const { return localProc_; }  // index among the processes on this host

  void broadcastId(ncclUniqueId* id);
  // Proc 0 gets every process's text in process order; others get {}.
  std::vector<std::string> gather(const std::string& mine);
  // Across processes (called by one thread at a time).
  void barrier();
  double reduce(double v, int how);  // how: see Team::Reduce
  long long sum(long long v);
  // Ends every process (MPI_Abort under MPI) with `code`.
  [[noreturn]] void abortAll(int code);

 private:
  bool mpi_ = false;
  int nprocs_ = 1, proc_ = 0, localProc_ = 0;
};

class Team {
 public:
  enum Reduce { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3, kSum = 4 };
  Team(World* world, int nthreads) : world_(world), nthreads_(nthreads) {}

  void barrier() { (void)combine(0, kSum, 0); }
  // Combines one value from every thread of every process. kMean divides by
  // the number of threads in all processes (as nccl-tests' -a 1); kRank0
  // returns thread 0 of process 0's value.
  double combine(double v, Reduce how, int thread);
  long long sum(long long v) { return (long long)combine(double(v), kSum, 0); }

 private:
  World* world_;
  int nthreads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  double acc_ = 0, result_ = 0;
};

}  // namespace perf
