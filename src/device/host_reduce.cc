#include "device/host_reduce.h"

#include <cstring>
#include <initializer_list>
#include <string>

#include "base/debug.h"
#include "base/param.h"
#include "device/host_kernels.h"

namespace accl {
namespace {

HostIsa choose() {
  HostIsa widest = HostIsa::Base;
  for (HostIsa isa : {HostIsa::X86v3, HostIsa::X86v4})
    if (hostIsaRuns(isa)) widest = isa;
  const std::string want = paramString(Param::HostIsa);
  if (want == "auto") return widest;
  for (HostIsa isa : {HostIsa::Base, HostIsa::X86v3, HostIsa::X86v4}) {
    if (want != hostIsaName(isa)) continue;
    if (hostIsaRuns(isa)) return isa;
    WARN("ACCL_HOST_ISA=%s: this build or this CPU has no such kernels; using %s", want.c_str(), hostIsaName(widest));
    return widest;
  }
  WARN("ACCL_HOST_ISA=%s is none of auto, %s, x86-64-v3, x86-64-v4; using %s", want.c_str(),
       hostIsaName(HostIsa::Base), hostIsaName(widest));
  return widest;
}

HostIsa pickHostIsa() {
  const HostIsa isa = choose();
  INFO(kColl, "host reductions: the %s kernels", hostIsaName(isa));
  return isa;
}

}  // namespace

HostIsa hostIsaInUse() {
  static const HostIsa isa = pickHostIsa();
  return isa;
}

bool hostKernels(ncclDataType_t type, OpKind op, ReduceKernels* out) {
  return hostKernelsOf(hostIsaInUse(), type, op, out);
}

void Reducer::combineFinishCopy(void* out, void* copy, const void* peer, const void* local, size_t n,
                                size_t esize) const {
  // out may alias local (in place), never copy: the fused kernel reads both inputs before writing.
  if (k.combine2 && !k.finish) {
    k.combine2(out, copy, peer, local, n, &scalar);
    return;
  }
  combine(out, peer, local, n);
  finish(out, n);
  memcpy(copy, out, n * esize);
}

void Reducer::prepare(void* dst, const void* local, size_t n, size_t esize) const {
  if (k.prepare) k.prepare(dst, local, n, &scalar);
  else if (dst != local) memcpy(dst, local, n * esize);
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(ncclDataType_t type) {
  static const char* const kNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                       "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  int t = static_cast<int>(type);
  return t >= 0 && t < 12 ? kNames[t] : "invalid";
}

bool typeIsFloating(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16 ||
         type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

}  // namespace accl
