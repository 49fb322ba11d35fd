#include "metrics/scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace ros2::metrics {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on `fd` until `deadline`; false on timeout.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, static_cast<int>(left.count())) == 1;
}

Result<int> Connect(const std::string& host, const std::string& port, std::chrono::steady_clock::time_point deadline,
                    std::string_view where) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status::Disconnected(fmt::format("{}: {}", where, ::gai_strerror(rc)));
  }
  std::string last = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && WaitFor(fd, POLLOUT, deadline))) {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        ::freeaddrinfo(res);
        return fd;
      }
      last = std::strerror(err);
    } else {
      last = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return Status::Disconnected(fmt::format("{}: cannot connect: {}", where, last));
}

// Reads one label value in quotes starting at text[*i] == '"'; false if malformed.
bool ReadQuoted(std::string_view text, size_t* i, std::string* out) {
  if (*i >= text.size() || text[*i] != '"') return false;
  for (++*i; *i < text.size(); ++*i) {
    char c = text[*i];
    if (c == '"') {
      ++*i;
      return true;
    }
    if (c == '\\' && *i + 1 < text.size()) {
      c = text[++*i];
      if (c == 'n') c = '\n';
    }
    out->push_back(c);
  }
  return false;
}

bool ParseLine(std::string_view line, Sample* s) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  s->name = std::string(line.substr(0, i));
  if (s->name.empty()) return false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string_view::npos) return false;
      std::string key(line.substr(i, eq - i));
      i = eq + 1;
      std::string value;
      if (!ReadQuoted(line, &i, &value)) return false;
      s->labels[key] = std::move(value);
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return false;
    ++i;  // '}'
  }
  while (i < line.size() && line[i] == ' ') ++i;
  const std::string number(line.substr(i, line.find(' ', i) - i));
  if (number == "+Inf") {
    s->value = std::numeric_limits<double>::infinity();
    return true;
  }
  char* end = nullptr;
  s->value = std::strtod(number.c_str(), &end);
  return !number.empty() && end == number.c_str() + number.size();
}

}  // namespace

const std::string& Sample::Label(const std::string& key) const {
  static const std::string kEmpty;
  auto it = labels.find(key);
  return it == labels.end() ? kEmpty : it->second;
}

double SumOf(const std::vector<Sample>& samples, std::string_view name, const std::string& label,
             std::string_view value) {
  double total = 0;
  for (const Sample& s : samples) {
    if (s.name == name && (label.empty() || s.Label(label) == value)) total += s.value;
  }
  return total;
}

Result<double> ScrapeSum(std::string_view host_port, std::string_view name, const std::string& label,
                         std::string_view value) {
  ROS2_ASSIGN_OR_RETURN(std::string body, HttpGet(host_port, "/metrics"));
  ROS2_ASSIGN_OR_RETURN(std::vector<Sample> samples, ParseExposition(body));
  return SumOf(samples, name, label, value);
}

Result<std::string> HttpGet(std::string_view host_port, std::string_view path, std::chrono::milliseconds timeout) {
  const std::string where = fmt::format("http://{}{}", host_port, path);
  const size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos) return Status::InvalidArgument(fmt::format("{}: not host:port", host_port));
  std::string host(host_port.substr(0, colon));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ROS2_ASSIGN_OR_RETURN(int raw, Connect(host, std::string(host_port.substr(colon + 1)), deadline, where));
  Fd fd(raw);
  const std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\nConnection: close\r\n\r\n", path, host_port);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EAGAIN && WaitFor(fd.get(), POLLOUT, deadline)) continue;
    if (n <= 0) return Status::Disconnected(fmt::format("{}: send: {}", where, std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      response.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EAGAIN && WaitFor(fd.get(), POLLIN, deadline)) continue;
    return Status::Disconnected(
        fmt::format("{}: {}", where, errno == EAGAIN ? "timed out waiting for the answer" : std::strerror(errno)));
  }
  const size_t body = response.find("\r\n\r\n");
  const size_t sp = response.find(' ');
  if (body == std::string::npos || sp == std::string::npos) {
    return Status::IOError(fmt::format("{}: not an HTTP answer", where));
  }
  const std::string code = response.substr(sp + 1, 3);
  if (code != "200") {
    return Status::IOError(
        fmt::format("{}: HTTP {}: {}", where, code, response.substr(body + 4, std::min<size_t>(200, response.size()))));
  }
  return response.substr(body + 4);
}

Result<std::vector<Sample>> ParseExposition(std::string_view text) {
  std::vector<Sample> samples;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    Sample s;
    if (!ParseLine(line, &s)) {
      return Status::InvalidArgument(fmt::format("metrics line {}: cannot parse '{}'", line_no, line));
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

double HistogramQuantile(double q, const std::vector<std::pair<double, double>>& cumulative) {
  if (cumulative.empty() || cumulative.back().second <= 0) return 0;
  const double rank = q * cumulative.back().second;
  double lower_bound = 0;
  double lower_count = 0;
  for (const auto& [bound, count] : cumulative) {
    if (count >= rank) {
      // The +Inf bucket has no upper bound: answer its lower one.
      if (std::isinf(bound)) return lower_bound;
      if (count == lower_count) return bound;
      return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count);
    }
    lower_bound = bound;
    lower_count = count;
  }
  return lower_bound;
}

}  // namespace ros2::metrics
