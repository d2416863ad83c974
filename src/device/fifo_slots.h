// The data slots of every FIFO, host and device connectors alike: a step is
// one slot, and both sides of a connection count steps modulo this.
#pragma once

namespace accl {

constexpr int kSlots = 8;

}  // namespace accl
