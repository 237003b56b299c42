// The production persistor and the pmem instantiation of the write path.
#include "fs/direct/direct_write.h"

#include "fs/direct/pmem_calls.h"

namespace walfs::direct {

// LoadedPmem() is not null in a store: a write lease is granted only after LoadPmem succeeded
// (LeasePending), and the entry's publication orders that before this load.
void PmemPersistor::Store(const MappedRun& run, uint64_t offset, const void* src, size_t n) {
  LoadedPmem()->memcpy_nodrain(run.pool_addr + offset, src, n);
}

void PmemPersistor::Drain() { LoadedPmem()->drain(); }

bool DirectFlagsOk(int flags) {
  return (flags & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT)) == 0;
}

DirectResult TryDirectWritePmem(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                                off_t offset, int flags, size_t* written) {
  PmemPersistor persistor;
  return TryDirectWrite(table, fd, iov, iovcnt, offset, flags, persistor, written);
}

}  // namespace walfs::direct
