/*
 * ACCL public header: the NCCL C API at NCCL API level 2.30 (2.30.7).
 *
 * ACCL ships as a drop-in libnccl.so.2. Programs written for NVIDIA NCCL
 * compile against this header unchanged, and binaries built against NVIDIA's
 * header run against ACCL's library unchanged: every type, enum value, struct
 * layout, initializer and function signature below is an ABI fact of NCCL
 * 2.30.7 on LP64 Linux (see tests/abi/ and docs/abi.md, which check them).
 *
 * Each entry point has a `pnccl` twin with the same signature, for profiling
 * and interposition tools.
 *
 * CUDA headers: NCCL's header always pulls in <cuda_runtime.h>. This one does
 * so only where the CUDA headers can be found (and ACCL_NO_CUDA_HEADERS is not
 * defined); otherwise it declares cudaStream_t itself with the same type CUDA
 * uses (a pointer to the opaque struct CUstream_st), so host-only programs can
 * use the API with no CUDA toolkit installed.
 */
#ifndef NCCL_H_
#define NCCL_H_

/* ---- CUDA types ---------------------------------------------------------- */

#if !defined(ACCL_NO_CUDA_HEADERS)
#  if defined(__has_include)
#    if __has_include(<cuda_runtime.h>)
#      define ACCL_NCCL_H_USES_CUDA 1
#    endif
#  else
     /* No way to probe: behave like NCCL and require the CUDA headers. */
#    define ACCL_NCCL_H_USES_CUDA 1
#  endif
#endif
#ifndef ACCL_NCCL_H_USES_CUDA
#  define ACCL_NCCL_H_USES_CUDA 0
#endif

#if ACCL_NCCL_H_USES_CUDA
#  include <cuda_runtime.h>
#  include <cuda_fp16.h>
#  if CUDART_VERSION >= 11000
#    include <cuda_bf16.h>
#  endif
#  if defined(__cplusplus) && CUDART_VERSION >= 11080
#    include <cuda_fp8.h>
#  endif
#elif !defined(__DRIVER_TYPES_H__) && !defined(ACCL_CUDA_STREAM_T_DECLARED)
   /* Same type as CUDA's driver_types.h declares: an opaque stream pointer. */
#  define ACCL_CUDA_STREAM_T_DECLARED 1
typedef struct CUstream_st* cudaStream_t;
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Version ------------------------------------------------------------- */

#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23007
/* Version codes are X*1000+Y*100+Z up to 2.8 and X*10000+Y*100+Z from 2.9 on. */
#define NCCL_VERSION(X, Y, Z)                                                  \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z)                       \
                          : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and ids ----------------------------------------------------- */

typedef struct ncclComm* ncclComm_t;             /* opaque communicator */
typedef struct ncclWindow_vidmem* ncclWindow_t;  /* opaque registered window */
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* Rendezvous token made by ncclGetUniqueId; copied verbatim to every rank. */
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

/* ---- Result codes -------------------------------------------------------- */

typedef enum {
  ncclSuccess            = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError        = 2,
  ncclInternalError      = 3,
  ncclInvalidArgument    = 4,
  ncclInvalidUsage       = 5,
  ncclRemoteError        = 6,
  ncclInProgress         = 7,
  ncclTimeout            = 8,
  ncclNumResults         = 9
} ncclResult_t;

/* ---- Constants ----------------------------------------------------------- */

/* "Not set" markers for config fields: the library then picks its default. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* Color for ncclCommSplit: this rank joins no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Stamped into versioned structs by their initializers; checked by the library. */
#define NCCL_API_MAGIC 0xcafebeef

/* ncclCommWindowRegister flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags: plain shrink, or abort the parent's pending work first. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags (only 0 is valid). */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclCommSuspend flags: release the memory that can be re-created on resume. */
#define NCCL_SUSPEND_MEM 0x01

/* ---- Communicator configuration ----------------------------------------- */

/* Versioned by size/magic/version: always start from NCCL_CONFIG_INITIALIZER,
 * then set the fields you care about. Fields are only ever appended. */
typedef struct ncclConfig_v23000 {
  size_t size;            /* sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;     /* NCCL_API_MAGIC */
  unsigned int version;   /* NCCL_VERSION_CODE of the caller's header */
  int blocking;           /* 0: init/finalize calls may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;    /* network plugin/transport to use */
  int splitShare;         /* children of ncclCommSplit share resources */
  int trafficClass;
  const char* commName;   /* shown in logs */
  int collnetEnable;
  int CTAPolicy;          /* NCCL_CTA_POLICY_* */
  int shrinkShare;        /* children of ncclCommShrink share resources */
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                              \
  sizeof(ncclConfig_t),   /* size */                                           \
  NCCL_API_MAGIC,         /* magic */                                          \
  NCCL_VERSION_CODE,      /* version */                                        \
  NCCL_CONFIG_UNDEF_INT,  /* blocking */                                       \
  NCCL_CONFIG_UNDEF_INT,  /* cgaClusterSize */                                 \
  NCCL_CONFIG_UNDEF_INT,  /* minCTAs */                                        \
  NCCL_CONFIG_UNDEF_INT,  /* maxCTAs */                                        \
  NCCL_CONFIG_UNDEF_PTR,  /* netName */                                        \
  NCCL_CONFIG_UNDEF_INT,  /* splitShare */                                     \
  NCCL_CONFIG_UNDEF_INT,  /* trafficClass */                                   \
  NCCL_CONFIG_UNDEF_PTR,  /* commName */                                       \
  NCCL_CONFIG_UNDEF_INT,  /* collnetEnable */                                  \
  NCCL_CONFIG_UNDEF_INT,  /* CTAPolicy */                                      \
  NCCL_CONFIG_UNDEF_INT,  /* shrinkShare */                                    \
  NCCL_CONFIG_UNDEF_INT,  /* nvlsCTAs */                                       \
  NCCL_CONFIG_UNDEF_INT,  /* nChannelsPerNetPeer */                            \
  NCCL_CONFIG_UNDEF_INT,  /* nvlinkCentricSched */                             \
  NCCL_CONFIG_UNDEF_INT,  /* graphUsageMode */                                 \
  NCCL_CONFIG_UNDEF_INT,  /* numRmaCtx */                                      \
  NCCL_CONFIG_UNDEF_INT,  /* maxP2pPeers */                                    \
  NCCL_CONFIG_UNDEF_INT,  /* graphStreamOrdering */                            \
}

/* Result of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;    /* predicted time of the simulated group */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER {                                            \
  sizeof(ncclSimInfo_t),  /* size */                                           \
  0x74685283,             /* magic */                                          \
  NCCL_VERSION_CODE,      /* version */                                        \
  NCCL_UNDEF_FLOAT        /* estimatedTime */                                  \
}

/* ---- Memory, version, ids ------------------------------------------------ */

/* Allocate/free memory suited to registration and symmetric windows. */
ncclResult_t  ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t  ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* The library's version code (see NCCL_VERSION). */
ncclResult_t  ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Make a new unique id; call on one rank and broadcast it out of band. */
ncclResult_t  ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ---- Communicator lifetime ----------------------------------------------- */

ncclResult_t  ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

ncclResult_t  ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* One process, ndev ranks; devlist may be NULL (devices 0..ndev-1). */
ncclResult_t  ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Flush outstanding work and release shared resources (may be asynchronous). */
ncclResult_t  ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

ncclResult_t  ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stop in-flight work and free the communicator. */
ncclResult_t  ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stop in-flight work but keep the communicator for destroy/split/shrink. */
ncclResult_t  ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Ranks passing the same color form a new communicator, ordered by key. */
ncclResult_t  ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* New communicator without the listed ranks (NCCL_SHRINK_* flags). */
ncclResult_t  ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* Id for a following ncclCommGrow of this communicator. */
ncclResult_t  ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

/* Add ranks to a communicator. Existing ranks pass comm and rank -1; joining
 * ranks pass comm NULL and their new rank; the id comes from the root. */
ncclResult_t  ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm, ncclConfig_t* config);

/* Like ncclCommInitRankConfig, with nId ids (same list on every rank). */
ncclResult_t  ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config);

/* ---- Errors and queries -------------------------------------------------- */

const char*  ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* Text of the most recent error (comm may be NULL). */
const char*  ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-read the logging environment. Like NCCL, declared only when
 * NCCL_OS_LINUX is defined and a no-op macro otherwise; the library always
 * exports the functions. */
#ifdef NCCL_OS_LINUX
#  if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("ncclResetDebugInit is not part of the supported NCCL API")))
#  endif
void  ncclResetDebugInit(void);
#  if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("pncclResetDebugInit is not part of the supported NCCL API")))
#  endif
void pncclResetDebugInit(void);
#else
#  define ncclResetDebugInit()
#  define pncclResetDebugInit()
#endif

/* Asynchronous error state (ncclInProgress while a non-blocking call runs). */
ncclResult_t  ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t  ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

ncclResult_t  ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

ncclResult_t  ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Buffer registration ------------------------------------------------- */

ncclResult_t  ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

ncclResult_t  ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* ---- Suspend / resume and memory statistics ------------------------------ */

ncclResult_t  ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

ncclResult_t  ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

typedef enum {
  ncclStatGpuMemSuspend   = 0,  /* bytes of GPU memory that suspend can free */
  ncclStatGpuMemSuspended = 1,  /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist   = 2,  /* bytes of GPU memory that stays allocated */
  ncclStatGpuMemTotal     = 3   /* all GPU memory the communicator tracks */
} ncclCommMemStat_t;

ncclResult_t  ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* ---- Windows (symmetric registration) ------------------------------------ */

ncclResult_t  ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

ncclResult_t  ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* The local buffer address a window was registered with. */
ncclResult_t  ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* ---- Reduction operators and data types ---------------------------------- */

/* Carries the enum size NCCL has always used; not used by the API itself. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

typedef enum {
  ncclSum    = 0,
  ncclProd   = 1,
  ncclMax    = 2,
  ncclMin    = 3,
  ncclAvg    = 4,
  /* Count of built-in operators; operators from ncclRedOpCreate* start here. */
  ncclNumOps = 5,
  /* Largest operator value; pins sizeof(ncclRedOp_t) to 4. */
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8       = 0, ncclChar   = 0,
  ncclUint8      = 1,
  ncclInt32      = 2, ncclInt    = 2,
  ncclUint32     = 3,
  ncclInt64      = 4,
  ncclUint64     = 5,
  ncclFloat16    = 6, ncclHalf   = 6,
  ncclFloat32    = 7, ncclFloat  = 7,
  ncclFloat64    = 8, ncclDouble = 8,
  ncclBfloat16   = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes   = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice        = 0,  /* device memory, read when the collective runs */
  ncclScalarHostImmediate = 1   /* host memory, read before the create call returns */
} ncclScalarResidence_t;

/* Operator computing sum(scalar * x); valid only on comm and for datatype. */
ncclResult_t  ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm);

ncclResult_t  ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives ---------------------------------------------------------
 * Enqueued on `stream` (device mode); counts are in elements. Calls for
 * several ranks from one thread must be wrapped in ncclGroupStart/End. */

ncclResult_t  ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/* In-place broadcast (older form of ncclBroadcast). */
ncclResult_t  ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
    ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* sendbuff holds nranks*recvcount elements. */
ncclResult_t  ncclReduceScatter(const void* sendbuff, void* recvbuff,
    size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
    cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff,
    size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
    cudaStream_t stream);

/* recvbuff holds nranks*sendcount elements. */
ncclResult_t  ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* count elements to and from each rank. */
ncclResult_t  ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclGather(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point ------------------------------------------------------ */

ncclResult_t  ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);

ncclResult_t  ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
    ncclComm_t comm, cudaStream_t stream);

/* ---- One-sided operations on windows ------------------------------------- */

/* Write count elements into peer's window at peerWinOffset (bytes), then
 * raise signal sigIdx of context ctx on the peer. flags: reserved, 0. */
ncclResult_t  ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
    int peer, ncclWindow_t peerWin, size_t peerWinOffset,
    int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
    int peer, ncclWindow_t peerWin, size_t peerWinOffset,
    int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

/* Raise a signal on peer with no data. */
ncclResult_t  ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

/* One entry of an ncclWaitSignal list: wait for opCnt signals from peer. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

ncclResult_t  ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/* ---- Groups -------------------------------------------------------------- */

/* Calls between Start and End are queued and issued together at End. */
ncclResult_t  ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

ncclResult_t  ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Like ncclGroupEnd but runs nothing: fills simInfo with the estimate. */
ncclResult_t  ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- Runtime parameters -------------------------------------------------- */

/* Handle to one named parameter; owned by the library, never freed. */
typedef struct ncclParamHandle* ncclParamHandle_t;

ncclResult_t  ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);

/* Typed reads of a bound parameter. */
ncclResult_t  ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t  ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t  ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t  ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t  ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t  ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t  ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t  ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);

/* Value as text; the string stays valid until this thread's next call. */
ncclResult_t  ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);

/* Raw bytes of the value into out (maxLen bytes); *len gets the size. */
ncclResult_t  ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);

/* Value as text by name, without a handle (valid until this thread's next call). */
ncclResult_t  ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);

/* Table of all parameter names (valid until this thread's next call). */
ncclResult_t  ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);

/* Log every parameter and its value. */
void  ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* NCCL_H_ */
