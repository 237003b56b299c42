// StateLog: the journal and the pool's state record (format::PoolState), behind their
// own lock. Every journal commit of an open pool goes through Commit here, and the state
// record changes only here (LevelDB's VersionSet::LogAndApply, without the apply).
// May not touch the in-memory inode table or the allocator: it is handed transactions
// and marks, never reads them.
#ifndef WALFS_CORE_STATE_LOG_H_
#define WALFS_CORE_STATE_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/format.h"
#include "core/journal.h"
#include "core/mutex.h"

namespace walfs::core {

// Thread-safe. Its lock is the last in the engine's lock order (core/pool.h): it is
// taken under any other and nothing is taken under it.
class StateLog {
 public:
  // `free_space_zero`: whether every commit made now may say free space is zero
  // (format::kJournalFlagFreeSpaceZero); Space publishes it.
  explicit StateLog(const std::atomic<bool>& free_space_zero)
      : free_space_zero_(free_space_zero) {}
  StateLog(const StateLog&) = delete;
  StateLog& operator=(const StateLog&) = delete;

  // Open: the state record as read and checked through the journal, and the header
  // flags of the newest replayed transaction (0 if none was replayed).
  void Load(const format::PoolState& state, uint32_t replayed_flags);
  // Open, after Load: the journal the commits go to.
  void Start(std::unique_ptr<Journal> journal);

  // Commits `txn` in one journal transaction, with the state record when the marks
  // moved since the last commit (NoteMarks). *committed (if given) says whether the
  // commit point was reached, which may be so even when the status is an error
  // (journal.h).
  absl::Status Commit(const Transaction& txn, bool* committed = nullptr);
  // The table marks and the uninitialised range moved (only forward): the next commit
  // writes them.
  void NoteMarks(uint64_t inode_high, uint64_t dirent_high, uint64_t uninit_begin,
                 uint64_t uninit_end);
  // A grow's commit: the state record with `data_blocks` and the range [begin, end), in
  // a transaction of its own. *done as for Commit.
  absl::Status CommitGrow(uint64_t data_blocks, uint64_t uninit_begin, uint64_t uninit_end,
                          bool* done);
  // Close: when free space became known zero after the newest commit, one more commit of
  // the state record says so, so that the next open trusts it instead of reading it.
  absl::Status CommitFreeSpaceFlag();
  // Close: persists the home images the journal still carries (journal.h).
  absl::Status Sync();

  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }

 private:
  // The flags a commit made now may carry.
  uint32_t CommitFlags() const {
    return free_space_zero_.load() ? format::kJournalFlagFreeSpaceZero : 0;
  }
  // Under mu_: one journal commit with `flags`; on reaching the commit point, notes the
  // flags (when the transaction has content) and counts it.
  absl::Status CommitLocked(const Transaction& txn, uint32_t flags, bool* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::atomic<bool>& free_space_zero_;
  Mutex mu_;
  std::unique_ptr<Journal> journal_ ABSL_GUARDED_BY(mu_);
  // The PoolState image the next commit adds when state_dirty_.
  format::PoolState state_ ABSL_GUARDED_BY(mu_){};
  bool state_dirty_ ABSL_GUARDED_BY(mu_) = false;
  // The header flags of the newest committed transaction (replayed at open, or written
  // since): CommitFreeSpaceFlag compares against them.
  uint32_t journal_flags_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> commits_{0};
};

}  // namespace walfs::core

#endif  // WALFS_CORE_STATE_LOG_H_
