// FaultInjection: the transport's test seam, in the spirit of VOS's Env
// (vos/env.h, vos/fault_injection_env.h). Production code never makes one and
// TransportOptions carries no fault knobs; a test that needs a client to send
// what a well-behaved client never sends (a cma descriptor on a connection
// that never proved its pid, a damaged segment reference, another
// connection's id, a forged hello) attaches one to its Worker with
// SetFaultInjection. Each hook defaults to "change nothing"; a test overrides
// the ones it needs.
//
// Cost when absent: the worker holds a null pointer and tests it once per
// call (StartCall) and once per Connect; nothing else on the hot path.
//
// Ownership and threads: not owned by the worker; it must outlive the worker
// or be detached first (SetFaultInjection(worker, nullptr)). Hooks run on the
// worker's thread, inside Connect, Endpoint::Call and the sends of a
// connection whose integrity is keyed.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "transport/shared_segment.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace ros2::transport {

class FaultInjection {
 public:
  virtual ~FaultInjection() = default;

  // Client: describe bulk as if the server had accepted this connection's cma
  // proof: buffers in shared segments go by reference, and ordinary memory
  // above the inline limit as a raw cma descriptor naming the caller's
  // address (the server must refuse both on an unproven connection, and raw
  // cma on every connection unless it accepts cma bulk).
  virtual bool ClaimCmaProof() { return false; }
  // Client: the location of a caller's segment buffer, before it is encoded
  // into the request (damage it to test the server's checks).
  virtual void DamageSegmentReference(segment::Location& /*where*/) {}
  // Client: every request, fully built, just before it is sent or batched.
  virtual void RewriteRequest(wire::Message& /*request*/) {}
  // Client: the hello of Connect, just before it is sent.
  virtual void RewriteHello(wire::Message& /*hello*/) {}
  // Client: the payload of an authenticate request (session id, flags,
  // proof), just before it is sent.
  virtual void RewriteAuthenticate(std::span<uint8_t> /*payload*/) {}
  // Either side, on a connection whose integrity is keyed: the sequence
  // number a message is about to be sealed with (set an old one to replay),
  // and the sealed bytes the tag covers, after tagging (alter one to forge).
  virtual void RewriteSequence(uint64_t& /*seq*/) {}
  virtual void DamageSealed(std::span<uint8_t> /*covered*/) {}
};

// A FaultInjection whose message rewrites are functions, for tests that
// change them from step to step (the attack tests' hostile clients). An empty
// function changes nothing.
class MessageRewriter : public FaultInjection {
 public:
  std::function<void(wire::Message&)> request;
  std::function<void(wire::Message&)> hello;
  std::function<void(std::span<uint8_t>)> authenticate;
  std::function<void(uint64_t&)> sequence;
  std::function<void(std::span<uint8_t>)> sealed;

  void RewriteRequest(wire::Message& m) override {
    if (request) request(m);
  }
  void RewriteHello(wire::Message& m) override {
    if (hello) hello(m);
  }
  void RewriteAuthenticate(std::span<uint8_t> p) override {
    if (authenticate) authenticate(p);
  }
  void RewriteSequence(uint64_t& seq) override {
    if (sequence) sequence(seq);
  }
  void DamageSealed(std::span<uint8_t> covered) override {
    if (sealed) sealed(covered);
  }
};

// Attaches `faults` (not owned; nullptr detaches) to `worker`, which must be a
// Worker made by Context::CreateWorker. Worker thread only.
void SetFaultInjection(Worker& worker, FaultInjection* faults);

}  // namespace ros2::transport
