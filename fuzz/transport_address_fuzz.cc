// libFuzzer target: the worker address blob decoder (src/transport/wire.h).
// An accepted blob must re-encode to exactly the input bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire.h"

using namespace ros2::transport::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto decoded = DecodeAddress(std::span<const uint8_t>(data, size));
  if (!decoded.ok()) return 0;
  const WorkerAddress& a = *decoded;
  if (a.ucx_address.data() < data || a.ucx_address.data() + a.ucx_address.size() > data + size) abort();
  std::vector<uint8_t> again(EncodedAddressSize(a));
  auto n = EncodeAddress(a, again);
  if (!n.ok() || *n != size || std::memcmp(again.data(), data, size) != 0) abort();
  return 0;
}
