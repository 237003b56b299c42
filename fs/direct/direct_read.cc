// The production instantiation of the read path.
#include "fs/direct/direct_read.h"

namespace walfs::direct {

DirectResult TryDirectReadMemcpy(FdTable& table, int fd, const struct iovec* iov, int iovcnt,
                                 off_t offset, int flags, size_t* copied) {
  MemcpyCopier copier;
  return TryDirectRead(table, fd, iov, iovcnt, offset, flags, copier, copied);
}

}  // namespace walfs::direct
