// FUSE data callbacks: open, read, write, flush, release, fsync and fallocate of a
// regular file's handle. Owns no name and no attribute conversion; the leases a handle
// holds are dropped at release but granted only in operations_direct.cc.
#include <fcntl.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/wal_directory.h"
#include "fs/errors.h"
#include "fs/file_handle.h"
#include "fs/lease_stamps.h"
#include "fs/logging.h"
#include "fs/operations_internal.h"
#include "fs/server.h"
#include "fs/session_nodes.h"

namespace walfs::fs {

void WalfsOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOpen);
  if (SessionNodes::IsNodeId(ino)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  // With ATOMIC_O_TRUNC (negotiated in init) O_TRUNC reaches us here, not as SETATTR.
  if (fi->flags & O_TRUNC) {
    core::SetattrRequest truncate;
    truncate.size = 0;
    truncate.clear_setid = ClearsSetid(req);
    Server& server = GetServer(req);
    absl::StatusOr<core::Attr> attr = server.read_leases().Shrink(
        ino, [&] { return server.dir().names().Setattr(ino, truncate); });
    if (!attr.ok()) {
      fuse_reply_err(req, StatusToErrno(attr.status(), "open (truncate)", ino));
      return;
    }
  }
  OpenHandle(fi, GetServer(req).config());
  if (fuse_reply_open(req, fi) != 0) delete FileHandle::From(fi);
}

void WalfsRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kRead);
  (void)fi;
  // One buffer per worker thread, grown to the largest read it served (<= max_read).
  thread_local std::vector<char> buffer;
  if (buffer.size() < size) buffer.resize(size);
  absl::StatusOr<size_t> n = GetServer(req).dir().data().Read(ino, static_cast<uint64_t>(off),
                                                              absl::MakeSpan(buffer.data(), size));
  if (!n.ok()) {
    fuse_reply_err(req, StatusToErrno(n.status(), "read", ino));
    return;
  }
  fuse_reply_buf(req, buffer.data(), *n);
}

void WalfsWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kWrite);
  const Server& server = GetServer(req);
  bool sync = FileHandle::From(fi)->SyncWrite(fi->flags) && !server.config().ignore_dsync;
  const bool clear_setid = ClearsSetid(req);
  bool setid_cleared = false;
  core::WalDirectory& dir = server.dir();
  absl::StatusOr<size_t> n = RetryInterrupted([&] {
    return dir.data().Write(ino, static_cast<uint64_t>(off), absl::MakeConstSpan(buf, size), sync,
                            clear_setid, &setid_cleared);
  });
  if (!n.ok()) {
    fuse_reply_err(req, NeverEintr(StatusToErrno(n.status(), "write", ino)));
    return;
  }
  if (setid_cleared && server.session() != nullptr) {
    // After a WRITE the kernel refreshes only size and times; it must also read the mode
    // again. Attributes only (offset < 0): no page-cache lock, so no deadlock with the
    // write in flight, which holds the inode lock.
    fuse_lowlevel_notify_inval_inode(server.session(), ino, -1, 0);
  }
  fuse_reply_write(req, *n);
}

void WalfsFlush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kFsync);
  (void)ino;
  Server& server = GetServer(req);
  server.fuse_flush.fetch_add(1, std::memory_order_relaxed);
  // A descriptor of this handle is being closed, maybe one a client library tracks
  // without having seen the close: its next store must not go into the pool until it
  // has checked again (L4, fs/lease_stamps.h). Revoked before the reply,
  // which close(2) waits for.
  FileHandle* handle = FileHandle::From(fi);
  if (handle != nullptr && server.lease_stamps() != nullptr) {
    std::lock_guard<std::mutex> l(handle->lease_mu);
    if (handle->stamp_slot >= 0) {
      server.lease_stamps()->Revoke(static_cast<uint32_t>(handle->stamp_slot));
    }
  }
  fuse_reply_err(req, server.flush_shortcut() ? ENOSYS : 0);
}

void WalfsRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOpen);
  FileHandle* handle = FileHandle::From(fi);
  bool leased;
  {
    std::lock_guard<std::mutex> l(handle->lease_mu);
    leased = handle->leased;
    if (handle->stamp_slot >= 0) {
      const uint32_t slot = static_cast<uint32_t>(handle->stamp_slot);
      if (handle->read_leased) GetServer(req).read_leases().Remove(ino, slot);
      GetServer(req).lease_stamps()->Free(slot);
      handle->stamp_slot = -1;
    }
  }
  if (leased) {
    // The last descriptor of the open file description is gone, and with it every
    // client mapping made under this lease (the client unmaps before close returns).
    absl::Status s = GetServer(req).dir().leases().ReleaseLease(ino);
    if (!s.ok()) Log(LOG_ERR, "release of the lease on inode %lu: %s",
                     static_cast<unsigned long>(ino), s.ToString().c_str());
  }
  // Pending times are committed and allocation ahead of the file's end is given back.
  // Nobody waits on the outcome (close(2) has returned): a failure is logged, and what
  // it left is recovered at the next open.
  absl::Status s = GetServer(req).dir().data().Release(ino);
  if (!s.ok()) Log(LOG_ERR, "release of inode %lu: %s", static_cast<unsigned long>(ino),
                   s.ToString().c_str());
  delete handle;
  fuse_reply_err(req, 0);
}

void WalfsFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kFsync);
  (void)fi;
  Server& server = GetServer(req);
  server.fuse_fsync.fetch_add(1, std::memory_order_relaxed);
  if (server.fsync_shortcut()) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  absl::Status status =
      RetryInterrupted([&] { return server.dir().data().Fsync(ino, datasync != 0); });
  fuse_reply_err(req, status.ok() ? 0 : NeverEintr(StatusToErrno(status, "fsync", ino)));
}

void WalfsFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                    fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)fi;
  // Preallocation only; punching or collapsing holes has no use on pg_wal.
  if (mode & ~FALLOC_FL_KEEP_SIZE) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  if (offset < 0 || length <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  uint32_t flags = 0;
  if (mode & FALLOC_FL_KEEP_SIZE) flags |= core::kFallocateKeepSize;
  ReplyStatus(req,
              GetServer(req).dir().data().Fallocate(ino, static_cast<uint64_t>(offset),
                                                    static_cast<uint64_t>(length), flags),
              "fallocate", ino);
}

}  // namespace walfs::fs
