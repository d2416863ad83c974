/* LD_AUDIT module for `accl-run --audit`: every request for libnccl.so.2 or
 * libnccl.so (DT_NEEDED or dlopen, by name or by path) is answered with ACCL's
 * libnccl.so.2. The target is $ACCL_AUDIT_NCCL, else the libnccl.so.2 next to
 * this module. See rtld-audit(7): la_objsearch runs before the search path
 * (DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH) is consulted.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char target[PATH_MAX];

static int is_nccl(const char* name) {
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return strcmp(base, "libnccl.so.2") == 0 || strcmp(base, "libnccl.so") == 0;
}

unsigned int la_version(unsigned int version) {
  const char* env = getenv("ACCL_AUDIT_NCCL");
  if (env && *env && strlen(env) < sizeof(target)) {
    strcpy(target, env);
  } else {
    Dl_info info;
    if (dladdr((void*)&la_version, &info) && info.dli_fname) {
      const char* slash = strrchr(info.dli_fname, '/');
      size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
      if (dir + sizeof("libnccl.so.2") <= sizeof(target)) {
        memcpy(target, info.dli_fname, dir);
        strcpy(target + dir, "libnccl.so.2");
      }
    }
  }
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  (void)cookie;
  (void)flag;
  if (target[0] && is_nccl(name)) return target;
  return (char*)name;
}
