// Status -> errno for FUSE replies.
#include "fs/errors.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <utility>

#include "core/status.h"
#include "fs/logging.h"

namespace walfs::fs {
namespace {

std::atomic<uint64_t> g_enospc{0};
std::atomic<uint64_t> g_eio{0};
// Steady-clock seconds of the last ENOSPC message, and ENOSPC answers since then.
std::atomic<int64_t> g_enospc_logged_at{INT64_MIN};
std::atomic<uint64_t> g_enospc_unlogged{0};
std::function<std::string()> g_describe_free;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A full pool takes PostgreSQL down (PANIC on xlogtemp): the operator must see it in the
// log, but a server retrying in a loop must not flood it.
void NoteEnospc(const char* operation, unsigned long long inode) {
  g_enospc.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = NowSeconds();
  int64_t last = g_enospc_logged_at.load(std::memory_order_relaxed);
  if ((last != INT64_MIN && now - last < kEnospcLogIntervalSeconds) ||
      !g_enospc_logged_at.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    g_enospc_unlogged.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t suppressed = g_enospc_unlogged.exchange(0, std::memory_order_relaxed);
  const std::string free_space = g_describe_free ? g_describe_free() : std::string();
  Log(LOG_WARNING, "%s (inode %llu): no space left in the pool%s%s%s", operation, inode,
      free_space.empty() ? "" : " (", free_space.c_str(), free_space.empty() ? "" : ")");
  if (suppressed > 0) {
    Log(LOG_WARNING, "%llu more requests were answered ENOSPC in the last %d s",
        static_cast<unsigned long long>(suppressed), kEnospcLogIntervalSeconds);
  }
}

}  // namespace

int StatusToErrno(const absl::Status& status, const char* operation, uint64_t ino) {
  unsigned long long inode = ino;
  if (status.code() == absl::StatusCode::kDataLoss) {
    Log(LOG_ERR, "%s (inode %llu): %s", operation, inode, status.ToString().c_str());
    g_eio.fetch_add(1, std::memory_order_relaxed);
    return EIO;
  }
  int error = core::ErrnoFromStatus(status);
  if (error <= 0) {
    Log(LOG_ERR, "%s (inode %llu): unexpected status %s", operation, inode,
        status.ToString().c_str());
    g_eio.fetch_add(1, std::memory_order_relaxed);
    return EIO;
  }
  if (error == EIO) {
    Log(LOG_WARNING, "%s (inode %llu): %s", operation, inode, status.ToString().c_str());
    g_eio.fetch_add(1, std::memory_order_relaxed);
  } else if (error == ENOSPC) {
    NoteEnospc(operation, inode);
  }
  return error;
}

ReplyErrorCounts GetReplyErrorCounts() {
  return ReplyErrorCounts{.enospc = g_enospc.load(std::memory_order_relaxed),
                          .eio = g_eio.load(std::memory_order_relaxed)};
}

void SetFreeSpaceDescriber(std::function<std::string()> describe) {
  g_describe_free = std::move(describe);
}

}  // namespace walfs::fs
