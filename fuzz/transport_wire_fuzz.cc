// libFuzzer target: the data-plane message decoder (src/transport/wire.h).
// Properties checked on every input:
//  - Decode never crashes, reads out of bounds or leaks (ASan);
//  - every view it returns lies inside the input;
//  - an accepted message re-encodes to exactly the input bytes, and the encoder
//    agrees the message is valid (one set of rules on both sides).
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
  if (!decoded.ok()) return 0;
  const Message& m = *decoded;
  CheckInside(m.capability, data, size);
  CheckInside(m.payload, data, size);
  CheckInside(m.inline_data, data, size);
  CheckInside(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m.status_message.data()), m.status_message.size()),
      data, size);
  for (uint8_t i = 0; i < m.bulk_count; ++i) CheckInside(m.bulk[i].rkey, data, size);
  if (EncodedSize(m) != size) abort();
  std::vector<uint8_t> again(size);
  auto n = Encode(m, again);
  if (!n.ok() || *n != size) abort();
  if (size != 0 && std::memcmp(again.data(), data, size) != 0) abort();
  return 0;
}
