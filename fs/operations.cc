// FUSE session callbacks (init, destroy), statfs and extended attributes, and the
// low-level operation table that points at every handler (operations_internal.h). It
// may not touch names, file data or leases; those handlers live in operations_*.cc.
#include "fs/operations.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/wal_directory.h"
#include "fs/logging.h"
#include "fs/operations_internal.h"
#include "fs/server.h"
#include "fs/status_json.h"

namespace walfs::fs {
namespace {

// Bytes added to the status document's size when a caller asks for it (getxattr with
// size 0): every counter could gain digits before the value itself is read.
constexpr size_t kStatusSizeHeadroom = 256;

// --- session ---------------------------------------------------------------------

// max_write is 1 MiB by default: PostgreSQL writes up to ~1 MiB of WAL per call and
// zero-fills 16 MiB segments. libfuse 3.14 sizes its request buffers for max_pages 256
// (1 MiB of 4 KiB pages) and sends max_pages to kernels that take it (7.28+), so this is
// the most it can accept.
void WalfsInit(void* userdata, fuse_conn_info* conn) {
  Server& server = *static_cast<Server*>(userdata);
  const ServerConfig& config = server.config();
  // No writeback cache: a write must reach the pool (and on PMEM be durable) before
  // write(2) returns; with the cache the kernel would acknowledge it from its page cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // No splice: each WRITE is copied once from /dev/fuse into libfuse's buffer and once
  // into the pool; moving pages through a pipe pays off only for large page-aligned
  // payloads, not for 8 KiB WAL pages, and costs extra system calls per request.
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
  // The kernel applies the caller's umask before CREATE/MKDIR (no DONT_MASK), so the
  // mode that arrives is final and fuse_req_ctx()->umask is not needed.
  conn->want &= ~FUSE_CAP_DONT_MASK;
  // Without HANDLE_KILLPRIV the kernel clears suid/sgid itself (with a SETATTR) on chown
  // and truncate(2). Not on a direct_io WRITE or an O_TRUNC OPEN: it flags those for the
  // server (FUSE_WRITE_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID), flags libfuse 3.14 does
  // not pass on, so walfs clears the bits itself for callers other than root
  // (ClearsSetid).
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
  // O_TRUNC arrives with OPEN and is applied with it: one round trip instead of two.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // A symlink's target never changes, so the kernel may cache it.
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  // Two round trips fewer for every directory fsync PostgreSQL makes (Server).
  server.opendir_shortcut.store((conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0);
  // PARALLEL_DIROPS, ASYNC_READ and ASYNC_DIO stay as libfuse set them (on when the
  // kernel has them): WalDirectory takes concurrent calls. No lock support is offered,
  // so the kernel keeps POSIX and flock locks local, which is right for one host.
  conn->max_write = config.max_write;
  conn->time_gran = 1;
  Log(LOG_INFO, "FUSE protocol %u.%u, max_write %u", conn->proto_major, conn->proto_minor,
      conn->max_write);
}

void WalfsDestroy(void* userdata) {
  (void)userdata;
  Log(LOG_INFO, "FUSE session ended");
}

void WalfsStatfs(fuse_req_t req, fuse_ino_t ino) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  core::FsStats s = GetServer(req).dir().Statfs();
  struct statvfs st {};
  st.f_bsize = s.block_size;
  st.f_frsize = s.block_size;
  st.f_blocks = s.total_blocks;
  st.f_bfree = s.free_blocks;
  // The reserve is for WAL segments, not for root (core/layout.h): df's "Avail"
  // is what any other file can still get, as with ext4's reserved blocks.
  st.f_bavail = s.free_blocks - std::min(s.free_blocks, s.reserved_blocks);
  st.f_files = s.total_inodes;
  st.f_ffree = s.free_inodes;
  st.f_favail = s.free_inodes;
  st.f_namemax = s.name_max;
  fuse_reply_statfs(req, &st);
}

// --- extended attributes -------------------------------------------------------------
//
// walfs stores no extended attributes. The one it answers is the status document on
// the root (status_json.h), deliberately absent from listxattr so that copies of the
// mount (cp -a, rsync -X) do not carry it. Everything is answered without ENOSYS: that
// would make the kernel stop asking, the status name included.

void WalfsSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                   size_t size, int flags) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  (void)name;
  (void)value;
  (void)size;
  (void)flags;
  fuse_reply_err(req, EOPNOTSUPP);
}

void WalfsGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  if (ino != core::kRootInode || std::strcmp(name, kStatusXattr) != 0) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  std::string json = GetServer(req).StatusJson();
  if (size == 0) {
    // Counters grow between the size query and the read that follows it; headroom
    // keeps that read from failing with ERANGE (a shorter value is fine).
    fuse_reply_xattr(req, json.size() + kStatusSizeHeadroom);
  } else if (size < json.size()) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, json.data(), json.size());
  }
}

void WalfsListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  if (size == 0) {
    fuse_reply_xattr(req, 0);
  } else {
    fuse_reply_buf(req, nullptr, 0);
  }
}

void WalfsRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  (void)name;
  fuse_reply_err(req, ENODATA);
}

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops{};
  ops.init = WalfsInit;
  ops.destroy = WalfsDestroy;
  ops.lookup = WalfsLookup;
  ops.forget = WalfsForget;
  ops.forget_multi = WalfsForgetMulti;
  ops.getattr = WalfsGetattr;
  ops.setattr = WalfsSetattr;
  ops.readlink = WalfsReadlink;
  ops.mknod = WalfsMknod;
  ops.mkdir = WalfsMkdir;
  ops.unlink = WalfsUnlink;
  ops.rmdir = WalfsRmdir;
  ops.symlink = WalfsSymlink;
  ops.rename = WalfsRename;
  ops.link = WalfsLink;
  ops.open = WalfsOpen;
  ops.read = WalfsRead;
  ops.write = WalfsWrite;
  ops.flush = WalfsFlush;
  ops.release = WalfsRelease;
  ops.fsync = WalfsFsync;
  ops.opendir = WalfsOpendir;
  ops.readdir = WalfsReaddir;
  ops.readdirplus = WalfsReaddirplus;
  ops.releasedir = WalfsReleasedir;
  ops.fsyncdir = WalfsFsyncdir;
  ops.statfs = WalfsStatfs;
  ops.setxattr = WalfsSetxattr;
  ops.getxattr = WalfsGetxattr;
  ops.listxattr = WalfsListxattr;
  ops.removexattr = WalfsRemovexattr;
  ops.create = WalfsCreate;
  ops.fallocate = WalfsFallocate;
  ops.ioctl = WalfsIoctl;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& Operations() {
  static const fuse_lowlevel_ops ops = MakeOperations();
  return ops;
}

}  // namespace walfs::fs
