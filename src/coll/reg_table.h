// A rank's table of shared registrations, and a peer's view of it: the
// bookkeeping of the direct collectives' registered buffers between processes
// on one GPU (coll/dev_share.h), apart from CUDA, so it can be tested alone.
//
// The owner adds each exported allocation under the next id, at place
// id % kRegPlaces, skipping places whose registration still lives; it kills
// an entry when the registration goes. A peer looks at the table before each
// collective: it maps what was added since its last look and unmaps what
// died, through callbacks, and knows the id below which it has mapped every
// live entry (its watermark).
//
// The table lives in shared memory; the owner writes, peers read. An entry's
// id is written last and read again after its contents: a reader never takes
// an entry being replaced, and a place is replaced only once its entry is dead.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "device/dev_types.h"

namespace accl {

constexpr int kRegPlaces = kDevMaxRegistrations;
constexpr int kRegHandleBytes = 64;  // a cudaIpcMemHandle_t

struct RegEntry {
  std::atomic<uint32_t> id;
  std::atomic<uint32_t> live;
  uint64_t base;  // the allocation in its owner's process (ranks of that process use it as it is)
  char handle[kRegHandleBytes];
};
struct RegTable {
  std::atomic<uint32_t> count;   // ids so far (the next one)
  std::atomic<uint32_t> deaths;  // entries killed so far
  char pad[56];
  RegEntry e[kRegPlaces];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "atomics in shared memory");

// The owner (one thread at a time). regAdd: false when every place holds a
// live entry. `beforePublish(place, id)` runs before peers can see the entry
// (false: nothing is added).
template <typename BeforePublish>
bool regAdd(RegTable* t, const char* handle, uint64_t base, uint32_t* idOut, BeforePublish beforePublish);
void regKill(RegTable* t, uint32_t id);

// One peer's table as this rank has mapped it.
class RegMirror {
 public:
  RegMirror() : places_(kRegPlaces) {}
  // Maps what the owner added since the last look and unmaps what died.
  // open(place, id, handle, base) -> bool: map it (false: failed, WARNed; this
  // mirror maps nothing more from then on); close(place): unmap what open
  // mapped there.
  template <typename Open, typename Close>
  void refresh(const RegTable& t, Open open, Close close);
  // Every live entry with an id below this one is mapped.
  uint32_t watermark() const { return scanned_; }
  bool stuck() const { return stuck_; }
  // Entries mapped now (places with one).
  template <typename Fn>
  void forEachMapped(Fn fn) const {
    for (int i = 0; i < kRegPlaces; ++i)
      if (places_[i].mapped) fn(i);
  }

 private:
  struct Place {
    uint32_t id = 0;
    bool mapped = false;
  };
  std::vector<Place> places_;
  uint32_t scanned_ = 0, deathsSeen_ = 0;
  bool stuck_ = false;
};

template <typename BeforePublish>
bool regAdd(RegTable* t, const char* handle, uint64_t base, uint32_t* idOut, BeforePublish beforePublish) {
  uint32_t id = t->count.load(std::memory_order_relaxed);
  int tries = 0;
  while (tries < kRegPlaces && t->e[id % kRegPlaces].live.load(std::memory_order_relaxed)) ++id, ++tries;
  if (tries == kRegPlaces) return false;
  const int place = static_cast<int>(id % kRegPlaces);
  if (!beforePublish(place, id)) return false;
  RegEntry& e = t->e[place];
  e.id.store(~0u, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < kRegHandleBytes; ++i) e.handle[i] = handle[i];
  e.base = base;
  e.live.store(1, std::memory_order_relaxed);
  e.id.store(id, std::memory_order_release);
  t->count.store(id + 1, std::memory_order_release);
  *idOut = id;
  return true;
}

inline void regKill(RegTable* t, uint32_t id) {
  t->e[id % kRegPlaces].live.store(0, std::memory_order_release);
  t->deaths.fetch_add(1, std::memory_order_acq_rel);
}

template <typename Open, typename Close>
void RegMirror::refresh(const RegTable& t, Open open, Close close) {
  auto drop = [&](int i) {
    close(i);
    places_[i] = Place{};
  };
  // Dead entries first: their places may be reused below.
  const uint32_t deaths = t.deaths.load(std::memory_order_acquire);
  if (deaths != deathsSeen_) {
    deathsSeen_ = deaths;
    for (int i = 0; i < kRegPlaces; ++i) {
      const RegEntry& e = t.e[i];
      if (places_[i].mapped &&
          !(e.id.load(std::memory_order_acquire) == places_[i].id && e.live.load(std::memory_order_acquire)))
        drop(i);
    }
  }
  const uint32_t count = t.count.load(std::memory_order_acquire);
  for (; scanned_ < count && !stuck_; ++scanned_) {
    const uint32_t id = scanned_;
    const int i = static_cast<int>(id % kRegPlaces);
    const RegEntry& e = t.e[i];
    if (e.id.load(std::memory_order_acquire) != id) continue;  // replaced, or skipped: dead before this look
    char handle[kRegHandleBytes];
    for (int b = 0; b < kRegHandleBytes; ++b) handle[b] = e.handle[b];
    const uint64_t base = e.base;
    const bool live = e.live.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.id.load(std::memory_order_relaxed) != id || !live) continue;
    if (places_[i].mapped) drop(i);  // an older entry at this place, dead
    if (!open(i, id, handle, base)) {
      stuck_ = true;  // the watermark stays at this id
      break;
    }
    places_[i] = Place{id, true};
  }
}

}  // namespace accl
