// PowerCutRegion: a test facility under which killing the process is a power cut. Test
// support: only the tests and the daemon of a test build (WALFS_TEST_FACILITIES, its
// powercut_sim option) link it; core and shipped programs never do.
//
// It wraps the region a pool really lives in (normally OpenPmemRegion over the pool
// file: "the media") and serves every read and store from a private anonymous copy of it
// taken at construction ("the written image": what CPU caches or the page cache would
// hold). Bytes reach the media only the way persistent_region.h says they become
// durable, and only then:
//  - pmem semantics (media.is_pmem()): Flush records the byte range for the calling
//    thread; Drain copies the calling thread's recorded ranges from the written image to
//    the media and persists them there. Ranges are not widened to cache lines, so a test
//    gets exactly what the contract promises and no more; another thread's flushes are
//    left alone (SFENCE orders only the issuing core's stores).
//  - msync semantics: Flush copies every page overlapping the range to the media (msync
//    writes whole pages) and persists it there; Drain drains the media.
// The written image exists only in this process, so after SIGKILL the pool file holds
// just the persisted image: the worst a power failure at that instant could leave, as no
// unflushed store ever reaches the media early. (Real hardware may write some back on
// its own; enumerating those states is the crash tests' job, see recording_region.h.)
//
// data() is the written image; is_pmem() and health() are the media's; kind() is the
// media's with "+powercut" appended.
//
// Thread-safety: the contract's. Store/Fill/Flush on disjoint ranges may run
// concurrently and Drain persists the calling thread's flushes. In msync semantics a
// Flush copies whole pages, which may hold bytes a concurrent Store to the same page is
// writing, so stores and page copies are serialised there.
//
// Memory: one anonymous mapping of the media's size. Pages that are all zero in the
// media are not copied, so only the pool's used part becomes resident.
#ifndef WALFS_TESTS_SUPPORT_POWER_CUT_REGION_H_
#define WALFS_TESTS_SUPPORT_POWER_CUT_REGION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/persistent_region.h"

namespace walfs::core {

// Wraps `media`, which the returned region owns. Fails (with the media untouched) when
// the written image cannot be mapped.
//
// `image_fd` -1: the written image is anonymous memory. Otherwise it is that file (a
// memfd the caller made and keeps: the daemon of a test build passes it to
// direct-access clients, fs/lease_protocol.h kHelloFlagImage, so that they store into
// the image the daemon reads from). It must be empty; the region sizes it and maps it
// shared, and does not own the descriptor. The image dies with the last process holding
// it, so a new daemon always starts from the media alone, as after a power cut.
absl::StatusOr<std::unique_ptr<PersistentRegion>> NewPowerCutRegion(
    std::unique_ptr<PersistentRegion> media, int image_fd = -1);

}  // namespace walfs::core

#endif  // WALFS_TESTS_SUPPORT_POWER_CUT_REGION_H_
