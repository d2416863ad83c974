// The unit tests' harness: TEST(name) registers a function (in any file of
// the binary), CHECK and CHECK_EQ count failures and print both values.
#pragma once

#include <cstdio>
#include <functional>
#include <sstream>
#include <vector>

struct Test {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Test>& tests() {
  static std::vector<Test> t;
  return t;
}
inline int failures = 0;

struct Register {
  Register(const char* n, std::function<void()> f) { tests().push_back({n, std::move(f)}); }
};

#define TEST(name)                                  \
  void test_##name();                               \
  static Register reg_##name(#name, test_##name);   \
  void test_##name()

template <typename A, typename B>
void checkEq(const A& a, const B& b, const char* ea, const char* eb, int line) {
  if (!(a == b)) {
    std::ostringstream os;
    os << "line " << line << ": " << ea << " == " << eb << " failed: " << a << " vs " << b;
    fprintf(stderr, "  %s\n", os.str().c_str());
    ++failures;
  }
}
#define CHECK_EQ(a, b) checkEq((a), (b), #a, #b, __LINE__)
#define CHECK(c) checkEq(static_cast<bool>(c), true, #c, "true", __LINE__)
