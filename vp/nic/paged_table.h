// PagedTable: a fixed-capacity table of POD entries whose memory is allocated
// a page at a time, when an entry of the page is first written.
//
// The NIC's context tables are sized by NicLimits (4 Mi MTT entries, 64 Ki
// MPTs, ... by default) but a simulation uses a tiny fraction of them; a
// scenario with hundreds of NICs cannot afford to allocate them whole. A
// lookup stays O(1): one bounds check against the capacity, one directory
// index, one page index. Entries never written read as value-initialised
// (all zero). Pages, once allocated, stay until clear(), so pointers to
// entries stay valid while the table is not cleared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mprdma::nic {

template <typename T, unsigned PageBits>
class PagedTable {
 public:
  static constexpr uint64_t kPageEntries = uint64_t{1} << PageBits;
  static constexpr uint64_t kPageMask = kPageEntries - 1;

  explicit PagedTable(uint64_t capacity = 0) : capacity_(capacity) {}

  // Forgets every entry and page, and sets the capacity.
  void reset(uint64_t capacity) {
    capacity_ = capacity;
    std::vector<std::unique_ptr<T[]>>().swap(pages_);
    pages_allocated_ = 0;
  }

  uint64_t capacity() const { return capacity_; }

  // The entry, or nullptr if `index` is beyond the capacity or its page was
  // never written (the entry is then all zero).
  T* find(uint64_t index) {
    if (index >= capacity_) return nullptr;
    const uint64_t page = index >> PageBits;
    if (page >= pages_.size() || !pages_[page]) return nullptr;
    return &pages_[page][index & kPageMask];
  }
  const T* find(uint64_t index) const { return const_cast<PagedTable*>(this)->find(index); }

  // A copy of the entry; a zero entry if it was never written or `index` is
  // beyond the capacity.
  T get(uint64_t index) const {
    const T* e = find(index);
    return e ? *e : T{};
  }

  // The entry for writing, allocating its page (zeroed) if needed. nullptr if
  // `index` is beyond the capacity.
  T* touch(uint64_t index) {
    if (index >= capacity_) return nullptr;
    const uint64_t page = index >> PageBits;
    if (page >= pages_.size()) pages_.resize(page + 1);
    if (!pages_[page]) {
      pages_[page] = std::make_unique<T[]>(kPageEntries);  // value-initialised: zero
      ++pages_allocated_;
    }
    return &pages_[page][index & kPageMask];
  }

  size_t pages_allocated() const { return pages_allocated_; }
  // Heap bytes held: the pages and the page directory.
  size_t bytes_allocated() const {
    return pages_allocated_ * kPageEntries * sizeof(T) +
           pages_.capacity() * sizeof(std::unique_ptr<T[]>);
  }

 private:
  uint64_t capacity_;
  std::vector<std::unique_ptr<T[]>> pages_;  // grows to the highest page written
  size_t pages_allocated_ = 0;
};

}  // namespace mprdma::nic
