/* NCCL 2.30's parameter API, run by tests/native/test_c_api.py with this
 * environment: NCCL_BUFFSIZE=2M, NCCL_HOSTID=hostA, ACCL_STAGE_CHUNK_BYTES=-1,
 * ACCL_PEER_CHECK_MS=abc (malformed: the default, 100, is used), and
 * NCCL_CONF_FILE naming a file that sets NCCL_ALGO=ring and ACCL_TIMEOUT=77,
 * ACCL_SECRET=topsecret (never shown); NCCL_SOCKET_FAMILY and
 * ACCL_DIRECT_MIN_BYTES unset. Then
 * ncclParamDumpAll, whose stdout the test reads. Prints "OK" at the end. */
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

static ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = NULL;
  CHECK(ncclParamBind(&h, key) == ncclSuccess && h != NULL, "bind %s", key);
  return h;
}

static void expectStr(const char* key, const char* want) {
  const char* s = NULL;
  int len = -1;
  CHECK(ncclParamGetStr(bind(key), &s) == ncclSuccess && strcmp(s, want) == 0, "GetStr %s: %s", key, s);
  CHECK(ncclParamGetParameter(key, &s, &len) == ncclSuccess && strcmp(s, want) == 0 && len == (int)strlen(want),
        "GetParameter %s: %s (%d)", key, s, len);
}

/* Another thread's strings are its own: this one's GetStr stays as it was. */
static void* otherThread(void* arg) {
  const char* s = NULL;
  CHECK(ncclParamGetStr(bind("NCCL_HOSTID"), &s) == ncclSuccess, "GetStr in a thread");
  *(int*)arg = strcmp(s, "hostA") == 0;
  return NULL;
}

int main(void) {
  ncclParamHandle_t buff = bind("NCCL_BUFFSIZE"), chunk = bind("ACCL_STAGE_CHUNK_BYTES"),
                    host = bind("NCCL_HOSTID");
  CHECK(bind("NCCL_BUFFSIZE") == buff, "a second bind of a key gives the same handle");

  /* Integers: each type that holds the value, and none that does not. */
  int64_t i64 = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 7;
  int16_t i16 = 5;
  int8_t i8 = 0;
  uint8_t u8 = 9;
  CHECK(ncclParamGetI64(buff, &i64) == ncclSuccess && i64 == 2 << 20, "GetI64 NCCL_BUFFSIZE: %lld", (long long)i64);
  CHECK(ncclParamGetI32(buff, &i32) == ncclSuccess && i32 == 2 << 20, "GetI32");
  CHECK(ncclParamGetU32(buff, &u32) == ncclSuccess && u32 == 2u << 20, "GetU32");
  CHECK(ncclParamGetU64(buff, &u64) == ncclSuccess && u64 == 2u << 20, "GetU64");
  CHECK(ncclParamGetI16(buff, &i16) == ncclInvalidArgument && i16 == 5, "GetI16 of 2M must fail, out untouched");
  CHECK(strstr(ncclGetLastError(NULL), "does not fit in int16"), "the WARN says why");
  CHECK(ncclParamGetU8(buff, &u8) == ncclInvalidArgument && u8 == 9, "GetU8 of 2M must fail");
  CHECK(ncclParamGetI8(chunk, &i8) == ncclSuccess && i8 == -1, "GetI8 of -1");
  u64 = 7;
  CHECK(ncclParamGetU64(chunk, &u64) == ncclInvalidArgument && u64 == 7, "GetU64 of -1 must fail");
  CHECK(ncclParamGetI64(bind("ACCL_PEER_CHECK_MS"), &i64) == ncclSuccess && i64 == 100,
        "a malformed value reads as the default: %lld", (long long)i64);
  CHECK(ncclParamGetI64(bind("ACCL_DIRECT_MIN_BYTES"), &i64) == ncclSuccess && i64 == 262144, "default");
  CHECK(ncclParamGetI32(bind("ACCL_TIMEOUT"), &i32) == ncclSuccess && i32 == 77, "from NCCL_CONF_FILE: %d", i32);
  CHECK(ncclParamGetI64(host, &i64) == ncclInvalidArgument, "GetI64 of a string parameter must fail");
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_HOSTID is a string parameter"), "the WARN says why");

  /* Text, by handle and by key. */
  expectStr("NCCL_BUFFSIZE", "2097152");
  expectStr("ACCL_STAGE_CHUNK_BYTES", "-1");
  expectStr("NCCL_HOSTID", "hostA");
  expectStr("NCCL_ALGO", "ring");
  expectStr("NCCL_SOCKET_FAMILY", "");
  expectStr("ACCL_MODE", "host");
  expectStr("ACCL_SECRET", "(hidden)");

  /* Raw bytes: an int64, or the text with its NUL. */
  char raw[16];
  int len = -1;
  CHECK(ncclParamGet(buff, raw, sizeof(raw), &len) == ncclSuccess && len == 8, "Get int: len %d", len);
  memcpy(&i64, raw, sizeof(i64));
  CHECK(i64 == 2 << 20, "Get int: value");
  CHECK(ncclParamGet(host, raw, sizeof(raw), &len) == ncclSuccess && len == 6 && strcmp(raw, "hostA") == 0,
        "Get string");
  len = -1;
  CHECK(ncclParamGet(host, raw, 5, &len) == ncclInvalidArgument && len == 6, "too small: fails, len says 6");
  len = -1;
  CHECK(ncclParamGet(host, raw, 0, &len) == ncclInvalidArgument && len == -1, "maxLen 0 fails, len untouched");
  CHECK(ncclParamGet(host, NULL, 16, &len) == ncclInvalidArgument, "NULL out");
  CHECK(ncclParamGet(host, raw, 16, NULL) == ncclInvalidArgument, "NULL len");

  /* Keys: every one binds, and the names the library reads are there. */
  const char** keys = NULL;
  int n = 0, sawBuff = 0, sawTimeout = 0;
  CHECK(ncclParamGetAllParameterKeys(&keys, &n) == ncclSuccess && n >= 20, "keys: %d", n);
  for (int i = 0; i < n; ++i) {
    ncclParamHandle_t h = NULL;
    CHECK(ncclParamBind(&h, keys[i]) == ncclSuccess, "bind listed key %s", keys[i]);
    sawBuff |= strcmp(keys[i], "NCCL_BUFFSIZE") == 0;
    sawTimeout |= strcmp(keys[i], "ACCL_TIMEOUT") == 0;
  }
  CHECK(sawBuff && sawTimeout, "NCCL_BUFFSIZE and ACCL_TIMEOUT listed");
  CHECK(ncclParamGetAllParameterKeys(NULL, &n) == ncclInvalidArgument, "NULL table");
  CHECK(ncclParamGetAllParameterKeys(&keys, NULL) == ncclInvalidArgument, "NULL tableLen");

  /* Bad keys and handles. */
  ncclParamHandle_t h = buff;
  CHECK(ncclParamBind(&h, "NCCL_NO_SUCH_THING") == ncclInvalidArgument && h == buff, "unknown key, *out untouched");
  CHECK(strstr(ncclGetLastError(NULL), "no parameter is named \"NCCL_NO_SUCH_THING\""), "the WARN names it");
  CHECK(ncclParamBind(&h, "nccl_buffsize") == ncclInvalidArgument, "keys are case-sensitive");
  CHECK(ncclParamBind(&h, NULL) == ncclInvalidArgument, "NULL key");
  CHECK(ncclParamBind(NULL, "NCCL_BUFFSIZE") == ncclInvalidArgument, "NULL out");
  const char* s = "x";
  len = 3;
  CHECK(ncclParamGetParameter("NCCL_NO_SUCH_THING", &s, &len) == ncclInvalidArgument && s == NULL && len == 0,
        "GetParameter of an unknown key: NULL and 0");
  CHECK(ncclParamGetParameter(NULL, &s, &len) == ncclInvalidArgument, "NULL key");
  CHECK(ncclParamGetParameter("NCCL_BUFFSIZE", NULL, &len) == ncclInvalidArgument, "NULL value");
  CHECK(ncclParamGetParameter("NCCL_BUFFSIZE", &s, NULL) == ncclInvalidArgument, "NULL valueLen");
  int notAHandle = 0;
  CHECK(ncclParamGetI64((ncclParamHandle_t)&notAHandle, &i64) == ncclInvalidArgument, "a stray pointer");
  CHECK(strstr(ncclGetLastError(NULL), "not a handle from ncclParamBind"), "the WARN says so");
  CHECK(ncclParamGetI64((ncclParamHandle_t)((char*)buff + 1), &i64) == ncclInvalidArgument, "inside a handle");
  CHECK(ncclParamGetI64(NULL, &i64) == ncclInvalidArgument, "NULL handle");
  CHECK(ncclParamGetI64(buff, NULL) == ncclInvalidArgument, "NULL out");
  CHECK(ncclParamGetStr(buff, NULL) == ncclInvalidArgument, "GetStr NULL out");

  /* Strings stay valid: after later calls of this thread and of another one. */
  const char *mine = NULL, *longer = NULL;
  int theirs = 0;
  pthread_t t;
  CHECK(ncclParamGetStr(buff, &mine) == ncclSuccess, "GetStr");
  CHECK(ncclParamGetStr(bind("ACCL_MODE"), &longer) == ncclSuccess, "GetStr");
  CHECK(pthread_create(&t, NULL, otherThread, &theirs) == 0 && pthread_join(t, NULL) == 0, "thread");
  CHECK(theirs && strcmp(mine, "2097152") == 0 && strcmp(longer, "host") == 0, "strings kept");

  ncclParamDumpAll();
  printf("OK\n");
  return 0;
}
