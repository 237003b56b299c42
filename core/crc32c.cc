// CRC-32C: a table implementation and an SSE4.2 one, picked once per process, at first use.
#include "core/crc32c.h"

#include <array>
#include <cstring>

#include <cpuid.h>
#include <nmmintrin.h>

namespace walfs::core {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

uint32_t SoftwareCrc(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  while (n--) crc = kTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

__attribute__((target("sse4.2"))) uint32_t HardwareCrc(uint32_t crc, const uint8_t* p,
                                                       size_t n) {
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

bool HasSse42() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  // Asked at the first checksum, not at load: CPUID traps to the hypervisor in a guest,
  // and the direct-access library is loaded into processes that never checksum.
  static const bool use_hardware = HasSse42();
  const auto* p = static_cast<const uint8_t*>(data);
  return use_hardware ? HardwareCrc(crc, p, n) : SoftwareCrc(crc, p, n);
}

uint32_t RecordCrc(const void* record, size_t size) {
  static constexpr uint8_t kZero[4] = {};
  uint32_t crc = Crc32c(0, kZero, 4);
  return Crc32c(crc, static_cast<const uint8_t*>(record) + 4, size - 4);
}

}  // namespace walfs::core
