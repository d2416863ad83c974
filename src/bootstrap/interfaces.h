// Network interface choice with NCCL's rules: NCCL_SOCKET_IFNAME (prefixes,
// "^" to exclude, "=" for exact names) and NCCL_SOCKET_FAMILY.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/socket.h"

namespace accl {

struct IfSpec {
  bool exclude = false;  // "^eth,ib": every interface except these
  bool exact = false;    // "=eth0": whole names, not prefixes
  std::vector<std::string> names;
};

IfSpec parseIfSpec(const char* spec);
bool ifMatches(const IfSpec& spec, const std::string& ifname);

struct NetIf {
  std::string name;
  SockAddr addr;  // port 0
  SockAddr mask;
};

// Every up interface with an address of `family` (AF_UNSPEC: both).
std::vector<NetIf> listInterfaces(int family, int* err = nullptr);  // *err: getifaddrs's errno, or 0
// The interfaces to use: NCCL_SOCKET_IFNAME if set; otherwise one that shares a
// subnet with `reach` (when given), else NCCL's default order (ib*, then anything
// but docker*/lo, then docker*, then lo). Fails with a WARN saying what was tried.
ncclResult_t chooseInterfaces(const SockAddr* reach, std::vector<NetIf>* out);
bool sameSubnet(const NetIf& i, const SockAddr& a);
// The interface's subnet as text: "10.64.3.0/24", "fd00::/64".
std::string subnetOf(const NetIf& i);

}  // namespace accl
