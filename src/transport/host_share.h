// Host memory that other processes can map: ncclMemAlloc's memory in host
// mode. Each allocation is a memfd mapped shared, so a peer process on the
// same host opens it through /proc/<pid>/fd/<fd> and maps the same pages: the
// direct collectives on symmetric windows (coll/host_direct.h) read and write
// other ranks' buffers in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace accl {

// Page-aligned, zero-filled; the pages exist on return (no SIGBUS later).
ncclResult_t hostShareAlloc(void** ptr, size_t size);
// false: `ptr` is not from hostShareAlloc (nothing done).
bool hostShareFree(void* ptr);

// Where bytes [p, p + bytes) lie in a shareable allocation of this process,
// as a peer process maps them. Plain bytes: travels in an allgather.
struct HostShareRef {
  int32_t pid = 0;
  int32_t fd = -1;      // -1: not in a shareable allocation
  uint64_t offset = 0;  // of p in the allocation
  uint64_t bytes = 0;
};
HostShareRef hostShareFind(const void* p, size_t bytes);

// Maps `ref` (another process's) here. *base is p as this process sees it;
// *mapping and *mappingBytes are what hostShareUnmap takes. A WARN says why it
// could not.
ncclResult_t hostShareMap(const HostShareRef& ref, char** base, void** mapping, size_t* mappingBytes);
void hostShareUnmap(void* mapping, size_t mappingBytes);

}  // namespace accl
