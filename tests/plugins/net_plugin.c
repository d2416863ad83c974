/* A foreign NCCL net plugin for the tests: TCP, one socket per connection,
 * written against include/plugin/nccl_net.h alone, as a plugin author
 * would. Its one device is the first interface NCCL_SOCKET_IFNAME names
 * (IPv4). Built several ways (tests/native/test_net_plugin.py):
 *   -DPLUGIN_VERSION=12, 11 or 8   exports ncclNetPlugin_v12, _v11 or _v8
 *   -DBROKEN_INIT              its init fails
 *   -DOLD_ONLY                 exports only ncclNetPlugin_v7 (which ACCL does not load)
 *   -DSILENT_CLOSE             a peer's closing is never an error (as with some RDMA plugins): a
 *                              receive from a dead peer just never completes
 * It logs through the logger it is given, and at each connection's close
 * how many bytes went through it ("AcclTestNet: closed ... N bytes"). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugin/nccl_net.h"

#define MAX_REQS 32

static ncclDebugLogger_t logf_ = NULL;
static struct sockaddr_in dev_addr;

struct handle { uint32_t magic; struct sockaddr_in addr; int fd; int stage; };
struct req { int used, done; char* data; size_t size, moved; uint32_t head; struct comm* c; };
struct comm { int fd, send; long long bytes; struct req reqs[MAX_REQS]; int first, count, broken; };
struct listen { int fd; };

#define MAGIC 0x61637474u

static ncclResult_t init_common(ncclDebugLogger_t logger) {
  logf_ = logger;
#ifdef BROKEN_INIT
  logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "AcclTestNet: built to fail its init");
  return ncclInternalError;
#else
  const char* spec = getenv("NCCL_SOCKET_IFNAME");
  char want[64] = "lo";
  if (spec) {
    if (*spec == '=') ++spec;
    size_t n = strcspn(spec, ",");
    if (n >= sizeof(want)) n = sizeof(want) - 1;
    memcpy(want, spec, n);
    want[n] = 0;
  }
  struct ifaddrs *all, *i;
  if (getifaddrs(&all) != 0) return ncclSystemError;
  int found = 0;
  for (i = all; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strncmp(i->ifa_name, want, strlen(want)) == 0) {
      memcpy(&dev_addr, i->ifa_addr, sizeof(dev_addr));
      found = 1;
      break;
    }
  freeifaddrs(all);
  logger(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "AcclTestNet: device %s (%s)", want,
         found ? "found" : "not found");
  return found ? ncclSuccess : ncclSystemError;
#endif
}

static ncclResult_t devices(int* n) { *n = 1; return ncclSuccess; }

static void nonblocking(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static ncclResult_t do_listen(int dev, void* opaque, void** listenComm) {
  struct handle* h = opaque;
  struct sockaddr_in a = dev_addr;
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  a.sin_port = 0;
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(fd, 64) != 0) return ncclSystemError;
  getsockname(fd, (struct sockaddr*)&a, &len);
  nonblocking(fd);
  memset(h, 0, sizeof(*h));
  h->magic = MAGIC;
  h->addr = a;
  h->fd = -1;
  struct listen* l = calloc(1, sizeof(*l));
  l->fd = fd;
  *listenComm = l;
  (void)dev;
  return ncclSuccess;
}

static struct comm* new_comm(int fd, int send) {
  struct comm* c = calloc(1, sizeof(*c));
  c->fd = fd;
  c->send = send;
  nonblocking(fd);
  return c;
}

static ncclResult_t do_connect(void* opaque, void** sendComm) {
  struct handle* h = opaque;
  *sendComm = NULL;
  if (h->magic != MAGIC) return ncclInvalidArgument;
  if (h->fd < 0) {
    h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (h->fd < 0) return ncclSystemError;
    if (connect(h->fd, (struct sockaddr*)&h->addr, sizeof(h->addr)) != 0 && errno != EINPROGRESS) return ncclSystemError;
  }
  struct pollfd p = {h->fd, POLLOUT, 0};
  if (poll(&p, 1, 0) <= 0) return ncclSuccess;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) return ncclSystemError;
  *sendComm = new_comm(h->fd, 1);
  h->fd = -1;
  return ncclSuccess;
}

static ncclResult_t do_accept(void* listenComm, void** recvComm) {
  struct listen* l = listenComm;
  int fd = accept(l->fd, NULL, NULL);
  *recvComm = fd >= 0 ? new_comm(fd, 0) : NULL;
  return fd >= 0 || errno == EAGAIN || errno == EWOULDBLOCK ? ncclSuccess : ncclSystemError;
}

static ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm, (void)data, (void)size;
  *mhandle = (void*)0x1;  /* checked when data moves: ACCL must pass it back */
  return type == NCCL_PTR_HOST ? ncclSuccess : ncclInvalidArgument;
}
static ncclResult_t deregMr(void* comm, void* mhandle) { (void)comm; return mhandle == (void*)0x1 ? ncclSuccess : ncclInternalError; }

static ncclResult_t post(struct comm* c, void* data, size_t size, void* mhandle, void** request) {
  *request = NULL;
  if (c->broken) return ncclSystemError;
  if (mhandle != (void*)0x1) {
    logf_(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "AcclTestNet: data moved without its registration");
    return ncclInvalidArgument;
  }
  if (c->count == MAX_REQS) return ncclSuccess;
  struct req* r = &c->reqs[(c->first + c->count++) % MAX_REQS];
  memset(r, 0, sizeof(*r));
  r->used = 1;
  r->data = data;
  r->size = size;
  r->head = (uint32_t)size;
  r->c = c;
  *request = r;
  return ncclSuccess;
}

/* Moves the front request; 0 on a broken connection. */
static int move(struct comm* c, struct req* r) {
  while (!r->done) {
    size_t total = sizeof(r->head) + (c->send ? r->size : r->head);
    char* p;
    size_t left;
    if (r->moved < sizeof(r->head)) {
      p = (char*)&r->head + r->moved;
      left = sizeof(r->head) - r->moved;
    } else {
      p = r->data + (r->moved - sizeof(r->head));
      left = total - r->moved;
    }
    if (left > 0) {
      ssize_t k = c->send ? send(c->fd, p, left, MSG_NOSIGNAL) : recv(c->fd, p, left, 0);
#ifdef SILENT_CLOSE
      if (k == 0 && !c->send) return 1;
#else
      if (k == 0 && !c->send) return 0;
#endif
      if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      r->moved += (size_t)k;
      c->bytes += k;
      if (!c->send && r->moved == sizeof(r->head) && r->head > r->size) return 0;
      continue;
    }
    r->done = 1;
  }
  return 1;
}

static ncclResult_t test(void* request, int* done, int* size) {
  struct req* r = request;
  struct comm* c = r->c;
  *done = 0;
  for (int k = 0; k < c->count && !c->broken; ++k) {  /* in order: each moves once those before it are done */
    struct req* q = &c->reqs[(c->first + k) % MAX_REQS];
    if (q->done) continue;
    if (!move(c, q)) c->broken = 1;
    if (!q->done) break;
  }
  if (!r->done) return c->broken ? ncclSystemError : ncclSuccess;
  *done = 1;
  if (size) *size = (int)(c->send ? r->size : r->head);
  r->used = 0;
  while (c->count > 0 && !c->reqs[c->first].used) {
    c->first = (c->first + 1) % MAX_REQS;
    --c->count;
  }
  return ncclSuccess;
}

static ncclResult_t close_comm(void* comm) {
  struct comm* c = comm;
  logf_(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "AcclTestNet: closed a %s connection after %lld bytes",
        c->send ? "send" : "receive", c->bytes);
  close(c->fd);
  free(c);
  return ncclSuccess;
}
static ncclResult_t close_listen(void* comm) {
  struct listen* l = comm;
  close(l->fd);
  free(l);
  return ncclSuccess;
}
static ncclResult_t iflush(void* c, int n, void** d, int* s, void** m, void** r) {
  (void)c, (void)n, (void)d, (void)s, (void)m;
  *r = NULL;
  return ncclSuccess;
}

#if defined(OLD_ONLY)
/* Only an older table's name: ACCL must refuse it and say which it has. */
__attribute__((visibility("default"))) const int ncclNetPlugin_v7 = 7;
#elif PLUGIN_VERSION == 11 || PLUGIN_VERSION == 12
/* v11 and v12 share a table's shape; v12's types are wider and its devices
 * name their rail and plane. */
#if PLUGIN_VERSION == 12
#define V(name) name##_v12_t
#define TABLE_NAME ncclNetPlugin_v12
#else
#define V(name) name##_v11_t
#define TABLE_NAME ncclNetPlugin_v11
#endif
static int ctx11;  /* what init gives: listen and connect must get it back */
static ncclResult_t init11(void** ctx, uint64_t commId, V(ncclNetCommConfig)* cfg, ncclDebugLogger_t l,
                           ncclProfilerCallback_t p) {
  (void)commId, (void)cfg, (void)p;
  *ctx = &ctx11;
  return init_common(l);
}
static ncclResult_t listen11(void* ctx, int dev, void* h, void** l) {
  if (ctx != &ctx11) return ncclInvalidArgument;
  return do_listen(dev, h, l);
}
static ncclResult_t props11(int dev, V(ncclNetProperties)* p) {
  (void)dev;
  memset(p, 0, sizeof(*p));
  p->name = (char*)"acctest0";
  p->pciPath = NULL;
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 1000;
  p->maxComms = 1024;
  p->maxRecvs = 1;
#if PLUGIN_VERSION == 12
  p->railId = 3; /* what ACCL logs of it */
  p->planeId = 1;
#endif
  return ncclSuccess;
}
static ncclResult_t connect11(void* ctx, int dev, void* h, void** s, V(ncclNetDeviceHandle)** d) {
  (void)dev, (void)d;
  if (ctx != &ctx11) return ncclInvalidArgument;
  return do_connect(h, s);
}
static ncclResult_t accept11(void* l, void** r, V(ncclNetDeviceHandle)** d) { (void)d; return do_accept(l, r); }
static ncclResult_t isend11(void* c, void* data, size_t size, int tag, void* m, void* ph, void** r) {
  (void)tag, (void)ph;
  return post(c, data, size, m, r);
}
static ncclResult_t irecv11(void* c, int n, void** data, size_t* sizes, int* tags, void** m, void** ph, void** r) {
  (void)tags, (void)ph;
  if (n != 1) return ncclInvalidArgument;
  return post(c, data[0], sizes[0], m[0], r);
}
__attribute__((visibility("default"))) const V(ncclNet) TABLE_NAME = {
    "AcclTestNet", init11, devices, props11, listen11, connect11, accept11, regMr, NULL, deregMr, isend11, irecv11,
    iflush, test, close_comm, close_comm, close_listen, NULL, NULL, NULL, NULL, NULL};
#else
static ncclResult_t init8(ncclDebugLogger_t l) { return init_common(l); }
static ncclResult_t props8(int dev, ncclNetProperties_v8_t* p) {
  (void)dev;
  memset(p, 0, sizeof(*p));
  p->name = (char*)"acctest0";
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 1000;
  p->maxComms = 1024;
  p->maxRecvs = 1;
  return ncclSuccess;
}
static ncclResult_t connect8(int dev, void* h, void** s, ncclNetDeviceHandle_v8_t** d) {
  (void)dev, (void)d;
  return do_connect(h, s);
}
static ncclResult_t accept8(void* l, void** r, ncclNetDeviceHandle_v8_t** d) { (void)d; return do_accept(l, r); }
static ncclResult_t isend8(void* c, void* data, int size, int tag, void* m, void** r) {
  (void)tag;
  return post(c, data, (size_t)size, m, r);
}
static ncclResult_t irecv8(void* c, int n, void** data, int* sizes, int* tags, void** m, void** r) {
  (void)tags;
  if (n != 1) return ncclInvalidArgument;
  return post(c, data[0], (size_t)sizes[0], m[0], r);
}
__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    "AcclTestNet", init8, devices, props8, do_listen, connect8, accept8, regMr, NULL, deregMr, isend8, irecv8,
    iflush, test, close_comm, close_comm, close_listen, NULL, NULL};
#endif
