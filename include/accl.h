/* ACCL extensions to the NCCL C ABI. Everything here is prefixed `accl` so it
 * can never collide with a name NVIDIA's NCCL exports. */
#ifndef ACCL_H_
#define ACCL_H_

#include <stddef.h>
#include "nccl.h"

#define ACCL_VERSION_MAJOR 0
#define ACCL_VERSION_MINOR 1
#define ACCL_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* ACCL's own version, e.g. "0.1.0" (ncclGetVersion reports the NCCL API level). */
const char* acclGetVersionString(void);

/* The last WARN line's text that the calling thread wrote ("" if none).
 * ncclGetLastError is per process, as NCCL's: with several ranks in one
 * process it may hold another rank's error. Valid until this thread's next
 * WARN. */
const char* acclGetThreadLastError(void);

/* The mode a new communicator would run in on this machine.
 * Returns 1 for device mode (a usable CUDA device), 0 for host mode, and writes
 * a one-line human-readable reason (e.g. "host: built without CUDA") into
 * `reason` (always NUL-terminated when len > 0). */
int acclQueryMode(char* reason, size_t len);

/* The tuner's cost model (docs/tuning.md): predicted microseconds for one call
 * of `collective` ("allreduce", "broadcast", "reduce", "allgather",
 * "reducescatter", "sendrecv") with algorithm `algorithm` ("ring", "tree" or
 * "hier"; tree and hier for allreduce only, hier where nhosts >= 2 hosts hold
 * nranks / nhosts >= 2 ranks each) moving `bytes` (the call's count x element
 * size) on nranks ranks spread over nhosts hosts. ncclInvalidArgument for
 * unknown names or impossible sizes. */
ncclResult_t acclTunerPredict(const char* collective, const char* algorithm, size_t bytes, int nranks, int nhosts,
                              double* microseconds);

/* The algorithm the tuner picks for that call when NCCL_ALGO allows everything
 * (hosts taken to hold nranks / nhosts ranks each, and an allreduce of at
 * least nranks elements, below which a communicator does not take hier):
 * writes "ring", "tree" or "hier" (NUL-terminated) into `algorithm`. */
ncclResult_t acclTunerChoose(const char* collective, size_t bytes, int nranks, int nhosts, char* algorithm,
                             size_t len);

/* The topology planned from a layout, without a job (`python -m accl.topo`):
 * `layout` is text, one host a line, "host [NAME] ranks R,R,... nics
 * NIC[=SUBNET],... [rails <ACCL_NICS>]", and optionally "crossnic N". Writes
 * JSON (hosts and their NICs' rails and planes, the ring, the NICs of each
 * connection between hosts, the hierarchical algorithms' rails, the two
 * trees) into `out`; *needed (when not NULL) gets the bytes it takes, and
 * with it a short `out` is not an error. ncclInvalidArgument (with a WARN
 * naming the line) for a layout that does not parse. */
ncclResult_t acclTopoPlan(const char* layout, char* out, size_t len, size_t* needed);

/* This host's NICs as the network backend sees them, as a layout's
 * "nics ... [rails ...]" words (ACCL_NICS applied). */
ncclResult_t acclTopoLocal(char* out, size_t len, size_t* needed);

#ifdef __cplusplus
}
#endif

#endif /* ACCL_H_ */
