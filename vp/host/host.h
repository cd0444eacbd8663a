// What every kind of host offers the platform: a name and its NIC. Modeled
// hosts run applications in SystemC; QEMU hosts run a guest against the
// same NIC model.
#pragma once

#include <string>

#include "vp/nic/nic.h"

namespace mprdma::host {

class Host {
 public:
  virtual ~Host() = default;
  virtual nic::Nic& nic() = 0;
  virtual const char* kind() const = 0;
};

}  // namespace mprdma::host
