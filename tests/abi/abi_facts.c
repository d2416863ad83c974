/* Prints the ABI facts of ACCL's include/nccl.h in the format and order of
 * tests/abi/nccl-2.30.7-abi-facts.txt (measured from NVIDIA NCCL 2.30.7), so a
 * test can diff the two:
 *
 *   cc -std=c11 -Iinclude tests/abi/abi_facts.c -o facts && ./facts \
 *     | diff - tests/abi/nccl-2.30.7-abi-facts.txt
 *
 * Builds as C or C++, with or without the CUDA headers on the include path.
 * Checks that the facts file has no line for (every int field of
 * NCCL_CONFIG_INITIALIZER is NCCL_CONFIG_UNDEF_INT, every pointer NULL) print
 * an extra "MISMATCH" line, so they also show up in the diff, and make the
 * program exit 1. */
#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

static int failures = 0;

#define FACT(name, value) printf("%s = %lld\n", name, (long long)(value))
#define SIZE(T) printf("sizeof(%s) = %zu\n", #T, sizeof(T))
#define ENUMV(e) FACT(#e, e)
#define OFF(T, f) printf("offsetof(%s,%s) = %zu\n", #T, #f, offsetof(T, f))

#define EXPECT_UNDEF_INT(cfg, f)                                               \
  do {                                                                         \
    if ((cfg).f != NCCL_CONFIG_UNDEF_INT) {                                    \
      printf("MISMATCH init.%s=%d (want NCCL_CONFIG_UNDEF_INT)\n", #f,         \
             (cfg).f);                                                         \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define EXPECT_NULL(cfg, f)                                                    \
  do {                                                                         \
    if ((cfg).f != NULL) {                                                     \
      printf("MISMATCH init.%s not NULL\n", #f);                               \
      failures++;                                                              \
    }                                                                          \
  } while (0)

int main(void) {
  FACT("NCCL_MAJOR", NCCL_MAJOR);
  FACT("NCCL_MINOR", NCCL_MINOR);
  FACT("NCCL_UNIQUE_ID_BYTES", NCCL_UNIQUE_ID_BYTES);
  SIZE(ncclUniqueId);
  SIZE(ncclConfig_t);
  SIZE(ncclSimInfo_t);
  FACT("NCCL_SPLIT_NOCOLOR", NCCL_SPLIT_NOCOLOR);
  FACT("NCCL_CONFIG_UNDEF_INT", NCCL_CONFIG_UNDEF_INT);
  FACT("NCCL_WIN_DEFAULT", NCCL_WIN_DEFAULT);
  FACT("NCCL_WIN_COLL_SYMMETRIC", NCCL_WIN_COLL_SYMMETRIC);
  FACT("NCCL_WIN_REQUIRED_ALIGNMENT", NCCL_WIN_REQUIRED_ALIGNMENT);
  FACT("NCCL_CTA_POLICY_DEFAULT", NCCL_CTA_POLICY_DEFAULT);
  FACT("NCCL_CTA_POLICY_EFFICIENCY", NCCL_CTA_POLICY_EFFICIENCY);
  FACT("NCCL_CTA_POLICY_ZERO", NCCL_CTA_POLICY_ZERO);
  FACT("NCCL_SHRINK_DEFAULT", NCCL_SHRINK_DEFAULT);
  FACT("NCCL_SHRINK_ABORT", NCCL_SHRINK_ABORT);

  ENUMV(ncclSuccess);
  ENUMV(ncclUnhandledCudaError);
  ENUMV(ncclSystemError);
  ENUMV(ncclInternalError);
  ENUMV(ncclInvalidArgument);
  ENUMV(ncclInvalidUsage);
  ENUMV(ncclRemoteError);
  ENUMV(ncclInProgress);
  ENUMV(ncclTimeout);
  ENUMV(ncclNumResults);

  ENUMV(ncclInt8);
  ENUMV(ncclChar);
  ENUMV(ncclUint8);
  ENUMV(ncclInt32);
  ENUMV(ncclInt);
  ENUMV(ncclUint32);
  ENUMV(ncclInt64);
  ENUMV(ncclUint64);
  ENUMV(ncclFloat16);
  ENUMV(ncclHalf);
  ENUMV(ncclFloat32);
  ENUMV(ncclFloat);
  ENUMV(ncclFloat64);
  ENUMV(ncclDouble);
  ENUMV(ncclBfloat16);
  ENUMV(ncclFloat8e4m3);
  ENUMV(ncclFloat8e5m2);
  ENUMV(ncclNumTypes);

  ENUMV(ncclSum);
  ENUMV(ncclProd);
  ENUMV(ncclMax);
  ENUMV(ncclMin);
  ENUMV(ncclAvg);
  ENUMV(ncclNumOps);
  ENUMV(ncclMaxRedOp);
  SIZE(ncclRedOp_t);

  ENUMV(ncclScalarDevice);
  ENUMV(ncclScalarHostImmediate);

  OFF(ncclConfig_t, size);
  OFF(ncclConfig_t, magic);
  OFF(ncclConfig_t, version);
  OFF(ncclConfig_t, blocking);
  OFF(ncclConfig_t, cgaClusterSize);
  OFF(ncclConfig_t, minCTAs);
  OFF(ncclConfig_t, maxCTAs);
  OFF(ncclConfig_t, netName);
  OFF(ncclConfig_t, splitShare);
  OFF(ncclConfig_t, trafficClass);
  OFF(ncclConfig_t, commName);
  OFF(ncclConfig_t, collnetEnable);
  OFF(ncclConfig_t, CTAPolicy);
  OFF(ncclConfig_t, shrinkShare);
  OFF(ncclConfig_t, nvlsCTAs);
  OFF(ncclConfig_t, nChannelsPerNetPeer);
  OFF(ncclConfig_t, nvlinkCentricSched);
  OFF(ncclConfig_t, graphUsageMode);
  OFF(ncclConfig_t, numRmaCtx);
  OFF(ncclConfig_t, maxP2pPeers);
  OFF(ncclConfig_t, graphStreamOrdering);

  {
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    printf("init.size=%zu magic=%x version=%u blocking=%d netName=%p\n",
           init.size, init.magic, init.version, init.blocking,
           (const void*)init.netName);
    EXPECT_UNDEF_INT(init, blocking);
    EXPECT_UNDEF_INT(init, cgaClusterSize);
    EXPECT_UNDEF_INT(init, minCTAs);
    EXPECT_UNDEF_INT(init, maxCTAs);
    EXPECT_NULL(init, netName);
    EXPECT_UNDEF_INT(init, splitShare);
    EXPECT_UNDEF_INT(init, trafficClass);
    EXPECT_NULL(init, commName);
    EXPECT_UNDEF_INT(init, collnetEnable);
    EXPECT_UNDEF_INT(init, CTAPolicy);
    EXPECT_UNDEF_INT(init, shrinkShare);
    EXPECT_UNDEF_INT(init, nvlsCTAs);
    EXPECT_UNDEF_INT(init, nChannelsPerNetPeer);
    EXPECT_UNDEF_INT(init, nvlinkCentricSched);
    EXPECT_UNDEF_INT(init, graphUsageMode);
    EXPECT_UNDEF_INT(init, numRmaCtx);
    EXPECT_UNDEF_INT(init, maxP2pPeers);
    EXPECT_UNDEF_INT(init, graphStreamOrdering);
    if (init.version != (unsigned)NCCL_VERSION(2, 30, 7)) {
      printf("MISMATCH init.version=%u (want NCCL_VERSION(2,30,7))\n", init.version);
      failures++;
    }
  }
  {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    printf("siminit.size=%zu magic=%x estimatedTime=%f\n", sim.size, sim.magic,
           (double)sim.estimatedTime);
    if (sim.version != NCCL_VERSION_CODE) {
      printf("MISMATCH siminit.version=%u\n", sim.version);
      failures++;
    }
  }
  return failures ? 1 : 0;
}
