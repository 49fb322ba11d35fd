// libFuzzer target: the data-plane message decoder (src/transport/wire.h).
// Properties checked on every input:
//  - Decode never crashes, reads out of bounds or leaks (ASan);
//  - every view it returns lies inside the input;
//  - an accepted message re-encodes to exactly the input bytes (but for an
//    integrity trailer, which the sender appends), and the encoder
//    agrees the message is valid (one set of rules on both sides);
//  - an accepted batch's entries, when DecodeBatch accepts them, lie inside the
//    input and each re-encodes (as a batch entry) to exactly its bytes;
//  - decoding in place into a message left over from earlier inputs (the
//    receive path's form) accepts and rejects the same inputs and yields the
//    same message: no field of an older message survives.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire.h"

using namespace ros2::transport::wire;

namespace {

void CheckInside(std::span<const uint8_t> view, const uint8_t* data, size_t size) {
  if (view.empty()) return;
  if (view.data() < data || view.data() + view.size() > data + size) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  auto decoded = Decode(input);
  static Message reused;  // holds whatever the previous inputs decoded to
  const bool in_place_ok = Decode(input, reused).ok();
  if (in_place_ok != decoded.ok()) abort();
  if (!decoded.ok()) return 0;
  const Message& m = *decoded;
  CheckInside(m.capability, data, size);
  CheckInside(m.payload, data, size);
  CheckInside(m.inline_data, data, size);
  CheckInside(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m.status_message.data()), m.status_message.size()),
      data, size);
  for (uint8_t i = 0; i < m.bulk_count; ++i) CheckInside(m.bulk[i].rkey, data, size);
  // The integrity trailer is not the encoder's: it re-encodes the rest, and
  // the sender's seal sets the flag.
  CheckInside(m.integrity, data, size);
  const size_t body = size - m.integrity.size();
  if (EncodedSize(m) != body) abort();
  std::vector<uint8_t> again(body);
  auto n = Encode(m, again);
  if (!n.ok() || *n != body) abort();
  if (!m.integrity.empty()) SetIntegrityFlag(again);
  if (body != 0 && std::memcmp(again.data(), data, body) != 0) abort();
  if (m.kind == Kind::kBatch) {
    static std::vector<Message> entries(kMaxBatchMessages);
    static std::vector<std::span<const uint8_t>> raw(kMaxBatchMessages);
    auto n = DecodeBatch(m, entries, raw);
    if (n.ok()) {
      for (size_t i = 0; i < *n; ++i) {
        CheckInside(raw[i], data, size);
        std::vector<uint8_t> entry(BatchEntrySize(entries[i]));
        auto e = EncodeBatchEntry(entries[i], entry);
        if (!e.ok() || *e != raw[i].size() + kBatchEntryPrefix) abort();
        if (std::memcmp(entry.data() + kBatchEntryPrefix, raw[i].data(), raw[i].size()) != 0) abort();
      }
    }
  }
  // The in-place decode re-encodes to the same bytes (the trailer aside, as
  // above).
  if (reused.integrity.size() != m.integrity.size()) abort();
  std::vector<uint8_t> from_reused(body);
  auto r = Encode(reused, from_reused);
  if (!r.ok() || *r != body) abort();
  if (!reused.integrity.empty()) SetIntegrityFlag(from_reused);
  if (body != 0 && std::memcmp(from_reused.data(), data, body) != 0) abort();
  return 0;
}
