// FUSE ioctl callback: the direct-access session and lease ioctls (fs/lease_protocol.h).
// Owns their decoding, refusals and replies; it may not read or write file data nor
// change the namespace (the session nodes themselves are fs/session_nodes.h).
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/wal_directory.h"
#include "fs/errors.h"
#include "fs/file_handle.h"
#include "fs/lease_protocol.h"
#include "fs/lease_reply.h"
#include "fs/lease_stamps.h"
#include "fs/logging.h"
#include "fs/operations_internal.h"
#include "fs/server.h"
#include "fs/session.h"

namespace walfs::fs {
namespace {

// Direct access (fs/lease_protocol.h): the two ioctls walfs answers. The kernel sends
// them as restricted ioctls (sizes from the commands).

// Step 1b: the caller asks for a hello on the socket it bound in the root. Refusals, in
// this order: EPERM (not the pool's owner or root, L5), EINVAL (malformed request),
// ENOENT (not a live node the same pid created), EOPNOTSUPP (direct access off: a copy
// + drain is not durable here, L7), EBUSY (too many hellos pending). The hello is
// queued before the reply so that a full queue can still be refused; the sender's
// connect waits in the socket's backlog until the client, once the reply is in,
// accepts it.
void HandleSessionIoctl(fuse_req_t req, const void* in_buf, size_t in_bufsz) {
  Server& server = GetServer(req);
  auto refuse = [&](int error) {
    server.sessions_refused.fetch_add(1, std::memory_order_relaxed);
    fuse_reply_err(req, error);
  };
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (!MayUseDirectAccess(ctx->uid, server.config().pool_owner)) {
    refuse(EPERM);
    return;
  }
  if (in_buf == nullptr || in_bufsz < sizeof(lease::SessionRequest)) {
    refuse(EINVAL);
    return;
  }
  lease::SessionRequest request;
  std::memcpy(&request, in_buf, sizeof(request));
  std::string name;
  if (const int error = CheckSessionRequest(request, &name); error != 0) {
    refuse(error);
    return;
  }
  if (const int error = server.session_nodes().CheckCreator(name, ctx->pid); error != 0) {
    refuse(error);
    return;
  }
  SessionSender* sender = server.session_sender();
  if (!server.config().direct_access.reads_available() || sender == nullptr) {
    refuse(EOPNOTSUPP);
    return;
  }
  if (!sender->Enqueue(name, ctx->uid)) {
    Log(LOG_WARNING, "direct-access session %s refused: %zu hellos already pending",
        name.c_str(), SessionSender::kMaxPending);
    refuse(EBUSY);
    return;
  }
  fuse_reply_ioctl(req, 0, nullptr, 0);
}

// Step 2: a lease on the open handle, which the lease then lives with until RELEASE: a
// write lease on a handle opened for writing, a read lease on one opened read-only
// (fs/lease_protocol.h, L9; the register of read leases is fs/read_leases.h).
void HandleLeaseIoctl(fuse_req_t req, fuse_ino_t ino, FileHandle* handle,
                      const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  Server& server = GetServer(req);
  auto refuse = [&](int error) {
    server.leases_refused.fetch_add(1, std::memory_order_relaxed);
    fuse_reply_err(req, error);
  };
  if (!MayUseDirectAccess(fuse_req_ctx(req)->uid, server.config().pool_owner)) {
    refuse(EPERM);  // L5
    return;
  }
  if (in_buf == nullptr || in_bufsz < sizeof(lease::Reply) ||
      out_bufsz < sizeof(lease::Reply)) {
    refuse(EINVAL);
    return;
  }
  uint32_t access;
  {
    // One request buffer per worker thread: it is 704 bytes, and leases are rare.
    thread_local lease::Reply request;
    std::memcpy(&request, in_buf, sizeof(request));
    if (const int error = CheckLeaseRequest(request); error != 0) {
      refuse(error);
      return;
    }
    access = request.access;
  }
  const bool read = access == lease::kAccessRead;
  if (!read && !handle->Writable()) {
    refuse(EBADF);  // a write lease is for stores
    return;
  }
  if (read && handle->Writable()) {
    refuse(EINVAL);  // a writable handle asks for a write lease, which serves reads too
    return;
  }
  if (!read && (handle->open_flags & O_APPEND)) {
    refuse(EINVAL);  // where an append lands is decided at EOF, by the daemon
    return;
  }
  LeaseStamps* stamps = server.lease_stamps();
  const DirectAccess& offered = server.config().direct_access;
  if (!(read ? offered.reads_available() : offered.available()) || stamps == nullptr) {
    // Read-only, the page_cache experiment (the kernel would cache file pages that a
    // client's stores never update), or no stamps: leases could not be revoked (L4);
    // a write lease in msync mode, where a client's store is not durable (L7).
    refuse(EOPNOTSUPP);
    return;
  }
  std::lock_guard<std::mutex> l(handle->lease_mu);
  if (handle->stamp_slot < 0) {
    std::optional<uint32_t> slot = stamps->Allocate();
    if (!slot) {
      Log(LOG_WARNING, "lease on inode %lu refused: all %u revocation stamps in use",
          static_cast<unsigned long>(ino), stamps->slots());
      refuse(EBUSY);
      return;
    }
    handle->stamp_slot = *slot;
  }
  const uint32_t slot = static_cast<uint32_t>(handle->stamp_slot);
  core::WalDirectory& dir = server.dir();
  thread_local lease::Reply reply;
  // The runs and the stamp of the reply; false (after refusing) when there is no lease.
  auto grant = [&](bool renew) {
    absl::StatusOr<core::Lease> lease =
        read ? dir.leases().AcquireReadLease(ino) : dir.leases().AcquireLease(ino, renew);
    if (!lease.ok()) {
      refuse(StatusToErrno(lease.status(), "lease", ino));
      return false;
    }
    const LeaseStamp stamp{.offset = LeaseStamps::OffsetOf(slot), .value = stamps->Renew(slot),
                           .stamps_id = stamps->id()};
    absl::Status filled = FillLeaseReply(*lease, dir.superblock(), stamp, access, &reply);
    if (!filled.ok()) {
      Log(LOG_WARNING, "lease on inode %lu refused: %s", static_cast<unsigned long>(ino),
          std::string(filled.message()).c_str());
      if (!read && !renew) (void)dir.leases().ReleaseLease(ino);
      refuse(EOPNOTSUPP);
      return false;
    }
    return true;
  };
  if (read) {
    const bool was_leased = handle->read_leased;
    // Under the register's lock: no size change between taking the runs and the holder
    // being known to revoke (read_leases.h).
    if (!server.read_leases().Grant(ino, slot, [&] { return grant(/*renew=*/true); })) return;
    handle->read_leased = true;
    if (fuse_reply_ioctl(req, 0, &reply, sizeof(reply)) != 0 && !was_leased) {
      handle->read_leased = false;
      stamps->Revoke(slot);
      server.read_leases().Remove(ino, slot);
    }
    return;
  }
  const bool was_leased = handle->leased;
  if (!grant(/*renew=*/was_leased)) return;
  handle->leased = true;
  if (fuse_reply_ioctl(req, 0, &reply, sizeof(reply)) != 0 && !was_leased) {
    // The caller is gone (interrupted): it never saw the lease.
    handle->leased = false;
    stamps->Revoke(slot);
    (void)dir.leases().ReleaseLease(ino);
  }
}

}  // namespace

void WalfsIoctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void* arg,
                fuse_file_info* fi, unsigned flags, const void* in_buf, size_t in_bufsz,
                size_t out_bufsz) {
  OpTimer timer(GetServer(req), OpClass::kOpen);
  (void)arg;
  // 32-bit callers would read the structs at another layout (they have none of their
  // own); unknown commands are not ours.
  if ((flags & FUSE_IOCTL_COMPAT) != 0) {
    fuse_reply_err(req, ENOTTY);
    return;
  }
  if (cmd == static_cast<unsigned int>(lease::kIoctlSession)) {
    // On any walfs file or directory the caller has open: the handle plays no part.
    HandleSessionIoctl(req, in_buf, in_bufsz);
    return;
  }
  FileHandle* handle = (flags & FUSE_IOCTL_DIR) != 0 ? nullptr : FileHandle::From(fi);
  if (cmd == static_cast<unsigned int>(lease::kIoctlLease) && handle != nullptr) {
    HandleLeaseIoctl(req, ino, handle, in_buf, in_bufsz, out_bufsz);
    return;
  }
  fuse_reply_err(req, ENOTTY);  // directories have no FileHandle
}

}  // namespace walfs::fs
