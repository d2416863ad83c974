#include "coll/tuner.h"

#include <strings.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "base/check.h"
#include "base/param.h"
#include "core/comm.h"

namespace accl {
namespace {

// Host-mode constants: rough fits to 2-4 ranks on a 2-core machine (docs/tuning.md).
struct LinkModel {
  double alphaUs;  // per hop: a wait, a wake-up, a slot hand-over
  double gbps;     // sustained copy/reduce bandwidth through one connection
};
constexpr LinkModel kShmLink = {1.5, 6.0};
constexpr LinkModel kNetLink = {12.0, 2.0};
// The largest 2-rank allreduce whose exchange stays in cache (measured: the
// exchange beat the ring on one host to 128 KiB and lost from 512 KiB).
constexpr size_t kExchangeCacheBytes = 256 << 10;

const char* const kCollTokens[7] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "send", "recv"};
// Algorithm names NCCL knows; those ACCL does not have are accepted and simply never available.
// Then ACCL's own: "hier", the hierarchical allreduce, allgather and reducescatter (coll/hier.h).
const char* const kAlgoTokens[] = {"ring", "tree", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat", "hier"};
const char* const kProtoTokens[] = {"ll", "ll128", "simple"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

template <size_t N>
int tokenIndex(const char* const (&tokens)[N], const std::string& t) {
  for (size_t i = 0; i < N; ++i)
    if (strcasecmp(tokens[i], t.c_str()) == 0) return static_cast<int>(i);
  return -1;
}

// Shared grammar of NCCL_ALGO and NCCL_PROTO: [coll:]list[;coll:list...], list = [^]tok[,tok...].
template <size_t N>
bool parseSpec(const char* spec, const char* const (&tokens)[N], const char* what,
               std::vector<std::set<int>>* enabled /* per coll, may be null */, std::string* error) {
  if (!spec || !*spec) return true;
  for (const std::string& part0 : split(spec, ';')) {
    std::string part = trim(part0);
    if (part.empty()) continue;
    std::vector<int> colls;
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      int c = tokenIndex(kCollTokens, trim(part.substr(0, colon)));
      if (c < 0) {
        *error = std::string(what) + ": unknown collective '" + trim(part.substr(0, colon)) + "'";
        return false;
      }
      colls.push_back(c);
      part = trim(part.substr(colon + 1));
    } else {
      for (int c = 0; c < 7; ++c) colls.push_back(c);
    }
    bool exclude = !part.empty() && part[0] == '^';
    if (exclude) part = part.substr(1);
    std::set<int> listed;
    for (const std::string& tok0 : split(part, ',')) {
      std::string tok = trim(tok0);
      int t = tokenIndex(tokens, tok);
      if (t < 0) {
        *error = std::string(what) + ": unknown token '" + tok + "'";
        return false;
      }
      listed.insert(t);
    }
    if (enabled) {
      for (int c : colls) {
        std::set<int>& e = (*enabled)[c];
        if (exclude) {
          for (int t : listed) e.erase(t);
        } else {
          e = listed;
        }
      }
    }
  }
  return true;
}

double log2ceil(int n) { return n <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(n))); }

}  // namespace

bool parseAlgoSpec(const char* spec, AlgoMask* out, std::string* error) {
  std::vector<std::set<int>> enabled(7, std::set<int>{0, 1, 2, 3, 4, 5, 6, 7});
  if (!parseSpec(spec, kAlgoTokens, "NCCL_ALGO", &enabled, error)) return false;
  for (int c = 0; c < 7; ++c) {
    out->ring[c] = enabled[c].count(0) > 0;
    out->tree[c] = enabled[c].count(1) > 0;
    out->hier[c] = enabled[c].count(7) > 0;
  }
  return true;
}

bool parseProtoSpec(const char* spec, std::string* error) {
  return parseSpec(spec, kProtoTokens, "NCCL_PROTO", nullptr, error);
}

double predictUs(CollKind kind, Algo algo, size_t bytes, int n, int nhosts) {
  if (n <= 1) return 0.5;
  if (algo == Algo::Hier) {
    const int local = n / nhosts;
    if (kind != CollKind::AllReduce)  // s is the per-rank block: H passes within the host, one along the rail
      return nhosts * predictUs(kind, Algo::Ring, bytes, local, 1) + predictUs(kind, Algo::Ring, bytes, nhosts, nhosts);
    // A reduce-scatter and an allgather of S/L blocks among each host's L
    // ranks, and a ring allreduce of S/L among the H ranks of each rail, all
    // rails at once (each rank over its own NIC).
    const size_t block = bytes / static_cast<size_t>(local);
    return 2 * predictUs(CollKind::ReduceScatter, Algo::Ring, block, local, 1) +
           predictUs(CollKind::AllReduce, Algo::Ring, block, nhosts, nhosts);
  }
  // The slowest link of a ring or tree that spans hosts is a network link.
  const LinkModel& l = nhosts > 1 ? kNetLink : kShmLink;
  const double perByteUs = 1e-3 / l.gbps;  // us per byte
  const double s = static_cast<double>(bytes);
  switch (kind) {
    case CollKind::AllReduce:
      // Double binary tree: up then down, so latency grows with 2 x depth, and each
      // level hands over two trees' chunks one after the other (2 alpha); an inner
      // node takes two children's halves and forwards to two: about 2S per rank
      // through its links, against the ring's 2(n-1)/n S.
      // With two ranks the tree is one exchange: S each way at once, one hop.
      // Each rank reduces all of S where the ring reduces half: on one host,
      // beyond the cache, that is 5S of memory traffic against the ring's 4S.
      if (algo == Algo::Tree && n == 2)
        return l.alphaUs + (nhosts == 1 && bytes > kExchangeCacheBytes ? 1.25 : 1.0) * s * perByteUs;
      if (algo == Algo::Tree) return 4 * log2ceil(n) * l.alphaUs + 2.0 * s * perByteUs;
      return 2 * (n - 1) * l.alphaUs + 2.0 * (n - 1) / n * s * perByteUs;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:  // s is the per-rank block; n-1 blocks cross every link
      return (n - 1) * l.alphaUs + (n - 1) * s * perByteUs;
    case CollKind::Broadcast:
    case CollKind::Reduce:  // pipelined chain: fill latency plus the whole buffer once
      return (n - 1) * l.alphaUs + s * perByteUs;
    case CollKind::Send:
    case CollKind::Recv:
      return l.alphaUs + s * perByteUs;
    case CollKind::AllToAll:  // s is the per-rank block: n-1 of them out and in, at once
    case CollKind::Gather:    // the root takes n-1 blocks in; scatter sends them out
    case CollKind::Scatter:
      return l.alphaUs + (n - 1) * s * perByteUs;
  }
  return 0;
}

bool directAllowed() { return paramInt(Param::Direct) != 0 && paramString(Param::Algo)[0] == '\0'; }

Algo chooseAlgo(const CollArgs& a) {
  const AlgoMask& mask = a.comm->algoMask;
  const int c = static_cast<int>(a.kind);
  if (runsAsSendRecv(a.kind)) return Algo::Ring;  // sends and receives: NCCL_ALGO does not apply
  if (!mask.allowsAny(a.kind)) return Algo::Default;
  const bool allreduce = a.kind == CollKind::AllReduce;
  // hier needs hosts of two ranks or more each, as many on every host (and
  // for allreduce a block per rank); where it cannot run, ring stands in.
  const bool hierOk = hasHier(a.kind) && mask.hier[c] && hierShape(a.comm) &&
                      (!allreduce || a.count >= static_cast<size_t>(a.comm->nranks));
  const bool treeOk = allreduce && mask.tree[c];
  const bool ringOk = mask.ring[c] || (hasHier(a.kind) && mask.hier[c] && !treeOk && !hierOk);
  return fastestAlgo(a.kind, a.count * typeSize(a.type), a.comm->nranks, a.comm->nhosts, ringOk, treeOk, hierOk);
}

Algo fastestAlgo(CollKind kind, size_t bytes, int nranks, int nhosts, bool ring, bool tree, bool hier) {
  Algo best = Algo::Ring;
  double bestUs = -1;
  for (Algo algo : {Algo::Ring, Algo::Tree, Algo::Hier}) {
    if (!(algo == Algo::Ring ? ring : algo == Algo::Tree ? tree : hier)) continue;
    const double us = predictUs(kind, algo, bytes, nranks, nhosts);
    if (bestUs < 0 || us < bestUs) {
      best = algo;
      bestUs = us;
    }
  }
  return best;
}

}  // namespace accl
