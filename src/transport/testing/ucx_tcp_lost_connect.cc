// ucx_tcp_lost_connect: UCX's tcp transport when the peer a new endpoint
// connects to exits between the connection's establishment and the
// endpoint's first message (docs/transport.md, "Failure handling"). Usage:
//   ucx_tcp_lost_connect [rounds]
// Each round listens on a plain socket of 127.0.0.1 and creates a UCT tcp
// endpoint to it. UCT connects a blocking socket, so connect() completes
// inside uct_ep_create; this program's send() closes the listener before the
// endpoint's connection request goes out, as the peer's exit would: the
// queued connection is reset, the request fails, and UCT's reconnection is
// refused. UCX 1.13 as packaged then destroys the endpoint it returned from a
// progress callback (an assertion, or a use after free without assertions);
// the patched libuct fails uct_ep_create instead. Then the interface must
// still flush and carry an active message to a second, live interface.
// Prints "RESULT <name> <value>" lines; exits 0 when it ran to the end.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <uct/api/uct.h>

namespace {

int g_listen_fd = -1;
uint16_t g_listen_port = 0;
bool g_armed = false;

[[noreturn]] void Fail(const char* what, ucs_status_t st) {
  fprintf(stderr, "ucx_tcp_lost_connect: %s: %s\n", what, ucs_status_string(st));
  exit(2);
}

void Check(const char* what, ucs_status_t st) {
  if (st != UCS_OK) Fail(what, st);
}

size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

ucs_status_t CountAm(void* arg, void* /*data*/, size_t /*length*/, unsigned /*flags*/) {
  ++*static_cast<int*>(arg);
  return UCS_OK;
}

// One tcp interface on lo.
uct_iface_h OpenIface(uct_md_h md, uct_worker_h worker) {
  uct_iface_config_t* config = nullptr;
  Check("uct_md_iface_config_read", uct_md_iface_config_read(md, "tcp", nullptr, nullptr, &config));
  uct_iface_params_t params{};
  params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
  params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
  params.mode.device.tl_name = "tcp";
  params.mode.device.dev_name = "lo";
  uct_iface_h iface = nullptr;
  Check("uct_iface_open", uct_iface_open(md, worker, &params, config, &iface));
  uct_config_release(config);
  uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
  return iface;
}

uct_ep_h CreateEp(uct_iface_h iface, const uct_device_addr_t* dev, const uct_iface_addr_t* addr, ucs_status_t* st) {
  uct_ep_params_t params{};
  params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
  params.iface = iface;
  params.dev_addr = dev;
  params.iface_addr = addr;
  uct_ep_h ep = nullptr;
  *st = uct_ep_create(&params, &ep);
  return ep;
}

}  // namespace

// libucs's sockets send through this definition (the program exports it).
// The first message to the armed listener's port finds the listener closed:
// the peer exited after the kernel completed the connection.
extern "C" ssize_t send(int fd, const void* buf, size_t len, int flags) {
  using SendFn = ssize_t (*)(int, const void*, size_t, int);
  static const SendFn real_send = reinterpret_cast<SendFn>(dlsym(RTLD_NEXT, "send"));
  sockaddr_in peer{};
  socklen_t peer_len = sizeof(peer);
  if (g_armed && getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      ntohs(peer.sin_port) == g_listen_port) {
    g_armed = false;
    close(g_listen_fd);
    g_listen_fd = -1;
  }
  return real_send(fd, buf, len, flags);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  ucs_async_context_t* async = nullptr;
  uct_worker_h worker = nullptr;
  Check("ucs_async_context_create", ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async));
  Check("uct_worker_create", uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker));
  uct_component_h* components = nullptr;
  unsigned num_components = 0;
  Check("uct_query_components", uct_query_components(&components, &num_components));
  uct_component_h tcp = nullptr;
  for (unsigned i = 0; i < num_components; ++i) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    Check("uct_component_query", uct_component_query(components[i], &attr));
    if (strcmp(attr.name, "tcp") == 0) tcp = components[i];
  }
  if (tcp == nullptr) Fail("no tcp component", UCS_ERR_NO_DEVICE);
  uct_md_config_t* md_config = nullptr;
  uct_md_h md = nullptr;
  Check("uct_md_config_read", uct_md_config_read(tcp, nullptr, nullptr, &md_config));
  Check("uct_md_open", uct_md_open(tcp, "tcp", md_config, &md));
  uct_iface_h iface = OpenIface(md, worker);
  uct_iface_attr_t iface_attr{};
  Check("uct_iface_query", uct_iface_query(iface, &iface_attr));
  std::string dev_addr(iface_attr.device_addr_len, '\0');
  Check("uct_iface_get_device_address",
        uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t*>(dev_addr.data())));
  const auto* dev = reinterpret_cast<const uct_device_addr_t*>(dev_addr.data());

  const size_t fds_before = OpenFds();
  int created = 0;
  int failed = 0;
  ucs_status_t first = UCS_OK;
  for (int r = 0; r < rounds; ++r) {
    g_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sa_len = sizeof(sa);
    if (g_listen_fd < 0 || bind(g_listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        listen(g_listen_fd, 16) != 0 || getsockname(g_listen_fd, reinterpret_cast<sockaddr*>(&sa), &sa_len) != 0) {
      perror("ucx_tcp_lost_connect: listener");
      return 2;
    }
    g_listen_port = ntohs(sa.sin_port);
    // A tcp interface address is its listening port in network order.
    const uint16_t port = htons(g_listen_port);
    g_armed = true;
    ucs_status_t st = UCS_OK;
    uct_ep_h ep = CreateEp(iface, dev, reinterpret_cast<const uct_iface_addr_t*>(&port), &st);
    if (g_armed) {
      fprintf(stderr, "ucx_tcp_lost_connect: uct_ep_create sent nothing to the listener (%s)\n", ucs_status_string(st));
      return 2;
    }
    if (r == 0) first = st;
    // Runs what the failed connection scheduled.
    for (int i = 0; i < 100; ++i) uct_worker_progress(worker);
    if (st == UCS_OK) {
      ++created;
      uct_ep_destroy(ep);
    } else {
      ++failed;
    }
  }
  printf("RESULT create_status %s\n", ucs_status_string(first));
  printf("RESULT created %d\n", created);
  printf("RESULT failed %d\n", failed);
  printf("RESULT fds_left %zd\n", static_cast<ssize_t>(OpenFds() - fds_before));
  // A failed endpoint must not stay counted among the interface's
  // outstanding connection attempts.
  printf("RESULT iface_flush %s\n", ucs_status_string(uct_iface_flush(iface, 0, nullptr)));

  // The interface still connects and sends to a live peer.
  uct_iface_h live = OpenIface(md, worker);
  int received = 0;
  Check("uct_iface_set_am_handler", uct_iface_set_am_handler(live, 1, CountAm, &received, 0));
  uct_iface_attr_t live_attr{};
  Check("uct_iface_query", uct_iface_query(live, &live_attr));
  std::string live_addr(live_attr.iface_addr_len, '\0');
  Check("uct_iface_get_address", uct_iface_get_address(live, reinterpret_cast<uct_iface_addr_t*>(live_addr.data())));
  ucs_status_t st = UCS_OK;
  uct_ep_h ep = CreateEp(iface, dev, reinterpret_cast<const uct_iface_addr_t*>(live_addr.data()), &st);
  Check("uct_ep_create to a live interface", st);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool sent = false;
  while (received == 0 && std::chrono::steady_clock::now() < deadline) {
    if (!sent) {
      st = uct_ep_am_short(ep, 1, 0, "ping", 4);
      if (st == UCS_OK) {
        sent = true;
      } else if (st != UCS_ERR_NO_RESOURCE) {
        Fail("uct_ep_am_short", st);
      }
    }
    uct_worker_progress(worker);
  }
  printf("RESULT live_received %d\n", received);
  uct_ep_destroy(ep);
  uct_iface_close(live);
  uct_iface_close(iface);
  uct_md_close(md);
  uct_config_release(md_config);
  uct_release_component_list(components);
  uct_worker_destroy(worker);
  ucs_async_context_destroy(async);
  return 0;
}
