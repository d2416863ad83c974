// Collectives on host (CPU) arrays. The Python layer picks the datatype and
// count; here we only check that the buffers are large enough.
#include <cstddef>
#include <string>

#include <nanobind/ndarray.h>

#include "bindings.h"

namespace accl_py {

namespace {

using SendArray = nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig>;
using RecvArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

size_t typeSize(int datatype) {
  switch (datatype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: throw nb::value_error(("unknown ncclDataType_t " + std::to_string(datatype)).c_str());
  }
}

void requireBytes(const char* what, size_t have, size_t need) {
  if (have < need)
    throw nb::value_error((std::string(what) + " holds " + std::to_string(have) + " bytes, " +
                           std::to_string(need) + " needed")
                              .c_str());
}

// ncclAllReduce on host buffers (stream NULL). Returns 0, or 7 when a
// non-blocking communicator has queued the operation.
int allReduce(const Comm& c, SendArray send, RecvArray recv, size_t count, int datatype, int op) {
  size_t need = count * typeSize(datatype);
  requireBytes("send", send.nbytes(), need);
  requireBytes("recv", recv.nbytes(), need);
  ncclComm_t comm = c.get("ncclAllReduce");
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = ncclAllReduce(send.data(), recv.data(), count, static_cast<ncclDataType_t>(datatype),
                      static_cast<ncclRedOp_t>(op), comm, nullptr);
  }
  return static_cast<int>(check(r, "ncclAllReduce", /*allowInProgress=*/true));
}

}  // namespace

void register_coll(nb::module_& m) {
  m.def("all_reduce", &allReduce, nb::arg("comm"), nb::arg("send").noconvert(),
        nb::arg("recv").noconvert(), nb::arg("count"), nb::arg("datatype"), nb::arg("op"),
        "ncclAllReduce on C-contiguous host arrays; recv may be send (in place).");
}

}  // namespace accl_py
