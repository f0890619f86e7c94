// serve's connection slots: with every slot held by a connection still waiting for its request head, a
// queued connection gets a thread once that head has waited over 0.5 s, and not before (a client is left
// its time to send a head, so two new connections cannot close each other in turn).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "../../src/serve/connection_threads.h"

namespace {

using mo::serve::ConnectionThreads;
using namespace std::chrono_literals;

TEST(ServeConnectionThreads, AHeadWaitOver500MsMakesRoomForAQueuedConnection) {
  auto threads = std::make_shared<ConnectionThreads>(1);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  std::promise<void> registered, served;
  std::promise<ssize_t> idle_read;  // what the idle client's read returned: 0 once its socket was shut
  threads->enqueue([&] {
    const ConnectionThreads::HeadWait waiting(*threads, pair[0]);
    registered.set_value();
    char c;
    idle_read.set_value(::recv(pair[0], &c, 1, 0));
  });
  registered.get_future().wait();
  threads->enqueue([&] { served.set_value(); });
  auto served_future = served.get_future();
  EXPECT_EQ(served_future.wait_for(100ms), std::future_status::timeout) << "closed a head wait younger than 0.5 s";
  std::this_thread::sleep_for(500ms);
  threads->make_room();  // as httplib's idle callback does every 100 ms
  EXPECT_EQ(served_future.wait_for(10s), std::future_status::ready);
  auto idle_future = idle_read.get_future();
  EXPECT_EQ(idle_future.wait_for(10s), std::future_status::ready);
  ::close(pair[1]);  // ends the idle client's read in any case
  EXPECT_EQ(idle_future.get(), 0);
  served_future.wait();
  ::close(pair[0]);
}

}  // namespace
