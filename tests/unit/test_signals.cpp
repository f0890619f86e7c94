// The one SIGINT/SIGTERM module: a registered action runs (serve's graceful stop, bench's "keep what was
// measured"), and without one a stop signal still ends the process as if no handler were installed.
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "mo/core/signals.h"

namespace {

using namespace std::chrono_literals;
using mo::signals::OnStopSignal;

TEST(Signals, StopSignalsRunEveryRegisteredActionInOrder) {
  std::mutex mu;
  std::vector<int> seen;
  std::promise<void> second_done;
  {
    OnStopSignal first([&](int sig) {
      std::lock_guard lock(mu);
      seen.push_back(sig);
    });
    OnStopSignal second([&](int sig) {
      std::lock_guard lock(mu);
      seen.push_back(-sig);
      if (seen.size() == 4) second_done.set_value();
    });
    std::raise(SIGINT);
    std::raise(SIGTERM);
    ASSERT_EQ(second_done.get_future().wait_for(10s), std::future_status::ready);
  }
  EXPECT_EQ(seen, (std::vector<int>{SIGINT, -SIGINT, SIGTERM, -SIGTERM}));
}

TEST(SignalsDeathTest, WithNoActionLeftAStopSignalEndsTheProcessAsBefore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        {
          OnStopSignal gone([](int) {});
        }
        std::raise(SIGTERM);
        std::this_thread::sleep_for(10s);
      },
      testing::KilledBySignal(SIGTERM), "");
}

TEST(SignalsDeathTest, AnActionMayCleanUpThenEndTheProcessOfTheSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        OnStopSignal stop([](int sig) {
          std::fputs("cleaned up\n", stderr);
          mo::signals::die_of(sig);
        });
        std::raise(SIGINT);
        std::this_thread::sleep_for(10s);
      },
      testing::KilledBySignal(SIGINT), "cleaned up");
}

}  // namespace
