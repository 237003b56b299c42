// libFuzzer target: random operation sequences through WalDirectory against a model.
//
// Each input is a program: every 8 bytes are one operation (create, write, truncate,
// fallocate, read, unlink, link, rename with its flags, mkdir, rmdir, symlink with a
// short or an out-of-line target, mknod, release, fsync, reopen) on a few names in the
// root and one subdirectory, run on a small in-memory pool (pmem semantics). The model
// keeps what POSIX says the tree holds: names, types, link counts, sizes, contents and
// symlink targets. After every operation the errno must be the model's (ENOSPC and
// EFBIG are the pool's to decide; the operation then must change nothing) and the
// inodes it touched must match; at the end, and at every reopen, the whole tree is
// compared, and after Close fsck must find no error.
// A violated expectation aborts with the operation that broke it.
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fsck.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"

namespace walfs::fuzz {
namespace {

using core::InodeId;

constexpr uint64_t kPoolBytes = 4 << 20;
constexpr uint64_t kSegment = 1 << 20;
constexpr core::Caller kUser{1000, 1000};
constexpr const char* kNames[] = {"a", "b", "000000010000000000000001", "xlogtemp.7",
                                  "d", "00000002.history"};
constexpr int kNameCount = sizeof(kNames) / sizeof(kNames[0]);

[[noreturn]] void Violation(const std::string& what) {
  std::fprintf(stderr, "ops_fuzz: %s\n", what.c_str());
  std::abort();
}

// The model: node 0 is the root; directories hold names -> node.
struct Node {
  char type = 'f';  // 'f' file, 'd' directory, 'l' symlink, 'p' fifo
  std::string data;  // file bytes or symlink target
  uint32_t nlink = 1;
  std::map<std::string, int> children;  // directories
  InodeId ino = 0;
};

class Program {
 public:
  Program() {
    core::FormatOptions options;
    options.segment_size = kSegment;
    options.inode_count = 64;
    auto region = std::make_unique<core::MemoryRegion>(kPoolBytes);
    options.region_is_zero = true;
    if (!core::FormatPool(*region, options).ok()) Violation("format");
    image_ = region->bytes();
    Open();
    nodes_.push_back(Node{'d', "", 2, {}, core::kRootInode});
  }

  void Run(const uint8_t* data, size_t size) {
    for (size_t i = 0; i + 8 <= size && i < 8 * 200; i += 8) Step(data + i);
    Verify("end");
    Close();
  }

 private:
  void Open() {
    auto region = std::make_unique<core::MemoryRegion>(image_);
    bytes_ = &region->bytes();
    auto dir = core::WalDirectory::Open(std::move(region));
    if (!dir.ok()) Violation("open: " + dir.status().ToString());
    dir_ = std::move(*dir);
  }
  void Close() {
    if (!dir_->Close().ok()) Violation("close");
    image_ = *bytes_;
    dir_.reset();
    core::MemoryRegion region(image_);
    auto report = core::CheckPool(region, core::FsckOptions{});
    if (!report.ok()) Violation("fsck did not run");
    for (const auto& p : report->problems) {
      if (p.severity == core::FsckProblem::kError) Violation("fsck: " + p.where + ": " + p.what);
    }
  }

  // Directory node and name for selector bits: the root or "d" (when it is a directory).
  std::pair<int, std::string> Where(uint8_t b) {
    int dir = 0;
    if ((b & 0x80) != 0) {
      auto it = nodes_[0].children.find("d");
      if (it != nodes_[0].children.end() && nodes_[it->second].type == 'd') dir = it->second;
    }
    return {dir, kNames[(b & 0x7f) % kNameCount]};
  }
  int Child(int dir, const std::string& name) const {
    auto it = nodes_[dir].children.find(name);
    return it == nodes_[dir].children.end() ? -1 : it->second;
  }
  static int ErrnoOf(const absl::Status& s) { return s.ok() ? 0 : core::ErrnoFromStatus(s); }

  void Expect(const std::string& op, int got, int want) {
    if (got != want) {
      Violation(op + ": errno " + std::to_string(got) + ", model says " + std::to_string(want));
    }
  }
  void Check(const std::string& op, int node) {
    const Node& n = nodes_[node];
    auto a = dir_->names().GetAttr(n.ino);
    if (!a.ok()) Violation(op + ": getattr " + a.status().ToString());
    if (n.type != 'd' && a->nlink != n.nlink) {
      Violation(op + ": nlink " + std::to_string(a->nlink) + ", model " + std::to_string(n.nlink));
    }
    if (n.type == 'f') {
      if (a->size != n.data.size()) {
        Violation(op + ": size " + std::to_string(a->size) + ", model " +
                  std::to_string(n.data.size()));
      }
      std::string got(n.data.size(), '\0');
      auto r = dir_->data().Read(n.ino, 0, absl::MakeSpan(got));
      if (!r.ok() || *r != got.size() || got != n.data) Violation(op + ": contents differ");
    } else if (n.type == 'l') {
      auto t = dir_->names().Readlink(n.ino);
      if (!t.ok() || *t != n.data) Violation(op + ": symlink target differs");
    }
  }
  // ENOSPC only when the pool really lacks the blocks a file needs to reach `end` (blocks
  // being zeroed are freed before the operation returns here: no reclaim runs in the
  // background in this process). The reserve (core/layout.h) is not counted: only
  // WAL segments may take it, and this check does not tell them from other files.
  void ExpectFull(const std::string& op, InodeId ino, uint64_t end) {
    const uint64_t have = dir_->names().GetAttr(ino)->blocks / 8;
    const uint64_t need = (end + 4095) / 4096;
    const core::FsStats st = dir_->Statfs();
    const uint64_t free = st.free_blocks - st.reserved_blocks;
    if (need > have && free >= need - have) {
      Violation(op + ": ENOSPC with " + std::to_string(free) + " blocks free, " +
                std::to_string(need - have) + " needed");
    }
  }

  // Every name in the model exists with its node's attributes, and nothing else does.
  void Verify(const std::string& op) {
    for (size_t d = 0; d < nodes_.size(); ++d) {
      if (nodes_[d].type != 'd' || (d != 0 && nodes_[d].nlink == 0)) continue;
      size_t seen = 0;
      absl::Status s = dir_->names().Readdir(nodes_[d].ino, 0, [&](const core::DirEntry& e) {
        if (e.name == "." || e.name == "..") return true;
        ++seen;
        const int c = Child(static_cast<int>(d), std::string(e.name));
        if (c < 0 || nodes_[c].ino != e.ino) {
          Violation(op + ": unexpected entry " + std::string(e.name));
        }
        return true;
      });
      if (!s.ok() || seen != nodes_[d].children.size()) {
        Violation(op + ": directory listing differs");
      }
      for (const auto& [name, c] : nodes_[d].children) Check(op + " " + name, c);
    }
  }

  void Step(const uint8_t* p) {
    const uint8_t op = p[0] % 16;
    auto [dir, name] = Where(p[1]);
    auto [dir2, name2] = Where(p[2]);
    const uint64_t off = (uint64_t{p[3]} << 8 | p[4]) * 37;
    const uint64_t len = (uint64_t{p[5]} << 8 | p[6]) % 20000;
    const char fill = static_cast<char>('A' + p[7] % 26);
    const int c = Child(dir, name);
    const InodeId dino = nodes_[dir].ino;
    const std::string what = std::to_string(op) + " " + name;
    switch (op) {
      case 0: {  // create (O_EXCL)
        auto a = dir_->names().Create(dino, name, 0644, kUser, true);
        if (c >= 0) return Expect(what + " create", ErrnoOf(a.status()), EEXIST);
        if (!a.ok()) return Expect(what + " create", ErrnoOf(a.status()), ENOSPC);
        nodes_.push_back(Node{'f', "", 1, {}, a->ino});
        nodes_[dir].children[name] = static_cast<int>(nodes_.size() - 1);
        return Check(what, static_cast<int>(nodes_.size() - 1));
      }
      case 1:
      case 2: {  // write
        if (c < 0 || nodes_[c].type != 'f') return;
        std::string bytes(len + 1, fill);
        auto n = dir_->data().Write(nodes_[c].ino, off, {bytes.data(), bytes.size()}, op == 2);
        if (!n.ok()) {
          const int e = ErrnoOf(n.status());
          if (e != ENOSPC && e != EFBIG) Expect(what + " write", e, ENOSPC);
          if (e == ENOSPC) ExpectFull(what + " write", nodes_[c].ino, off + bytes.size());
          return Check(what + " failed write", c);
        }
        std::string& d = nodes_[c].data;
        if (d.size() < off + bytes.size()) d.resize(off + bytes.size(), '\0');
        d.replace(off, bytes.size(), bytes);
        return Check(what + " write", c);
      }
      case 3: {  // truncate
        if (c < 0 || nodes_[c].type != 'f') return;
        core::SetattrRequest r;
        r.size = off * 3;
        auto a = dir_->names().Setattr(nodes_[c].ino, r);
        if (!a.ok()) {
          const int e = ErrnoOf(a.status());
          if (e != ENOSPC && e != EFBIG) Expect(what + " truncate", e, ENOSPC);
          return Check(what + " failed truncate", c);
        }
        nodes_[c].data.resize(*r.size, '\0');
        return Check(what + " truncate", c);
      }
      case 4: {  // unlink
        absl::Status s = dir_->names().Unlink(dino, name);
        if (c < 0) return Expect(what + " unlink", ErrnoOf(s), ENOENT);
        if (nodes_[c].type == 'd') return Expect(what + " unlink", ErrnoOf(s), EISDIR);
        Expect(what + " unlink", ErrnoOf(s), 0);
        nodes_[dir].children.erase(name);
        if (--nodes_[c].nlink == 0) dir_->names().Forget(nodes_[c].ino, 1000);
        return;
      }
      case 5: {  // link
        if (c < 0) return;
        const int c2 = Child(dir2, name2);
        auto a = dir_->names().Link(nodes_[c].ino, nodes_[dir2].ino, name2);
        if (nodes_[c].type == 'd') return Expect(what + " link", ErrnoOf(a.status()), EPERM);
        if (c2 >= 0) return Expect(what + " link", ErrnoOf(a.status()), EEXIST);
        if (ErrnoOf(a.status()) == ENOSPC) return;  // the dirent table is full
        Expect(what + " link", ErrnoOf(a.status()), 0);
        ++nodes_[c].nlink;
        nodes_[dir2].children[name2] = c;
        return Check(what + " link", c);
      }
      case 6:
      case 7: {  // rename, plain or (7) with NOREPLACE / EXCHANGE from the fill byte
        const uint32_t flags = op == 6 ? 0 : (p[7] & 1) ? core::kRenameNoReplace
                                                           : core::kRenameExchange;
        absl::Status s = dir_->names().Rename(dino, name, nodes_[dir2].ino, name2, flags);
        const int c2 = Child(dir2, name2);
        const int want = Rename(dir, name, dir2, name2, flags, c, c2);
        Expect(what + " rename to " + name2, ErrnoOf(s), want);
        if (want == 0) Verify(what + " rename");
        return;
      }
      case 8: {  // mkdir
        auto a = dir_->names().Mkdir(dino, name, 0755, kUser);
        if (c >= 0) return Expect(what + " mkdir", ErrnoOf(a.status()), EEXIST);
        if (!a.ok()) return Expect(what + " mkdir", ErrnoOf(a.status()), ENOSPC);
        nodes_.push_back(Node{'d', "", 2, {}, a->ino});
        nodes_[dir].children[name] = static_cast<int>(nodes_.size() - 1);
        return;
      }
      case 9: {  // rmdir
        absl::Status s = dir_->names().Rmdir(dino, name);
        if (c < 0) return Expect(what + " rmdir", ErrnoOf(s), ENOENT);
        if (nodes_[c].type != 'd') return Expect(what + " rmdir", ErrnoOf(s), ENOTDIR);
        if (!nodes_[c].children.empty()) return Expect(what + " rmdir", ErrnoOf(s), ENOTEMPTY);
        Expect(what + " rmdir", ErrnoOf(s), 0);
        nodes_[dir].children.erase(name);
        nodes_[c].nlink = 0;
        dir_->names().Forget(nodes_[c].ino, 1000);
        return;
      }
      case 10: {  // symlink: short, or out of line
        const std::string target((p[7] & 1) ? 300 + len % 3700 : 1 + len % 400, fill);
        auto a = dir_->names().Symlink(dino, name, target, kUser);
        if (c >= 0) return Expect(what + " symlink", ErrnoOf(a.status()), EEXIST);
        if (!a.ok()) return Expect(what + " symlink", ErrnoOf(a.status()), ENOSPC);
        nodes_.push_back(Node{'l', target, 1, {}, a->ino});
        nodes_[dir].children[name] = static_cast<int>(nodes_.size() - 1);
        return Check(what + " symlink", static_cast<int>(nodes_.size() - 1));
      }
      case 11: {  // mkfifo
        auto a = dir_->names().Mknod(dino, name, S_IFIFO | 0600, 0, kUser);
        if (c >= 0) return Expect(what + " mknod", ErrnoOf(a.status()), EEXIST);
        if (!a.ok()) return Expect(what + " mknod", ErrnoOf(a.status()), ENOSPC);
        nodes_.push_back(Node{'p', "", 1, {}, a->ino});
        nodes_[dir].children[name] = static_cast<int>(nodes_.size() - 1);
        return;
      }
      case 12: {  // fallocate, KEEP_SIZE from the fill byte
        if (c < 0 || nodes_[c].type != 'f') return;
        const bool keep = (p[7] & 1) != 0;
        absl::Status s = dir_->data().Fallocate(nodes_[c].ino, off, len + 1,
                                                keep ? core::kFallocateKeepSize : 0);
        if (!s.ok()) {
          const int e = ErrnoOf(s);
          if (e != ENOSPC && e != EFBIG) Expect(what + " fallocate", e, ENOSPC);
          return Check(what + " failed fallocate", c);
        }
        if (!keep && nodes_[c].data.size() < off + len + 1) {
          nodes_[c].data.resize(off + len + 1, '\0');
        }
        return Check(what + " fallocate", c);
      }
      case 13:  // release (close of a handle)
        if (c >= 0) Expect(what + " release", ErrnoOf(dir_->data().Release(nodes_[c].ino)), 0);
        if (c >= 0) Check(what + " release", c);
        return;
      case 14:  // fsync
        if (c >= 0 && nodes_[c].type == 'f') {
          Expect(what + " fsync", ErrnoOf(dir_->data().Fsync(nodes_[c].ino, (p[7] & 1) != 0)), 0);
        }
        return;
      case 15:  // clean restart
        Verify("before reopen");
        if (!dir_->Close().ok()) Violation("close");
        image_ = *bytes_;
        dir_.reset();
        Open();
        for (Node& n : nodes_) {
          if (n.nlink == 0 && n.type != 'd') n.ino = 0;  // reclaimed
        }
        return Verify("after reopen");
    }
  }

  // Applies a rename to the model; returns the errno walfs must give.
  int Rename(int dir, const std::string& name, int dir2, const std::string& name2,
             uint32_t flags, int c, int c2) {
    if (c < 0) return ENOENT;
    if (dir == dir2 && name == name2) return 0;
    if ((flags & core::kRenameNoReplace) && c2 >= 0) return EEXIST;
    if ((flags & core::kRenameExchange) && c2 < 0) return ENOENT;
    // Moving "d" into itself.
    if (nodes_[c].type == 'd' && dir2 == c) return EINVAL;
    if (c2 >= 0 && c == c2) return 0;
    if (flags & core::kRenameExchange) {
      if (nodes_[c2].type == 'd' && dir == c2) return EINVAL;
      nodes_[dir].children[name] = c2;
      nodes_[dir2].children[name2] = c;
      return 0;
    }
    if (c2 >= 0) {
      const bool d1 = nodes_[c].type == 'd', d2 = nodes_[c2].type == 'd';
      if (d1 && !d2) return ENOTDIR;
      if (!d1 && d2) return EISDIR;
      if (d2 && !nodes_[c2].children.empty()) return ENOTEMPTY;
      if (--nodes_[c2].nlink == 0 || d2) {
        nodes_[c2].nlink = 0;
        dir_->names().Forget(nodes_[c2].ino, 1000);
      }
    }
    nodes_[dir].children.erase(name);
    nodes_[dir2].children[name2] = c;
    return 0;
  }

  std::string image_;
  std::string* bytes_ = nullptr;
  std::unique_ptr<core::WalDirectory> dir_;
  std::vector<Node> nodes_;
};

}  // namespace
}  // namespace walfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  walfs::fuzz::Program program;
  program.Run(data, size);
  return 0;
}
