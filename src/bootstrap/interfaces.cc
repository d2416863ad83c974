#include "bootstrap/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/param.h"

namespace accl {

IfSpec parseIfSpec(const char* spec) {
  IfSpec s;
  if (!spec) return s;
  if (*spec == '^') { s.exclude = true; ++spec; }
  if (*spec == '=') { s.exact = true; ++spec; }
  std::string all(spec);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    std::string tok = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty()) s.names.push_back(tok);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}

bool ifMatches(const IfSpec& spec, const std::string& ifname) {
  bool hit = false;
  for (const auto& n : spec.names) {
    if (spec.exact ? ifname == n : ifname.compare(0, n.size(), n) == 0) { hit = true; break; }
  }
  return spec.exclude ? !hit : hit;
}

std::vector<NetIf> listInterfaces(int family, int* err) {
  std::vector<NetIf> out;
  ifaddrs* list = nullptr;
  if (err) *err = 0;
  if (getifaddrs(&list) != 0) {
    if (err) *err = errno;
    return out;
  }
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != AF_UNSPEC && fam != family) continue;
    NetIf n;
    n.name = i->ifa_name;
    memset(&n.addr, 0, sizeof(n.addr));
    memset(&n.mask, 0, sizeof(n.mask));
    size_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&n.addr, i->ifa_addr, len);
    if (i->ifa_netmask) memcpy(&n.mask, i->ifa_netmask, len);
    // IPv6 link-local addresses need a scope and rarely route between hosts: skip them.
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&n.addr.sin6.sin6_addr)) continue;
    out.push_back(n);
  }
  freeifaddrs(list);
  return out;
}

namespace {

// The bytes of `a` read as an address of `family` (a mask's own family may
// be unset), and how many there are: 4 for IPv4, else 16.
const unsigned char* addrBytes(const SockAddr& a, int family, size_t* n) {
  if (family == AF_INET) {
    *n = 4;
    return reinterpret_cast<const unsigned char*>(&a.sin.sin_addr);
  }
  *n = 16;
  return a.sin6.sin6_addr.s6_addr;
}

}  // namespace

bool sameSubnet(const NetIf& i, const SockAddr& a) {
  if (i.addr.sa.sa_family != a.sa.sa_family) return false;
  const int f = a.sa.sa_family;
  size_t n;
  const unsigned char* x = addrBytes(i.addr, f, &n);
  const unsigned char* y = addrBytes(a, f, &n);
  const unsigned char* m = addrBytes(i.mask, f, &n);
  for (size_t k = 0; k < n; ++k)
    if ((x[k] & m[k]) != (y[k] & m[k])) return false;
  return true;
}

std::string subnetOf(const NetIf& i) {
  const int f = i.addr.sa.sa_family == AF_INET ? AF_INET : AF_INET6;
  size_t n;
  const unsigned char* x = addrBytes(i.addr, f, &n);
  const unsigned char* m = addrBytes(i.mask, f, &n);
  unsigned char net[16] = {};
  int bits = 0;
  for (size_t k = 0; k < n; ++k) {
    net[k] = x[k] & m[k];
    bits += __builtin_popcount(m[k]);
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(f, net, text, sizeof(text))) return "";
  return std::string(text) + "/" + std::to_string(bits);
}

ncclResult_t chooseInterfaces(const SockAddr* reach, std::vector<NetIf>* out) {
  out->clear();
  int family = AF_UNSPEC;
  const char* fam = paramString(Param::SocketFamily);
  if (strcasecmp(fam, "AF_INET") == 0) family = AF_INET;
  else if (strcasecmp(fam, "AF_INET6") == 0) family = AF_INET6;
  else if (*fam) {
    WARN("NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6", fam);
    return ncclInvalidUsage;
  }
  if (reach && family == AF_UNSPEC) family = reach->sa.sa_family;
  int err = 0;
  std::vector<NetIf> all = listInterfaces(family, &err);
  if (err != 0) {  // out of descriptors or memory, say: not a matter of which interfaces there are
    WARN("listing the network interfaces failed: %s", strerror(err));
    return ncclSystemError;
  }
  const char* ifname = paramString(Param::SocketIfname);
  if (*ifname) {
    IfSpec spec = parseIfSpec(ifname);
    for (const auto& i : all)
      if (ifMatches(spec, i.name)) out->push_back(i);
    if (out->empty()) {
      std::string seen;  // each name once (an interface with IPv4 and IPv6 addresses is listed twice)
      std::vector<std::string> names;
      for (const auto& i : all)
        if (std::find(names.begin(), names.end(), i.name) == names.end()) names.push_back(i.name);
      for (const auto& n : names) seen += (seen.empty() ? "" : ", ") + n;
      WARN("NCCL_SOCKET_IFNAME=%s matches no usable interface (found: %s)", ifname, seen.c_str());
      return ncclInvalidUsage;
    }
    return ncclSuccess;
  }
  if (reach) {
    for (const auto& i : all)
      if (sameSubnet(i, *reach)) out->push_back(i);
    if (!out->empty()) return ncclSuccess;
  }
  const IfSpec ib = parseIfSpec("ib"), other = parseIfSpec("^docker,lo"), docker = parseIfSpec("docker"),
               lo = parseIfSpec("lo");
  for (const IfSpec* spec : {&ib, &other, &docker, &lo}) {
    for (const auto& i : all)
      if (ifMatches(*spec, i.name)) out->push_back(i);
    if (!out->empty()) return ncclSuccess;
  }
  WARN("no usable network interface found (NCCL_SOCKET_FAMILY=%s)", *fam ? fam : "any");
  return ncclSystemError;
}

}  // namespace accl
