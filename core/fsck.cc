// fsck: CheckPool's passes, the Checker's order of steps and its repair writes, and the
// report's counts. The steps themselves are in fsck_superblock.cc,
// fsck_namespace.cc and fsck_space.cc (core/fsck_checker.h); the JSON form of a report
// in fsck_json.cc. Reads and writes the pool only through the Checker.
#include "core/fsck.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "core/fsck_checker.h"
#include "core/journal.h"
#include "core/pool_state.h"

namespace walfs::core {
namespace fsck_internal {

void Checker::Run() {
  report_->region_size = region_.size();
  if (!CheckSuperblocks()) return;
  CheckJournal();
  CheckState();
  LoadInodes();
  LoadDirents();
  CheckTree();
  CheckLinkCounts();
  CheckOverlaps();
  ReclaimOrphans();
  if (options_.scan_data) CheckFileTails();
  CheckFreeSpace();
  FillCounts();
  if (options_.list_files) ListFiles();
}

bool Checker::CommitRecord(uint64_t offset, const void* image, uint32_t length) {
  if (journal_ == nullptr) {
    journal_ = std::make_unique<Journal>(region_, sb_, sequence_ + 1,
                                         /*carry_home_images=*/false);
  }
  Transaction txn;
  txn.PutImage(offset, image, length);
  bool committed = false;
  return journal_->Commit(txn, &committed).ok();
}

bool Checker::FreeInode(uint64_t ino) {
  const InodeRecord zero{};
  return CommitRecord(InodeOffset(ino), &zero, sizeof(zero));
}

bool Checker::DropDirent(uint64_t index) {
  const DirentRecord zero{};
  return CommitRecord(DirentOffset(index), &zero, sizeof(zero));
}

bool Checker::ZeroBytes(uint64_t offset, uint64_t length) {
  region_.Fill(offset, 0, length);
  region_.Persist(offset, length);
  return true;
}

bool Checker::CommitState() {
  SealPoolState(&state_);
  return CommitRecord(format::kStateOffset, &state_, sizeof(state_));
}

}  // namespace fsck_internal

namespace {

using fsck_internal::Checker;
using Severity = FsckProblem::Severity;

constexpr size_t kMaxPasses = 4;

bool SameProblem(const FsckProblem& a, const FsckProblem& b) {
  return a.severity == b.severity && a.where == b.where && a.what == b.what;
}

}  // namespace

std::string_view SeverityName(FsckProblem::Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

bool FsckReport::clean() const { return Count(Severity::kError, true) == 0; }

size_t FsckReport::Count(FsckProblem::Severity severity, bool unrepaired_only) const {
  return std::count_if(problems.begin(), problems.end(), [&](const FsckProblem& p) {
    return p.severity == severity && !(unrepaired_only && p.repaired);
  });
}

size_t FsckReport::repaired_count() const {
  return std::count_if(problems.begin(), problems.end(),
                       [](const FsckProblem& p) { return p.repaired; });
}

absl::StatusOr<FsckReport> CheckPool(PersistentRegion& region, const FsckOptions& options) {
  FsckReport result;
  for (size_t pass = 1; pass <= kMaxPasses; ++pass) {
    // The last pass only looks, so a repair that did not hold is reported unrepaired.
    FsckOptions pass_options = options;
    pass_options.repair = options.repair && pass < kMaxPasses;
    FsckReport report;
    Checker(region, pass_options, &report).Run();
    // A problem found again keeps its first wording; it is repaired only if the last
    // pass that saw it repaired it.
    for (FsckProblem& p : report.problems) {
      auto it = std::find_if(result.problems.begin(), result.problems.end(),
                             [&](const FsckProblem& q) { return SameProblem(p, q); });
      if (it == result.problems.end()) {
        result.problems.push_back(std::move(p));
      } else {
        it->repaired = p.repaired;
      }
    }
    const bool repaired_now = report.repaired_count() > 0;
    report.problems = std::move(result.problems);
    result = std::move(report);
    result.passes = pass;
    if (!pass_options.repair || !repaired_now) break;
  }
  // A repair whose writes did not reach the media repaired nothing.
  if (absl::Status h = region.health(); !h.ok()) return h;
  return result;
}

}  // namespace walfs::core
