#include "core/pattern.h"

#include <algorithm>
#include <cmath>

namespace perf {
namespace {
constexpr int64_t kMaxMagnitude = 100;  // keeps values readable and inside every type
}

Pattern::Pattern(ncclDataType_t type, Op op, int nranks, uint32_t seed)
    : type_(type), op_(op), nranks_(std::max(nranks, 1)), seed_(seed) {
  const TypeInfo& t = typeInfo(type);
  signed_ = t.isSigned;
  int64_t exact = t.exactMax;
  switch (op) {
    case Op::Sum:
    case Op::MulSum: {
      if (op == Op::MulSum) exact /= 2;  // scalars are 1 or 2
      m_ = int(std::min<int64_t>(nranks_, std::max<int64_t>(exact, 1)));
      k_ = std::min<int64_t>(kMaxMagnitude, std::max<int64_t>(exact / m_, 1));
      break;
    }
    case Op::Prod:
      m_ = std::min(nranks_, t.maxPow2);
      k_ = 2;
      break;
    case Op::Avg:
      // c in [-k, k] (unsigned [1, k]); partial sums stay within nranks*k + 1.
      k_ = std::min<int64_t>(kMaxMagnitude, (exact - 1) / nranks_);
      m_ = nranks_;
      if (t.isFloat) tolerance_ = t.epsilon * (nranks_ + 2) * double(k_ + 2);
      break;
    default:  // Max, Min, None: plain data
      k_ = std::min<int64_t>(kMaxMagnitude, exact);
      m_ = nranks_;
      break;
  }
}

uint32_t Pattern::hash(int rank, size_t index) const {
  uint64_t x = uint64_t(index) * 0x9E3779B97F4A7C15ull + uint64_t(rank + 1) * 0xC2B2AE3D27D4EB4Full +
               uint64_t(seed_) * 0x165667B19E3779F9ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return uint32_t(x);
}

bool Pattern::contributes(int rank, size_t index) const {
  int first = int((index + seed_) % size_t(nranks_));
  return (rank - first + nranks_) % nranks_ < m_;
}

double Pattern::value(int rank, size_t index) const {
  uint32_t h = hash(rank, index);
  switch (op_) {
    case Op::Sum:
    case Op::MulSum:
      if (!contributes(rank, index)) return 0;
      return signed_ ? double(int64_t(h % uint32_t(2 * k_ + 1)) - k_) : double(h % uint32_t(k_ + 1));
    case Op::Prod: {
      double magnitude = contributes(rank, index) && (h & 1) ? 2 : 1;
      return signed_ && (h & 2) ? -magnitude : magnitude;
    }
    case Op::Avg: {
      if (k_ <= 0) return 0;
      uint32_t hc = hash(-1, index);  // the same c on every rank
      double c = signed_ ? double(int64_t(hc % uint32_t(2 * k_ + 1)) - k_) : double(1 + hc % uint32_t(k_));
      if (nranks_ < 2) return c;
      int plus = int((index + seed_) % size_t(nranks_));
      if (rank == plus) return c + 1;
      if (rank == (plus + 1) % nranks_) return c - 1;
      return c;
    }
    default:
      return signed_ ? double(int64_t(h % uint32_t(2 * k_ + 1)) - k_) : double(h % uint32_t(k_ + 1));
  }
}

double Pattern::reduced(size_t index) const {
  double acc = value(0, index);
  if (op_ == Op::MulSum) acc *= scalar(0);
  for (int r = 1; r < nranks_; r++) {
    double v = value(r, index);
    switch (op_) {
      case Op::Sum:
      case Op::Avg: acc += v; break;
      case Op::MulSum: acc += v * scalar(r); break;
      case Op::Prod: acc *= v; break;
      case Op::Max: acc = std::max(acc, v); break;
      case Op::Min: acc = std::min(acc, v); break;
      default: break;
    }
  }
  return op_ == Op::Avg ? acc / nranks_ : acc;
}

bool Pattern::matches(double got, double want) const {
  if (got == want) return true;
  return tolerance_ > 0 && std::fabs(got - want) <= tolerance_;
}

}  // namespace perf
