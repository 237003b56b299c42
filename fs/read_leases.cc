// The read-lease register (read_leases.h).
#include "fs/read_leases.h"

#include <algorithm>

namespace walfs::fs {

void ReadLeases::Remove(uint64_t ino, uint32_t slot) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return;
  std::vector<uint32_t>& slots = it->second;
  auto pos = std::find(slots.begin(), slots.end(), slot);
  if (pos == slots.end()) return;
  slots.erase(pos);
  if (slots.empty()) by_ino_.erase(it);
  released_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace walfs::fs
