// Which communicators are live, and pins that keep one allocated for the
// length of an API call.
//
// A call checks its handle, then uses it; an abort or destroy on another
// thread may free the communicator in between. commPin closes that window: it
// finds the handle live and pins it as one step, and commFree unregisters the
// communicator before it waits for its pins to go.
//
// Every call pins, so the common case is made cheap: a thread names the
// communicator in a slot of its own, then checks that no communicator left the
// registry since it last found this one live. unregisterComm, after it moves
// the registry's generation on, makes every thread's stores visible at once
// (membarrier) and the waiter then scans the slots: either the pinning thread
// sees the generation move (and asks the registry under its lock), or the
// waiter sees its slot. The pinning side thus needs no locked instruction.
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

#include "base/debug.h"
#include "base/fork_safe.h"
#include "core/comm.h"

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
std::atomic<uint64_t> registryGeneration{0};  // moves on whenever a communicator leaves

// The process's threads' slots, never freed: a thread that exits hands its
// slot on to the next new thread. One per thread: an API call pins its
// communicator there, and the work it runs on that thread pins the same one;
// the rare pin of a second communicator on a thread counts in inFlight.
struct PinSlots {
  std::atomic<const ncclComm*> pinning{nullptr};
  std::atomic<bool> taken{true};
  PinSlots* next = nullptr;
};
std::atomic<PinSlots*> allSlots{nullptr};

PinSlots* claimSlots() {
  for (PinSlots* s = allSlots.load(); s; s = s->next) {
    bool free = false;
    if (s->taken.compare_exchange_strong(free, true)) return s;
  }
  PinSlots* s = new PinSlots();
  s->next = allSlots.load();
  while (!allSlots.compare_exchange_weak(s->next, s)) {
  }
  return s;
}

// What a thread keeps: its slots, and the last communicator it found in the
// registry with the generation then (while the generation stays, that pointer
// is still a live communicator and needs no lock; a destroyed one's address
// may come back as a new communicator, but its removal moved the generation).
// Plain data (every call reads it): no guard and no wrapper around the access.
// (Not the initial-exec model, which would be one load: a library that Python
// opens with dlopen finds no static TLS left for it.)
struct ThreadPins {
  PinSlots* slots;
  const ncclComm* lastValid;
  uint64_t lastGeneration;
  bool exiting;  // its slot went back: a call from a later thread_local destructor counts in inFlight
};
thread_local ThreadPins mine = {nullptr, nullptr, 0, false};

// The thread's slot, claimed at its first pin and handed on when it exits;
// nullptr after that.
PinSlots* slotsOf(ThreadPins& t) {
  if (!t.slots && !t.exiting) {
    t.slots = claimSlots();
    struct HandOn {
      ~HandOn() {
        mine.exiting = true;
        if (mine.slots) mine.slots->taken.store(false);
        mine.slots = nullptr;
      }
    };
    static thread_local HandOn atExit;
    (void)atExit;
  }
  return t.slots;
}

// The asymmetric barrier: membarrier, where the kernel has it, orders the
// pinning threads' plain store and load for the rare unregistering side.
bool registerBarrier() {
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}
std::atomic<bool> heavyBarrierWorks{registerBarrier()};
// A child of fork() has only the forking thread, which pins nothing (fork is
// not called from inside the library): the other threads' slots are freed.
// It registers for membarrier again (the registration may not pass to a new
// address space); it runs alone then, so switching is safe.
const int childAtFork = pthread_atfork(nullptr, nullptr, [] {
  for (PinSlots* s = allSlots.load(); s; s = s->next) {
    s->pinning.store(nullptr);
    if (s != mine.slots) s->taken.store(false);
  }
  heavyBarrierWorks.store(registerBarrier());
});

inline void lightBarrier() {
  if (heavyBarrierWorks.load(std::memory_order_relaxed)) std::atomic_signal_fence(std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
}
void heavyBarrier() {
  if (!heavyBarrierWorks.load(std::memory_order_relaxed) ||
      syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Under registryMu: `comm` is registered, and then this thread remembers it
// with the generation now.
bool registeredLocked(ThreadPins& t, const ncclComm* comm) {
  if (!registry().count(comm) || comm->magic != kCommMagic) return false;
  t.lastValid = comm;
  t.lastGeneration = registryGeneration.load(std::memory_order_relaxed);
  return true;
}

}  // namespace

bool commValid(const ncclComm* comm) {
  if (!comm) return false;
  // Its magic changes only after it leaves the registry, in commFree, so the
  // cached answer reads nothing of a communicator being freed.
  ThreadPins& t = mine;
  if (comm == t.lastValid && t.lastGeneration == registryGeneration.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> g(registryMu());
  return registeredLocked(t, comm);
}

CommPin commPin(const ncclComm* comm) {
  CommPin pin;
  if (!comm) return pin;
  ThreadPins& t = mine;
  PinSlots* slots = slotsOf(t);
  std::atomic<const ncclComm*>* slot = slots ? &slots->pinning : nullptr;
  const ncclComm* held = slot ? slot->load(std::memory_order_relaxed) : nullptr;
  if (slot && held == comm) {  // an outer scope of this thread pins it, until after this one
    pin.live = true;
    return pin;
  }
  if (slot && !held && comm == t.lastValid) {
    slot->store(comm, std::memory_order_relaxed);
    lightBarrier();
    if (t.lastGeneration == registryGeneration.load(std::memory_order_relaxed)) {
      pin.live = true;
      pin.slot = slot;
      return pin;
    }
    slot->store(nullptr, std::memory_order_relaxed);  // one left meanwhile, perhaps this one: ask the registry
  }
  std::lock_guard<std::mutex> g(registryMu());
  if (!registeredLocked(t, comm)) return pin;
  pin.live = true;
  if (slot && !held) {
    slot->store(comm, std::memory_order_relaxed);  // the unregistering side takes this lock first
    pin.slot = slot;
  } else {
    ncclComm* c = const_cast<ncclComm*>(comm);
    c->inFlight.fetch_add(1);  // the thread's slot pins another communicator, or is gone
    pin.counted = c;
  }
  return pin;
}

bool commPinned(const ncclComm* comm) {
  for (PinSlots* s = allSlots.load(); s; s = s->next)
    if (s->pinning.load(std::memory_order_acquire) == comm) return true;
  return false;
}

ncclResult_t commGone(const ncclComm* comm, const char* what) {
  WARN("%s: comm %p was destroyed or aborted (by another thread) before this queued work ran", what,
       static_cast<const void*>(comm));
  return ncclInvalidUsage;
}

bool siblingThreads(const ncclComm* comm, int k, unsigned long* driver, unsigned long* caller) {
  std::lock_guard<std::mutex> g(registryMu());  // a communicator leaves the registry before it is freed
  for (const ncclComm* c : registry()) {
    if (c == comm || c->magic != kCommMagic || c->commHash != comm->commHash || c->rank != k) continue;
    *driver = c->driver.load(std::memory_order_acquire);
    *caller = c->caller.load(std::memory_order_acquire);
    return true;
  }
  return false;
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
  heavyBarrier();  // from here commPinned sees every pin taken before the generation moved
}

}  // namespace accl
