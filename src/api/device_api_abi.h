/*
 * Private: the host functions that NVIDIA's libnccl.so.2 (2.28.9 and 2.30.7)
 * exports but does not declare in nccl.h, with the types their signatures
 * need. They belong to NCCL's "device API" (declared by NVIDIA in
 * the nccl_device/ headers, which ACCL does not ship), plus two debug hooks.
 *
 * These are ABI facts, not an ACCL feature: ACCL exports every symbol NCCL
 * exports so that programs and tools linked against NCCL load and resolve.
 * The implementation returns ncclInvalidUsage for most of them (no device
 * API; ncclCommQueryProperties reports deviceApiSupport = false).
 *
 * Signatures and layouts are those of NCCL 2.30.7's shipped headers,
 * x86-64 / LP64; the structs' sizes are checked at compile time below.
 * Every function also has a `pnccl` twin (NCCL exports both; the one
 * exception is ncclResetDebugInitInternal, which has no twin).
 *
 * Version note: the requirement/properties structs are versioned by their
 * leading size/magic/version fields since NCCL 2.29. Programs built against
 * 2.28 headers pass the older, unversioned ncclDevCommRequirements (56 bytes,
 * first field resourceRequirementsList) and a 200-byte ncclDevComm.
 */
#ifndef ACCL_SRC_API_DEVICE_API_ABI_H_
#define ACCL_SRC_API_DEVICE_API_ABI_H_

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Small handles ------------------------------------------------------- */

typedef uint32_t ncclDevResourceHandle;      /* index of a resource buffer */
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;            /* id of a GIN signal */
typedef uint32_t ncclGinCounter_t;           /* id of a GIN counter */

#define NCCL_GIN_MAX_CONNECTIONS 4

/* A set of ranks: rank r of the team is world rank base + r*stride. Passed and
 * returned by value (12 bytes: two registers on x86-64). */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

typedef struct ncclMultimemHandle {
  void* mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t unused;
} ncclGinBarrierHandle_t;

typedef struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
} ncclLLA2AHandle_t;

/* NCCL names these two without a _t typedef. Layouts confirmed against the
 * 2.30.7 binary: ncclGinOutboxCreateRequirement stores size_log2 at offset 4;
 * ncclGinInboxA2ACreateRequirement stores size_log2 at 8, nPeers_rcp32 at 12
 * and points outGinSignalStart at offset 4. (Newer NCCL sources add a
 * counter0 field to the outbox handle; 2.30.7 does not have it.) */
typedef struct ncclGinOutboxHandle {
  ncclDevResourceHandle bufHandle;
  uint32_t size_log2;
} ncclGinOutboxHandle;

typedef struct ncclGinInboxA2AHandle {
  ncclDevResourceHandle bufHandle;
  ncclGinSignal_t signals;
  uint32_t size_log2;
  uint32_t nPeers_rcp32;
} ncclGinInboxA2AHandle;

/* ---- Requirements (inputs to ncclDevCommCreate) -------------------------- */

typedef enum {
  NCCL_GIN_CONNECTION_NONE = 0,
  NCCL_GIN_CONNECTION_FULL = 1,
  NCCL_GIN_CONNECTION_RAIL = 2
} ncclGinConnectionType_t;

typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

/* One extra buffer / signal range a device communicator must provide; chained
 * through next. The out* pointers are filled by ncclDevCommCreate. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

/* A team the device communicator must support (optionally with multimem). */
struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

typedef struct ncclDevCommRequirements {
  size_t size;            /* versioning header, set by the initializer */
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;    /* a hint */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
} ncclDevCommRequirements_t;

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER {                               \
  sizeof(ncclDevCommRequirements_t), /* size */                                \
  NCCL_API_MAGIC,                    /* magic */                               \
  NCCL_VERSION_CODE,                 /* version */                             \
  NULL,                              /* resourceRequirementsList */            \
  NULL,                              /* teamRequirementsList */                \
  false,                             /* lsaMultimem */                         \
  0,                                 /* barrierCount */                        \
  0,                                 /* lsaBarrierCount */                     \
  0,                                 /* railGinBarrierCount */                 \
  0,                                 /* lsaLLA2ABlockCount */                  \
  0,                                 /* lsaLLA2ASlotCount */                   \
  false,                             /* ginForceEnable */                      \
  4,                                 /* ginContextCount */                     \
  0,                                 /* ginSignalCount */                      \
  0,                                 /* ginCounterCount */                     \
  NCCL_GIN_CONNECTION_NONE,          /* ginConnectionType */                   \
  false,                             /* ginExclusiveContexts */                \
  0,                                 /* ginQueueDepth */                       \
  NCCL_CONFIG_UNDEF_INT,             /* ginTrafficClass */                     \
  0,                                 /* worldGinBarrierCount */                \
  true,                              /* ginStrongSignalsRequired */            \
  true,                              /* ginVaSignalsRequired */                \
}

/* ---- Communicator properties --------------------------------------------- */

typedef enum {
  NCCL_GIN_TYPE_NONE  = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI   = 4
} ncclGinType_t;

/* Filled by ncclCommQueryProperties; the caller sets the header with
 * NCCL_COMM_PROPERTIES_INITIALIZER (the remaining fields start zeroed). */
typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
} ncclCommProperties_t;

#define NCCL_COMM_PROPERTIES_INITIALIZER {                                     \
  sizeof(ncclCommProperties_t), /* size */                                     \
  NCCL_API_MAGIC,               /* magic */                                    \
  NCCL_VERSION_CODE,            /* version */                                  \
}

/* ---- Device communicator (output of ncclDevCommCreate) ------------------- */

/* NCCL keeps a table of windows for device-side lookups; only the pointer
 * appears here. */
typedef struct ncclDevCommWindowTable* ncclDevCommWindowTable_t;

/* The fields of a window that a resource-buffer address needs, at the same
 * offsets as in NCCL's window struct (lsaFlatBase 8, stride4G 24,
 * mcOffset4K 28). Not all of NCCL's window: that one is 88 bytes and is read
 * directly by NCCL's device-side inline functions. */
typedef struct ncclResourceWindow_vidmem {
  char reserved1[8];
  char* lsaFlatBase;
  char reserved2[8];
  uint32_t stride4G;
  uint32_t mcOffset4K;
  char reserved3[32];
} ncclResourceWindow_vidmem_t;

/* Plain struct that NCCL copies to kernels by value; the caller owns its
 * storage (ncclDevCommCreate writes it, ncclDevCommDestroy reads it). */
typedef struct ncclDevComm {
  unsigned int magic;
  unsigned int version;
  int rank, nRanks;
  uint32_t nRanks_rcp32;
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;
  ncclDevCommWindowTable_t windowTable;
  ncclWindow_t resourceWindow;
  ncclResourceWindow_vidmem_t resourceWindow_inlined;
  ncclGinBarrierHandle_t hybridWorldGinBarrier;
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;
  uint8_t ginConnectionCount;
  uint8_t ginNetDeviceTypes[NCCL_GIN_MAX_CONNECTIONS];
  void* ginHandles[NCCL_GIN_MAX_CONNECTIONS];
  int ginSignalCount;
  int ginCounterCount;
  uint64_t* ginSignalShadows;
  uint32_t ginContextCount;
  bool ginConnectionsRailed;
  bool ginStrongLegacySignals;
  bool ginContextsRailed;
  uint32_t* abortFlag;
  ncclLsaBarrierHandle_t hybridLsaBarrier;
  ncclGinBarrierHandle_t hybridRailGinBarrier;
  ncclGinBarrierHandle_t worldGinBarrier;
} ncclDevComm_t;

/* ---- Functions ----------------------------------------------------------- */

ncclResult_t  ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);

ncclResult_t  ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t  ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* Device addresses inside a symmetric window, computed on the host. */
ncclResult_t  ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t  ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem, void** outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem, void** outPtr);
ncclResult_t  ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t  ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

/* Teams of a host communicator, and rank translation between teams. */
ncclTeam_t  ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclTeam_t  ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
ncclTeam_t  ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);
int  ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int  ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Resource requirements for the device-side primitives. */
ncclResult_t  ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t  ncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t  ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2, ncclGinInboxA2AHandle* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2, ncclGinInboxA2AHandle* outHandle, ncclDevResourceRequirements_t* outReq);
int  ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t  ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t  ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);

/* Debug hooks. nccl.h declares ncclResetDebugInit only under NCCL_OS_LINUX
 * and otherwise defines it as an empty macro; the library defines and exports
 * the real functions either way. */
#ifdef ncclResetDebugInit
#undef ncclResetDebugInit
#endif
#ifdef pncclResetDebugInit
#undef pncclResetDebugInit
#endif
void  ncclResetDebugInit(void);
void pncclResetDebugInit(void);
/* Same as ncclResetDebugInit, without the deprecation; exported with no pnccl twin. */
void ncclResetDebugInitInternal(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

/* ---- Layout checks (NCCL 2.30.7, LP64) ----------------------------------- */

#if defined(__LP64__) || defined(_LP64)
#  ifdef __cplusplus
#    define ACCL_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#  else
#    define ACCL_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#  endif
ACCL_ABI_ASSERT(sizeof(ncclTeam_t) == 12, "ncclTeam_t");
ACCL_ABI_ASSERT(sizeof(ncclMultimemHandle_t) == 8, "ncclMultimemHandle_t");
ACCL_ABI_ASSERT(sizeof(ncclLsaBarrierHandle_t) == 8, "ncclLsaBarrierHandle_t");
ACCL_ABI_ASSERT(sizeof(ncclGinBarrierHandle_t) == 8, "ncclGinBarrierHandle_t");
ACCL_ABI_ASSERT(sizeof(ncclLLA2AHandle_t) == 8, "ncclLLA2AHandle_t");
ACCL_ABI_ASSERT(sizeof(ncclGinOutboxHandle) == 8, "ncclGinOutboxHandle");
ACCL_ABI_ASSERT(sizeof(ncclGinInboxA2AHandle) == 16, "ncclGinInboxA2AHandle");
ACCL_ABI_ASSERT(sizeof(ncclDevResourceRequirements_t) == 56, "ncclDevResourceRequirements_t");
ACCL_ABI_ASSERT(sizeof(ncclTeamRequirements_t) == 32, "ncclTeamRequirements_t");
ACCL_ABI_ASSERT(offsetof(ncclTeamRequirements_t, multimem) == 20, "ncclTeamRequirements_t.multimem");
ACCL_ABI_ASSERT(sizeof(ncclDevCommRequirements_t) == 96, "ncclDevCommRequirements_t");
ACCL_ABI_ASSERT(offsetof(ncclDevCommRequirements_t, ginConnectionType) == 72, "ncclDevCommRequirements_t.ginConnectionType");
ACCL_ABI_ASSERT(offsetof(ncclDevCommRequirements_t, ginTrafficClass) == 84, "ncclDevCommRequirements_t.ginTrafficClass");
ACCL_ABI_ASSERT(offsetof(ncclDevCommRequirements_t, ginVaSignalsRequired) == 93, "ncclDevCommRequirements_t.ginVaSignalsRequired");
ACCL_ABI_ASSERT(sizeof(ncclCommProperties_t) == 56, "ncclCommProperties_t");
ACCL_ABI_ASSERT(offsetof(ncclCommProperties_t, deviceApiSupport) == 32, "ncclCommProperties_t.deviceApiSupport");
ACCL_ABI_ASSERT(offsetof(ncclCommProperties_t, railedGinType) == 48, "ncclCommProperties_t.railedGinType");
ACCL_ABI_ASSERT(sizeof(ncclResourceWindow_vidmem_t) == 64, "ncclResourceWindow_vidmem_t");
ACCL_ABI_ASSERT(sizeof(ncclDevComm_t) == 240, "ncclDevComm_t");
ACCL_ABI_ASSERT(offsetof(ncclDevComm_t, resourceWindow_inlined) == 48, "ncclDevComm_t.resourceWindow_inlined");
ACCL_ABI_ASSERT(offsetof(ncclDevComm_t, ginHandles) == 152, "ncclDevComm_t.ginHandles");
ACCL_ABI_ASSERT(offsetof(ncclDevComm_t, abortFlag) == 208, "ncclDevComm_t.abortFlag");
ACCL_ABI_ASSERT(offsetof(ncclDevComm_t, worldGinBarrier) == 232, "ncclDevComm_t.worldGinBarrier");
#  undef ACCL_ABI_ASSERT
#endif

#endif /* ACCL_SRC_API_DEVICE_API_ABI_H_ */
