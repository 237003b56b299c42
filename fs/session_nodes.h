// SessionNodes: the virtual socket nodes of direct-access sessions (fs/lease_protocol.h,
// step 1a; L8).
//
// A client binds a listening unix socket at <mount root>/<kSessionPrefix><token>. The
// kernel asks the daemon to MKNOD it; the daemon answers with a node of this table
// instead of a pool inode: nothing is written to the pool, readdir never lists it, and
// it lives until the client unlinks it (or, once the table is full, until it is found
// abandoned). The kernel finds a bound socket by its inode, so LOOKUP of the name must
// return the node id and generation MKNOD returned: the daemon's own connect (step 1b)
// then reaches the client's socket.
//
// Node ids come from a reserved range, [kFirstNodeId, 2^64): pool inode ids are table
// indexes below inode_count, which validation bounds by 2^32 (core/validate.cc), and
// FUSE_ROOT_ID is the pool's root inode (1), so the ranges never meet. Ids are never
// reused, so every node has generation 1 and a FORGET or GETATTR of a removed node can
// never reach a newer one.
//
// Names: only <kSessionPrefix><token>, token 1..kMaxTokenBytes of [0-9A-Za-z_.-], only
// sockets, only in the root. Nothing else may be created under the prefix anywhere
// (operations_namespace.cc asks IsReserved before every create, link and rename), so
// no pool dirent can shadow or be shadowed by a node.
//
// Limits: at most kMaxNodes at once. When full, a create first drops nodes whose
// creator no longer exists or that are older than kMaxAge (a client that died between
// bind and unlink), then fails with EMFILE.
//
// Thread-safe: every method takes the table's mutex; the clock and the liveness check
// are called with it held.
#ifndef WALFS_FS_SESSION_NODES_H_
#define WALFS_FS_SESSION_NODES_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace walfs::fs {

class SessionNodes {
 public:
  static constexpr size_t kMaxNodes = 64;
  static constexpr std::chrono::seconds kMaxAge{60};
  static constexpr size_t kMaxTokenBytes = 40;
  static constexpr uint64_t kFirstNodeId = uint64_t{1} << 62;
  static constexpr uint64_t kGeneration = 1;

  struct Node {
    uint64_t nodeid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    pid_t pid = 0;              // the creator, as FUSE reported it (fuse_req_ctx)
    int64_t created_ns = 0;     // CLOCK_REALTIME, for the node's times
    std::chrono::steady_clock::time_point created;  // for kMaxAge
  };

  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using PidAlive = std::function<bool(pid_t)>;

  // `clock` and `alive` default to steady_clock::now and kill(pid, 0) != ESRCH; tests
  // pass their own.
  explicit SessionNodes(Clock clock = {}, PidAlive alive = {});
  SessionNodes(const SessionNodes&) = delete;
  SessionNodes& operator=(const SessionNodes&) = delete;

  // Whether `name` starts with kSessionPrefix: reserved for session nodes in every
  // directory.
  static bool IsReserved(std::string_view name);
  // Whether `name` is a well-formed session node name (prefix and token).
  static bool IsValidName(std::string_view name);
  // Whether `nodeid` lies in the reserved range (a session node, live or not).
  static bool IsNodeId(uint64_t nodeid) { return nodeid >= kFirstNodeId; }

  // MKNOD in the root of a reserved name: 0 and the node in *out, or an errno: EPERM for
  // anything but a socket with a valid name, or an unknown creator (pid 0: outside the
  // daemon's pid namespace); EEXIST for a live name; EMFILE when full of live nodes.
  int Create(std::string_view name, mode_t mode, uid_t uid, gid_t gid, pid_t pid,
             Node* out);
  std::optional<Node> Lookup(std::string_view name) const;
  std::optional<Node> Get(uint64_t nodeid) const;
  // 0, or ENOENT when `name` is not a live node.
  int Remove(std::string_view name);
  // 0 when `name` is a live node created by `pid`; ENOENT otherwise (a name that is not
  // the caller's is as good as absent to it).
  int CheckCreator(std::string_view name, pid_t pid) const;
  size_t size() const;

 private:
  // Drops abandoned nodes; mu_ held.
  void CollectLocked();

  const Clock clock_;
  const PidAlive alive_;
  mutable std::mutex mu_;
  std::map<std::string, Node, std::less<>> nodes_;  // guarded by mu_
  uint64_t next_nodeid_ = kFirstNodeId;              // guarded by mu_
};

}  // namespace walfs::fs

#endif  // WALFS_FS_SESSION_NODES_H_
