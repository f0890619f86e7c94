#include "mo/core/signals.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "mo/core/error.h"

namespace mo::signals {
namespace {

int g_pipe[2] = {-1, -1};
bool g_ignored_before[2] = {false, false};  // SIGINT, SIGTERM: ignored before the handler came (a background job)

extern "C" void on_stop_signal(int sig) {
  const int saved = errno;
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] auto n = ::write(g_pipe[1], &byte, 1);
  errno = saved;
}

struct Registry {
  std::mutex mu;  // held while actions run, so a destroyed OnStopSignal's action never runs after
  int next_id = 0;
  std::vector<std::pair<int, std::function<void(int)>>> actions;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the watcher may still run while statics are torn down
  return *r;
}

void watch() {
  for (;;) {
    char byte = 0;
    const auto n = ::read(g_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) return;
    const int sig = byte;
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    if (r.actions.empty() && !g_ignored_before[sig == SIGTERM]) die_of(sig);
    for (auto& [id, action] : r.actions) action(sig);
  }
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_pipe, O_CLOEXEC) != 0 || ::fcntl(g_pipe[1], F_SETFL, O_NONBLOCK) != 0)
      throw Error(fmt::format("cannot install the SIGINT/SIGTERM handler: {}", std::strerror(errno)));
    std::thread(watch).detach();
    struct sigaction sa {
    }, before{};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM}) {
      sigaction(sig, &sa, &before);
      g_ignored_before[sig == SIGTERM] = before.sa_handler == SIG_IGN;
    }
  });
}

}  // namespace

OnStopSignal::OnStopSignal(std::function<void(int sig)> action) {
  install();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  id_ = r.next_id++;
  r.actions.emplace_back(id_, std::move(action));
}

OnStopSignal::~OnStopSignal() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::erase_if(r.actions, [&](const auto& a) { return a.first == id_; });
}

void die_of(int sig) {
  ::signal(sig, SIG_DFL);
  ::kill(::getpid(), sig);
  ::_exit(128 + sig);
}

void ignore_broken_pipe() { ::signal(SIGPIPE, SIG_IGN); }

}  // namespace mo::signals
