// Memory translation and protection: checks an lkey or rkey against the MPT
// (validity, protection domain, access rights, bounds) and turns a virtual
// range into physical segments through the MTT, split at page boundaries.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>
#include <vector>

#include "vp/nic/context_memory.h"

namespace mprdma::nic {

struct Segment {
  uint64_t pa;
  uint32_t len;
};

enum class AccessStatus { ok, bad_key, pd_mismatch, bounds, access };
const char* to_string(AccessStatus s);

class Translation {
 public:
  explicit Translation(ContextMemory& contexts) : contexts_(contexts) {}

  // Appends the segments of [va, va + len) of the MR `key` to `out`.
  // `need` is the MPR_ACCESS_* bits the operation requires. A zero-length
  // range is valid without a key (IB: no protection check for length 0).
  AccessStatus translate(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t need,
                         std::vector<Segment>& out) const;
  // The checks of translate() without the translation: whether the range
  // may be accessed now. For a request whose data moves packet by packet,
  // each packet translated when it moves (a key deregistered meanwhile then
  // fails that packet's translation: nothing is held across packets).
  AccessStatus check(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t need) const;
  // translate() of the byte range [offset, offset + len) of the
  // concatenation of the scatter/gather entries `sges` (a RECV's buffers).
  AccessStatus translate_sges(const std::vector<mpr_wqe_data>& sges, uint32_t pdn, uint64_t offset,
                              uint64_t len, uint32_t need, std::vector<Segment>& out) const;

 private:
  ContextMemory& contexts_;
};

// Copies helpers over segment lists: the byte range [offset, offset + len)
// of the concatenation of `segs`, as sub-segments.
void slice_segments(const std::vector<Segment>& segs, uint64_t offset, uint64_t len,
                    std::vector<Segment>& out);

}  // namespace mprdma::nic
