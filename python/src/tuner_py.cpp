// The tuner's cost model (acclTunerPredict / acclTunerChoose), for comparing
// predictions with measurements.
#include <nanobind/stl/string.h>

#include "accl.h"
#include "bindings.h"

namespace accl_py {

void register_tuner(nb::module_& m) {
  m.def(
      "tuner_predict",
      [](const std::string& coll, const std::string& algo, size_t bytes, int nranks, int nhosts) {
        double us = 0;
        check(api().acclTunerPredict(coll.c_str(), algo.c_str(), bytes, nranks, nhosts, &us), "acclTunerPredict");
        return us;
      },
      nb::arg("collective"), nb::arg("algorithm"), nb::arg("nbytes"), nb::arg("nranks"), nb::arg("nhosts"));
  m.def(
      "tuner_choose",
      [](const std::string& coll, size_t bytes, int nranks, int nhosts) {
        char algo[16] = {0};
        check(api().acclTunerChoose(coll.c_str(), bytes, nranks, nhosts, algo, sizeof(algo)), "acclTunerChoose");
        return std::string(algo);
      },
      nb::arg("collective"), nb::arg("nbytes"), nb::arg("nranks"), nb::arg("nhosts"));
}

}  // namespace accl_py
