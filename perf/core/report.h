// The output: nccl-tests' table on stdout (preamble, devices, header, rows,
// footer) and, optionally, the same rows as JSON (-J) or CSV (--csv).
// Only process 0's thread 0 reports.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/options.h"

namespace perf {

struct PartResult {
  double timeUs = 0;
  double algbw = 0;  // GB/s (1e9 bytes)
  double busbw = 0;
  long long wrong = 0;
  bool checked = false;  // false: "N/A"
};

struct Row {
  size_t bytes = 0;  // max(send, recv) bytes
  size_t count = 0;  // the call's count
  const char* type = "";
  const char* op = "";
  int root = -1;
  PartResult part[2];  // out of place, in place
};

class Report {
 public:
  Report(const char* program, const Options& o) : program_(program), opts_(o) {}

  void preamble(int headerVersion, int libraryVersion) const;
  void devices(const std::vector<std::string>& lines) const;
  void header() const;
  void row(const Row& r);
  void skipped(const char* type, const char* op, const std::string& why);
  void footer(int failedParts, double avgBusbw) const;
  // Writes -J / --csv; false with a message in *err.
  bool writeFiles(int nranks, int failedParts, double avgBusbw, std::string* err) const;

 private:
  const char* program_;
  const Options& opts_;
  std::vector<Row> rows_;
  std::vector<std::string> skips_;
};

}  // namespace perf
