#include "core/report.h"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace perf {
namespace {

// nccl-tests' getFloatStr: as many decimals as fit in `width`.
std::string floatStr(double value, int width) {
  char buf[64];
  if (!std::isfinite(value)) {
    std::snprintf(buf, sizeof buf, "%*g", width, value);
    return buf;
  }
  int power = 0;
  for (double v = 1; value >= v; v *= 10) power++;
  if (power < width - 2) {
    std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  } else if (power < width - 1) {
    std::snprintf(buf, sizeof buf, "%*.1f", width, value);
  } else if (power < width + 1) {
    std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  } else {
    std::snprintf(buf, sizeof buf, "%*.1e", width, value);
  }
  return buf;
}

// nccl-tests' time column: %7.0f, %7.1f or %7.2f by magnitude.
std::string timeStr(double us) {
  char buf[64];
  std::snprintf(buf, sizeof buf, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return buf;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string jsonPart(const PartResult& p) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "{\"time_us\": %.6g, \"algbw_gbs\": %.6g, \"busbw_gbs\": %.6g, \"wrong\": ", p.timeUs,
                p.algbw, p.busbw);
  return std::string(buf) + (p.checked ? std::to_string(p.wrong) : "null") + "}";
}

}  // namespace

void Report::preamble(int headerVersion, int libraryVersion) const {
  const Options& o = opts_;
  std::printf("# accl perf drivers %s nccl-headers=%d nccl-library=%d\n", ACCL_PERF_VERSION, headerVersion,
              libraryVersion);
  std::printf("# Collective test starting: %s\n", program_);
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
              "agg iters: %d validation: %d graph: %d\n",
              o.nThreads, o.nGpus, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
              o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraphs);
  if (o.blocking) std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  std::printf("#\n");
}

void Report::devices(const std::vector<std::string>& lines) const {
  std::printf("# Using devices\n");
  for (const std::string& l : lines) std::printf("%s", l.c_str());
}

void Report::header() const {
  const char* t = opts_.reportCpuTime ? "cputime" : "time";
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
              "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void Report::row(const Row& r) {
  std::string line;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type, r.op, r.root);
  line = buf;
  for (const PartResult& p : r.part) {
    std::string wrong = p.checked ? std::to_string(p.wrong) : "N/A";
    std::snprintf(buf, sizeof buf, "  %7s  %6s  %6s  %5s", timeStr(p.timeUs).c_str(), floatStr(p.algbw, 6).c_str(),
                  floatStr(p.busbw, 6).c_str(), wrong.c_str());
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  rows_.push_back(r);
}

void Report::skipped(const char* type, const char* op, const std::string& why) {
  std::printf("# Skipping %s %s: %s\n", type, op, why.c_str());
  std::fflush(stdout);
  skips_.push_back(std::string(type) + " " + op + ": " + why);
}

void Report::footer(int failedParts, double avgBusbw) const {
  std::printf("# %-20s : %d %s\n", "Out of bounds values", failedParts, failedParts ? "FAILED" : "OK");
  std::printf("# %-20s : %g \n", "Avg bus bandwidth", avgBusbw);
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", program_);
  std::fflush(stdout);
}

bool Report::writeFiles(int nranks, int failedParts, double avgBusbw, std::string* err) const {
  if (!opts_.jsonFile.empty()) {
    std::ofstream f(opts_.jsonFile);
    if (!f) return *err = "cannot write " + opts_.jsonFile, false;
    f << "{\n  \"program\": " << jsonString(program_) << ",\n  \"version\": " << jsonString(ACCL_PERF_VERSION)
      << ",\n  \"nranks\": " << nranks << ",\n  \"nthreads\": " << opts_.nThreads << ",\n  \"ngpus\": "
      << opts_.nGpus << ",\n  \"time\": " << jsonString(opts_.reportCpuTime ? "cputime" : "time")
      << ",\n  \"rows\": [";
    for (size_t i = 0; i < rows_.size(); i++) {
      const Row& r = rows_[i];
      f << (i ? "," : "") << "\n    {\"size\": " << r.bytes << ", \"count\": " << r.count
        << ", \"type\": " << jsonString(r.type) << ", \"redop\": " << jsonString(r.op) << ", \"root\": " << r.root
        << ", \"out_of_place\": " << jsonPart(r.part[0]) << ", \"in_place\": " << jsonPart(r.part[1]) << "}";
    }
    f << "\n  ],\n  \"skipped\": [";
    for (size_t i = 0; i < skips_.size(); i++) f << (i ? ", " : "") << jsonString(skips_[i]);
    f << "],\n  \"out_of_bounds\": " << failedParts << ",\n  \"avg_busbw_gbs\": " << avgBusbw << "\n}\n";
    if (!f) return *err = "cannot write " + opts_.jsonFile, false;
  }
  if (!opts_.csvFile.empty()) {
    std::ofstream f(opts_.csvFile);
    if (!f) return *err = "cannot write " + opts_.csvFile, false;
    f << "collective,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,"
         "ip_time_us,ip_algbw,ip_busbw,ip_wrong\n";
    for (const Row& r : rows_) {
      f << program_ << ',' << r.bytes << ',' << r.count << ',' << r.type << ',' << r.op << ',' << r.root;
      for (const PartResult& p : r.part) {
        f << ',' << p.timeUs << ',' << p.algbw << ',' << p.busbw << ',';
        if (p.checked) f << p.wrong;
      }
      f << '\n';
    }
    if (!f) return *err = "cannot write " + opts_.csvFile, false;
  }
  return true;
}

}  // namespace perf
