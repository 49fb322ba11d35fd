// Temporary: the API compiles and links while the implementation lands.
#include "transport/transport.h"

namespace ros2::transport {

MemoryRegion::~MemoryRegion() = default;
bool MemoryRegion::Contains(const void* p, uint64_t n) const {
  auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && n <= length_ && b - base_ <= static_cast<ptrdiff_t>(length_ - n);
}
struct Context::Cache {};
Result<std::unique_ptr<Context>> Context::Create(const TransportOptions&) { return Status::NotSupported("transport: not implemented yet"); }
Context::~Context() = default;
std::string Context::Describe() const { return ""; }
Result<std::unique_ptr<Worker>> Context::CreateWorker(std::string_view) { return Status::NotSupported("transport: not implemented yet"); }
Result<std::shared_ptr<const MemoryRegion>> Context::RegisterMemory(void*, uint64_t) { return Status::NotSupported("x"); }
Result<std::shared_ptr<const MemoryRegion>> Context::CachedRegistration(void*, uint64_t) { return Status::NotSupported("x"); }
void Context::InvalidateRegistrations(const void*, uint64_t) {}
Context::RegistrationStats Context::registration_stats() const { return {}; }

struct IncomingRequest::State {};
IncomingRequest::IncomingRequest(State* s) : state_(s) {}
IncomingRequest::IncomingRequest(const IncomingRequest& o) : state_(o.state_) {}
IncomingRequest::IncomingRequest(IncomingRequest&& o) noexcept : state_(o.state_) { o.state_ = nullptr; }
IncomingRequest& IncomingRequest::operator=(IncomingRequest o) noexcept { std::swap(state_, o.state_); return *this; }
IncomingRequest::~IncomingRequest() = default;
uint16_t IncomingRequest::opcode() const { return 0; }
uint64_t IncomingRequest::request_id() const { return 0; }
std::span<const uint8_t> IncomingRequest::payload() const { return {}; }
std::span<const uint8_t> IncomingRequest::capability() const { return {}; }
uint64_t IncomingRequest::bulk_out_size() const { return 0; }
uint64_t IncomingRequest::bulk_in_capacity() const { return 0; }
bool IncomingRequest::bulk_out_inline() const { return false; }
BulkMode IncomingRequest::bulk_mode() const { return BulkMode::kRma; }
uint64_t IncomingRequest::connection_id() const { return 0; }
void IncomingRequest::Pull(std::span<std::byte>, Completion) {}
void IncomingRequest::Push(std::span<const std::byte>, Completion) {}
void IncomingRequest::Reply(const Status&, std::span<const uint8_t>) {}
bool IncomingRequest::replied() const { return false; }

}  // namespace ros2::transport
