// Crash-state enumeration (the Yat / Chipmunk method, in-process, no mount).
//
// Each scenario is a sequence of steps run on a WalDirectory over a RecordingRegion. At
// every durability point inside a step (a drain on PMEM, an msync otherwise) the region
// enumerates the images a power failure at that instant could leave: the durable image,
// plus subsets of up to two in-flight stores, plus 8-byte-torn stores. Each image is
// recovered and checked:
//  - it opens (recovery succeeds) and fsck finds nothing wrong afterwards;
//  - its namespace equals the model before the step or after it (atomic operations);
//  - every file holds, byte by byte, either its last acknowledged (durable) content or
//    its newest content, with a size from one of those: nothing acknowledged by fsync,
//    fdatasync, fsyncdir, an O_DSYNC write, or (on PMEM) any returned write is lost;
//  - free space reads zero (fsck reads every free block outside the uninitialised range)
//    and the recovered pool trusts it without reading it: every commit said it was
//    zero (format::kJournalFlagFreeSpaceZero), which is what core/pool_state.h argues;
//  - recovering the recovered image again gives the same state (idempotent recovery);
//  - a crash at any durability point of recovery itself (every 8th image is recovered
//    this way, with the scenario's own durability semantics, msync included) leaves an
//    image that recovers to the same state.
// A step may run two sequences of operations in two threads at once (two writers): the
// region's drains are per thread, and a crash image must then match each thread's
// progress (its current operation before or after, the ones it finished after).
// Scenarios named "over_old_pool_*" run on a pool formatted lazily (format v2, PoolState)
// over a used pool, as mkfs.walfs --force leaves it: old records above the table marks,
// old data in the uninitialised range. So the marks, the zeroing of fresh slots and of
// uninitialised blocks at allocation, and the state record's journal commits are
// crash-tested too.
// The test prints how many crash states it checked.
#include <malloc.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fsck.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"
#include "tests/support/recording_region.h"

namespace walfs::core {
namespace {

// The harness and the recording region allocate and free pool-sized images at every
// durability point. glibc gives such blocks back to the kernel on free (the mmap
// threshold, heap trimming), so each new one costs a page fault per 4 KiB page: on a
// virtual machine that was 98% of this binary's time. Freed images stay in the heap.
// (AddressSanitizer's allocator ignores this; the harness's buffer reuse is for it.)
[[maybe_unused]] const bool kFreedImagesStayInTheHeap = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  return true;
}();

constexpr uint64_t kSegment = 1 << 20;
constexpr uint64_t kPoolSize = 6 << 20;
constexpr Caller kPg{105, 111};
constexpr char kSeg1[] = "000000010000000000000001";
constexpr char kSeg2[] = "000000010000000000000002";
constexpr char kSeg3[] = "000000010000000000000003";

// ---- The model: what the file system must contain ----------------------------------

struct Node {
  char type;  // 'f', 'd', 'l', 'p' (a FIFO), 's' (a socket), 'c' (a character device)
  int id = 0;  // files: content identity (hard links share it)
  std::string target;
  // Attributes, checked once a step set them: permission bits (-1: not checked), mtime
  // (INT64_MIN: not checked) and, for devices, rdev.
  int mode = -1;
  int64_t mtime_ns = INT64_MIN;
  uint64_t rdev = 0;
};
struct Content {
  std::string durable;  // last acknowledged
  std::string current;  // newest written
};

class Model {
 public:
  explicit Model(bool pmem) : pmem_(pmem) {}
  void Create(const std::string& p) {
    nodes[p] = {'f', next_id_};
    data[next_id_++] = {};
  }
  void Mkdir(const std::string& p) { nodes[p] = {'d'}; }
  void Symlink(const std::string& p, const std::string& t) { nodes[p] = {'l', 0, t}; }
  void Mkfifo(const std::string& p) { nodes[p] = {'p'}; }
  void Mknod(const std::string& p, char type, int mode, uint64_t rdev) {
    nodes[p] = {type, 0, "", mode, INT64_MIN, rdev};
  }
  // Attributes belong to the inode: every name of a hard-linked file sees them.
  // Metadata changes are durable on return in both modes.
  void SetAttrs(const std::string& p, std::optional<int> mode, std::optional<int64_t> mtime) {
    const Node target = nodes.at(p);
    for (auto& [path, node] : nodes) {
      const bool same = path == p || (target.type == 'f' && node.type == 'f' && node.id == target.id);
      if (!same) continue;
      if (mode) node.mode = *mode;
      if (mtime) node.mtime_ns = *mtime;
    }
  }
  void Write(int id, uint64_t off, const std::string& bytes) {
    auto& c = data.at(id);
    if (c.current.size() < off + bytes.size()) c.current.resize(off + bytes.size(), '\0');
    c.current.replace(off, bytes.size(), bytes);
    if (pmem_) c.durable = c.current;
  }
  void Sync(int id) { data.at(id).durable = data.at(id).current; }
  void Truncate(int id, uint64_t size) {
    data.at(id).current.resize(size, '\0');
    data.at(id).durable = data.at(id).current;  // a metadata change: durable on return
  }
  void Unlink(const std::string& p) { nodes.erase(p); }
  void Link(const std::string& from, const std::string& to) { nodes[to] = nodes.at(from); }
  void Rename(const std::string& from, const std::string& to) {
    std::map<std::string, Node> moved;
    for (auto it = nodes.begin(); it != nodes.end();) {
      if (it->first == from || it->first.rfind(from + "/", 0) == 0) {
        moved[to + it->first.substr(from.size())] = it->second;
        it = nodes.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = nodes.begin(); it != nodes.end();) {  // a replaced target goes
      it = (it->first == to || it->first.rfind(to + "/", 0) == 0) ? nodes.erase(it)
                                                                   : std::next(it);
    }
    nodes.insert(moved.begin(), moved.end());
  }
  int Id(const std::string& p) const { return nodes.at(p).id; }

  std::map<std::string, Node> nodes;  // "/a/b" -> node; the root is implicit
  std::map<int, Content> data;

 private:
  bool pmem_;
  int next_id_ = 1;
};

// ---- What a recovered pool contains ------------------------------------------------

struct Seen {
  char type;
  uint64_t ino;
  std::string content;  // file bytes or symlink target
  int mode = 0;          // permission bits
  int64_t mtime_ns = 0;
  uint64_t rdev = 0;
};
using Tree = std::map<std::string, Seen>;

absl::Status Walk(WalDirectory& d, InodeId dir, const std::string& prefix, Tree& out) {
  std::vector<std::string> names;
  absl::Status s = d.names().Readdir(dir, 0, [&](const DirEntry& e) {
    if (e.name != "." && e.name != "..") names.emplace_back(e.name);
    return true;
  });
  if (!s.ok()) return s;
  for (const auto& n : names) {
    auto a = d.names().Lookup(dir, n);
    if (!a.ok()) return a.status();
    const std::string path = prefix + "/" + n;
    Seen seen{'f', a->ino, {}, static_cast<int>(a->mode & 07777), a->mtime_ns, a->rdev};
    if (S_ISDIR(a->mode)) {
      seen.type = 'd';
      s = Walk(d, a->ino, path, out);
      if (!s.ok()) return s;
    } else if (S_ISLNK(a->mode)) {
      seen.type = 'l';
      auto t = d.names().Readlink(a->ino);
      if (!t.ok()) return t.status();
      seen.content = *t;
    } else if (S_ISFIFO(a->mode) || S_ISSOCK(a->mode) || S_ISCHR(a->mode)) {
      seen.type = S_ISFIFO(a->mode) ? 'p' : S_ISSOCK(a->mode) ? 's' : 'c';
      if (a->size != 0) return absl::DataLossError(absl::StrCat(path, ": a special file with a size"));
    } else {
      seen.content.resize(a->size);
      auto r = d.data().Read(a->ino, 0, absl::MakeSpan(seen.content));
      if (!r.ok()) return r.status();
      if (*r != a->size) return absl::DataLossError(absl::StrCat(path, ": short read"));
    }
    out[path] = std::move(seen);
  }
  return absl::OkStatus();
}

bool SameNamespace(const Tree& got, const Model& m) {
  if (got.size() != m.nodes.size()) return false;
  std::map<int, uint64_t> id_to_ino;
  std::map<uint64_t, int> ino_to_id;
  for (const auto& [path, node] : m.nodes) {
    auto it = got.find(path);
    if (it == got.end() || it->second.type != node.type) return false;
    if (node.type == 'l' && it->second.content != node.target) return false;
    if (node.mode >= 0 && it->second.mode != node.mode) return false;
    if (node.mtime_ns != INT64_MIN && it->second.mtime_ns != node.mtime_ns) return false;
    if (node.type == 'c' && it->second.rdev != node.rdev) return false;
    if (node.type == 'f') {
      auto [a, fresh_a] = id_to_ino.emplace(node.id, it->second.ino);
      auto [b, fresh_b] = ino_to_id.emplace(it->second.ino, node.id);
      if (a->second != it->second.ino || b->second != node.id) return false;
    }
  }
  return true;
}

std::string Describe(const Tree& t) {
  std::string s;
  for (const auto& [p, n] : t) absl::StrAppend(&s, p, "(", std::string(1, n.type), ") ");
  return s;
}

// "" when `got` is a state one of `allowed` permits: its namespace, and each file's
// bytes and size from that model's acknowledged or newest content (or another matching
// model's). `allowed` is {before, after} of one operation, or with two writers every
// combination of each thread's current operation before and after.
std::string Verify(const Tree& got, const std::vector<const Model*>& allowed) {
  std::vector<const Model*> matching;
  for (const Model* m : allowed) {
    if (SameNamespace(got, *m)) matching.push_back(m);
  }
  if (matching.empty()) return "namespace is neither before nor after: " + Describe(got);
  for (const auto& [path, seen] : got) {
    if (seen.type != 'f') continue;
    std::vector<const std::string*> candidates;
    for (const Model* m : matching) {
      const Content& c = m->data.at(m->Id(path));
      candidates.push_back(&c.durable);
      candidates.push_back(&c.current);
    }
    bool size_ok = false;
    for (const auto* c : candidates) size_ok |= c->size() == seen.content.size();
    if (!size_ok) {
      return absl::StrCat(path, ": size ", seen.content.size(), " is neither acknowledged (",
                          candidates[0]->size(), ") nor newest (", candidates[1]->size(), ")");
    }
    for (size_t i = 0; i < seen.content.size(); ++i) {
      bool ok = false;
      for (const auto* c : candidates) ok |= (i < c->size() ? (*c)[i] : '\0') == seen.content[i];
      if (!ok) return absl::StrCat(path, ": byte ", i, " is neither old nor new");
    }
  }
  return "";
}

// ---- The harness -------------------------------------------------------------------

struct Context {
  WalDirectory* dir;
  Model* model;  // the model as it will be after the step (steps update it)
  std::map<std::string, InodeId> handles;  // "open files": lookup references held
  InodeId Resolve(const std::string& path) {
    InodeId cur = kRootInode;
    size_t pos = 1;
    while (pos <= path.size()) {
      const size_t slash = path.find('/', pos);
      const std::string part =
          path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      auto a = dir->names().Lookup(cur, part);
      EXPECT_TRUE(a.ok()) << path << ": " << a.status();
      if (!a.ok()) return 0;
      cur = a->ino;
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    return cur;
  }
  std::pair<InodeId, std::string> Parent(const std::string& path) {
    const size_t slash = path.rfind('/');
    return {slash == 0 ? kRootInode : Resolve(path.substr(0, slash)), path.substr(slash + 1)};
  }
};

struct Step {
  std::string label;
  std::function<void(Context&)> run;  // does the operation and updates *ctx.model
  // Two writers: when not empty, `run` is unused and these two sequences run at once,
  // each in a thread of its own (see Together).
  std::vector<std::vector<Step>> threads;
};

// ---- Crashes during recovery -------------------------------------------------------

using RecoverFn = std::function<absl::Status(std::unique_ptr<PersistentRegion>)>;

// Recovers `image` with `recover` on a RecordingRegion with the scenario's semantics
// (pmem or msync: recovery takes the code paths of that mode, and its msyncs, not
// drains, are its durability points there). At each of recovery's durability points it
// passes to `check` the images a power failure there could leave: the durable image,
// then in-flight units landed one at a time and all but one (no prefixes or tears), at
// most `per_point` images. Returns recovery's own status.
absl::Status ForEachCrashDuringRecovery(const std::string& image, bool pmem,
                                        const RecoverFn& recover, size_t per_point,
                                        const std::function<void(const std::string&)>& check) {
  auto region = std::make_unique<RecordingRegion>(image, pmem);
  RecordingRegion* rec = region.get();
  RecordingRegion::CrashEnumOptions opts;
  opts.max_subset = 1;
  opts.prefixes = false;
  opts.tear = false;
  opts.max_images = per_point;
  rec->SetDurabilityHook([&] { rec->ForEachCrashImage(opts, check); });
  return recover(std::move(region));
}

class CrashHarness {
 public:
  explicit CrashHarness(bool pmem) : pmem_(pmem) {}

  // Runs `steps`, checking every crash state of every step; returns states checked.
  uint64_t Run(const std::string& name, const std::vector<Step>& steps) {
    const bool over_old = name.rfind("over_old_pool_", 0) == 0;
    auto region = std::make_unique<RecordingRegion>(over_old ? PoolOverOldPool() : FreshPool(),
                                                    pmem_);
    RecordingRegion* rec = region.get();
    auto opened = WalDirectory::Open(std::move(region));
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return 0;
    std::unique_ptr<WalDirectory> dir = std::move(*opened);
    Model model(pmem_);
    uint64_t states = 0;
    for (const Step& step : steps) {
      if (!step.threads.empty()) {
        states += RunTogether(rec, dir.get(), &model, name, step);
        if (::testing::Test::HasFailure()) break;
        continue;
      }
      Model before = model;
      Context ctx{dir.get(), &model, handles_};
      // The step mutates `model` as it runs, so the hook compares against the model
      // predicted before the step runs: the step is first applied to a scratch copy.
      Model after = model;
      {
        Context dry{nullptr, &after, handles_};
        step.run(dry);
      }
      rec->SetDurabilityHook([&] {
        RecordingRegion::CrashEnumOptions opts;
        opts.max_images = 4000;
        states += rec->ForEachCrashImage(opts, [&](const std::string& image) {
          Check(image, {&before, &after}, name + " / " + step.label);
        });
      });
      step.run(ctx);
      rec->SetDurabilityHook({});
      handles_ = ctx.handles;
      // Quiescent point after the step: no store in flight may matter.
      Check(rec->DurableImage(), {&model}, name + " / after " + step.label);
      ++states;
      if (::testing::Test::HasFailure()) break;
    }
    std::printf("[ crash ] %-40s %-5s %8llu crash states checked (+%llu mid-recovery)%s\n",
                name.c_str(), pmem_ ? "pmem" : "msync", static_cast<unsigned long long>(states),
                static_cast<unsigned long long>(recovery_states_),
                overlapping_points_ == 0
                    ? ""
                    : absl::StrCat(", ", overlapping_points_,
                                   " durability points with both writers mid-sequence")
                          .c_str());
    return states;
  }

 private:
  // Runs a two-writer step: its two sequences at once, one thread each, on the same
  // WalDirectory. A crash image at any durability point (a drain or msync of either
  // thread; the other thread waits while it is checked) must match some model in which
  // each thread's finished operations are done and its current one is before or after.
  uint64_t RunTogether(RecordingRegion* rec, WalDirectory* dir, Model* model,
                       const std::string& name, const Step& step) {
    const std::vector<Step>& a = step.threads.at(0);
    const std::vector<Step>& b = step.threads.at(1);
    // grid[i][j]: the first i operations of a and the first j of b done.
    std::vector<std::vector<Model>> grid(a.size() + 1);
    for (size_t i = 0; i <= a.size(); ++i) {
      for (size_t j = 0; j <= b.size(); ++j) {
        Model m = *model;
        Context dry{nullptr, &m, handles_};
        for (size_t k = 0; k < i; ++k) a[k].run(dry);
        for (size_t k = 0; k < j; ++k) b[k].run(dry);
        grid[i].push_back(std::move(m));
      }
    }
    std::atomic<size_t> done_a{0};
    std::atomic<size_t> done_b{0};
    uint64_t states = 0;
    rec->SetDurabilityHook([&] {
      const size_t i = done_a.load();
      const size_t j = done_b.load();
      if (i < a.size() && j < b.size()) ++overlapping_points_;
      std::vector<const Model*> allowed;
      for (size_t di : {size_t{0}, size_t{1}}) {
        for (size_t dj : {size_t{0}, size_t{1}}) {
          if (i + di <= a.size() && j + dj <= b.size()) allowed.push_back(&grid[i + di][j + dj]);
        }
      }
      const std::string where = absl::StrCat(
          name, " / ", step.label, " / ", i < a.size() ? a[i].label : "(done)", " || ",
          j < b.size() ? b[j].label : "(done)");
      RecordingRegion::CrashEnumOptions opts;
      opts.max_images = 4000;
      states += rec->ForEachCrashImage(
          opts, [&](const std::string& image) { Check(image, allowed, where); });
    });
    // Each thread has its own model copy (its steps update it) and handles.
    Model model_a = *model;
    Model model_b = *model;
    Context ctx_a{dir, &model_a, handles_};
    Context ctx_b{dir, &model_b, handles_};
    auto run = [](const std::vector<Step>& seq, Context* ctx, std::atomic<size_t>* done) {
      for (const Step& s : seq) {
        if (::testing::Test::HasFailure()) return;
        s.run(*ctx);
        ++*done;
      }
    };
    std::thread thread_a(run, std::cref(a), &ctx_a, &done_a);
    std::thread thread_b(run, std::cref(b), &ctx_b, &done_b);
    thread_a.join();
    thread_b.join();
    rec->SetDurabilityHook({});
    for (const auto& [path, ino] : ctx_a.handles) handles_[path] = ino;
    for (const auto& [path, ino] : ctx_b.handles) handles_[path] = ino;
    *model = grid[a.size()][b.size()];
    Check(rec->DurableImage(), {model}, name + " / after " + step.label);
    return states + 1;
  }

  std::string FreshPool() {
    MemoryRegion r(kPoolSize);
    FormatOptions opts;
    opts.segment_size = kSegment;
    opts.inode_count = 32;
    opts.region_is_zero = true;
    EXPECT_TRUE(FormatPool(r, opts).ok());
    return r.bytes();
  }

  // A used pool (files, segments with data, freed blocks), formatted again lazily.
  std::string PoolOverOldPool() {
    auto region = std::make_unique<MemoryRegion>(FreshPool(), true);
    MemoryRegion* raw = region.get();
    auto old = WalDirectory::Open(std::move(region));
    EXPECT_TRUE(old.ok()) << old.status();
    if (!old.ok()) return "";
    WalDirectory& d = **old;
    for (int i = 0; i < 12; ++i) {
      const std::string name = i < 3 ? absl::StrCat("00000001000000000000001", i)
                                     : absl::StrCat("old", i);
      auto f = d.names().Create(kRootInode, name, 0600, kPg, true);
      EXPECT_TRUE(f.ok()) << f.status();
      if (!f.ok()) return "";
      const std::string bytes(i < 3 ? kSegment : 5000 + i, static_cast<char>('A' + i));
      EXPECT_TRUE(
          d.data().Write(f->ino, 0, absl::MakeConstSpan(bytes.data(), bytes.size()), false).ok());
      d.names().Forget(f->ino, 1);
    }
    EXPECT_TRUE(d.names().Unlink(kRootInode, "old5").ok());  // a freed file: zeroed, free
    EXPECT_TRUE(d.Close().ok());
    MemoryRegion r(raw->bytes());
    FormatOptions opts;
    opts.segment_size = kSegment;
    opts.inode_count = 32;
    EXPECT_TRUE(FormatPool(r, opts).ok());
    return r.bytes();
  }

  // Recovers a copy of `image`, made in `*work`, with the scenario's semantics
  // (recovery's code paths differ by mode); `*work` then holds the recovered image.
  // The harness's few work buffers are reused for every image it checks (see
  // MemoryRegion::Over: a fresh pool-sized buffer per image costs page faults).
  absl::StatusOr<Tree> Recover(const std::string& image, std::string* work) const {
    work->assign(image);
    auto dir = WalDirectory::Open(MemoryRegion::Over(work, pmem_));
    if (!dir.ok()) return dir.status();
    free_space_trusted_ = (*dir)->FreeSpaceKnownZero();
    Tree t;
    absl::Status s = Walk(**dir, kRootInode, "", t);
    if (!s.ok()) return s;
    return t;
  }

  void Check(const std::string& image, const std::vector<const Model*>& allowed,
             const std::string& where) {
    if (::testing::Test::HasFailure()) return;  // one diagnosis is enough
    std::string& recovered = work_[0];
    auto tree = Recover(image, &recovered);
    ASSERT_TRUE(tree.ok()) << where << ": recovery failed: " << tree.status();
    ASSERT_TRUE(free_space_trusted_)
        << where << ": the newest transaction does not say free space is zero";
    const std::string why = Verify(*tree, allowed);
    ASSERT_EQ(why, "") << where;
    auto again = Recover(recovered, &work_[1]);
    ASSERT_TRUE(again.ok()) << where << ": second recovery failed: " << again.status();
    ASSERT_EQ(Describe(*again), Describe(*tree)) << where << ": recovery is not idempotent";
    for (const auto& [p, n] : *tree) {
      ASSERT_EQ(again->at(p).content, n.content) << where << ": " << p << " changed";
    }
    if (++checked_ % 8 == 0) CheckCrashDuringRecovery(image, *tree, where);
    // fsck without repair only reads: it checks the recovered image in place.
    auto report = CheckPool(*MemoryRegion::Over(&recovered), FsckOptions{});
    ASSERT_TRUE(report.ok()) << where << ": " << report.status();
    std::string problems;
    for (const auto& pr : report->problems) {
      if (pr.severity != FsckProblem::kInfo) absl::StrAppend(&problems, pr.where, ": ", pr.what, "; ");
    }
    ASSERT_EQ(problems, "") << where << ": fsck after recovery";
  }

  // Recovery writes too (journal replay, re-zeroing, orphan reclaim): a power failure
  // at any of its durability points must leave an image that recovers to the same state.
  void CheckCrashDuringRecovery(const std::string& image, const Tree& expected,
                                const std::string& where) {
    const RecoverFn open = [](std::unique_ptr<PersistentRegion> region) {
      return WalDirectory::Open(std::move(region)).status();
    };
    absl::Status s = ForEachCrashDuringRecovery(
        image, pmem_, open, kImagesPerRecoveryPoint, [&](const std::string& mid) {
          if (::testing::Test::HasFailure()) return;
          auto tree = Recover(mid, &work_[1]);
          ASSERT_TRUE(tree.ok()) << where << ": crash during recovery: " << tree.status();
          ASSERT_EQ(Describe(*tree), Describe(expected)) << where << ": crash during recovery";
          for (const auto& [p, n] : expected) {
            ASSERT_EQ(tree->at(p).content, n.content)
                << where << ": crash during recovery: " << p;
          }
          ++recovery_states_;
        });
    ASSERT_TRUE(s.ok()) << where << ": " << s;
  }

  // Whether the last pool Recover opened trusted its free space (Check's first open).
  mutable bool free_space_trusted_ = false;

  // Crash images checked at each durability point of a recovery.
  static constexpr size_t kImagesPerRecoveryPoint = 4;

 public:
  uint64_t recovery_states() const { return recovery_states_; }

 private:
  bool pmem_;
  std::map<std::string, InodeId> handles_;
  uint64_t checked_ = 0;
  uint64_t recovery_states_ = 0;
  // Check's work buffers: [0] the recovered image, [1] recovery again / mid-recovery.
  std::string work_[2];
  // Two-writer steps: durability points reached while neither thread had finished.
  uint64_t overlapping_points_ = 0;
};

// ---- Operations as steps (each runs on the pool unless dry, and updates the model) --

bool Dry(Context& c) { return c.dir == nullptr; }

Step Create(const std::string& path) {
  return {"create " + path, [path](Context& c) {
            c.model->Create(path);
            if (Dry(c)) return;
            auto [parent, name] = c.Parent(path);
            auto a = c.dir->names().Create(parent, name, 0600, kPg, true);
            ASSERT_TRUE(a.ok()) << a.status();
            c.handles[path] = a->ino;
          }};
}

Step Write(const std::string& path, uint64_t off, std::string bytes, bool sync = false) {
  return {absl::StrCat("write ", path, " @", off, "+", bytes.size(), sync ? " dsync" : ""),
          [=](Context& c) {
            const int id = c.model->Id(path);
            c.model->Write(id, off, bytes);
            if (sync) c.model->Sync(id);
            if (Dry(c)) return;
            auto n =
                c.dir->data().Write(c.handles.at(path), off, {bytes.data(), bytes.size()}, sync);
            ASSERT_TRUE(n.ok()) << n.status();
          }};
}

// PostgreSQL 15 zero-fills a new segment with 256 KiB pwritev calls; each is one
// acknowledged write, so each is its own step.
std::vector<Step> ZeroFill(const std::string& path, uint64_t size, uint64_t chunk) {
  std::vector<Step> steps;
  for (uint64_t off = 0; off < size; off += chunk) {
    steps.push_back(Write(path, off, std::string(chunk, '\0')));
  }
  return steps;
}

Step Fsync(const std::string& path, bool datasync = true) {
  return {"fsync " + path, [=](Context& c) {
            c.model->Sync(c.model->Id(path));
            if (Dry(c)) return;
            ASSERT_TRUE(c.dir->data().Fsync(c.handles.at(path), datasync).ok());
          }};
}

Step Rename(const std::string& from, const std::string& to, uint32_t flags = 0,
            int expect_errno = 0) {
  return {absl::StrCat("rename ", from, " -> ", to, flags ? " flags" : ""), [=](Context& c) {
            if (expect_errno == 0 && (flags & kRenameExchange)) {
              std::swap(c.model->nodes.at(from), c.model->nodes.at(to));
            } else if (expect_errno == 0) {
              c.model->Rename(from, to);
            }
            if (Dry(c)) return;
            auto [p1, n1] = c.Parent(from);
            auto [p2, n2] = c.Parent(to);
            absl::Status s = c.dir->names().Rename(p1, n1, p2, n2, flags);
            if (expect_errno != 0) {
              ASSERT_FALSE(s.ok());
            } else {
              ASSERT_TRUE(s.ok()) << s;
              if (flags & kRenameExchange) {
                std::swap(c.handles[from], c.handles[to]);
              } else if (c.handles.count(from)) {
                c.handles[to] = c.handles[from];
              }
            }
          }};
}

Step Link(const std::string& from, const std::string& to) {
  return {"link " + from + " -> " + to, [=](Context& c) {
            c.model->Link(from, to);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(to);
            auto a = c.dir->names().Link(c.handles.at(from), p, n);
            ASSERT_TRUE(a.ok()) << a.status();
            c.handles[to] = a->ino;
          }};
}

Step Unlink(const std::string& path) {
  return {"unlink " + path, [=](Context& c) {
            c.model->Unlink(path);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            ASSERT_TRUE(c.dir->names().Unlink(p, n).ok());
          }};
}

// Drops every lookup reference on `path`'s inode: the last close of an open file.
Step Close(const std::string& path) {
  return {"close " + path, [=](Context& c) {
            if (Dry(c)) return;
            const InodeId ino = c.handles.at(path);
            c.dir->names().Forget(ino, 1000);
            for (auto it = c.handles.begin(); it != c.handles.end();) {
              it = it->second == ino ? c.handles.erase(it) : std::next(it);
            }
          }};
}

// fallocate: without KEEP_SIZE the size grows (zeros), durable on return (metadata).
Step Fallocate(const std::string& path, uint64_t offset, uint64_t length, bool keep_size) {
  return {absl::StrCat("fallocate ", path, " ", offset, "+", length, keep_size ? " keep" : ""),
          [=](Context& c) {
            const int id = c.model->Id(path);
            const uint64_t size = c.model->data.at(id).current.size();
            if (!keep_size && offset + length > size) c.model->Truncate(id, offset + length);
            if (Dry(c)) return;
            const uint32_t flags = keep_size ? uint32_t{kFallocateKeepSize} : 0u;
            ASSERT_TRUE(c.dir->data().Fallocate(c.handles.at(path), offset, length, flags).ok());
          }};
}

Step Mkfifo(const std::string& path) {
  return {"mkfifo " + path, [=](Context& c) {
            c.model->Mkfifo(path);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            auto a = c.dir->names().Mknod(p, n, S_IFIFO | 0600, 0, kPg);
            ASSERT_TRUE(a.ok()) << a.status();
            c.handles[path] = a->ino;
          }};
}

// A socket ('s') or character device ('c', with rdev) made by mknod.
Step Mknod(const std::string& path, char type, uint64_t rdev) {
  return {absl::StrCat("mknod ", path, " ", std::string(1, type)), [=](Context& c) {
            c.model->Mknod(path, type, 0640, rdev);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            const uint32_t kind = type == 's' ? S_IFSOCK : S_IFCHR;
            auto a = c.dir->names().Mknod(p, n, kind | 0640, rdev, kPg);
            ASSERT_TRUE(a.ok()) << a.status();
            c.handles[path] = a->ino;
          }};
}

// chmod and utimensat (mtime), through Setattr as FUSE SETATTR sends them.
Step Chmod(const std::string& path, uint32_t mode) {
  return {absl::StrFormat("chmod %s %o", path, mode), [=](Context& c) {
            c.model->SetAttrs(path, static_cast<int>(mode), std::nullopt);
            if (Dry(c)) return;
            SetattrRequest r;
            r.mode = mode;
            ASSERT_TRUE(c.dir->names().Setattr(c.handles.at(path), r).ok());
          }};
}
Step SetMtime(const std::string& path, int64_t mtime_ns) {
  return {absl::StrCat("utimens ", path, " ", mtime_ns), [=](Context& c) {
            c.model->SetAttrs(path, std::nullopt, mtime_ns);
            if (Dry(c)) return;
            SetattrRequest r;
            r.mtime_ns = mtime_ns;
            ASSERT_TRUE(c.dir->names().Setattr(c.handles.at(path), r).ok());
          }};
}

// FUSE RELEASE of a file (its handle stays usable: the kernel would send another OPEN).
Step Release(const std::string& path) {
  return {"release " + path, [=](Context& c) {
            if (Dry(c)) return;
            ASSERT_TRUE(c.dir->data().Release(c.handles.at(path)).ok());
          }};
}

Step Truncate(const std::string& path, uint64_t size) {
  return {absl::StrCat("truncate ", path, " ", size), [=](Context& c) {
            c.model->Truncate(c.model->Id(path), size);
            if (Dry(c)) return;
            SetattrRequest r;
            r.size = size;
            ASSERT_TRUE(c.dir->names().Setattr(c.handles.at(path), r).ok());
          }};
}

Step Mkdir(const std::string& path) {
  return {"mkdir " + path, [=](Context& c) {
            c.model->Mkdir(path);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            ASSERT_TRUE(c.dir->names().Mkdir(p, n, 0700, kPg).ok());
          }};
}

Step Rmdir(const std::string& path) {
  return {"rmdir " + path, [=](Context& c) {
            c.model->Unlink(path);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            ASSERT_TRUE(c.dir->names().Rmdir(p, n).ok());
          }};
}

Step Symlink(const std::string& path, const std::string& target) {
  return {"symlink " + path, [=](Context& c) {
            c.model->Symlink(path, target);
            if (Dry(c)) return;
            auto [p, n] = c.Parent(path);
            ASSERT_TRUE(c.dir->names().Symlink(p, n, target, kPg).ok());
          }};
}

Step FsyncDir(const std::string& path) {
  return {"fsyncdir " + path, [=](Context& c) {
            if (Dry(c)) return;
            ASSERT_TRUE(c.dir->data().FsyncDir(path == "/" ? kRootInode : c.Resolve(path)).ok());
          }};
}

// Two writers: `a` and `b` run at once, each in a thread of its own.
Step Together(const std::string& label, std::vector<Step> a, std::vector<Step> b) {
  Step s{label, nullptr, {}};
  s.threads = {std::move(a), std::move(b)};
  return s;
}

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 13);
  return s;
}

// PostgreSQL's XLogFileInitInternal (xlog.c) + durable_rename (fd.c).
std::vector<Step> InstallSegment(const std::string& tmp, const std::string& seg) {
  std::vector<Step> steps = {Create(tmp)};
  for (auto& z : ZeroFill(tmp, kSegment, 256 << 10)) steps.push_back(std::move(z));
  for (auto& z : {Fsync(tmp, false), Rename(tmp, seg), Fsync(seg, false), FsyncDir("/")}) {
    steps.push_back(z);
  }
  return steps;
}

std::vector<Step> Concat(std::vector<std::vector<Step>> parts) {
  std::vector<Step> all;
  for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

std::map<std::string, std::vector<Step>> Scenarios() {
  std::map<std::string, std::vector<Step>> s;
  s["create_write_fsync"] = {Create("/00000002.history"),
                             Write("/00000002.history", 0, Pattern(3000, 'a')),
                             Fsync("/00000002.history")};
  s["zero_fill_fsync_rename_over_existing"] = Concat(
      {{Create(std::string("/") + kSeg1), Write(std::string("/") + kSeg1, 0, Pattern(9000, 'o')),
        Fsync(std::string("/") + kSeg1)},
       InstallSegment("/xlogtemp.77", std::string("/") + kSeg1)});
  s["rename_noreplace"] = {Create("/a"), Write("/a", 0, "A"), Create("/b"),
                           Rename("/a", "/b", kRenameNoReplace, EEXIST),
                           Rename("/a", "/c", kRenameNoReplace),
                           Rename("/b", "/c", kRenameExchange)};
  s["link_unlink"] = {Create("/xlogtemp.5"), Write("/xlogtemp.5", 0, Pattern(5000, 'l')),
                      Fsync("/xlogtemp.5"), Link("/xlogtemp.5", std::string("/") + kSeg2),
                      Unlink("/xlogtemp.5")};
  s["unlink_open_file_then_close"] = {
      Create(std::string("/") + kSeg2), Write(std::string("/") + kSeg2, 0, Pattern(6000, 'u')),
      Fsync(std::string("/") + kSeg2), Unlink(std::string("/") + kSeg2),
      Close(std::string("/") + kSeg2)};
  s["truncate_grow_shrink"] = {Create("/t"), Write("/t", 0, Pattern(10000, 't')), Fsync("/t"),
                               Truncate("/t", 30000), Truncate("/t", 100),
                               Truncate("/t", 5000), Write("/t", 4000, "tail", true)};
  s["mkdir_rmdir"] = {Mkdir("/archive_status"), Create("/archive_status/x.ready"),
                      Rename("/archive_status/x.ready", "/archive_status/x.done"),
                      FsyncDir("/archive_status"), Unlink("/archive_status/x.done"),
                      Rmdir("/archive_status"), Symlink("/s", "target")};
  // Trims: a timeline history file written as xlogtemp.<pid> gives back its segment
  // extent at the rename; a file grown ahead of its end gives back the rest at release.
  // A symlink target too long to be inline is stored in a block of its own.
  s["history_trim_release_long_symlink"] = {
      Create("/xlogtemp.7"), Write("/xlogtemp.7", 0, "1\t0/3000060\tno recovery target\n"),
      Fsync("/xlogtemp.7"), Rename("/xlogtemp.7", "/00000002.history"), FsyncDir("/"),
      // (An fsync between the writes: in msync mode the second write's allocation commits
      // the first write's size early, a state the model does not list.)
      Create("/f"), Write("/f", 0, Pattern(9000, 'g')), Fsync("/f"),
      Write("/f", 9000, Pattern(9000, 'h')), Fsync("/f"), Release("/f"),
      Symlink("/long", Pattern(3000, 's'))};
  // The inode kind and allocation calls the scenarios above do not reach.
  s["fallocate_fifo"] = {Create("/fa"), Write("/fa", 0, Pattern(100, 'a')), Fsync("/fa"),
                         Fallocate("/fa", 0, 50000, true), Fallocate("/fa", 4096, 20000, false),
                         Release("/fa"), Mkfifo("/fifo"), Link("/fifo", "/fifo2"),
                         Rename("/fifo2", "/fifo3"), Unlink("/fifo")};
  // Attributes (mode, mtime; shared by hard links) and the other special inode kinds.
  s["attributes_sockets_devices"] = {
      Create("/a"), Write("/a", 0, Pattern(3000, 'm')), Fsync("/a"), Chmod("/a", 0640),
      SetMtime("/a", 1234567890123456789), Link("/a", "/b"), Chmod("/b", 04600),
      SetMtime("/b", -5), Mknod("/sock", 's', 0), Mknod("/null", 'c', makedev(1, 3)),
      Chmod("/null", 0666), Rename("/null", "/null2"), Unlink("/sock")};
  s["segment_allocation_init_zero_off"] = {Create("/xlogtemp.9"),
                                           Write("/xlogtemp.9", kSegment - 1, std::string(1, '\0')),
                                           Fsync("/xlogtemp.9"),
                                           Rename("/xlogtemp.9", std::string("/") + kSeg3)};
  // Segment install, WAL writes with the partial page rewritten in place, archiving and
  // recycling by rename.
  const std::string s1 = std::string("/") + kSeg1;
  const std::string s2 = std::string("/") + kSeg2;
  const std::string s3 = std::string("/") + kSeg3;
  s["postgres_segment_lifecycle"] = Concat(
      {{Mkdir("/archive_status")},
       InstallSegment("/xlogtemp.100", s1),
       {Write(s1, 0, Pattern(8192, 'p')), Fsync(s1),
        Write(s1, 8192, Pattern(100, 'q')), Fsync(s1),
        Write(s1, 8192, Pattern(900, 'q')), Fsync(s1),
        Write(s1, 8192, Pattern(8192, 'q'), true)},
       InstallSegment("/xlogtemp.101", s2),
       {Create("/archive_status/" + std::string(kSeg1) + ".ready"),
        Rename("/archive_status/" + std::string(kSeg1) + ".ready",
               "/archive_status/" + std::string(kSeg1) + ".done"),
        FsyncDir("/archive_status"), Fsync(s1), Rename(s1, s3), FsyncDir("/"),
        Unlink("/archive_status/" + std::string(kSeg1) + ".done"), FsyncDir("/archive_status"),
        Write(s2, 0, Pattern(8192, 'r')), Fsync(s2), Unlink(s3), FsyncDir("/")}});
  // Two writers on one WalDirectory: the WAL writer appending to a segment while a
  // backend installs the next one, then the archiver's status files while a writer
  // makes a hard link and removes it.
  s["two_writers"] = {
      Create(s1), Write(s1, 0, Pattern(8192, 'p')), Fsync(s1), Mkdir("/archive_status"),
      Together("wal writer || segment installer",
               {Write(s1, 8192, Pattern(8192, 'w')), Fsync(s1),
                Write(s1, 16384, Pattern(100, 'x'), true)},
               {Create("/xlogtemp.2"), Write("/xlogtemp.2", 0, Pattern(20000, 'z')),
                Fsync("/xlogtemp.2"), Rename("/xlogtemp.2", s2)}),
      Together("archiver || linker",
               {Create("/archive_status/1.ready"),
                Rename("/archive_status/1.ready", "/archive_status/1.done"),
                FsyncDir("/archive_status")},
               {Write(s2, 0, Pattern(4096, 'y'), true), Link(s2, "/hl"), Unlink("/hl")})};
  // A burst of metadata commits with no fsync of their own: in msync mode each commit is
  // one msync of a journal slot, and the home records of the earlier ones are carried in
  // every later transaction (core/journal.h), so a torn slot write must fall back to the
  // other slot with all of them. Enough creates that the carried images pass the carry
  // limit mid-burst: that commit's one msync covers the slot and their home span, and a
  // crash there may leave any of those pages unwritten.
  {
    std::vector<Step> burst = {Mkdir("/archive_status")};
    for (int i = 0; i < 12; ++i) {
      burst.push_back(Create(absl::StrCat("/archive_status/", i, ".ready")));
    }
    for (int i = 0; i < 12; i += 3) {
      burst.push_back(Rename(absl::StrCat("/archive_status/", i, ".ready"),
                             absl::StrCat("/archive_status/", i, ".done")));
      burst.push_back(Unlink(absl::StrCat("/archive_status/", i + 1, ".ready")));
    }
    burst.push_back(Create("/xlogtemp.3"));
    burst.push_back(Rename("/xlogtemp.3", s3));
    s["metadata_burst_carried_images"] = std::move(burst);
  }
  // Unlinks of files nobody holds (the kernel has forgotten them, as after a segment's
  // last close): each is zeroed, and its record freed by the next commit, whichever it
  // is (pending frees, core/space.h), so a crash leaves zeroed orphans for the next open.
  s["unlink_forgotten_frees_ride_next_commit"] = {
      Create(s1), Write(s1, 0, Pattern(9000, 'a')), Fsync(s1), Close(s1),
      Create("/b"), Write("/b", 0, Pattern(5000, 'b'), true), Close("/b"),
      Unlink(s1), Create("/xlogtemp.4"), Unlink("/b"),
      Rename("/xlogtemp.4", s2), Mkdir("/archive_status")};
  // Blocks given back (an unlink of a file nobody holds, a truncate's trim) are zeroed
  // before a commit frees them, and reused: free space reads zero at every power cut
  // during and after the reclaims (Check), and the blocks a new file takes read as
  // zeros past what it wrote.
  s["reclaim_then_reuse_free_space"] = {
      Create("/r"), Write("/r", 0, Pattern(20000, 'r')), Fsync("/r"), Close("/r"),
      Unlink("/r"),
      Create("/n"), Write("/n", 0, Pattern(12000, 'n'), true), Truncate("/n", 100),
      Release("/n"), Write("/n", 100, Pattern(9000, 'm'), true), Close("/n"), Unlink("/n")};
  // After mkfs --force over a used pool (see the top of this file): fresh inode and
  // dirent slots over old records, a segment and a small file from the uninitialised
  // range's two ends. One segment only: in msync mode its zeroing leaves every page of
  // it in flight at one msync, which is most of the states checked.
  s["over_old_pool_lifecycle"] = Concat(
      {{Mkdir("/archive_status"), Create("/history"),
        Write("/history", 0, Pattern(5000, 'h'), true)},
       InstallSegment("/xlogtemp.1", s1),
       {Create("/archive_status/" + std::string(kSeg1) + ".ready"), Unlink("/history"),
        FsyncDir("/")}});
  return s;
}

class CrashTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(CrashTest, EveryCrashStateRecoversToOldOrNew) {
  const auto& [name, pmem] = GetParam();
  CrashHarness harness(pmem);
  const uint64_t states = harness.Run(name, Scenarios().at(name));
  EXPECT_GT(states, 0u);
  ::testing::Test::RecordProperty("crash_states", static_cast<int>(states));
}

std::vector<std::string> ScenarioNames() {
  std::vector<std::string> names;
  for (const auto& [n, steps] : Scenarios()) names.push_back(n);
  return names;
}

INSTANTIATE_TEST_SUITE_P(
    All, CrashTest, ::testing::Combine(::testing::ValuesIn(ScenarioNames()), ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_pmem" : "_msync");
    });

// ---- The recovery check sees msync-only bugs ----------------------------------------

// A toy journal: page 0 holds a pending record (a flag word of 1, then the value), page 1
// the value's home word. Recovery applies a pending record and clears the flag. Its pmem
// path persists the value before clearing the flag; its msync path has the bug the check
// must find: it clears the flag and msyncs that page before the value's page, so a crash
// between the two msyncs loses the value. Like walfs's own code, it picks its path by
// is_pmem(), so only a recovery run with msync semantics takes the buggy path.
constexpr uint64_t kToyPage = RecordingRegion::kPageSize;
constexpr uint64_t kToyValue = 0x5eed;

void ToyRecover(PersistentRegion& r) {
  uint64_t flag = 0;
  uint64_t value = 0;
  std::memcpy(&flag, r.data(), sizeof(flag));
  std::memcpy(&value, r.data() + 8, sizeof(value));
  if (flag != 1) return;
  const uint64_t zero = 0;
  r.Store(kToyPage, &value, sizeof(value));
  if (r.is_pmem()) {
    r.Persist(kToyPage, sizeof(value));
    r.Store(0, &zero, sizeof(zero));
    r.Persist(0, sizeof(zero));
  } else {
    r.Store(0, &zero, sizeof(zero));
    r.Persist(0, sizeof(zero));
    r.Persist(kToyPage, sizeof(value));
  }
}

// Crash images during the toy's recovery, with pmem or msync semantics, that recover
// (again with the same semantics) to a pool without the value.
size_t ToyRecoveryLosses(bool pmem, size_t* images) {
  std::string image(2 * kToyPage, '\0');
  const uint64_t record[2] = {1, kToyValue};
  std::memcpy(image.data(), record, sizeof(record));
  size_t losses = 0;
  *images = 0;
  const RecoverFn recover = [](std::unique_ptr<PersistentRegion> region) {
    ToyRecover(*region);
    return absl::OkStatus();
  };
  absl::Status s = ForEachCrashDuringRecovery(image, pmem, recover, 16, [&](const std::string& mid) {
    ++*images;
    MemoryRegion again(mid, pmem);
    ToyRecover(again);
    uint64_t value = 0;
    std::memcpy(&value, again.bytes().data() + kToyPage, sizeof(value));
    if (value != kToyValue) ++losses;
  });
  EXPECT_TRUE(s.ok()) << s;
  return losses;
}

TEST(CrashModel, CrashDuringRecoveryUsesTheScenariosSemantics) {
  size_t images = 0;
  EXPECT_EQ(ToyRecoveryLosses(/*pmem=*/true, &images), 0u);
  EXPECT_GT(images, 0u);
  // Recovered under pmem semantics (as every scenario's recovery was before), the msync
  // path never runs; under msync semantics the lost value is found.
  EXPECT_GT(ToyRecoveryLosses(/*pmem=*/false, &images), 0u);
}

}  // namespace
}  // namespace walfs::core
