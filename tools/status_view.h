// The three views walfsctl status gives of the daemon's status document
// (fs/status_json.h): for people, for Prometheus, and the latency table.
//
// The document comes from the daemon over getxattr and is treated as untrusted: a
// missing or mistyped field shows as absent (the human view says "?", Prometheus omits
// the series), never as a crash. Fields a newer daemon adds are ignored by the
// Prometheus view (each series there has a name, type and help chosen here) and shown
// raw at the end of the human view.
#ifndef WALFS_TOOLS_STATUS_VIEW_H_
#define WALFS_TOOLS_STATUS_VIEW_H_

#include <string>

#include "nlohmann/json.hpp"

namespace walfs::tools {

using StatusDoc = nlohmann::ordered_json;

// Prometheus text exposition format 0.0.4: # HELP and # TYPE for every family, counters
// named *_total, sizes in *_bytes, times in *_seconds, and the labels mountpoint and pool
// on every series, so several mounts can share node_exporter's textfile collector.
std::string RenderPrometheus(const StatusDoc& doc);

// The operator's first view: health, space (MiB/GiB and percent), traffic, direct
// access, errors and the latency of the main request classes.
std::string RenderHuman(const StatusDoc& doc, const std::string& mountpoint);

// One line per request class: requests, mean, and the bucket bounds holding p50, p90,
// p99 and p99.9, and the largest bucket used.
std::string RenderLatency(const StatusDoc& doc);

}  // namespace walfs::tools

#endif  // WALFS_TOOLS_STATUS_VIEW_H_
