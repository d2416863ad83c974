// The host executor's reduction kernels, compiled for more than one
// instruction set: the x86-64 baseline every build runs on, and on x86-64
// builds with GCC 11 or later also x86-64-v3 (AVX2, F16C, FMA) and x86-64-v4
// (AVX-512), whose wider vectors, F16C's conversions and gathers make
// float16, bfloat16, fp8, max and min several times faster. All give the
// same bits; hostKernels() (host_reduce.h) picks the
// widest this CPU runs, or the one ACCL_HOST_ISA names.
#pragma once

#include "device/host_reduce.h"

namespace accl {

enum class HostIsa { Base, X86v3, X86v4 };

// Whether this build has kernels for `isa` and this CPU runs them.
bool hostIsaRuns(HostIsa isa);
const char* hostIsaName(HostIsa isa);  // "x86-64" ("baseline" off x86), "x86-64-v3", "x86-64-v4"
// The set hostKernels() uses: ACCL_HOST_ISA's, else the widest this CPU runs (chosen at first use).
HostIsa hostIsaInUse();
// The kernels of one instruction set (which must run here); false where (type, op) has none.
bool hostKernelsOf(HostIsa isa, ncclDataType_t type, OpKind op, ReduceKernels* out);

}  // namespace accl
