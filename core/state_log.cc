// StateLog: the one path from a built transaction to the journal (state_log.h). Writes
// only through Journal; reads no table.
#include "core/state_log.h"

#include <utility>

namespace walfs::core {

void StateLog::Load(const format::PoolState& state, uint32_t replayed_flags) {
  MutexLock l(&mu_);
  state_ = state;
  journal_flags_ = replayed_flags;
}

void StateLog::Start(std::unique_ptr<Journal> journal) {
  MutexLock l(&mu_);
  journal_ = std::move(journal);
}

absl::Status StateLog::CommitLocked(const Transaction& txn, uint32_t flags, bool* done) {
  absl::Status s = journal_->Commit(txn, done, flags);
  if (*done && !txn.empty()) journal_flags_ = flags;
  if (*done) commits_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

absl::Status StateLog::Commit(const Transaction& txn, bool* committed) {
  bool done = false;
  absl::Status s;
  {
    MutexLock l(&mu_);
    const uint32_t flags = CommitFlags();
    if (state_dirty_) {
      // The marks moved (a fresh slot or uninitialised blocks taken): they commit with
      // the first transaction after, which is the one using them or an earlier one.
      Transaction with_state = txn;
      with_state.PutState(state_);
      s = CommitLocked(with_state, flags, &done);
      if (done) state_dirty_ = false;
    } else {
      s = CommitLocked(txn, flags, &done);
    }
  }
  if (committed != nullptr) *committed = done;
  return s;
}

void StateLog::NoteMarks(uint64_t inode_high, uint64_t dirent_high, uint64_t uninit_begin,
                         uint64_t uninit_end) {
  MutexLock l(&mu_);
  state_.inode_high = inode_high;
  state_.dirent_high = dirent_high;
  state_.uninit_begin = uninit_begin;
  state_.uninit_end = uninit_end;
  state_dirty_ = true;
}

absl::Status StateLog::CommitGrow(uint64_t data_blocks, uint64_t uninit_begin,
                                  uint64_t uninit_end, bool* done) {
  MutexLock l(&mu_);
  format::PoolState next = state_;
  next.data_blocks = data_blocks;
  next.uninit_begin = uninit_begin;
  next.uninit_end = uninit_end;
  Transaction txn;
  txn.PutState(next);
  // The state image in this transaction is the whole record, pending marks included
  // (state_ holds them), so whatever state_dirty_ promised is committed with it.
  absl::Status s = CommitLocked(txn, CommitFlags(), done);
  if (*done) {
    state_ = next;
    state_dirty_ = false;
  }
  return s;
}

absl::Status StateLog::CommitFreeSpaceFlag() {
  MutexLock l(&mu_);
  const uint32_t flags = CommitFlags();
  if ((flags & ~journal_flags_) == 0) return absl::OkStatus();
  Transaction txn;
  txn.PutState(state_);
  bool done = false;
  absl::Status s = CommitLocked(txn, flags, &done);
  if (done) state_dirty_ = false;
  return s;
}

absl::Status StateLog::Sync() {
  MutexLock l(&mu_);
  return journal_->Sync();
}

}  // namespace walfs::core
