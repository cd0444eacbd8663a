// The engines of this tree: a new transport is a folder under transport/
// with its entry function, and one line here.
#include "vp/nic/transport/engine_registry.h"

namespace mprdma::nic {

EngineEntry gbn_entry();      // gbn/gbn_entry.cc
EngineEntry mp_rdma_entry();  // mp_rdma/mp_rdma_entry.cc
EngineEntry irn_entry();      // irn/irn_entry.cc

void add_builtin_engines(EngineRegistry& r) {
  r.add(gbn_entry());
  r.add(mp_rdma_entry());
  r.add(irn_entry());
}

}  // namespace mprdma::nic
