// The virtual socket nodes of direct-access sessions (session_nodes.h).
#include "fs/session_nodes.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>

#include "fs/lease_protocol.h"

namespace walfs::fs {
namespace {

constexpr std::string_view kPrefix(lease::kSessionPrefix);
static_assert(kPrefix.size() + SessionNodes::kMaxTokenBytes < lease::kSessionNameBytes,
              "a session name and its NUL fit SessionRequest.name");

bool TokenChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         c == '_' || c == '.' || c == '-';
}

bool PidExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

SessionNodes::SessionNodes(Clock clock, PidAlive alive)
    : clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      alive_(alive ? std::move(alive) : PidAlive(PidExists)) {}

bool SessionNodes::IsReserved(std::string_view name) {
  return name.substr(0, kPrefix.size()) == kPrefix;
}

bool SessionNodes::IsValidName(std::string_view name) {
  if (!IsReserved(name)) return false;
  const std::string_view token = name.substr(kPrefix.size());
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  for (char c : token) {
    if (!TokenChar(c)) return false;
  }
  return true;
}

int SessionNodes::Create(std::string_view name, mode_t mode, uid_t uid, gid_t gid,
                         pid_t pid, Node* out) {
  if (!S_ISSOCK(mode) || !IsValidName(name) || pid <= 0) return EPERM;
  std::lock_guard<std::mutex> l(mu_);
  if (nodes_.find(name) != nodes_.end()) return EEXIST;
  if (nodes_.size() >= kMaxNodes) CollectLocked();
  if (nodes_.size() >= kMaxNodes) return EMFILE;
  Node node{.nodeid = next_nodeid_++,
            .uid = uid,
            .gid = gid,
            .pid = pid,
            .created_ns = RealtimeNs(),
            .created = clock_()};
  nodes_.emplace(std::string(name), node);
  *out = node;
  return 0;
}

void SessionNodes::CollectLocked() {
  const auto now = clock_();
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    const Node& n = it->second;
    if (now - n.created > kMaxAge || !alive_(n.pid)) {
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<SessionNodes::Node> SessionNodes::Lookup(std::string_view name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::optional<SessionNodes::Node> SessionNodes::Get(uint64_t nodeid) const {
  if (!IsNodeId(nodeid)) return std::nullopt;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, node] : nodes_) {
    if (node.nodeid == nodeid) return node;
  }
  return std::nullopt;
}

int SessionNodes::Remove(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return ENOENT;
  nodes_.erase(it);
  return 0;
}

int SessionNodes::CheckCreator(std::string_view name, pid_t pid) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || pid <= 0 || it->second.pid != pid) return ENOENT;
  return 0;
}

size_t SessionNodes::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return nodes_.size();
}

}  // namespace walfs::fs
