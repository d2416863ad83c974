// Which communicators are live, and pins that keep one alive for an API call.
//
// A call checks its handle, then uses it; an abort or destroy on another
// thread may free the communicator in between. commPin closes that window:
// it finds the handle live and counts the call in inFlight as one step, and
// commFree unregisters before it waits for inFlight.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <mutex>
#include <set>

#include "core/comm.h"
#include "core/debug.h"
#include "core/fork_safe.h"

namespace accl {
namespace {

std::mutex& registryMu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
const HeldAcrossFork<registryMu> registryFreeAtFork;
std::set<const ncclComm*>& registry() {
  static std::set<const ncclComm*>* s = new std::set<const ncclComm*>();
  return *s;
}

// Every call checks its communicator, some two or three times, so a thread
// remembers the last one it found registered, with the registry's generation
// then: while no communicator has left the registry since, the same pointer is
// still a live communicator and needs no lock (a destroyed one's address may
// come back as a new communicator, but its removal moved the generation on).
std::atomic<uint64_t> registryGeneration{0};
struct ValidComm {
  const ncclComm* comm = nullptr;
  uint64_t generation = 0;
};
thread_local ValidComm lastValid;

// Pinning without the registry's lock (every collective pins): a thread names
// the communicator in a slot of its own before it checks the generation and
// counts the call, and unregisterComm, after it moves the generation, waits
// until no slot names the one leaving. Either the pinning thread sees the
// generation move (and asks the registry), or unregisterComm sees its slot
// (and waits for the count to be taken, which commFree then waits out).
struct PinSlot {
  std::atomic<const ncclComm*> pinning{nullptr};
  std::atomic<bool> taken{true};
  PinSlot* next = nullptr;
};
std::atomic<PinSlot*> pinSlots{nullptr};  // never freed: a thread that exits hands its slot on

PinSlot* claimSlot() {
  for (PinSlot* s = pinSlots.load(); s; s = s->next) {
    bool free = false;
    if (s->taken.compare_exchange_strong(free, true)) return s;
  }
  PinSlot* s = new PinSlot();
  s->next = pinSlots.load();
  while (!pinSlots.compare_exchange_weak(s->next, s)) {
  }
  return s;
}
struct SlotOwner {
  PinSlot* slot = claimSlot();
  ~SlotOwner() { slot->taken.store(false); }
};
PinSlot& mySlot() {
  thread_local SlotOwner owner;
  return *owner.slot;
}

// A child of fork() has only the forking thread, which was not pinning.
const int pinsClearedAtFork = pthread_atfork(nullptr, nullptr, [] {
  for (PinSlot* s = pinSlots.load(); s; s = s->next) s->pinning.store(nullptr);
});

bool anyPinning(const ncclComm* comm) {
  for (PinSlot* s = pinSlots.load(); s; s = s->next)
    if (s->pinning.load() == comm) return true;
  return false;
}

// Under registryMu.
bool registeredLocked(const ncclComm* comm) { return registry().count(comm) && comm->magic == kCommMagic; }

}  // namespace

bool commValid(const ncclComm* comm) {
  if (!comm) return false;
  // No communicator left the registry since this thread found `comm` in it:
  // still registered (its magic changes only after it leaves, in commFree,
  // so the cached answer reads nothing of a communicator being freed).
  if (comm == lastValid.comm && lastValid.generation == registryGeneration.load(std::memory_order_acquire))
    return true;
  std::lock_guard<std::mutex> g(registryMu());
  if (!registeredLocked(comm)) return false;
  lastValid = {comm, registryGeneration.load(std::memory_order_relaxed)};
  return true;
}

ncclComm* commPin(const ncclComm* comm) {
  if (!comm) return nullptr;
  ncclComm* c = const_cast<ncclComm*>(comm);
  if (comm == lastValid.comm) {
    PinSlot& slot = mySlot();
    slot.pinning.store(comm);  // sequentially consistent, as the generation's move
    const bool stillLive = lastValid.generation == registryGeneration.load();
    if (stillLive) c->inFlight.fetch_add(1);
    slot.pinning.store(nullptr);
    if (stillLive) return c;
  }
  std::lock_guard<std::mutex> g(registryMu());
  if (!registeredLocked(comm)) return nullptr;
  lastValid = {comm, registryGeneration.load(std::memory_order_relaxed)};
  c->inFlight.fetch_add(1);
  return c;
}

ncclResult_t commGone(const ncclComm* comm, const char* what) {
  WARN("%s: comm %p was destroyed or aborted (by another thread) before this queued work ran", what,
       static_cast<const void*>(comm));
  return ncclInvalidUsage;
}

void registerComm(ncclComm* comm) {
  std::lock_guard<std::mutex> g(registryMu());
  registry().insert(comm);
}

void unregisterComm(ncclComm* comm) {
  {
    std::lock_guard<std::mutex> g(registryMu());
    registry().erase(comm);
    registryGeneration.fetch_add(1);
  }
  while (anyPinning(comm)) sched_yield();  // a pin in progress takes nanoseconds
}

}  // namespace accl
