// ucx_tcp_attack_peer: a hostile UCX peer written from plain ucp calls (no
// ROS2 transport code), for ucx_tcp_attack_test.cc. It reads its UCX settings
// from the environment the test gives it (UCX_TCP_TX_SEG_SIZE,
// UCX_TCP_RX_SEG_SIZE, UCX_RNDV_THRESH, UCX_ZCOPY_THRESH, ...), connects to a
// ros2-engine target's UCX worker address and sends active messages, or a
// put or get at an address of the engine, without any hello or capability.
//
// Usage: ucx_tcp_attack_peer address=<hex UCX worker address> size=<bytes>
//          [count=<n>] [eager=1] [linger_ms=<ms>]
//        ucx_tcp_attack_peer address=<hex> rma=put|get remote=<hex address>
// Prints "RESULT <name> <value>" lines: sent (messages whose send completed
// without error), first_error (the first failed send's status, or "none"),
// ep_error (the status the endpoint's error handler saw, or "none"); with
// rma=: rma (the put's or get's status once flushed, within 5 s). Exits 0
// when it ran, whatever the engine did.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

std::map<std::string, std::string> g_args;

std::string Arg(const std::string& key, const std::string& fallback = "") {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : it->second;
}

void Result(const char* name, const std::string& value) {
  printf("RESULT %s %s\n", name, value.c_str());
  fflush(stdout);
}

ucs_status_t g_ep_error = UCS_OK;

void OnEpError(void*, ucp_ep_h, ucs_status_t status) {
  if (g_ep_error == UCS_OK) g_ep_error = status;
}

void OnSent(void*, ucs_status_t, void*) {}

// Progresses until `request` completes or `deadline`; its final status.
ucs_status_t Wait(ucp_worker_h worker, ucs_status_ptr_t request, std::chrono::steady_clock::time_point deadline) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t st = UCS_INPROGRESS;
  while ((st = ucp_request_check_status(request)) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker);
  }
  if (st == UCS_INPROGRESS) {
    // A request the peer never answers (RMA requests cannot be cancelled):
    // left behind, the process exits without cleaning up.
    ucp_request_cancel(worker, request);
    return UCS_ERR_TIMED_OUT;
  }
  ucp_request_free(request);
  return st;
}

// A put or get of 16 bytes at `remote=` in the engine, with an rkey of the
// attacker's own memory (software RMA ignores it), then a flush.
int RunRma(ucp_context_h context, ucp_worker_h worker, ucp_ep_h ep) {
  static char buf[16];
  std::memset(buf, 'Z', sizeof(buf));
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = buf;
  mp.length = sizeof(buf);
  ucp_mem_h memh = nullptr;
  void* packed = nullptr;
  size_t packed_size = 0;
  ucp_rkey_h rkey = nullptr;
  if (ucp_mem_map(context, &mp, &memh) != UCS_OK || ucp_rkey_pack(context, memh, &packed, &packed_size) != UCS_OK ||
      ucp_ep_rkey_unpack(ep, packed, &rkey) != UCS_OK) {
    fprintf(stderr, "ucx_tcp_attack_peer: no rkey\n");
    return 1;
  }
  const uint64_t remote = std::strtoull(Arg("remote", "10").c_str(), nullptr, 16);
  ucp_request_param_t rp{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ucs_status_t st = Arg("rma") == "put" ? Wait(worker, ucp_put_nbx(ep, buf, 8, remote, rkey, &rp), deadline)
                                        : Wait(worker, ucp_get_nbx(ep, buf, sizeof(buf), remote, rkey, &rp), deadline);
  if (st == UCS_OK) st = Wait(worker, ucp_ep_flush_nbx(ep, &rp), deadline);
  Result("rma", ucs_status_string(st));
  Result("ep_error", g_ep_error == UCS_OK ? "none" : ucs_status_string(g_ep_error));
  // The dropped operation is still outstanding: no orderly teardown.
  std::_Exit(0);
}

int Run() {
  std::vector<uint8_t> address;
  const std::string hex = Arg("address");
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    address.push_back(static_cast<uint8_t>(std::strtoul(hex.substr(i, 2).c_str(), nullptr, 16)));
  }
  const size_t size = std::strtoull(Arg("size", "1048576").c_str(), nullptr, 10);
  const int count = std::atoi(Arg("count", "1").c_str());
  const bool eager = Arg("eager", "1") == "1";
  const int linger_ms = std::atoi(Arg("linger_ms", "1000").c_str());
  if (address.empty() || size == 0) {
    fprintf(stderr, "ucx_tcp_attack_peer: address= and size= are required\n");
    return 2;
  }

  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return 1;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
  ucp_context_h context = nullptr;
  ucs_status_t st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    fprintf(stderr, "ucp_init: %s\n", ucs_status_string(st));
    return 1;
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  if ((st = ucp_worker_create(context, &wp, &worker)) != UCS_OK) {
    fprintf(stderr, "ucp_worker_create: %s\n", ucs_status_string(st));
    return 1;
  }
  ucp_ep_params_t ep_params{};
  ep_params.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep_params.err_handler.cb = OnEpError;
  ucp_ep_h ep = nullptr;
  if ((st = ucp_ep_create(worker, &ep_params, &ep)) != UCS_OK) {
    fprintf(stderr, "ucp_ep_create: %s\n", ucs_status_string(st));
    return 1;
  }

  if (!Arg("rma").empty()) return RunRma(context, worker, ep);
  std::vector<char> payload(size, 'A');
  int sent = 0;
  std::string first_error = "none";
  for (int i = 0; i < count && g_ep_error == UCS_OK; ++i) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS;
    rp.cb.send = OnSent;
    rp.flags = eager ? UCP_AM_SEND_FLAG_EAGER : 0;
    ucs_status_ptr_t req = ucp_am_send_nbx(ep, /*id=*/7, nullptr, 0, payload.data(), payload.size(), &rp);
    st = Wait(worker, req, std::chrono::steady_clock::now() + std::chrono::seconds(10));
    if (st == UCS_OK) {
      ++sent;
    } else if (first_error == "none") {
      first_error = ucs_status_string(st);
    }
  }
  // Long enough for the engine to see the messages and close the connection.
  const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms);
  while (std::chrono::steady_clock::now() < linger) ucp_worker_progress(worker);

  Result("sent", std::to_string(sent));
  Result("first_error", first_error);
  Result("ep_error", g_ep_error == UCS_OK ? "none" : ucs_status_string(g_ep_error));
  // Skip the endpoint's close handshake: a hostile peer just goes away.
  ucp_request_param_t close{};
  close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  close.flags = UCP_EP_CLOSE_FLAG_FORCE;
  Wait(worker, ucp_ep_close_nbx(ep, &close), std::chrono::steady_clock::now() + std::chrono::seconds(2));
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (eq == nullptr) {
      fprintf(stderr, "ucx_tcp_attack_peer: argument '%s' is not key=value\n", argv[i]);
      return 2;
    }
    g_args[std::string(argv[i], static_cast<size_t>(eq - argv[i]))] = eq + 1;
  }
  return Run();
}
