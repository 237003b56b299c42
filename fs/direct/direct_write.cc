// The production persistor and the pmem instantiation of the write path.
#include "fs/direct/direct_write.h"

#include <libpmem.h>

namespace walfs::direct {

void PmemPersistor::Store(const MappedRun& run, uint64_t offset, const void* src, size_t n) {
  pmem_memcpy_nodrain(run.pool_addr + offset, src, n);
}

void PmemPersistor::Drain() { pmem_drain(); }

bool DirectFlagsOk(int flags) {
  return (flags & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT)) == 0;
}

DirectResult TryDirectWritePmem(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                                off_t offset, int flags, size_t* written) {
  PmemPersistor persistor;
  return TryDirectWrite(table, fd, iov, iovcnt, offset, flags, persistor, written);
}

}  // namespace walfs::direct
