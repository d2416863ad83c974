// The topology planned from a layout (acclTopoPlan) and this host's NICs
// (acclTopoLocal), for `python -m accl.topo`.
#include <nanobind/stl/string.h>

#include <string>

#include "accl.h"
#include "bindings.h"

namespace accl_py {

namespace {

// Calls fn(out, len, &needed) with a buffer as large as it says it needs.
template <typename F>
std::string grown(F fn, const char* name) {
  size_t needed = 0;
  check(fn(nullptr, 0, &needed), name);
  std::string s(needed, '\0');
  check(fn(s.data(), s.size(), &needed), name);
  s.resize(needed ? needed - 1 : 0);
  return s;
}

}  // namespace

void register_topo(nb::module_& m) {
  m.def(
      "topo_plan",
      [](const std::string& layout) {
        return grown([&](char* o, size_t l, size_t* n) { return api().acclTopoPlan(layout.c_str(), o, l, n); },
                     "acclTopoPlan");
      },
      nb::arg("layout"));
  m.def("topo_local", [] {
    return grown([](char* o, size_t l, size_t* n) { return api().acclTopoLocal(o, l, n); }, "acclTopoLocal");
  });
}

}  // namespace accl_py
