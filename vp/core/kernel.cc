#include "vp/core/kernel.h"

#include <systemc>

namespace sc_core {
extern sc_simcontext* sc_curr_simcontext;
extern sc_simcontext* sc_default_global_context;
}  // namespace sc_core

namespace mprdma::core {
namespace {
bool resolution_set = false;
}

void init_kernel() {
  if (resolution_set) return;
  // 1 ps is SystemC's default; set it only if a build changed the default,
  // because setting it fails once any sc_time exists.
  if (sc_core::sc_get_time_resolution().to_seconds() != 1e-12)
    sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  // Our own log channels report; SystemC's info banner and the "simulation
  // stopped" message would only add noise.
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  resolution_set = true;
}

void reset_kernel() {
  // The first kernel holds SystemC's own static events, which deregister
  // from it at process exit: it must outlive the process, so it is kept
  // (not current, just not freed). Later kernels are ours to delete.
  static sc_core::sc_simcontext* const first = sc_core::sc_get_curr_simcontext();
  if (sc_core::sc_curr_simcontext != first) delete sc_core::sc_curr_simcontext;
  sc_core::sc_curr_simcontext = new sc_core::sc_simcontext;
  sc_core::sc_default_global_context = sc_core::sc_curr_simcontext;
  resolution_set = false;
  init_kernel();
}

}  // namespace mprdma::core
