// Private to the operation files (fs/operations*.cc): the helpers more than one of them
// uses and the handlers each defines for the table in operations.cc. Holds no state and
// decides no semantics; nothing outside fs/operations*.cc may include it.
#ifndef WALFS_FS_OPERATIONS_INTERNAL_H_
#define WALFS_FS_OPERATIONS_INTERNAL_H_

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/status.h"
#include "fs/errors.h"
#include "fs/file_handle.h"
#include "fs/server.h"

namespace walfs::fs {

// A write or fsync must never fail with EINTR (PostgreSQL PANICs). Interrupts are never
// looked at (no fuse_req_interrupt_func), so EINTR could only come from a system call
// inside core; the operation is idempotent, so it is simply repeated (and should EINTR
// persist, the reply is EIO: an error PostgreSQL reports instead of retrying forever).
inline constexpr int kInterruptedRetries = 100;

inline int NeverEintr(int error) { return error == EINTR ? EIO : error; }

inline Server& GetServer(fuse_req_t req) { return *static_cast<Server*>(fuse_req_userdata(req)); }

// Whether a write or O_TRUNC by this caller clears set-user-ID/set-group-ID. The kernel
// decides it by CAP_FSETID, which does not reach the server; the caller's fsuid stands
// in for it: root keeps the bits (as with the capability), anyone else clears them.
inline bool ClearsSetid(fuse_req_t req) { return fuse_req_ctx(req)->uid != 0; }

inline void ReplyStatus(fuse_req_t req, const absl::Status& status, const char* op,
                        fuse_ino_t ino) {
  fuse_reply_err(req, status.ok() ? 0 : StatusToErrno(status, op, ino));
}

// direct_io on every regular file, for three reasons:
//  - Durability: O_DSYNC/O_SYNC writes then arrive as WRITE requests carrying the flag
//    (no page cache, no FSYNC follows), and walfs persists them before replying; with
//    O_DIRECT opens (PostgreSQL 13-15, wal_level=minimal + open_datasync) that is the
//    only path anyway.
//  - One copy: the data already lives in the pool mapping (itself page cache in msync
//    mode); a second cached copy in the FUSE inode would only cost memory and copies.
//  - Coherence: mixing cached and direct handles on one inode lets a cached reader see
//    stale pages after a direct write. All-direct has no such case.
// The price is that shared writable mmap is refused (ENODEV) by the kernel; nothing
// PostgreSQL or its tools do on pg_wal maps files. (The page_cache experiment turns it
// off to measure what it costs; writeback caching stays off, see WalfsInit.)
inline void OpenHandle(fuse_file_info* fi, const ServerConfig& config) {
  auto* handle = new FileHandle{.open_flags = fi->flags};
  handle->AttachTo(fi);
  fi->direct_io = config.page_cache ? 0 : 1;
  fi->keep_cache = 0;
}

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

template <typename F>
auto RetryInterrupted(F&& f) {
  auto result = f();
  for (int i = 0; i < kInterruptedRetries && core::ErrnoFromStatus(StatusOf(result)) == EINTR;
       ++i) {
    result = f();
  }
  return result;
}

// --- handlers (in the file named above each group) --------------------------------------

// fs/operations_namespace.cc: names, attributes, namespace changes, create, directories.
void WalfsLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void WalfsForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void WalfsForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
void WalfsGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                  fuse_file_info* fi);
void WalfsReadlink(fuse_req_t req, fuse_ino_t ino);
void WalfsMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                dev_t rdev);
void WalfsMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void WalfsSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name);
void WalfsLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
void WalfsUnlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void WalfsRmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
void WalfsRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                 const char* newname, unsigned int flags);
void WalfsCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                 fuse_file_info* fi);
void WalfsOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  fuse_file_info* fi);
void WalfsReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      fuse_file_info* fi);
void WalfsFsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);

// fs/operations_data.cc: open handles and the data they read and write.
void WalfsOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void WalfsWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                fuse_file_info* fi);
void WalfsFlush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void WalfsFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
void WalfsFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                    fuse_file_info* fi);

// fs/operations_direct.cc: the direct-access ioctls (fs/lease_protocol.h).
void WalfsIoctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void* arg,
                fuse_file_info* fi, unsigned flags, const void* in_buf, size_t in_bufsz,
                size_t out_bufsz);

}  // namespace walfs::fs

#endif  // WALFS_FS_OPERATIONS_INTERNAL_H_
