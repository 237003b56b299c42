// FUSE namespace callbacks: lookup and forget, attributes, names created, linked,
// renamed and removed, and directories (open, read, fsync). Owns the attribute and
// entry conversions and the session socket nodes' entries; it may not open or touch a
// file's data or leases (operations_data.cc, operations_direct.cc).
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/format.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "fs/errors.h"
#include "fs/file_handle.h"
#include "fs/operations_internal.h"
#include "fs/server.h"
#include "fs/session_nodes.h"

namespace walfs::fs {
namespace {

core::Caller GetCaller(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return core::Caller{.uid = ctx->uid, .gid = ctx->gid};
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

// Entries, negative entries and attributes are cached for entry_timeout/attr_timeout
// (a day by default, fs/options.h): walfs is the only writer of its namespace and the
// kernel invalidates what its own requests change (size after a write, nlink after an
// unlink, the parent after a create), while PostgreSQL probes segment names that do not
// exist (expecting ENOENT) and stats archive_status names constantly.
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
  if (fuse_reply_entry(req, &e) != 0) server.dir().names().Forget(attr->ino, 1);
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

}  // namespace

// --- names and attributes ----------------------------------------------------------

void WalfsLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kOther);
  if (IsSessionName(parent, name)) {
    ReplySessionEntry(req, GetServer(req).session_nodes().Lookup(name));
    return;
  }
  absl::StatusOr<core::Attr> attr = GetServer(req).dir().names().Lookup(parent, name);
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
  if (!SessionNodes::IsNodeId(ino)) GetServer(req).dir().names().Forget(ino, nlookup);
  fuse_reply_none(req);
}

void WalfsForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  core::Namespace& names = GetServer(req).dir().names();
  for (size_t i = 0; i < count; ++i) {
    if (!SessionNodes::IsNodeId(forgets[i].ino)) names.Forget(forgets[i].ino, forgets[i].nlookup);
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
  absl::StatusOr<core::Attr> attr = GetServer(req).dir().names().GetAttr(ino);
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
  core::Namespace& names = GetServer(req).dir().names();
  // FUSE_SET_ATTR_CTIME alone (the kernel refreshing ctime) changes nothing core keeps
  // apart from what its own setattr does, so it only reads the attributes back.
  bool any = r.mode || r.uid || r.gid || r.size || r.atime_ns || r.mtime_ns;
  absl::StatusOr<core::Attr> result =
      !any     ? names.GetAttr(ino)
      : r.size ? GetServer(req).read_leases().Shrink(ino, [&] { return names.Setattr(ino, r); })
               : names.Setattr(ino, r);
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
  absl::StatusOr<std::string> target = GetServer(req).dir().names().Readlink(ino);
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
  core::Namespace& names = GetServer(req).dir().names();
  if (S_ISREG(mode)) {  // some tools create regular files with mknod
    ReplyEntry(req, names.Create(parent, name, mode & 07777, GetCaller(req), /*exclusive=*/true),
               "mknod", parent);
    return;
  }
  // FIFOs, sockets and devices are inert inodes: the kernel gives a FIFO its pipe and a
  // socket its binding without asking walfs, and the mount is nodev, so a device node
  // is never opened. (The kernel checks CAP_MKNOD for devices before it asks.)
  ReplyEntry(req, names.Mknod(parent, name, mode, rdev, GetCaller(req)), "mknod", parent);
}

void WalfsMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsReserved(name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().names().Mkdir(parent, name, mode & 07777, GetCaller(req)),
             "mkdir", parent);
}

void WalfsSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsReserved(name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().names().Symlink(parent, name, link, GetCaller(req)),
             "symlink", parent);
}

void WalfsLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  OpTimer timer(GetServer(req), OpClass::kCreate);
  if (SessionNodes::IsNodeId(ino) || SessionNodes::IsReserved(newname)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  ReplyEntry(req, GetServer(req).dir().names().Link(ino, newparent, newname), "link", ino);
}

void WalfsUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kUnlink);
  if (IsSessionName(parent, name)) {
    fuse_reply_err(req, GetServer(req).session_nodes().Remove(name));
    return;
  }
  ReplyStatus(req, GetServer(req).dir().names().Unlink(parent, name), "unlink", parent);
}

void WalfsRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  OpTimer timer(GetServer(req), OpClass::kUnlink);
  ReplyStatus(req, GetServer(req).dir().names().Rmdir(parent, name), "rmdir", parent);
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
  ReplyStatus(req,
              GetServer(req).dir().names().Rename(parent, name, newparent, newname, core_flags),
              "rename", parent);
}

// --- create ---------------------------------------------------------------------------

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
      dir.names().Create(parent, name, mode & 07777, GetCaller(req), exclusive);
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
        attr->ino, [&] { return dir.names().Setattr(attr->ino, truncate); });
    if (!truncated.ok()) {
      dir.names().Forget(attr->ino, 1);
      fuse_reply_err(req, StatusToErrno(truncated.status(), "create (truncate)", parent));
      return;
    }
    attr = truncated;
  }
  OpenHandle(fi, server.config());
  fuse_entry_param e = ToEntry(*attr, server.config());
  if (fuse_reply_create(req, &e, fi) != 0) {
    dir.names().Forget(attr->ino, 1);
    delete FileHandle::From(fi);
  }
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
  absl::Status status = GetServer(req).dir().names().Readdir(
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
      dir.names().Readdir(ino, static_cast<uint64_t>(off), [&](const core::DirEntry& d) {
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
      absl::StatusOr<core::Attr> attr = dir.names().Lookup(ino, p.name);
      if (!attr.ok()) continue;  // renamed or unlinked since Readdir saw it
      e = ToEntry(*attr, GetServer(req).config());
    }
    size_t need = fuse_add_direntry_plus(req, buffer.data() + used, size - used,
                                         p.name.c_str(), &e, static_cast<off_t>(p.next_cookie));
    if (need > size - used) {
      if (!dot) dir.names().Forget(e.ino, 1);
      break;
    }
    used += need;
    if (!dot) referenced.push_back(e.ino);
  }
  if (fuse_reply_buf(req, buffer.data(), used) != 0) {
    for (core::InodeId id : referenced) dir.names().Forget(id, 1);
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
  absl::Status status = RetryInterrupted([&] { return server.dir().data().FsyncDir(ino); });
  fuse_reply_err(req, status.ok() ? 0 : NeverEintr(StatusToErrno(status, "fsyncdir", ino)));
}

}  // namespace walfs::fs
