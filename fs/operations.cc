// FUSE low-level callbacks: decode, call WalDirectory, reply.
#include "fs/operations.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/format.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "fs/errors.h"
#include "fs/file_handle.h"
#include "fs/lease_protocol.h"
#include "fs/lease_reply.h"
#include "fs/lease_stamps.h"
#include "fs/logging.h"
#include "fs/server.h"
#include "fs/session.h"
#include "fs/session_nodes.h"
#include "fs/status_json.h"

namespace walfs::fs {
namespace {

// Entries, negative entries and attributes are cached for entry_timeout/attr_timeout
// (a day by default, fs/options.h): walfs is the only writer of its namespace and the
// kernel invalidates what its own requests change (size after a write, nlink after an
// unlink, the parent after a create), while PostgreSQL probes segment names that do not
// exist (expecting ENOENT) and stats archive_status names constantly.
//
// max_write is 1 MiB by default: PostgreSQL writes up to ~1 MiB of WAL per call and
// zero-fills 16 MiB segments. libfuse 3.14 sizes its request buffers for max_pages 256
// (1 MiB of 4 KiB pages) and sends max_pages to kernels that take it (7.28+), so this is
// the most it can accept.

// A write or fsync must never fail with EINTR (PostgreSQL PANICs). Interrupts are never
// looked at (no fuse_req_interrupt_func), so EINTR could only come from a system call
// inside core; the operation is idempotent, so it is simply repeated (and should EINTR
// persist, the reply is EIO: an error PostgreSQL reports instead of retrying forever).
constexpr int kInterruptedRetries = 100;

// Bytes added to the status document's size when a caller asks for it (getxattr with
// size 0): every counter could gain digits before the value itself is read.
constexpr size_t kStatusSizeHeadroom = 256;

int NeverEintr(int error) { return error == EINTR ? EIO : error; }

Server& GetServer(fuse_req_t req) { return *static_cast<Server*>(fuse_req_userdata(req)); }

// Whether a write or O_TRUNC by this caller clears set-user-ID/set-group-ID. The kernel
// decides it by CAP_FSETID, which does not reach the server; the caller's fsuid stands
// in for it: root keeps the bits (as with the capability), anyone else clears them.
bool ClearsSetid(fuse_req_t req) { return fuse_req_ctx(req)->uid != 0; }

core::Caller GetCaller(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return core::Caller{.uid = ctx->uid, .gid = ctx->gid};
}

void ReplyStatus(fuse_req_t req, const absl::Status& status, const char* op,
                 fuse_ino_t ino) {
  fuse_reply_err(req, status.ok() ? 0 : StatusToErrno(status, op, ino));
}

// Inode times are int64 nanoseconds (years 1677..2262). utimensat passes any 64-bit
// seconds through FUSE, so times outside that range are clamped to its ends, as the
// kernel clamps times for file systems with a narrower range (timestamp_truncate).
int64_t ToNanoseconds(const timespec& ts) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t sec = static_cast<int64_t>(ts.tv_sec);
  const int64_t nsec = static_cast<int64_t>(ts.tv_nsec);  // [0, 1e9): the kernel checks
  if (sec > (kMax - nsec) / 1000000000) return kMax;
  if (sec < kMin / 1000000000) return kMin;
  return sec * 1000000000 + nsec;
}

timespec ToTimespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1000000000;
    --ts.tv_sec;
  }
  return ts;
}

int64_t NowNanoseconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ToNanoseconds(ts);
}

struct stat ToStat(const core::Attr& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blocks = static_cast<blkcnt_t>(a.blocks);
  st.st_blksize = core::format::kBlockSize;
  st.st_rdev = static_cast<dev_t>(a.rdev);
  st.st_atim = ToTimespec(a.atime_ns);
  st.st_mtim = ToTimespec(a.mtime_ns);
  st.st_ctim = ToTimespec(a.ctime_ns);
  return st;
}

fuse_entry_param ToEntry(const core::Attr& a, const ServerConfig& config) {
  fuse_entry_param e{};
  e.ino = a.ino;
  e.generation = a.generation;
  e.attr = ToStat(a);
  e.attr_timeout = config.attr_timeout;
  e.entry_timeout = config.entry_timeout;
  return e;
}

// Replies with an entry that holds one lookup reference taken by core. If the kernel
// does not take the reply (the request was aborted), it will never FORGET it: drop it.
void ReplyEntry(fuse_req_t req, const absl::StatusOr<core::Attr>& attr, const char* op,
                fuse_ino_t parent) {
  if (!attr.ok()) {
    fuse_reply_err(req, StatusToErrno(attr.status(), op, parent));
    return;
  }
  Server& server = GetServer(req);
  fuse_entry_param e = ToEntry(*attr, server.config());
  if (fuse_reply_entry(req, &e) != 0) server.dir().Forget(attr->ino, 1);
}

// --- session socket nodes (fs/session_nodes.h) ------------------------------------

// Names under the session prefix belong to the session node table in the root and to
// no one else: no pool dirent may carry one.
bool IsSessionName(fuse_ino_t parent, const char* name) {
  return parent == core::kRootInode && SessionNodes::IsReserved(name);
}

struct stat SessionNodeStat(const SessionNodes::Node& n) {
  struct stat st {};
  st.st_ino = n.nodeid;
  st.st_mode = S_IFSOCK | 0600;
  st.st_nlink = 1;
  st.st_uid = n.uid;
  st.st_gid = n.gid;
  st.st_blksize = core::format::kBlockSize;
  st.st_atim = st.st_mtim = st.st_ctim = ToTimespec(n.created_ns);
  return st;
}

// Session nodes are never cached by the kernel beyond the request (timeouts 0): they
// come and go within milliseconds, and the daemon's own connect must find the node the
// client bound, or nothing.
void ReplySessionEntry(fuse_req_t req, const std::optional<SessionNodes::Node>& node) {
  fuse_entry_param e{};
  if (node) {
    e.ino = node->nodeid;
    e.generation = SessionNodes::kGeneration;
    e.attr = SessionNodeStat(*node);
  }
  fuse_reply_entry(req, &e);
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
void OpenHandle(fuse_file_info* fi, const ServerConfig& config) {
  auto* handle = new FileHandle{.open_flags = fi->flags};
  handle->AttachTo(fi);
  fi->direct_io = config.page_cache ? 0 : 1;
  fi->keep_cache = 0;
}

const absl::Status& StatusOf(const absl::Status& status) { return status; }
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

// --- session ---------------------------------------------------------------------

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

// --- names and attributes ----------------------------------------------------------

void WalfsLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  if (IsSessionName(parent, name)) {
    ReplySessionEntry(req, GetServer(req).session_nodes().Lookup(name));
    return;
  }
  absl::StatusOr<core::Attr> attr = GetServer(req).dir().Lookup(parent, name);
  if (!attr.ok() && core::ErrnoFromStatus(attr.status()) == ENOENT) {
    // A negative entry (ino 0) the kernel caches like a positive one.
    fuse_entry_param e{};
    e.entry_timeout = GetServer(req).config().entry_timeout;
    fuse_reply_entry(req, &e);
    return;
  }
  ReplyEntry(req, attr, "lookup", parent);
}

void WalfsForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  // Session nodes keep no lookup count: they live until UNLINK.
  if (!SessionNodes::IsNodeId(ino)) GetServer(req).dir().Forget(ino, nlookup);
  fuse_reply_none(req);
}

void WalfsForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  core::WalDirectory& dir = GetServer(req).dir();
  for (size_t i = 0; i < count; ++i) {
    if (!SessionNodes::IsNodeId(forgets[i].ino)) dir.Forget(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void WalfsGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)fi;
  if (SessionNodes::IsNodeId(ino)) {
    std::optional<SessionNodes::Node> node = GetServer(req).session_nodes().Get(ino);
    if (!node) {
      fuse_reply_err(req, ENOENT);
      return;
    }
    struct stat st = SessionNodeStat(*node);
    fuse_reply_attr(req, &st, 0);
    return;
  }
  absl::StatusOr<core::Attr> attr = GetServer(req).dir().GetAttr(ino);
  if (!attr.ok()) {
    fuse_reply_err(req, StatusToErrno(attr.status(), "getattr", ino));
    return;
  }
  struct stat st = ToStat(*attr);
  fuse_reply_attr(req, &st, GetServer(req).config().attr_timeout);
}

void WalfsSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                  fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)fi;
  if (SessionNodes::IsNodeId(ino)) {
    fuse_reply_err(req, EPERM);  // a session node's mode and owner are the daemon's
    return;
  }
  core::SetattrRequest r;
  if (to_set & FUSE_SET_ATTR_MODE) r.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) r.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) r.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) r.size = static_cast<uint64_t>(attr->st_size);
  // utimensat: UTIME_NOW arrives as *_NOW (the time is ours to take), UTIME_OMIT as
  // the bit being absent.
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    r.atime_ns = NowNanoseconds();
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    r.atime_ns = ToNanoseconds(attr->st_atim);
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    r.mtime_ns = NowNanoseconds();
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    r.mtime_ns = ToNanoseconds(attr->st_mtim);
  }
  core::WalDirectory& dir = GetServer(req).dir();
  // FUSE_SET_ATTR_CTIME alone (the kernel refreshing ctime) changes nothing core keeps
  // apart from what its own setattr does, so it only reads the attributes back.
  bool any = r.mode || r.uid || r.gid || r.size || r.atime_ns || r.mtime_ns;
  absl::StatusOr<core::Attr> result =
      !any     ? dir.GetAttr(ino)
      : r.size ? GetServer(req).read_leases().Shrink(ino, [&] { return dir.Setattr(ino, r); })
               : dir.Setattr(ino, r);
  if (!result.ok()) {
    fuse_reply_err(req, StatusToErrno(result.status(), "setattr", ino));
    return;
  }
  struct stat st = ToStat(*result);
  fuse_reply_attr(req, &st, GetServer(req).config().attr_timeout);
}

void WalfsReadlink(fuse_req_t req, fuse_ino_t ino) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  if (SessionNodes::IsNodeId(ino)) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  absl::StatusOr<std::string> target = GetServer(req).dir().Readlink(ino);
  if (!target.ok()) {
    fuse_reply_err(req, StatusToErrno(target.status(), "readlink", ino));
    return;
  }
  fuse_reply_readlink(req, target->c_str());
}

// --- namespace changes -------------------------------------------------------------

void WalfsMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                dev_t rdev) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsReserved(name)) {
    // A client binding its session socket (fs/lease_protocol.h, step 1a): a virtual
    // node, only in the root, only a socket; anything else under the prefix is EPERM.
    if (parent != core::kRootInode) {
      fuse_reply_err(req, EPERM);
      return;
    }
    const fuse_ctx* ctx = fuse_req_ctx(req);
    SessionNodes::Node node;
    const int error = GetServer(req).session_nodes().Create(name, mode, ctx->uid, ctx->gid,
                                                            ctx->pid, &node);
    if (error != 0) {
      fuse_reply_err(req, error);
      return;
    }
    ReplySessionEntry(req, node);
    return;
  }
  core::WalDirectory& dir = GetServer(req).dir();
  if (S_ISREG(mode)) {  // some tools create regular files with mknod
    ReplyEntry(req, dir.Create(parent, name, mode & 07777, GetCaller(req), /*exclusive=*/true),
               "mknod", parent);
    return;
  }
  // FIFOs, sockets and devices are inert inodes: the kernel gives a FIFO its pipe and a
  // socket its binding without asking walfs, and the mount is nodev, so a device node
  // is never opened. (The kernel checks CAP_MKNOD for devices before it asks.)
  ReplyEntry(req, dir.Mknod(parent, name, mode, rdev, GetCaller(req)), "mknod", parent);
}

void WalfsMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsReserved(name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().Mkdir(parent, name, mode & 07777, GetCaller(req)),
             "mkdir", parent);
}

void WalfsSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsReserved(name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().Symlink(parent, name, link, GetCaller(req)),
             "symlink", parent);
}

void WalfsLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsNodeId(ino) || SessionNodes::IsReserved(newname)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().Link(ino, newparent, newname), "link", ino);
}

void WalfsUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kUnlink);
  if (IsSessionName(parent, name)) {
    fuse_reply_err(req, GetServer(req).session_nodes().Remove(name));
    return;
  }
  ReplyStatus(req, GetServer(req).dir().Unlink(parent, name), "unlink", parent);
}

void WalfsRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kUnlink);
  ReplyStatus(req, GetServer(req).dir().Rmdir(parent, name), "rmdir", parent);
}

void WalfsRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                 const char* newname, unsigned int flags) {
  OpTimer timer(GetServer(req), OpClass::kRename);
  if (SessionNodes::IsReserved(name) || SessionNodes::IsReserved(newname)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
    fuse_reply_err(req, EINVAL);  // RENAME_WHITEOUT: overlayfs only
    return;
  }
  uint32_t core_flags = 0;
  if (flags & RENAME_NOREPLACE) core_flags |= core::kRenameNoReplace;
  if (flags & RENAME_EXCHANGE) core_flags |= core::kRenameExchange;
  ReplyStatus(req, GetServer(req).dir().Rename(parent, name, newparent, newname, core_flags),
              "rename", parent);
}

// --- files ---------------------------------------------------------------------------

void WalfsCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                 fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  const Server& server = GetServer(req);
  if (SessionNodes::IsReserved(name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  core::WalDirectory& dir = server.dir();
  bool exclusive = (fi->flags & O_EXCL) != 0;
  absl::StatusOr<core::Attr> attr =
      dir.Create(parent, name, mode & 07777, GetCaller(req), exclusive);
  if (!attr.ok()) {
    fuse_reply_err(req, StatusToErrno(attr.status(), "create", parent));
    return;
  }
  if ((fi->flags & O_TRUNC) && attr->size != 0) {
    // Create found an existing file (a race with another creator): O_TRUNC applies.
    core::SetattrRequest truncate;
    truncate.size = 0;
    truncate.clear_setid = ClearsSetid(req);
    absl::StatusOr<core::Attr> truncated = GetServer(req).read_leases().Shrink(
        attr->ino, [&] { return dir.Setattr(attr->ino, truncate); });
    if (!truncated.ok()) {
      dir.Forget(attr->ino, 1);
      fuse_reply_err(req, StatusToErrno(truncated.status(), "create (truncate)", parent));
      return;
    }
    attr = truncated;
  }
  OpenHandle(fi, server.config());
  fuse_entry_param e = ToEntry(*attr, server.config());
  if (fuse_reply_create(req, &e, fi) != 0) {
    dir.Forget(attr->ino, 1);
    delete FileHandle::From(fi);
  }
}

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
    absl::StatusOr<core::Attr> attr =
        server.read_leases().Shrink(ino, [&] { return server.dir().Setattr(ino, truncate); });
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
  absl::StatusOr<size_t> n = GetServer(req).dir().Read(
      ino, static_cast<uint64_t>(off), absl::MakeSpan(buffer.data(), size));
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
    return dir.Write(ino, static_cast<uint64_t>(off), absl::MakeConstSpan(buf, size), sync,
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
    absl::Status s = GetServer(req).dir().ReleaseLease(ino);
    if (!s.ok()) Log(LOG_ERR, "release of the lease on inode %lu: %s",
                     static_cast<unsigned long>(ino), s.ToString().c_str());
  }
  // Pending times are committed and allocation ahead of the file's end is given back.
  // Nobody waits on the outcome (close(2) has returned): a failure is logged, and what
  // it left is recovered at the next open.
  absl::Status s = GetServer(req).dir().Release(ino);
  if (!s.ok()) Log(LOG_ERR, "release of inode %lu: %s", static_cast<unsigned long>(ino),
                   s.ToString().c_str());
  delete handle;
  fuse_reply_err(req, 0);
}

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
        read ? dir.AcquireReadLease(ino) : dir.AcquireLease(ino, renew);
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
      if (!read && !renew) (void)dir.ReleaseLease(ino);
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
    (void)dir.ReleaseLease(ino);
  }
}

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
      RetryInterrupted([&] { return server.dir().Fsync(ino, datasync != 0); });
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
              GetServer(req).dir().Fallocate(ino, static_cast<uint64_t>(offset),
                                             static_cast<uint64_t>(length), flags),
              "fallocate", ino);
}

// --- directories ---------------------------------------------------------------------

// Readdir is cookie-based in core (a stable order that survives renames mid-scan), so
// an open directory needs no state of its own.
void WalfsOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  if (GetServer(req).opendir_shortcut.load(std::memory_order_relaxed)) {
    fuse_reply_err(req, ENOSYS);  // success, and no more OPENDIR/RELEASEDIR (Server)
    return;
  }
  fi->fh = 0;
  fuse_reply_open(req, fi);
}

void WalfsReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)ino;
  (void)fi;
  fuse_reply_err(req, 0);
}

void WalfsReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)fi;
  std::vector<char> buffer(size);
  size_t used = 0;
  std::string name;
  absl::Status status = GetServer(req).dir().Readdir(
      ino, static_cast<uint64_t>(off), [&](const core::DirEntry& d) {
        if (ino == core::kRootInode && SessionNodes::IsReserved(d.name)) return true;
        struct stat st {};
        st.st_ino = d.ino;
        st.st_mode = d.type;
        name.assign(d.name);
        size_t need = fuse_add_direntry(req, buffer.data() + used, size - used,
                                        name.c_str(), &st, static_cast<off_t>(d.next_cookie));
        if (need > size - used) return false;
        used += need;
        return true;
      });
  if (!status.ok() && used == 0) {
    fuse_reply_err(req, StatusToErrno(status, "readdir", ino));
    return;
  }
  fuse_reply_buf(req, buffer.data(), used);
}

// READDIRPLUS answers carry an entry (and so a lookup reference the kernel will FORGET)
// for each name. The names are gathered first, within the reply size, and looked up
// after Readdir returns (core's Readdir may hold a lock while it calls back). "." and
// ".." go out without an entry (ino 0): the kernel does not instantiate them and would
// never forget a reference taken for them.
void WalfsReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  (void)fi;
  struct Pending {
    std::string name;
    core::InodeId ino;
    uint32_t type;
    uint64_t next_cookie;
  };
  std::vector<Pending> pending;
  core::WalDirectory& dir = GetServer(req).dir();
  size_t budget = 0;
  absl::Status status =
      dir.Readdir(ino, static_cast<uint64_t>(off), [&](const core::DirEntry& d) {
        Pending p{std::string(d.name), d.ino, d.type, d.next_cookie};
        if (ino == core::kRootInode && SessionNodes::IsReserved(p.name)) return true;
        size_t need = fuse_add_direntry_plus(req, nullptr, 0, p.name.c_str(), nullptr, 0);
        if (budget + need > size) return false;
        budget += need;
        pending.push_back(std::move(p));
        return true;
      });
  if (!status.ok() && pending.empty()) {
    fuse_reply_err(req, StatusToErrno(status, "readdirplus", ino));
    return;
  }
  std::vector<char> buffer(size);
  std::vector<core::InodeId> referenced;
  size_t used = 0;
  for (const Pending& p : pending) {
    fuse_entry_param e{};
    bool dot = p.name == "." || p.name == "..";
    if (dot) {
      e.attr.st_ino = p.ino;
      e.attr.st_mode = p.type;
    } else {
      absl::StatusOr<core::Attr> attr = dir.Lookup(ino, p.name);
      if (!attr.ok()) continue;  // renamed or unlinked since Readdir saw it
      e = ToEntry(*attr, GetServer(req).config());
    }
    size_t need = fuse_add_direntry_plus(req, buffer.data() + used, size - used,
                                         p.name.c_str(), &e, static_cast<off_t>(p.next_cookie));
    if (need > size - used) {
      if (!dot) dir.Forget(e.ino, 1);
      break;
    }
    used += need;
    if (!dot) referenced.push_back(e.ino);
  }
  if (fuse_reply_buf(req, buffer.data(), used) != 0) {
    for (core::InodeId id : referenced) dir.Forget(id, 1);
  }
}

void WalfsFsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  OpTimer timer(GetServer(req), OpClass::kFsync);
  (void)datasync;
  (void)fi;
  Server& server = GetServer(req);
  server.fuse_fsyncdir.fetch_add(1, std::memory_order_relaxed);
  if (server.fsyncdir_shortcut()) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  absl::Status status = RetryInterrupted([&] { return server.dir().FsyncDir(ino); });
  fuse_reply_err(req, status.ok() ? 0 : NeverEintr(StatusToErrno(status, "fsyncdir", ino)));
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
  // The reserve is for WAL segments, not for root (core/wal_directory.h): df's "Avail"
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
